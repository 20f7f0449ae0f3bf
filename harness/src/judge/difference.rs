//! Every report row of two arms judged: each side's mean over rounds, the
//! difference B − A with its 95% confidence interval ([`inference`]), and a
//! verdict; then the findings worth a sentence. Pure: the same run.json
//! files always give the same rows.
//!
//! Rounds are paired by index when both arms come from one counterbalanced
//! run (a `--transport both` folder: the same `started_at`); arms from
//! separate runs are compared as independent samples.

use super::inference::{self, Interval, MIN_ROUNDS};
use super::metrics::{Better, Metric, metrics};
use super::noise::aa_noise_percent;
use super::stats::mean;
use crate::result::RunResult;

/// A difference this large (relative to A, in percent) and detectable makes a finding.
pub const FINDING_THRESHOLD_PERCENT: f64 = 5.0;

/// The rows findings are drawn from: one per dimension a team pays for (the
/// others repeat them: CPU seconds and CPU % follow CPU per request).
pub const FINDING_KEYS: &[&str] = &[
    "rss_mib_mean.caller",
    "rss_mib_mean.downstream",
    "rss_mib_mean.proxy",
    "p50",
    "p99",
    "throughput",
    "errors",
    "cpu_us_per_request.caller",
    "cpu_us_per_request.downstream",
    "cpu_us_per_request.proxy",
    "cpu_us_per_request.balancer",
    "imbalance",
    "replica_shed",
    "internal.request_wire_bytes",
    "internal.response_wire_bytes",
    "first_item_p50",
    "first_item_p99",
    "item_delay_p99",
    "items_per_second",
    "streams_cut",
    "cpu_us_per_item.caller",
    "cpu_us_per_item.downstream",
    "internal.request_wire_bytes_per_item",
    "internal.response_wire_bytes_per_item",
];

/// Headline rows that a streaming run says per item: their per-request
/// twin (per stream) would repeat the same ratio as a second finding.
const PER_ITEM_TWINS: &[(&str, &str)] = &[
    ("cpu_us_per_request.caller", "cpu_us_per_item.caller"),
    ("cpu_us_per_request.downstream", "cpu_us_per_item.downstream"),
    ("internal.request_wire_bytes", "internal.request_wire_bytes_per_item"),
    ("internal.response_wire_bytes", "internal.response_wire_bytes_per_item"),
];

/// The headline rows of `rows`, in [`FINDING_KEYS`]' order: every one but
/// a per-request row whose per-item twin was measured.
pub fn headline<'a>(rows: &'a [Row]) -> impl Iterator<Item = &'a Row> + 'a {
    let measured = |key: &str| rows.iter().any(|r| r.metric.key == key && (r.a.is_some() || r.b.is_some()));
    let shadowed = move |key: &str| PER_ITEM_TWINS.iter().any(|(k, twin)| *k == key && measured(twin));
    FINDING_KEYS.iter().filter(move |k| !shadowed(k)).filter_map(move |k| rows.iter().find(|r| r.metric.key == *k))
}

/// How a row's interval was computed: every row, latency percentiles
/// included, from its rounds' own figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// t interval of the paired round differences.
    PairedT,
    /// Welch's t interval (arms from separate runs).
    WelchT,
}

/// What a row's interval says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Fewer than [`MIN_ROUNDS`] rounds (pairs) to judge from.
    NotJudged {
        rounds: usize,
    },
    /// A side has no value for this row.
    NotMeasured,
    /// A process's memory, measured on one process per arm (tiers reused
    /// across rounds, or the harness): its rounds are not independent samples.
    OneProcess,
    /// The interval includes zero.
    NoDifference,
    /// The interval excludes zero, but the difference is under what the row
    /// prints ([`Row::resolution`]): no side is called.
    BelowResolution,
    ABetter,
    BBetter,
    /// A detectable difference on a row with no better side.
    BHigher,
    BLower,
}

impl Verdict {
    /// True when the interval excludes zero.
    pub fn is_detectable(self) -> bool {
        matches!(self, Verdict::ABetter | Verdict::BBetter | Verdict::BHigher | Verdict::BLower)
    }
}

