//! Capacity sweeps: one summary per arm and offered rate, whether the arm
//! sustained it, and the knee. Pure functions over results; no I/O.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use caller::Transport;

use crate::judge::stats::mean;
use crate::judge::validity::ACHIEVED_RATIO_MIN;
use crate::result::{RunResult, RunStatus, TierName};

/// One arm at one offered rate, averaged over its rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub transport: Transport,
    pub offered_qps: f64,
    pub achieved_ok_per_second: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub errors: u64,
    pub dropped: u64,
    /// CPU µs per request and mean RSS (MiB) by tier.
    pub cpu_us_per_request: BTreeMap<TierName, Option<f64>>,
    pub rss_mib: BTreeMap<TierName, Option<f64>>,
    pub sustained: bool,
    /// Why a step was not sustained.
    pub shortfalls: Vec<String>,
    /// The step's folder, relative to the sweep folder.
    pub folder: String,
}

/// Everything a sweep found for one arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmCapacity {
    pub transport: Transport,
    pub steps: Vec<Step>,
    /// The highest offered rate the arm sustained with every lower step
    /// sustained too ([`knee`]).
    pub knee_qps: Option<f64>,
    /// Rates above the knee the arm sustained again after a lower step was not
    /// sustained: between the knee and them the arm is not stable. Empty in
    /// sweeps recorded before it was kept (their knee was the highest
    /// sustained rate, whatever failed below it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sustained_above_knee_qps: Vec<f64>,
    /// Set when the sweep stopped early for this arm.
    pub stopped_early: Option<String>,
}

impl ArmCapacity {
    /// Sets the knee and the rates sustained above it from the steps run.
    pub fn judge_knee(&mut self) {
        self.knee_qps = knee(&self.steps);
        self.sustained_above_knee_qps = sustained_above(&self.steps, self.knee_qps);
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    /// Every offered rate the sweep was given, in order (what `harness rerun`
    /// repeats). Older sweeps lack it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offered_qps: Vec<f64>,
    pub slo_p99_ms: f64,
    pub arms: Vec<ArmCapacity>,
    /// Set when the sweep was interrupted: its knees are over the steps that ran.
    #[serde(default)]
    pub interrupted: Option<Interruption>,
}

/// Why a sweep stopped before its last step, and the steps that never ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interruption {
    pub reason: String,
    /// Offered rates no arm ran.
    pub not_run_qps: Vec<f64>,
}

/// The status of a whole sweep: interrupted if the user stopped it, even
/// between two steps, when the last step that ran was complete.
pub fn sweep_status(last_step: RunStatus, interrupted: bool) -> RunStatus {
    match last_step {
        RunStatus::Complete if interrupted => RunStatus::Interrupted,
        other => other,
    }
}

/// The offered rates of `rates` that no arm ran a step at.
pub fn not_run(rates: &[f64], arms: &[ArmCapacity]) -> Vec<f64> {
    rates.iter().copied().filter(|r| !arms.iter().any(|a| a.steps.iter().any(|s| s.offered_qps == *r))).collect()
}

/// Failed steps in a row after which a sweep stops for an arm.
pub const STOP_AFTER_FAILURES: usize = 2;

/// Summarizes one arm's run at one offered rate and judges it: sustained means
/// achieved at least 99% of the offered rate, no errors, no drops, and p99
/// under `slo_p99_ms`.
pub fn step(run: &RunResult, slo_p99_ms: f64, folder: String) -> Step {
    let rounds = &run.rounds;
    let m = |f: &dyn Fn(&crate::result::RoundResult) -> Option<f64>| mean(rounds.iter().filter_map(f));
    let errors: u64 =
        rounds.iter().map(|r| r.requests.error_total() - r.requests.errors.get("dropped").copied().unwrap_or(0)).sum();
    let dropped: u64 = rounds.iter().map(|r| r.requests.errors.get("dropped").copied().unwrap_or(0)).sum();
    let tiers = [TierName::Caller, TierName::Downstream, TierName::Harness];
    let per_tier = |f: fn(&crate::result::Resources) -> Option<f64>| {
        tiers
            .iter()
            .map(|t| (*t, mean(rounds.iter().filter_map(|r| r.resources.get(t).and_then(f)))))
            .collect::<BTreeMap<_, _>>()
    };
    let mut s = Step {
        transport: run.config.transport,
        offered_qps: run.config.load.qps,
        achieved_ok_per_second: m(&|r| Some(r.throughput.ok_per_second)),
        p50_ms: m(&|r| r.latency.corrected.as_ref().map(|l| l.p50_ms)),
        p99_ms: m(&|r| r.latency.corrected.as_ref().map(|l| l.p99_ms)),
        errors,
        dropped,
        cpu_us_per_request: per_tier(|r| r.cpu_us_per_request),
        rss_mib: per_tier(|r| r.rss_mib_mean),
        sustained: false,
        shortfalls: Vec::new(),
        folder,
    };
    s.shortfalls = shortfalls(&s, slo_p99_ms, run.rounds.iter().all(|r| r.complete) && !rounds.is_empty());
    s.sustained = s.shortfalls.is_empty();
    s
}

fn shortfalls(s: &Step, slo_p99_ms: f64, complete: bool) -> Vec<String> {
    let mut why = Vec::new();
    if !complete {
        why.push("did not complete".to_owned());
    }
    match s.achieved_ok_per_second {
        Some(a) if a >= ACHIEVED_RATIO_MIN * s.offered_qps => {}
        Some(a) => why.push(format!("achieved {:.1}%", a / s.offered_qps * 100.0)),
        None => why.push("no throughput measured".to_owned()),
    }
    if s.errors > 0 {
        why.push(format!("{} errors", s.errors));
    }
    if s.dropped > 0 {
        why.push(format!("{} dropped", s.dropped));
    }
    match s.p99_ms {
        Some(p) if p < slo_p99_ms => {}
        Some(p) => why.push(format!("p99 {p:.1} ms ≥ {slo_p99_ms:.0} ms")),
        None => why.push("no latency measured".to_owned()),
    }
    why
}

