//! Whether a run was a fair measurement of the transports: judged once when
//! the run ends, stored in `run.json` (`validity`), and read from there by
//! every renderer.

use crate::result::{RunResult, RunStatus, TierName};

/// Send lag p99 above this means the generator did not keep its schedule.
pub const SEND_LAG_P99_LIMIT_MS: f64 = 10.0;
/// How a send-lag problem ends: the one validity note that says the machine,
/// not the measured tiers, kept the generator from its schedule.
pub const FELL_BEHIND: &str = "the generator fell behind its schedule";
/// Achieved throughput below this share of the target is not the offered load.
pub const ACHIEVED_RATIO_MIN: f64 = 0.99;
/// The harness above this CPU % of one core may itself be the bottleneck.
pub const HARNESS_CPU_PEAK_LIMIT: f64 = 90.0;
/// Steal above this share of the machine's CPU ticks in a round: the
/// hypervisor gave this VM's cores away often enough to slow what it measured.
pub const STEAL_LIMIT_PERCENT: f64 = 2.0;
/// Processes outside the run keeping more than this share of the machine's
/// logical cores busy, on average over a round: the tiers and the harness
/// competed with them for CPU, so CPU and latency figures read as on a
/// busier machine than the run's own (on a 2-core machine, half a core).
pub const OTHER_LOAD_LIMIT_SHARE: f64 = 0.25;
/// How an other-load note ends: with [`FELL_BEHIND`] and steal, a note that
/// says the machine, not the measured tiers, is what was busy.
pub const COMPETED: &str = "the tiers competed with them for CPU, so CPU and latency read as on a busier machine";
/// A generator that began this many seconds after `--start-at` or more did
/// not start with the others.
pub const LATE_START_LIMIT_SECONDS: f64 = 0.02;

/// Reasons a run is not a fair measurement of the transports; empty if it is.
pub fn validity(run: &RunResult) -> Vec<String> {
    let mut problems = Vec::new();
    if !run.environment.is_optimised() {
        problems.push(format!(
            "built without optimisation ({}): figures are not representative; run with --release",
            run.environment.build_text()
        ));
    }
    match run.status {
        RunStatus::Complete => {}
        RunStatus::Interrupted => problems.push("the run was interrupted; the last round is partial".into()),
        RunStatus::Aborted => problems.push(format!(
            "the run was aborted: {}",
            run.status_reason.as_deref().unwrap_or("reason unknown").lines().next().unwrap_or("")
        )),
    }
    problems.extend(unread_admin(run));
    for g in run.generators.iter().filter(|g| g.late_seconds.is_some_and(|l| l >= LATE_START_LIMIT_SECONDS)) {
        problems.push(format!(
            "generator {}/{} began {:.3} s after --start-at {}: its schedule lagged the others' by that much",
            g.segment,
            g.count,
            g.late_seconds.unwrap_or_default(),
            g.start_at.as_deref().unwrap_or("?")
        ));
    }
    for r in &run.rounds {
        let k = r.index;
        if let Some(ratio) = r.throughput.achieved_ratio.filter(|a| *a < ACHIEVED_RATIO_MIN) {
            problems.push(format!(
                "round {k}: achieved {:.1}% of the target rate (below {:.0}%): the system did not keep up",
                ratio * 100.0,
                ACHIEVED_RATIO_MIN * 100.0
            ));
        }
        problems.extend(machine_notes(run, r));
        if let Some(&dropped) = r.requests.errors.get("dropped").filter(|d| **d > 0) {
            problems.push(format!("round {k}: {dropped} requests dropped at --max-in-flight"));
        }
        let errors = r.requests.error_total() - r.requests.errors.get("dropped").copied().unwrap_or(0);
        if errors > 0 {
            let classes: Vec<String> =
                r.requests.errors.iter().filter(|(c, _)| *c != "dropped").map(|(c, n)| format!("{c} {n}")).collect();
            problems.push(format!("round {k}: {errors} errors ({})", classes.join(", ")));
        }
        if let Some(lag) = r.latency.send_lag.as_ref().filter(|s| s.p99_ms > SEND_LAG_P99_LIMIT_MS) {
            problems.push(format!(
                "round {k}: send lag p99 {:.1} ms (over {SEND_LAG_P99_LIMIT_MS} ms): {FELL_BEHIND}",
                lag.p99_ms
            ));
        }
        problems.extend(r.cpu_throttling.iter().filter(|(_, t)| t.bound()).map(|(tier, t)| {
            format!(
                "round {k}: the {tier}'s CPU limit ({} cores) bound in {} of {} periods (throttled {:.1} s): {}",
                t.cpus,
                t.throttled_periods,
                t.periods,
                t.throttled_seconds,
                throttled_means(*tier)
            )
        }));
        if let Some(peak) =
            r.resources.get(&TierName::Harness).and_then(|h| h.cpu_percent_peak).filter(|p| *p > HARNESS_CPU_PEAK_LIMIT)
        {
            problems.push(format!(
                "round {k}: the harness peaked at {peak:.0}% of a core: the load generator may be the bottleneck"
            ));
        }
    }
    problems
}

