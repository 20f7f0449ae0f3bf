//! What one arm would need at a planned rate (`--plan-qps`), projected
//! linearly from its measured per-request costs, with the basis of each
//! figure kept beside it. Pure arithmetic on a run's means over rounds.
//!
//! * CPU cores per tier = rate × CPU µs per request / 10⁶.
//! * Requests in flight = rate × mean latency (Little's law), and memory:
//!   one measured rate cannot separate a tier's fixed resident set from what
//!   each request in flight adds, so at or below the measured in-flight count
//!   the projection is the measured RSS (an upper bound), and above it the
//!   RSS scaled in proportion to in-flight requests (an upper bound too: the
//!   fixed part is scaled with the rest).
//! * Internal-hop egress per day and direction = rate × wire bytes per
//!   request × 86,400 s, in GB (10⁹ bytes).
//!
//! Linear extrapolation is not valid past the knee: a planned rate above the
//! highest rate measured is flagged (`above_measured`).

use serde::Serialize;

use super::stats::mean;
use crate::result::{RunResult, TierName};

const SECONDS_PER_DAY: f64 = 86_400.0;

/// One tier's projected CPU and memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TierProjection {
    pub tier: TierName,
    /// Measured basis: CPU µs per request.
    pub cpu_us_per_request: Option<f64>,
    pub cores: Option<f64>,
    /// Measured basis: mean RSS over the rounds, at `in_flight_measured`.
    pub rss_mib_measured: Option<f64>,
    /// An upper bound on RSS at the planned rate (see the module text).
    pub rss_mib_at_most: Option<f64>,
}

/// Internal-hop bytes one direction moves.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Egress {
    /// Measured basis: wire bytes per request.
    pub bytes_per_request: Option<f64>,
    pub gb_per_day: Option<f64>,
}

/// One arm at the planned rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Projection {
    pub plan_qps: f64,
    /// OK responses per second the arm sustained (mean over rounds).
    pub measured_qps: Option<f64>,
    /// The planned rate is above the highest rate measured: a linear
    /// projection past the knee is not valid.
    pub above_measured: bool,
    pub latency_mean_ms: Option<f64>,
    pub in_flight_measured: Option<f64>,
    pub in_flight_planned: Option<f64>,
    pub tiers: Vec<TierProjection>,
    /// caller → downstream.
    pub request_egress: Egress,
    /// downstream → caller.
    pub response_egress: Egress,
}

/// The rate projections default to: the measured (offered) rate, or in closed
/// loop the throughput.
pub fn default_plan_qps(run: &RunResult) -> f64 {
    match run.config.output.plan_qps {
        Some(q) => q,
        None if run.config.load.qps > 0.0 => run.config.load.qps,
        None => mean(run.rounds.iter().map(|r| r.throughput.ok_per_second)).unwrap_or(0.0),
    }
}

