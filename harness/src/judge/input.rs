//! What one measured round hands the judges ([`RoundInput`]), and the
//! window both its unary figures (`round.rs`) and its stream figures
//! (`streams.rs`) are over: the seconds its rates span and the load samples
//! inside it.

use crate::config::Config;
use crate::measure::record::RoundRecord;
use crate::measure::tier_stats::Deltas;
use crate::result::{LoadSample, ResourceSample};

/// Everything one measured round produced, before any arithmetic.
#[derive(Debug, Clone, Copy)]
pub struct RoundInput<'a> {
    pub config: &'a Config,
    /// 0-based.
    pub round: u32,
    pub complete: bool,
    /// Requests due in the round (sent or dropped).
    pub scheduled: u64,
    /// When the round's counters were first read, seconds since the run's origin.
    pub from_seconds: f64,
    /// When they were read again (the round's end, or the stop).
    pub to_seconds: f64,
    pub record: &'a RoundRecord,
    pub deltas: &'a Deltas,
    /// The arm's resource samples (any time; only those in the window count).
    pub samples: &'a [ResourceSample],
    /// The run's load samples (any time; only those in the window count).
    pub load: &'a [LoadSample],
}

/// The seconds a round's rates are over: its schedule's span in an open
/// loop (`scheduled` at this generator's share of the rate), the window in
/// a closed loop ([`throughput`](super::round::throughput)).
pub fn span(config: &Config, scheduled: u64, window_seconds: f64) -> f64 {
    let qps = config.generators.share_of(config.load.qps);
    let on_schedule = !config.load.closed_loop && qps > 0.0 && scheduled > 0;
    if on_schedule { scheduled as f64 / qps } else { window_seconds }
}

/// The run's load samples inside the round's window.
pub fn load_in_window<'a>(input: &RoundInput<'a>) -> impl Iterator<Item = &'a LoadSample> {
    let (from, to) = (input.from_seconds, input.to_seconds);
    input.load.iter().filter(move |s| s.t_seconds > from && s.t_seconds <= to)
}
