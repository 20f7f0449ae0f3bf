//! The load and its rounds: the offered rate (`--qps`, or `--connections`
//! alone for a closed loop), the warm-up, the measured rounds and whether
//! each gets fresh tier processes, the timeout, the bounds on requests in
//! flight, the harness's own worker threads, how often tiers are sampled and
//! the SLO a sweep step is held to. The caller is given the timeout as its
//! own downstream timeout.

use std::time::Duration;

use clap::Args;
use serde::{Deserialize, Serialize};

use super::{ConfigError, Flags, TierRole, bad, duration, hd, parse_rates, secs};

/// The longest a run's measured load may last: warm-up plus every round.
pub const MAX_RUN: Duration = Duration::from_secs(30 * 24 * 3600);
/// The most measured rounds of one run.
pub const MAX_ROUNDS: u32 = 10_000;
/// The harness runtime's worker threads unless `--load-threads` says otherwise.
pub const DEFAULT_LOAD_THREADS: u32 = 1;
/// The latest `--send-precision` lets a request leave: half the 10 ms a
/// valid round's send lag p99 must stay under.
pub const MAX_SEND_PRECISION: Duration = Duration::from_millis(5);
/// Most worker threads `--load-threads` gives the harness's runtime.
pub const MAX_LOAD_THREADS: u32 = 256;

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Load and rounds (docs/measuring.md)")]
pub struct LoadArgs {
    /// Target rate in requests per second (open loop: request i is due at t0 + i/qps).
    ///
    /// one rate (default 100), or a sweep as a list (500,1000,2000) or a geometric range (500..16000x2).
    /// Leave it out and give --connections for closed-loop throughput mode.
    #[arg(long, allow_hyphen_values = true)]
    pub qps: Option<String>,
    /// Bound the front hop to N keep-alive connections, wrk2-style.
    ///
    /// a due request waits for a free connection, and that wait counts in the corrected latency, not in the
    /// service time. 0 (default): one connection per request in flight. Without --qps: closed-loop
    /// throughput mode, N connections sending back to back.
    #[arg(long, default_value_t = 0)]
    pub connections: usize,
    /// Length of each measured round (e.g. 60s, 2m).
    #[arg(long, default_value = "60s", value_parser = duration)]
    pub duration: Duration,
    /// Unrecorded load before the first round.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub warmup: Duration,
    /// The first part of the warm-up on fresh tiers, over which the rate rises linearly from zero to --qps
    /// (as traffic rises in production), so the tiers open their connections over it instead of thousands
    /// at once.
    ///
    /// 0s starts at the full rate. Open loop only [default: half of --warmup].
    #[arg(long, value_parser = duration)]
    pub warmup_ramp: Option<Duration>,
    /// Measured rounds, each with fresh histograms and (unless --reuse-tiers)
    /// freshly started and warmed-up tier processes [default: 1; 3 per arm
    /// when arms are compared at one rate, the fewest a confidence interval is
    /// judged from].
    #[arg(long, allow_hyphen_values = true)]
    pub rounds: Option<String>,
    /// Keep one set of tier processes per arm for all rounds (faster: one warm-up per arm).
    ///
    /// Memory is then one process per arm, so a comparison does not judge its memory rows. Remote tiers
    /// (--caller-url, --downstream-url) always keep one set.
    #[arg(long)]
    pub reuse_tiers: bool,
    /// A request not answered within this time counts as a timeout (also the
    /// caller's timeout on its downstream calls).
    #[arg(long, default_value = "30s", value_parser = duration)]
    pub timeout: Duration,
    /// Most requests in flight; a request due beyond it is counted as dropped, never delayed.
    #[arg(long, default_value_t = 10_000)]
    pub max_in_flight: usize,
    /// Worker threads of the harness's own async runtime, which dispatch and send the requests and read the
    /// answers.
    ///
    /// One (default) leaves the cores to the measured tiers and costs the fewest wake-ups; give more only
    /// when the generator itself is the bottleneck (see bench/README.md).
    #[arg(long, default_value_t = DEFAULT_LOAD_THREADS)]
    pub load_threads: u32,
    /// How late after its due time a request may leave, so that the requests due within one window go out
    /// on one wake-up of the generator (open loop).
    ///
    /// 1ms (default): a wake-up is set at most 0.75 ms after a due time, the last quarter left for the
    /// wake-up's own delay, as often as a load tool on tokio's 1 ms timer wakes; at 5,000 req/s that is
    /// about half the harness CPU per request of a wake-up at each due time (bench/README.md). 0s wakes
    /// the generator at each due time. Every request's latency counts from its due time. At most 5ms.
    #[arg(long, default_value = "1ms", value_parser = duration)]
    pub send_precision: Duration,
    /// How often CPU and RSS of every tier are sampled (at least 200ms, sysinfo's minimum).
    #[arg(long, default_value = "250ms", value_parser = duration)]
    pub sample_interval: Duration,
    /// In a sweep, a step is sustained only if its p99 is under this (default:
    /// the delay plus the jitter plus 100ms).
    #[arg(long, value_parser = duration)]
    pub slo_p99: Option<Duration>,
}