/// The knee: the highest offered rate that was sustained with every lower
/// step sustained too. A step that failed caps it, even if a higher one was
/// sustained again (REST at 10,000 req/s on two cores: p99 1,250 ms, then
/// 12,000 sustained): capacity is the rate up to which the arm held, not its
/// best moment.
pub fn knee(steps: &[Step]) -> Option<f64> {
    let mut by_rate: Vec<&Step> = steps.iter().collect();
    by_rate.sort_by(|a, b| a.offered_qps.total_cmp(&b.offered_qps));
    by_rate.iter().take_while(|s| s.sustained).map(|s| s.offered_qps).last()
}

/// The sustained rates above `knee`: each came after a lower step that was not
/// sustained (a collapse that recovered at a higher rate, or noise), so a
/// reader must not take the range up to them as capacity.
pub fn sustained_above(steps: &[Step], knee: Option<f64>) -> Vec<f64> {
    let mut above: Vec<f64> =
        steps.iter().filter(|s| s.sustained && knee.is_none_or(|k| s.offered_qps > k)).map(|s| s.offered_qps).collect();
    above.sort_by(f64::total_cmp);
    above
}

/// True once the last `STOP_AFTER_FAILURES` steps all failed.
pub fn should_stop(steps: &[Step]) -> bool {
    steps.len() >= STOP_AFTER_FAILURES && steps[steps.len() - STOP_AFTER_FAILURES..].iter().all(|s| !s.sustained)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn synthetic(offered: f64, achieved: f64, p99_base_ms: f64, errors: bool) -> Step {
        let mut run = testing::run(Transport::Grpc, if errors { 3.0 } else { 1.0 });
        run.config.load.qps = offered;
        run.rounds = vec![testing::round(1, p99_base_ms, if errors { 3.0 } else { 1.0 })];
        run.rounds[0].throughput.ok_per_second = achieved;
        step(&run, 600.0, format!("step-{offered}qps"))
    }

    #[test]
    fn a_step_is_sustained_only_at_rate_without_errors_and_under_the_slo() {
        assert!(synthetic(1000.0, 995.0, 500.0, false).sustained);
        let slow = synthetic(1000.0, 980.0, 500.0, false);
        assert!(!slow.sustained && slow.shortfalls == ["achieved 98.0%"], "{:?}", slow.shortfalls);
        let late = synthetic(1000.0, 1000.0, 650.0, false);
        assert!(!late.sustained && late.shortfalls[0].starts_with("p99 651"), "{:?}", late.shortfalls);
        let failing = synthetic(1000.0, 1000.0, 500.0, true);
        assert!(failing.shortfalls.contains(&"3 errors".to_owned()), "{:?}", failing.shortfalls);
    }

    #[test]
    fn knee_is_the_highest_sustained_rate_and_two_failures_stop_the_arm() {
        let steps = vec![
            synthetic(500.0, 500.0, 500.0, false),
            synthetic(1000.0, 1000.0, 500.0, false),
            synthetic(2000.0, 1500.0, 900.0, false),
        ];
        assert_eq!(knee(&steps), Some(1000.0));
        assert!(!should_stop(&steps));
        let mut more = steps.clone();
        more.push(synthetic(4000.0, 1600.0, 2000.0, false));
        assert!(should_stop(&more));
        assert_eq!(knee(&more), Some(1000.0));
        assert_eq!(knee(&more[2..]), None);
        assert!(sustained_above(&more, knee(&more)).is_empty());
    }

    #[test]
    fn a_failed_step_caps_the_knee_and_higher_sustained_steps_are_named() {
        let ok = |q: f64| synthetic(q, q, 500.0, false);
        let failed = |q: f64| synthetic(q, q, 1250.0, false);
        let steps = vec![ok(8000.0), failed(10000.0), ok(12000.0), failed(16000.0)];
        assert_eq!(knee(&steps), Some(8000.0));
        assert_eq!(sustained_above(&steps, knee(&steps)), [12000.0]);
        // The order the steps ran in does not matter, only their rates.
        let shuffled = vec![ok(12000.0), failed(10000.0), ok(8000.0)];
        assert_eq!(knee(&shuffled), Some(8000.0));
        // The lowest step failed: no knee, and every sustained step is above it.
        let low = vec![failed(1000.0), ok(2000.0)];
        assert_eq!((knee(&low), sustained_above(&low, None)), (None, vec![2000.0]));
    }

    #[test]
    fn an_interrupt_between_steps_interrupts_the_sweep_and_names_the_steps_not_run() {
        assert_eq!(sweep_status(RunStatus::Complete, true), RunStatus::Interrupted);
        assert_eq!(sweep_status(RunStatus::Complete, false), RunStatus::Complete);
        assert_eq!(sweep_status(RunStatus::Aborted, true), RunStatus::Aborted);
        let arms = [ArmCapacity {
            transport: Transport::Grpc,
            steps: vec![synthetic(500.0, 500.0, 500.0, false)],
            knee_qps: Some(500.0),
            sustained_above_knee_qps: Vec::new(),
            stopped_early: None,
        }];
        assert_eq!(not_run(&[500.0, 1000.0, 2000.0], &arms), [1000.0, 2000.0]);
    }
}