/// One row of a comparison.
#[derive(Debug, Clone)]
pub struct Row {
    pub metric: &'static Metric,
    /// Each side's mean over its rounds.
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// B − A and its 95% interval (`None` under two rounds or without values).
    pub diff: Option<Interval>,
    pub method: Method,
    /// Rounds (pairs) the interval rests on.
    pub rounds: usize,
    pub verdict: Verdict,
    /// The A/A noise of the row's type in these two runs, in percent of the
    /// mean ([`aa_noise_percent`]); `None` where it cannot be measured.
    pub noise_percent: Option<f64>,
}

impl Row {
    /// The difference relative to A, in percent; none for a count, which is
    /// compared as a count ([`Metric::is_count`]).
    pub fn relative(&self) -> Option<Interval> {
        if self.metric.is_count() {
            return None;
        }
        self.diff?.relative_to(self.a?)
    }

    /// The smallest difference these rounds would have called at 95%, in the
    /// row's unit: the half-width of its t interval (t(0.975, df) × the
    /// standard error from the rounds' own spread), since a mean difference
    /// is called exactly when it is larger than that.
    pub fn detectable(&self) -> Option<f64> {
        self.diff.map(|d| (d.hi - d.lo) / 2.0)
    }

    /// [`Row::detectable`] in percent of A, where the row is relative.
    pub fn detectable_percent(&self) -> Option<f64> {
        let a = self.a.filter(|a| *a != 0.0 && a.is_finite() && !self.metric.is_count())?;
        Some(self.detectable()? / a.abs() * 100.0)
    }

    /// The smallest difference the row prints, in its unit: one unit of the
    /// values' last digit, and for a relative row 0.1% of A (the difference
    /// cell's last digit), whichever is larger; a count's is one.
    pub fn resolution(&self) -> f64 {
        let digit = 10f64.powi(-i32::try_from(self.metric.decimals).unwrap_or(i32::MAX));
        match self.a {
            _ if self.metric.is_count() => digit.max(1.0),
            Some(a) if a != 0.0 && a.is_finite() => digit.max(a.abs() * 0.001),
            _ => digit,
        }
    }

    /// True when no difference was seen but one that matters could have hidden
    /// in the interval: the run could only have detected a difference of at
    /// least [`FINDING_THRESHOLD_PERCENT`] of A (a count: one or more).
    pub fn inconclusive(&self) -> bool {
        self.verdict == Verdict::NoDifference
            && match (self.detectable_percent(), self.detectable()) {
                (Some(p), _) => p >= FINDING_THRESHOLD_PERCENT,
                (None, Some(d)) => d >= self.resolution(),
                (None, None) => true,
            }
    }

    /// True when a called difference is under twice the A/A noise of its
    /// row type: two measurements of one arm differ by that much.
    pub fn within_noise(&self) -> bool {
        match (self.relative(), self.noise_percent) {
            (Some(rel), Some(noise)) => self.verdict.is_detectable() && rel.estimate.abs() < 2.0 * noise,
            _ => false,
        }
    }
}