/// The load section of [`super::Config`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// Offered rate (0 in closed-loop throughput mode).
    pub qps: f64,
    /// Throughput mode: `connections` workers send back to back; latency is
    /// then not corrected for coordinated omission.
    pub closed_loop: bool,
    /// The p99 a sweep step must stay under to count as sustained.
    #[serde(with = "secs")]
    pub slo_p99: Duration,
    #[serde(with = "secs")]
    pub duration: Duration,
    #[serde(with = "secs")]
    pub warmup: Duration,
    /// The first part of a cold warm-up (fresh tiers), over which the rate
    /// rises linearly from zero to `qps` (`--warmup-ramp`; open loop only).
    /// Older runs lack it: their warm-up started at the full rate.
    #[serde(with = "secs", default)]
    pub warmup_ramp: Duration,
    pub rounds: u32,
    /// Every measured round after an arm's first runs on freshly started tier
    /// processes, warmed up like the first: the process is the unit memory
    /// is judged on (`--reuse-tiers` turns it off). Older runs lack it: they
    /// reused one set of processes per arm.
    #[serde(default)]
    pub fresh_tiers: bool,
    #[serde(with = "secs")]
    pub timeout: Duration,
    pub max_in_flight: usize,
    /// Front-hop connection bound; 0 = one per request in flight.
    pub connections: usize,
    /// Worker threads of the harness's runtime (`--load-threads`). Older runs
    /// lack it: they ran one per core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_threads: Option<u32>,
    /// How late after its due time a request may leave, the requests due
    /// within it sent on one wake-up (`--send-precision`, 1 ms unless set;
    /// 0: a wake-up per due time, as older runs, which lack it, did).
    #[serde(with = "secs", default)]
    pub send_precision: Duration,
    #[serde(with = "secs")]
    pub sample_interval: Duration,
}

/// What the load section's checks need from other sections.
#[derive(Debug, Clone, Copy)]
pub struct LoadContext {
    /// The slowest service time (`--delay` plus `--jitter`): the default SLO.
    pub service_time: Duration,
    /// Rounds when `--rounds` is not given.
    pub default_rounds: u32,
    /// The harness starts the tiers as local processes, so it can restart
    /// them per round.
    pub restartable: bool,
}

impl LoadArgs {
    /// The offered rates: one for a single run, several for a sweep, none in
    /// closed-loop throughput mode (`--connections` without `--qps`).
    pub fn rates(&self) -> Result<Vec<f64>, ConfigError> {
        match (&self.qps, self.connections) {
            (Some(text), _) => parse_rates(text),
            (None, n) if n > 0 => Ok(Vec::new()),
            (None, _) => Ok(vec![100.0]),
        }
    }
}