/// `run` projected to `plan_qps`; `highest_measured_qps` is the highest rate
/// any arm compared was offered (or sustained).
pub fn project(run: &RunResult, plan_qps: f64, highest_measured_qps: f64) -> Projection {
    let avg = |f: &dyn Fn(&crate::result::RoundResult) -> Option<f64>| mean(run.rounds.iter().filter_map(f));
    let measured_qps = avg(&|r| Some(r.throughput.ok_per_second));
    let latency_mean_ms = avg(&|r| r.latency.corrected.as_ref().map(|s| s.mean_ms));
    let in_flight_measured = measured_qps.zip(latency_mean_ms).map(|(q, l)| q * l / 1000.0);
    let in_flight_planned = latency_mean_ms.map(|l| plan_qps * l / 1000.0);
    let tiers = [TierName::Caller, TierName::Downstream, TierName::Proxy]
        .into_iter()
        .filter(|t| run.rounds.iter().any(|r| r.resources.get(t).is_some_and(|res| res.cpu_seconds.is_some())))
        .map(|tier| {
            let cpu = avg(&|r| r.resources.get(&tier)?.cpu_us_per_request);
            let rss = avg(&|r| r.resources.get(&tier)?.rss_mib_mean);
            let at_most = match (rss, in_flight_measured, in_flight_planned) {
                (Some(rss), Some(m), Some(p)) if p > m && m > 0.0 => Some(rss * p / m),
                (Some(rss), _, _) => Some(rss),
                _ => None,
            };
            TierProjection {
                tier,
                cpu_us_per_request: cpu,
                cores: cpu.map(|us| plan_qps * us / 1e6),
                rss_mib_measured: rss,
                rss_mib_at_most: at_most,
            }
        })
        .collect();
    let egress = |bytes: Option<f64>| Egress {
        bytes_per_request: bytes,
        gb_per_day: bytes.map(|b| plan_qps * b * SECONDS_PER_DAY / 1e9),
    };
    Projection {
        plan_qps,
        measured_qps,
        above_measured: plan_qps > highest_measured_qps * 1.0001,
        latency_mean_ms,
        in_flight_measured,
        in_flight_planned,
        tiers,
        request_egress: egress(avg(&|r| r.bytes.internal.request_wire_bytes_per_request)),
        response_egress: egress(avg(&|r| r.bytes.internal.response_wire_bytes_per_request)),
    }
}

/// Every arm projected to the first arm's planned rate, flagged against the
/// highest rate any of them was offered.
pub fn project_all(runs: &[&RunResult]) -> Vec<Projection> {
    let Some(first) = runs.first() else { return Vec::new() };
    let plan = default_plan_qps(first);
    let highest = runs
        .iter()
        .map(|r| {
            let sustained = mean(r.rounds.iter().map(|x| x.throughput.ok_per_second)).unwrap_or(0.0);
            r.config.load.qps.max(sustained)
        })
        .fold(0.0, f64::max);
    runs.iter().map(|r| project(r, plan, highest)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use caller::Transport;

    #[test]
    fn projections_scale_the_measured_costs() {
        // testing::run: 100 ok/s, caller 200 µs/request, 20 MiB; 500 ms latency
        // (plus up to 1 ms); 66 B and 1095 B per request on the internal hop.
        let run = testing::run(Transport::Grpc, 1.0);
        let p = project(&run, 1000.0, 100.0);
        assert!(p.above_measured);
        let caller = &p.tiers[0];
        assert_eq!(caller.tier, TierName::Caller);
        assert!((caller.cpu_us_per_request.unwrap() - 200.0).abs() < 1e-9);
        assert!((caller.cores.unwrap() - 0.2).abs() < 1e-9, "{caller:?}");
        // 50 in flight measured, 500 planned: ten times the RSS at most.
        let (m, planned) = (p.in_flight_measured.unwrap(), p.in_flight_planned.unwrap());
        assert!((m - 50.0).abs() < 0.1 && (planned - 500.0).abs() < 1.0, "{m} {planned}");
        assert!((caller.rss_mib_at_most.unwrap() - 200.0).abs() < 1e-6);
        // 1000 req/s × 1095 B × 86400 s = 94.608 GB/day.
        assert!((p.response_egress.gb_per_day.unwrap() - 94.608).abs() < 1e-9);
        assert!((p.request_egress.gb_per_day.unwrap() - 5.7024).abs() < 1e-9);
    }

    #[test]
    fn below_the_measured_rate_memory_is_the_measured_rss() {
        let run = testing::run(Transport::Grpc, 1.0);
        let p = project(&run, 10.0, 100.0);
        assert!(!p.above_measured);
        assert_eq!(p.tiers[0].rss_mib_at_most, p.tiers[0].rss_mib_measured);
        assert_eq!(default_plan_qps(&run), 100.0);
        let all = project_all(&[&run, &run]);
        assert_eq!(all.len(), 2);
        assert!(!all[0].above_measured && all[0].plan_qps == 100.0);
    }
}