/// The runs of one folder in the order they are compared: the baseline first
/// (`--baseline`, recorded in each arm's configuration where it is not the
/// default), then the other arms (`config::compared_order`). Every renderer
/// judges `runs[1..]` against `runs[0]`.
pub fn in_compared_order(runs: Vec<RunResult>) -> Vec<RunResult> {
    let transports: Vec<_> = runs.iter().map(|r| r.config.transport).collect();
    let baseline = runs.iter().find_map(|r| r.config.baseline);
    let order = crate::config::compared_order(&transports, baseline);
    let mut slots: Vec<Option<RunResult>> = runs.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// True when `a` and `b` are the arms of one counterbalanced run.
pub fn paired(a: &RunResult, b: &RunResult) -> bool {
    a.started_at == b.started_at && a.rounds.len() == b.rounds.len()
}

/// Every row of [`metrics`] for B against A.
pub fn compare(a: &RunResult, b: &RunResult) -> Vec<Row> {
    let is_paired = paired(a, b);
    let mut rows: Vec<Row> = metrics().iter().map(|m| row(m, a, b, is_paired)).collect();
    for r in &mut rows {
        r.noise_percent = aa_noise_percent(&[a, b], FINDING_KEYS, r.metric.key);
    }
    rows
}

/// One row: a latency percentile is judged like every other figure, one
/// value per round (the round's own percentile), so the interval rests on
/// how much whole rounds differ ([`inference`]).
fn row(m: &'static Metric, a: &RunResult, b: &RunResult, is_paired: bool) -> Row {
    let values = |run: &RunResult| -> Vec<(u32, f64)> {
        run.rounds.iter().filter_map(|r| Some((r.index, (m.get)(r)?))).collect()
    };
    let (va, vb) = (values(a), values(b));
    let (ma, mb) = (mean(va.iter().map(|v| v.1)), mean(vb.iter().map(|v| v.1)));
    let (xa, xb): (Vec<f64>, Vec<f64>) = if is_paired {
        va.iter().filter_map(|(i, x)| Some((*x, vb.iter().find(|(j, _)| j == i)?.1))).unzip()
    } else {
        (va.iter().map(|v| v.1).collect(), vb.iter().map(|v| v.1).collect())
    };
    let rounds = xa.len().min(xb.len());
    let (method, diff) = if is_paired {
        (Method::PairedT, inference::paired_t(&xa, &xb))
    } else {
        (Method::WelchT, inference::welch_t(&xa, &xb))
    };
    let verdict = match verdict(m.better, diff, rounds) {
        _ if ma.is_none() || mb.is_none() => Verdict::NotMeasured,
        v @ Verdict::NotJudged { .. } => v,
        _ if m.process_tier().is_some_and(|tier| !own_processes(a, tier) || !own_processes(b, tier)) => {
            Verdict::OneProcess
        }
        v => v,
    };
    let mut row = Row { metric: m, a: ma, b: mb, diff, method, rounds, verdict, noise_percent: None };
    if row.verdict.is_detectable() && diff.is_some_and(|d| d.estimate.abs() < row.resolution()) {
        row.verdict = Verdict::BelowResolution;
    }
    row
}

/// True when every round of `run` measured `tier` on a process of its own
/// (fresh tiers): only then are its rounds independent samples of a
/// process's memory. Runs that do not name their processes never are.
fn own_processes(run: &RunResult, tier: &str) -> bool {
    let pids: Option<std::collections::BTreeSet<u32>> =
        run.rounds.iter().map(|r| r.pids.iter().find(|(t, _)| t.as_str() == tier).map(|(_, pid)| *pid)).collect();
    pids.is_some_and(|p| p.len() == run.rounds.len())
}

/// The verdict an interval supports, given which direction is better.
pub fn verdict(better: Better, diff: Option<Interval>, rounds: usize) -> Verdict {
    if rounds < MIN_ROUNDS {
        return Verdict::NotJudged { rounds };
    }
    let Some(d) = diff else { return Verdict::NotMeasured };
    if !d.excludes_zero() {
        return Verdict::NoDifference;
    }
    let b_higher = d.lo > 0.0;
    match (better, b_higher) {
        (Better::Lower, true) | (Better::Higher, false) => Verdict::ABetter,
        (Better::Lower, false) | (Better::Higher, true) => Verdict::BBetter,
        (Better::Neither, true) => Verdict::BHigher,
        (Better::Neither, false) => Verdict::BLower,
    }
}

/// The rows that make findings: detectable, on a row with a better side in
/// [`FINDING_KEYS`], and at least [`FINDING_THRESHOLD_PERCENT`] relative to
/// A (a count: any difference above its resolution); counts first, then the
/// largest first.
pub fn findings(rows: &[Row]) -> Vec<&Row> {
    let mut found: Vec<&Row> = headline(rows)
        .filter(|r| r.verdict.is_detectable())
        .filter(|r| {
            r.metric.is_count() || r.relative().is_some_and(|rel| rel.estimate.abs() >= FINDING_THRESHOLD_PERCENT)
        })
        .collect();
    found.sort_by(|x, y| {
        let size = |r: &Row| r.relative().map_or(f64::INFINITY, |rel| rel.estimate.abs());
        size(y).total_cmp(&size(x))
    });
    found
}

/// The finding rows with no detectable difference.
pub fn no_difference(rows: &[Row]) -> Vec<&Row> {
    headline(rows).filter(|r| r.verdict == Verdict::NoDifference).collect()
}

/// The share of judged rows (with a better side) called different: in an A/A
/// run, the method's false-call rate on this machine. `(called, judged)`.
pub fn called_share(rows: &[Row]) -> (usize, usize) {
    let judged: Vec<&Row> = rows
        .iter()
        .filter(|r| r.metric.better != Better::Neither)
        .filter(|r| {
            matches!(r.verdict, Verdict::NoDifference | Verdict::BelowResolution | Verdict::ABetter | Verdict::BBetter)
        })
        .collect();
    (judged.iter().filter(|r| r.verdict.is_detectable()).count(), judged.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use caller::Transport;

    /// A counterbalanced pair of arms, `rounds` each, REST's caller CPU
    /// `shift` times gRPC's, every other figure with the same small noise.
    fn pair(rounds: u32, shift: f64) -> (RunResult, RunResult) {
        let (mut a, mut b) = (testing::run(Transport::Grpc, 1.0), testing::run(Transport::Rest, 1.0));
        let mut rng = inference::Rng::new(u64::from(rounds));
        let wobble = |rng: &mut inference::Rng| 1.0 + 0.01 * rng.normal();
        a.rounds = (1..=rounds).map(|k| testing::round(k, 500.0, wobble(&mut rng))).collect();
        b.rounds = (1..=rounds).map(|k| testing::round(k, 500.0, wobble(&mut rng))).collect();
        for r in &mut b.rounds {
            let caller = r.resources.get_mut(&crate::result::TierName::Caller).unwrap();
            caller.cpu_us_per_request = caller.cpu_us_per_request.map(|c| c * shift);
        }
        (a, b)
    }

    fn by_key<'a>(rows: &'a [Row], key: &str) -> &'a Row {
        rows.iter().find(|r| r.metric.key == key).unwrap()
    }

    #[test]
    fn a_streaming_runs_findings_say_a_ratio_once_per_item() {
        let (mut a, mut b) = pair(5, 1.10);
        // The same shift per item: the per-request finding would repeat it.
        for run in [&mut a, &mut b] {
            for r in &mut run.rounds {
                let caller = r.resources[&crate::result::TierName::Caller].cpu_us_per_request.unwrap();
                let per_item = [(crate::result::TierName::Caller, caller / 100.0)].into_iter().collect();
                r.stream = Some(crate::result::StreamRound { cpu_us_per_item: per_item, ..Default::default() });
            }
        }
        let keys: Vec<&str> = findings(&compare(&a, &b)).iter().map(|r| r.metric.key).collect();
        assert_eq!(keys.first(), Some(&"cpu_us_per_item.caller"), "{keys:?}");
        assert!(!keys.contains(&"cpu_us_per_request.caller"), "{keys:?}");
        // Unary runs keep their per-request finding.
        let (a, b) = pair(5, 1.10);
        assert!(findings(&compare(&a, &b)).iter().any(|r| r.metric.key == "cpu_us_per_request.caller"));
    }

    #[test]
    fn a_ten_percent_cpu_shift_is_found_the_right_way_round() {
        let (a, b) = pair(5, 1.10);
        let rows = compare(&a, &b);
        let cpu = by_key(&rows, "cpu_us_per_request.caller");
        assert_eq!(cpu.verdict, Verdict::ABetter, "{cpu:?}");
        assert_eq!(cpu.method, Method::PairedT);
        let rel = cpu.relative().unwrap();
        assert!(rel.lo < 10.0 && rel.hi > 10.0 && rel.lo > 5.0, "{rel:?}");
        let f = findings(&rows);
        assert_eq!(f.first().map(|r| r.metric.key), Some("cpu_us_per_request.caller"));
        // Reversed, B is the better side.
        assert_eq!(by_key(&compare(&b, &a), "cpu_us_per_request.caller").verdict, Verdict::BBetter);
        assert_eq!(by_key(&rows, "p99").method, Method::PairedT);
    }

    #[test]
    fn memory_on_one_process_per_arm_is_not_judged() {
        let (a, mut b) = pair(5, 1.0);
        for r in &mut b.rounds {
            r.resources.get_mut(&crate::result::TierName::Caller).unwrap().rss_mib_mean = Some(40.0);
        }
        // Fresh processes every round: the memory difference is judged.
        assert_eq!(by_key(&compare(&a, &b), "rss_mib_mean.caller").verdict, Verdict::ABetter);
        // The same caller process in every round of B: not judged, whatever the rounds say.
        for r in &mut b.rounds {
            r.pids.insert(crate::result::TierName::Caller, 4242);
        }
        let rows = compare(&a, &b);
        assert_eq!(by_key(&rows, "rss_mib_mean.caller").verdict, Verdict::OneProcess);
        assert!(findings(&rows).iter().all(|r| r.metric.key != "rss_mib_mean.caller"));
        // Other rows are judged as before; a run that does not name its processes is one process.
        assert_eq!(by_key(&rows, "rss_mib_mean.downstream").verdict, Verdict::NoDifference);
        b.rounds.iter_mut().for_each(|r| r.pids.clear());
        assert_eq!(by_key(&compare(&a, &b), "rss_mib_mean.downstream").verdict, Verdict::OneProcess);
    }

    #[test]
    fn a_difference_under_the_printed_resolution_calls_no_side() {
        // p99 0.05 ms lower on B in every round, about 500 ms: the interval
        // excludes zero, but the row prints "-0.0%" (0.1% of A is 0.5 ms).
        let (a, mut b) = pair(5, 1.0);
        for (rb, ra) in b.rounds.iter_mut().zip(&a.rounds) {
            let p99 = ra.latency.corrected.as_ref().unwrap().p99_ms;
            rb.latency.corrected.as_mut().unwrap().p99_ms = p99 - 0.05 + 0.001 * f64::from(rb.index % 2);
        }
        let rows = compare(&a, &b);
        let p99 = by_key(&rows, "p99");
        assert!(p99.diff.unwrap().excludes_zero(), "{p99:?}");
        assert_eq!(p99.verdict, Verdict::BelowResolution, "{p99:?}");
        assert!((p99.resolution() - p99.a.unwrap() * 0.001).abs() < 1e-9);
        // A judged non-call: it counts in the A/A share, never as a finding.
        assert!(!findings(&rows).iter().any(|r| r.metric.key == "p99"));
        // Ten times as large it is over the resolution and called.
        for (rb, ra) in b.rounds.iter_mut().zip(&a.rounds) {
            rb.latency.corrected.as_mut().unwrap().p99_ms = ra.latency.corrected.as_ref().unwrap().p99_ms - 5.0;
        }
        assert_eq!(by_key(&compare(&a, &b), "p99").verdict, Verdict::BBetter);
    }

    #[test]
    fn counts_are_compared_as_counts() {
        let (mut a, mut b) = pair(3, 1.0);
        for (run, n) in [(&mut a, [1, 1, 1]), (&mut b, [53, 50, 56])] {
            for (r, n) in run.rounds.iter_mut().zip(n) {
                r.requests.errors = [("timeout".to_owned(), n)].into_iter().collect();
            }
        }
        let rows = compare(&a, &b);
        let errors = by_key(&rows, "errors");
        assert_eq!(errors.verdict, Verdict::ABetter);
        assert_eq!(errors.relative(), None, "a count has no percentage: {errors:?}");
        assert_eq!(errors.diff.unwrap().estimate, 52.0);
        assert_eq!(errors.detectable_percent(), None);
        // A count is a finding, before the relative ones.
        assert_eq!(findings(&rows).first().map(|r| r.metric.key), Some("errors"));
        // Under one count apart, no side is called.
        for (r, n) in b.rounds.iter_mut().zip([1, 1, 2]) {
            r.requests.errors = [("timeout".to_owned(), n)].into_iter().collect();
        }
        let rows = compare(&a, &b);
        assert_ne!(by_key(&rows, "errors").verdict, Verdict::ABetter);
    }

    #[test]
    fn no_difference_says_what_the_rounds_could_have_seen() {
        let (a, b) = pair(5, 1.0);
        let rows = compare(&a, &b);
        let cpu = by_key(&rows, "cpu_us_per_request.caller");
        assert_eq!(cpu.verdict, Verdict::NoDifference, "{cpu:?}");
        let d = cpu.diff.unwrap();
        // The half-width of the interval, relative to A.
        assert!((cpu.detectable().unwrap() - (d.hi - d.lo) / 2.0).abs() < 1e-12);
        let percent = cpu.detectable_percent().unwrap();
        assert!(percent > 0.0 && percent < FINDING_THRESHOLD_PERCENT, "{percent}");
        assert!(!cpu.inconclusive(), "a 1% noise leaves a tight interval: {cpu:?}");
        // The same rows with a wide spread on B: inconclusive, not a tie.
        let (a, mut b) = pair(3, 1.0);
        for (r, w) in b.rounds.iter_mut().zip([0.7, 1.4, 0.9]) {
            let caller = r.resources.get_mut(&crate::result::TierName::Caller).unwrap();
            caller.cpu_us_per_request = caller.cpu_us_per_request.map(|c| c * w);
        }
        let rows = compare(&a, &b);
        let cpu = by_key(&rows, "cpu_us_per_request.caller");
        assert_eq!(cpu.verdict, Verdict::NoDifference, "{cpu:?}");
        assert!(cpu.inconclusive() && cpu.detectable_percent().unwrap() > 20.0, "{cpu:?}");
    }

    #[test]
    fn a_finding_under_twice_the_a_a_noise_is_marked() {
        // Rounds of each arm 4% apart; a 10% shift is called and within twice the noise.
        let (mut a, mut b) = pair(5, 1.10);
        for run in [&mut a, &mut b] {
            for (r, w) in run.rounds.iter_mut().zip([0.95, 1.05, 1.0, 0.96, 1.04]) {
                for tier in [crate::result::TierName::Caller, crate::result::TierName::Downstream] {
                    let t = r.resources.get_mut(&tier).unwrap();
                    t.cpu_us_per_request = t.cpu_us_per_request.map(|c| c * w);
                }
            }
        }
        // Pairs move together (counterbalanced), so the paired interval still calls it.
        let rows = compare(&a, &b);
        let cpu = by_key(&rows, "cpu_us_per_request.caller");
        assert_eq!(cpu.verdict, Verdict::ABetter, "{cpu:?}");
        let noise = cpu.noise_percent.unwrap();
        assert!(noise > 5.0 && cpu.within_noise(), "{noise} {cpu:?}");
        // The quiet pair: the same shift stands clear of its noise.
        let (a, b) = pair(5, 1.10);
        let rows = compare(&a, &b);
        let cpu = by_key(&rows, "cpu_us_per_request.caller");
        assert!(cpu.verdict.is_detectable() && !cpu.within_noise(), "{cpu:?}");
    }

    #[test]
    fn too_few_rounds_are_not_judged() {
        let (a, b) = pair(2, 1.5);
        let rows = compare(&a, &b);
        assert!(rows.iter().all(|r| r.verdict == Verdict::NotJudged { rounds: 2 } || r.a.is_none()), "{rows:?}");
        assert_eq!(by_key(&rows, "cpu_us_per_request.caller").verdict, Verdict::NotJudged { rounds: 2 });
        assert!(findings(&rows).is_empty());
    }

    #[test]
    fn a_and_a_with_noise_calls_few_rows() {
        let mut called = (0, 0);
        for seed in 0..20 {
            let (a, mut b) = pair(5, 1.0);
            let mut rng = inference::Rng::new(100 + seed);
            b.rounds = (1..=5).map(|k| testing::round(k, 500.0, 1.0 + 0.01 * rng.normal())).collect();
            let (c, j) = called_share(&compare(&a, &b));
            called = (called.0 + c, called.1 + j);
        }
        let share = called.0 as f64 / called.1 as f64;
        assert!(share < 0.15, "{called:?}");
    }
}
