//! The collector: the one owner of every request's record. Workers send
//! [`Shot`]s over a channel; the collector files each into the round its due
//! time falls in, with fresh histograms per round. Nothing renders here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use hdrhistogram::Histogram;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use crate::load::{Outcome, Shot};
use crate::stats::new_histogram;

/// Which requests belong to the warm-up and to each round, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phases {
    pub warmup_requests: u64,
    pub requests_per_round: u64,
    pub rounds: u32,
}

impl Phases {
    pub fn total(&self) -> u64 {
        self.warmup_requests + self.requests_per_round * u64::from(self.rounds)
    }

    /// The 0-based round request `index` belongs to; `None` for the warm-up.
    pub fn round_of(&self, index: u64) -> Option<usize> {
        let i = index.checked_sub(self.warmup_requests)?;
        let r = (i / self.requests_per_round.max(1)) as usize;
        (r < self.rounds as usize).then_some(r)
    }

    /// Index of the first request of round `r` (or one past the end for `rounds`).
    pub fn first_of_round(&self, r: u32) -> u64 {
        self.warmup_requests + self.requests_per_round * u64::from(r)
    }
}

/// One round's records.
#[derive(Debug, Clone)]
pub struct RoundRecord {
    /// From the intended send time.
    pub corrected: Histogram<u64>,
    /// From the actual send time.
    pub service: Histogram<u64>,
    pub send_lag: Histogram<u64>,
    pub downstream_hop: Histogram<u64>,
    pub caller_overhead: Histogram<u64>,
    pub sent: u64,
    pub ok: u64,
    /// Error counts by class.
    pub errors: BTreeMap<String, u64>,
}

impl Default for RoundRecord {
    fn default() -> Self {
        RoundRecord {
            corrected: new_histogram(),
            service: new_histogram(),
            send_lag: new_histogram(),
            downstream_hop: new_histogram(),
            caller_overhead: new_histogram(),
            sent: 0,
            ok: 0,
            errors: BTreeMap::new(),
        }
    }
}

/// The error class name of an outcome.
pub fn error_class(outcome: Outcome) -> Option<String> {
    match outcome {
        Outcome::Ok => None,
        Outcome::Connect => Some("connect".into()),
        Outcome::Timeout => Some("timeout".into()),
        Outcome::Status(code) => Some(format!("http_{code}")),
        Outcome::BadResponse => Some("bad_response".into()),
        Outcome::Dropped => Some("dropped".into()),
    }
}

impl RoundRecord {
    pub fn add(&mut self, shot: &Shot) {
        let us = |d: std::time::Duration| d.as_micros().min(u128::from(u64::MAX)) as u64;
        if let Some(class) = error_class(shot.outcome) {
            *self.errors.entry(class).or_default() += 1;
        }
        let Some(sent) = shot.sent else { return };
        self.sent += 1;
        if shot.outcome != Outcome::Ok {
            return;
        }
        self.ok += 1;
        // Latency percentiles describe successful calls; errors are counted by
        // class above, so a fast failure cannot flatter the percentiles.
        let service_us = us(shot.done.saturating_duration_since(sent));
        self.corrected.saturating_record(us(shot.done.saturating_duration_since(shot.due)));
        self.service.saturating_record(service_us);
        self.send_lag.saturating_record(us(sent.saturating_duration_since(shot.due)));
        if let Some(hop) = shot.downstream_us {
            self.downstream_hop.saturating_record(hop);
            self.caller_overhead.saturating_record(service_us.saturating_sub(hop));
        }
    }
}

/// Files shots into rounds until every sender is gone or `finish` fires (then
/// it files what is already queued and returns). `live_p99_us` is kept up to
/// date with the current round's corrected p99 for the progress display.
pub async fn collect(
    mut shots: UnboundedReceiver<Shot>,
    phases: Phases,
    live_p99_us: Arc<AtomicU64>,
    finish: CancellationToken,
) -> Vec<RoundRecord> {
    let mut rounds = vec![RoundRecord::default(); phases.rounds as usize];
    let mut n = 0u64;
    loop {
        let shot = tokio::select! {
            biased;
            shot = shots.recv() => match shot {
                Some(s) => s,
                None => break,
            },
            _ = finish.cancelled() => match shots.try_recv() {
                Ok(s) => s,
                Err(_) => break,
            },
        };
        let Some(r) = phases.round_of(shot.index) else { continue };
        rounds[r].add(&shot);
        n += 1;
        if n.is_multiple_of(64) {
            live_p99_us.store(rounds[r].corrected.value_at_quantile(0.99), Relaxed);
        }
    }
    rounds
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn phases_split_by_index() {
        let p = Phases { warmup_requests: 10, requests_per_round: 100, rounds: 3 };
        assert_eq!(p.total(), 310);
        assert_eq!(p.round_of(9), None);
        assert_eq!(p.round_of(10), Some(0));
        assert_eq!(p.round_of(109), Some(0));
        assert_eq!(p.round_of(110), Some(1));
        assert_eq!(p.round_of(309), Some(2));
        assert_eq!(p.round_of(310), None);
        assert_eq!(p.first_of_round(3), 310);
    }

    #[test]
    fn corrected_latency_carries_the_wait_service_time_does_not() {
        let t = Instant::now();
        let mut r = RoundRecord::default();
        // Due at t, sent 2 s late (a stalled dispatcher), answered 10 ms later.
        r.add(&Shot {
            index: 0,
            due: t,
            sent: Some(t + Duration::from_secs(2)),
            done: t + Duration::from_millis(2010),
            outcome: Outcome::Ok,
            downstream_us: Some(8_000),
        });
        assert!(r.corrected.max() >= 2_009_000);
        assert!(r.service.max() <= 10_100);
        assert!(r.send_lag.min() >= 1_999_000);
        assert!(r.caller_overhead.max() <= 2_100);
        r.add(&Shot { index: 1, due: t, sent: None, done: t, outcome: Outcome::Dropped, downstream_us: None });
        r.add(&Shot { index: 2, due: t, sent: Some(t), done: t, outcome: Outcome::Status(502), downstream_us: None });
        assert_eq!((r.sent, r.ok), (2, 1));
        assert_eq!(r.errors["dropped"], 1);
        assert_eq!(r.errors["http_502"], 1);
        assert_eq!(r.corrected.len(), 1, "errors must not enter the latency histogram");
    }
}