impl Load {
    /// Validates the load flags; `qps` is the (first) offered rate, `None`
    /// for closed-loop throughput mode.
    pub fn from_args(a: &LoadArgs, qps: Option<f64>, cx: LoadContext) -> Result<Load, ConfigError> {
        let rounds = rounds(a.rounds.as_deref(), cx.default_rounds)?;
        let run_duration = a.duration;
        if run_duration.is_zero() {
            return Err(bad("--duration", "must be longer than 0s; e.g. --duration 60s"));
        }
        if let Some(q) = qps.filter(|q| run_duration.as_secs_f64() * q < 1.0) {
            return Err(bad("--duration", format!("{} at --qps {q} schedules no request; run longer", hd(a.duration))));
        }
        let timeout = a.timeout;
        if timeout.is_zero() {
            return Err(bad("--timeout", "must be longer than 0s"));
        }
        let (warmup, warmup_ramp) = warmup(a)?;
        let run_length = warmup + run_duration * rounds;
        if run_length > MAX_RUN {
            return Err(bad(
                "--rounds",
                format!(
                    "{rounds} rounds of {} plus the warm-up run for {}, over the {} a run may last; use fewer or \
                     shorter rounds",
                    hd(a.duration),
                    humantime::format_duration(run_length),
                    humantime::format_duration(MAX_RUN)
                ),
            ));
        }
        if a.max_in_flight == 0 {
            return Err(bad("--max-in-flight", "must be at least 1"));
        }
        if a.send_precision > MAX_SEND_PRECISION {
            return Err(bad(
                "--send-precision",
                format!(
                    "{} is over {}, half the 10 ms a valid round's send lag p99 must stay under",
                    hd(a.send_precision),
                    hd(MAX_SEND_PRECISION)
                ),
            ));
        }
        if !(1..=MAX_LOAD_THREADS).contains(&a.load_threads) {
            return Err(bad("--load-threads", format!("must be between 1 and {MAX_LOAD_THREADS}")));
        }
        Ok(Load {
            qps: qps.unwrap_or(0.0),
            closed_loop: qps.is_none(),
            slo_p99: a.slo_p99.unwrap_or(cx.service_time + Duration::from_millis(100)),
            duration: run_duration,
            warmup,
            // A closed loop has no rate to ramp.
            warmup_ramp: if qps.is_some() { warmup_ramp } else { Duration::ZERO },
            rounds,
            // Only tiers the harness starts (processes or containers) are
            // restarted per round; remote tiers keep one set per arm.
            fresh_tiers: !a.reuse_tiers && cx.restartable,
            timeout,
            max_in_flight: a.max_in_flight,
            connections: a.connections,
            load_threads: Some(a.load_threads),
            send_precision: a.send_precision,
            sample_interval: sample_interval(a.sample_interval)?,
        })
    }

    /// Requests scheduled in one round.
    pub fn requests_per_round(&self) -> u64 {
        (self.duration.as_secs_f64() * self.qps).round() as u64
    }

    /// The load's part of the command line `harness rerun` replays.
    pub fn replay(&self, flags: &mut Flags) {
        if !self.closed_loop {
            flags.flag("--qps", self.qps.to_string());
        }
        flags.flag("--connections", self.connections.to_string());
        for (name, d) in [
            ("--slo-p99", self.slo_p99),
            ("--duration", self.duration),
            ("--warmup", self.warmup),
            ("--warmup-ramp", self.warmup_ramp),
            ("--timeout", self.timeout),
            ("--sample-interval", self.sample_interval),
            ("--send-precision", self.send_precision),
        ] {
            flags.duration(name, d);
        }
        flags.flag("--rounds", self.rounds.to_string());
        flags.flag("--max-in-flight", self.max_in_flight.to_string());
        if let Some(n) = self.load_threads {
            flags.flag("--load-threads", n.to_string());
        }
        flags.switch(!self.fresh_tiers, "--reuse-tiers");
    }

    /// The caller times out its downstream calls as the harness times out
    /// its requests.
    pub fn tier_flags(&self, role: TierRole, flags: &mut Flags) {
        if role == TierRole::Caller {
            flags.duration("--downstream-timeout", self.timeout);
        }
    }
}

/// `--rounds`, or `default` without it.
fn rounds(text: Option<&str>, default: u32) -> Result<u32, ConfigError> {
    let Some(text) = text else { return Ok(default) };
    let rounds: u32 =
        text.trim().parse().map_err(|_| bad("--rounds", format!("{text:?} is not a whole number; e.g. --rounds 3")))?;
    if !(1..=MAX_ROUNDS).contains(&rounds) {
        return Err(bad("--rounds", format!("must be between 1 and {MAX_ROUNDS}")));
    }
    Ok(rounds)
}

/// `--warmup` and `--warmup-ramp` (half the warm-up unless given; never
/// longer than it).
fn warmup(a: &LoadArgs) -> Result<(Duration, Duration), ConfigError> {
    let warmup = a.warmup;
    let ramp = a.warmup_ramp.unwrap_or(warmup / 2);
    if ramp > warmup {
        return Err(bad(
            "--warmup-ramp",
            format!("{} is longer than the warm-up ({}); the ramp is the warm-up's first part", hd(ramp), hd(warmup)),
        ));
    }
    Ok((warmup, ramp))
}

/// `--sample-interval`: at least the interval CPU usage can be measured over.
fn sample_interval(interval: Duration) -> Result<Duration, ConfigError> {
    let minimum = sysinfo::MINIMUM_CPU_UPDATE_INTERVAL;
    if interval < minimum {
        return Err(bad(
            "--sample-interval",
            format!(
                "{} is below the {} ms CPU usage can be measured over; use at least --sample-interval {}ms",
                hd(interval),
                minimum.as_millis(),
                minimum.as_millis()
            ),
        ));
    }
    Ok(interval)
}