/// What else took the machine's CPU during round `r`: the hypervisor's
/// steal, or processes outside the run, over their limits.
fn machine_notes(run: &RunResult, r: &crate::result::RoundResult) -> Vec<String> {
    let k = r.index;
    let mut notes = Vec::new();
    if let Some(steal) = r.steal_percent.filter(|s| *s > STEAL_LIMIT_PERCENT) {
        notes.push(format!(
            "round {k}: the hypervisor took {steal:.1}% of the machine's CPU time (steal, over \
             {STEAL_LIMIT_PERCENT}%): its tiers ran on a slower machine than a quiet one"
        ));
    }
    if let Some((other, cores)) = other_load(run, r) {
        notes.push(format!(
            "round {k}: other processes kept {other:.2} of {cores} cores busy (over {:.0}% of the machine): {COMPETED}",
            OTHER_LOAD_LIMIT_SHARE * 100.0
        ));
    }
    notes
}

/// A round's other load and the machine's cores, where the other load is
/// over [`OTHER_LOAD_LIMIT_SHARE`] of them; `None` where it is not, or where
/// either was not measured.
fn other_load(run: &RunResult, r: &crate::result::RoundResult) -> Option<(f64, usize)> {
    let cores = run.environment.logical_cores?;
    r.other_cores.filter(|o| *o > OTHER_LOAD_LIMIT_SHARE * cores as f64).map(|o| (o, cores))
}

/// What a tier held back by its CPU limit does to the figures.
pub fn throttled_means(tier: TierName) -> &'static str {
    match tier {
        TierName::Caller => "its latency and the downstream hop time include waiting for quota",
        TierName::Downstream => "the latency and the downstream hop time include its waiting for quota",
        _ => "the latency includes its waiting for quota",
    }
}

/// Tiers sampled through an admin endpoint that could not be read (when the
/// run began, or at a round's boundaries): their figures are null, and the
/// run says why.
fn unread_admin(run: &RunResult) -> Vec<String> {
    let mut problems = Vec::new();
    for (tier, info) in &run.tiers {
        let Some(url) = info.sampled_via.as_ref().and_then(|v| v.admin_url.as_deref()) else { continue };
        if info.sampled_via.as_ref().is_some_and(|v| !v.reachable) {
            problems.push(format!(
                "the {tier}'s admin endpoint {url} could not be read: its CPU, memory and bytes are not measured"
            ));
            continue;
        }
        let unread: Vec<String> = run
            .rounds
            .iter()
            .filter(|r| r.resources.get(tier).is_none_or(|res| res.cpu_seconds.is_none()))
            .map(|r| r.index.to_string())
            .collect();
        if !unread.is_empty() {
            problems.push(format!(
                "round {}: the {tier}'s admin endpoint {url} could not be read: its CPU and bytes are not measured",
                unread.join(", ")
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use caller::Transport;

    use super::*;
    use crate::testing;

    #[test]
    fn a_round_beside_other_load_over_the_limit_is_not_valid_and_says_how_much() {
        let mut run = testing::run(Transport::Grpc, 1.0);
        run.environment.logical_cores = Some(2);
        run.rounds[0].other_cores = Some(0.5);
        assert!(!validity(&run).iter().any(|v| v.contains("other processes")), "at the limit: {:?}", validity(&run));
        run.rounds[0].other_cores = Some(1.9);
        let notes = validity(&run);
        assert!(
            notes.iter().any(|v| v.starts_with("round 1: other processes kept 1.90 of 2 cores busy (over 25%")),
            "{notes:?}"
        );
        // Not measured (the load, or the cores) is not a problem.
        run.environment.logical_cores = None;
        assert!(!validity(&run).iter().any(|v| v.contains("other processes")));
        run.environment.logical_cores = Some(2);
        run.rounds[0].other_cores = None;
        assert!(!validity(&run).iter().any(|v| v.contains("other processes")));
    }

    #[test]
    fn a_round_with_steal_over_the_limit_is_not_valid_and_says_how_much() {
        let mut run = testing::run(Transport::Grpc, 1.0);
        run.rounds[0].steal_percent = Some(STEAL_LIMIT_PERCENT);
        assert!(!validity(&run).iter().any(|v| v.contains("steal")), "at the limit: {:?}", validity(&run));
        run.rounds[0].steal_percent = Some(3.3);
        let notes = validity(&run);
        assert!(
            notes.iter().any(|v| v.starts_with("round 1: the hypervisor took 3.3% of the machine's CPU time")),
            "{notes:?}"
        );
        // Not measured is not a problem, and never zero.
        run.rounds[0].steal_percent = None;
        assert!(!validity(&run).iter().any(|v| v.contains("steal")));
    }
}
