//! The words and small tables that turn judged rows into something a team can
//! act on: the findings sentences, the cost at the planned rate, the verdict
//! and difference cells, and the note naming the methods. Bytes only: every
//! judgement comes from `judge::difference` and `judge::projection`.

use std::fmt::Write;

use super::numbers::num;
use crate::judge::difference::{FINDING_THRESHOLD_PERCENT, Row, Verdict, findings, no_difference};
use crate::judge::inference::{
    AA_SIMULATED_COMPARISONS, AA_SIMULATED_P50_SPREAD_PERCENT, AA_SIMULATED_WORST_PERCENT, MIN_ROUNDS,
};
use crate::judge::projection::Projection;

/// A row's label split into what it measures and its unit:
/// `("caller CPU per request", "µs")`; byte rows get `B`.
pub fn name_and_unit(label: &str) -> (&str, &str) {
    match label.rsplit_once(" (") {
        Some((name, unit)) if unit.ends_with(')') && unit != "all classes)" => (name, &unit[..unit.len() - 1]),
        _ if label.contains("bytes") => (label, "B"),
        _ => (label, ""),
    }
}

/// A value with its unit (`17.5 MiB`, `2448 B`, `3`).
pub fn with_unit(v: Option<f64>, decimals: usize, unit: &str) -> String {
    match unit {
        "" => num(v, decimals),
        u if u.starts_with('%') => format!("{}{u}", num(v, decimals)),
        u => format!("{} {u}", num(v, decimals)),
    }
}

/// One finding: `REST's caller CPU per request is 43.2% higher than gRPC's
/// (61.2 vs 42.7 µs; 95% CI +38.0% to +48.1%).`, or with a ratio at 2× and
/// beyond; a count as a count (`REST's errors are 52 more than gRPC's`). A
/// difference under twice its row type's A/A noise says so.
pub fn sentence(row: &Row, a: &str, b: &str) -> String {
    format!("{}{}", comparison_sentence(row, a, b), noise_note(row))
}

fn comparison_sentence(row: &Row, a: &str, b: &str) -> String {
    let (name, unit) = name_and_unit(row.metric.label);
    let d = row.metric.decimals;
    let values = format!("{} vs {}", with_unit(row.b, d, unit), with_unit(row.a, d, unit));
    let Some(rel) = row.relative() else {
        let Some(i) = row.diff else { return format!("{b}'s {name} differs from {a}'s ({values}).") };
        let way = match (row.metric.is_count(), i.estimate > 0.0) {
            (true, true) => "more",
            (true, false) => "fewer",
            (false, true) => "higher",
            (false, false) => "lower",
        };
        let is = if row.metric.is_count() { ":" } else { " is" };
        return format!(
            "{b}'s {name}{is} {} {way} than {a}'s ({values}; 95% CI {:+.d$} to {:+.d$}).",
            with_unit(Some(i.estimate.abs()), d, unit),
            i.lo,
            i.hi
        );
    };
    let ratio = 1.0 + rel.estimate / 100.0;
    if !(0.5..2.0).contains(&ratio) {
        return format!(
            "{b}'s {name} is {ratio:.2}× {a}'s ({values}; 95% CI {:.2}× to {:.2}×).",
            1.0 + rel.lo / 100.0,
            1.0 + rel.hi / 100.0
        );
    }
    let way = if rel.estimate > 0.0 { "higher" } else { "lower" };
    format!(
        "{b}'s {name} is {:.1}% {way} than {a}'s ({values}; 95% CI {:+.1}% to {:+.1}%).",
        rel.estimate.abs(),
        rel.lo,
        rel.hi
    )
}

/// For a called relative difference: whether it is under twice the A/A
/// noise of its row type in this run, or that the noise could not be measured.
fn noise_note(row: &Row) -> String {
    if !row.verdict.is_detectable() || row.relative().is_none() {
        return String::new();
    }
    let kind = crate::judge::noise::row_type(row.metric.key);
    match row.noise_percent {
        Some(n) if row.within_noise() => format!(
            " It is under twice the A/A noise of {kind} rows in this run (2 × {n:.1}%: two rounds of one arm \
             differ by {n:.1}% on this machine), so it may be noise."
        ),
        Some(_) => String::new(),
        None => format!(" The A/A noise of {kind} rows could not be measured in this run."),
    }
}

/// The smallest difference a row's rounds could have detected at 95%
/// (`±4.1%`, a count or a value without a base: `±1.4 B`).
pub fn detectable_text(row: &Row) -> String {
    match (row.detectable_percent(), row.detectable()) {
        (Some(p), _) => format!("±{p:.1}%"),
        (None, Some(d)) => {
            let (_, unit) = name_and_unit(row.metric.label);
            format!("±{}", with_unit(Some(d), row.metric.decimals + 1, unit))
        }
        (None, None) => "n/a".into(),
    }
}

/// What is appended to a sentence drawn from an arm that was not a valid
/// measurement, where it stands; empty when both arms were valid.
pub fn validity_mark(invalid: &[&str]) -> String {
    match invalid {
        [] => String::new(),
        names => format!(
            " **Drawn from {}: NOT a valid measurement (see Validity), no basis for a choice.**",
            names.join(" and ")
        ),
    }
}

fn names(rows: &[&Row]) -> String {
    let n: Vec<&str> = rows.iter().map(|r| name_and_unit(r.metric.label).0).collect();
    n.join(", ")
}

/// The findings of B against A as Markdown list items; every item drawn
/// from the arms carries `mark` ([`validity_mark`]).
pub fn findings_list(rows: &[Row], a: &str, b: &str, mark: &str) -> String {
    let mut out = String::new();
    if let Some(r) = rows.iter().find(|r| matches!(r.verdict, Verdict::NotJudged { .. })) {
        let rounds = r.rounds;
        let _ = writeln!(
            out,
            "- Not judged: {rounds} round(s) per arm, and a confidence interval needs at least {MIN_ROUNDS}; \
             run with --rounds {MIN_ROUNDS} or more."
        );
        return out;
    }
    let found = findings(rows);
    for r in &found {
        let _ = writeln!(out, "- {}{mark}", sentence(r, a, b));
    }
    if found.is_empty() {
        let _ = writeln!(
            out,
            "- No difference on the headline rows is both detectable at 95% and at least {FINDING_THRESHOLD_PERCENT}%."
        );
    }
    let small: Vec<&Row> = crate::judge::difference::headline(rows)
        .filter(|r| r.verdict.is_detectable() && !found.iter().any(|f| f.metric.key == r.metric.key))
        .collect();
    if !small.is_empty() {
        let _ = writeln!(out, "- Detectable but under {FINDING_THRESHOLD_PERCENT}%: {}.{mark}", names(&small));
    }
    let below: Vec<&Row> =
        crate::judge::difference::headline(rows).filter(|r| r.verdict == Verdict::BelowResolution).collect();
    if !below.is_empty() {
        let _ = writeln!(out, "- Under the printed resolution, no side called: {}.", names(&below));
    }
    let none = no_difference(rows);
    let with_detectable = |rows: &[&&Row]| {
        let n: Vec<String> = rows
            .iter()
            .map(|r| format!("{} (could have seen {})", name_and_unit(r.metric.label).0, detectable_text(r)))
            .collect();
        n.join(", ")
    };
    let (wide, tight): (Vec<&&Row>, Vec<&&Row>) = none.iter().partition(|r| r.inconclusive());
    if !tight.is_empty() {
        let _ = writeln!(out, "- No detectable difference in {}.{mark}", with_detectable(&tight));
    }
    if !wide.is_empty() {
        let _ = writeln!(
            out,
            "- Inconclusive (no detectable difference, but the rounds could not have seen one of \
             {FINDING_THRESHOLD_PERCENT}%): {}; more rounds narrow it.{mark}",
            with_detectable(&wide)
        );
    }
    let one: Vec<&Row> =
        crate::judge::difference::headline(rows).filter(|r| r.verdict == Verdict::OneProcess).collect();
    if !one.is_empty() {
        let _ = writeln!(
            out,
            "- Not judged: {} (one process per arm: the tiers ran every round on the same processes; \
             rerun without --reuse-tiers).",
            names(&one)
        );
    }
    out
}

/// A row's difference cell: relative to A with its interval, or absolute
/// where A is zero.
pub fn difference_cell(row: &Row) -> String {
    let d = row.metric.decimals;
    match (row.relative(), row.diff) {
        (Some(r), _) => format!("{:+.1}% ({:+.1} to {:+.1})", r.estimate, r.lo, r.hi),
        (None, Some(i)) => format!("{:+.d$} ({:+.d$} to {:+.d$})", i.estimate, i.lo, i.hi),
        (None, None) => match (row.a, row.b) {
            (Some(a), Some(b)) if a != 0.0 => format!("{:+.1}%", (b - a) / a.abs() * 100.0),
            _ => "n/a".into(),
        },
    }
}

/// A row's verdict in words.
pub fn verdict_cell(row: &Row, a: &str, b: &str) -> String {
    match row.verdict {
        Verdict::NotJudged { rounds } => format!("not judged ({rounds} rounds)"),
        Verdict::NotMeasured => "n/a".into(),
        Verdict::OneProcess => "not judged (one process per arm)".into(),
        Verdict::NoDifference => format!("no detectable difference (could have seen {})", detectable_text(row)),
        Verdict::BelowResolution => "under the printed resolution, no side called".into(),
        Verdict::ABetter => format!("{a} better"),
        Verdict::BBetter => format!("{b} better"),
        Verdict::BHigher => format!("{b} higher"),
        Verdict::BLower => format!("{b} lower"),
    }
}

/// The methods: one interval for every row, how wide three rounds leave it,
/// and its A/A false-call rate.
pub fn method_note(rounds: &str, paired: bool) -> String {
    let interval = if paired {
        "Student's t interval of the mean difference over round pairs, round k of each arm run side by side in \
         counterbalanced order (A B, B A, …) so that drift on the machine falls on both arms"
    } else {
        "Welch's t interval of the difference of the arms' means over rounds (the arms come from separate runs), \
         which assumes neither pairs nor equal variances"
    };
    let comparisons = format!("{},{:03}", AA_SIMULATED_COMPARISONS / 1000, AA_SIMULATED_COMPARISONS % 1000);
    format!(
        "\n**Methods** (rounds: {rounds}). Every row is judged from its rounds' own figures: a round's memory, CPU, \
         bytes, throughput or errors, and each latency percentile read from that round's own histogram, is one \
         observation, and the interval is {interval}. The spread from one round's tier processes to the next and \
         the request noise within a round both show in the round figures, so both widen the interval. The t \
         quantile is exact for the few rounds a run has (n − 1 degrees of freedom), so with 3 rounds per arm a \
         difference is called only when it exceeds about 2.5 times the standard deviation of the round \
         differences (1.2 times with 5 rounds, 0.7 with 10): 3 rounds can call a large latency difference, and a \
         small one needs more rounds. Calibrated by A/A (one arm against itself, every call a false one): in \
         {comparisons} simulated A/A comparisons of 3 rounds, a round's median moving \
         {AA_SIMULATED_P50_SPREAD_PERCENT}% from one set of tier processes to the next, every row type (latency \
         percentiles, latency min, mean and max, throughput, errors, CPU, memory, bytes) was called in at most \
         {AA_SIMULATED_WORST_PERCENT}% of them, the nominal 5% within the simulation's error. A row is *better* on one \
         side when its 95% interval of B − A excludes zero, *no detectable difference* when it includes zero, and \
         *not judged* with fewer than {MIN_ROUNDS} rounds per arm. Beside every *no detectable difference* \
         stands the smallest difference the rounds could have detected: the half-width of the same 95% t \
         interval, t(0.975, df) times the standard error from the rounds' own spread, since a mean difference is \
         called exactly when it is larger than that; where it is {FINDING_THRESHOLD_PERCENT}% of the first arm or \
         more, the comparison is *inconclusive* on that row, not a tie. A difference under what its row prints \
         (one unit of the last digit, or 0.1% of the first arm) calls no side. Counts (errors, connections, \
         streams cut) are compared as counts, never as a percentage of a base that may be near zero. A finding \
         under twice the A/A noise of its row type says so: that noise is how far two rounds of one arm differ \
         in this run (√2 times the rounds' pooled relative standard deviation within each arm), an A/A pair \
         measured on this machine beside whatever else it ran. \
         Memory belongs to a process, so its rows are judged only when every round ran on tier processes of its own \
         (started and warmed up for that round, the default); with tiers reused across rounds they say *not \
         judged (one process per arm)*. \
         Differences are relative to the first arm's mean; findings are the detectable differences of at least \
         {FINDING_THRESHOLD_PERCENT}% on the headline rows (memory, latency p50 and p99, throughput, errors, CPU \
         per request, internal-hop bytes), largest first.\n"
    )
}

/// The cost table: what each arm needs at the planned rate, with its basis.
pub fn projection_section(arms: &[&str], p: &[Projection]) -> String {
    let Some(first) = p.first() else { return String::new() };
    let mut out = String::new();
    let _ = writeln!(out, "\n## Cost at {} req/s\n", num(Some(first.plan_qps), 0));
    if p.iter().any(|x| x.above_measured) {
        let highest = p.iter().filter_map(|x| x.measured_qps).fold(0.0, f64::max);
        let _ = writeln!(
            out,
            "> **Warning:** {} req/s is above the highest rate measured (about {} req/s): linear extrapolation \
             past the knee is not valid. Measure it, or find the knee with a sweep (`--qps a..bx2`).\n",
            num(Some(first.plan_qps), 0),
            num(Some(highest), 0)
        );
    }
    let _ = writeln!(out, "| at {} req/s | {} | measured basis |", num(Some(first.plan_qps), 0), arms.join(" | "));
    let _ = writeln!(out, "|---|{}---|", "---:|".repeat(arms.len()));
    let basis = |f: &dyn Fn(&Projection) -> String| p.iter().map(f).collect::<Vec<_>>().join(" / ");
    let cells = |f: &dyn Fn(&Projection) -> Option<f64>, d: usize| {
        p.iter().map(|x| num(f(x), d)).collect::<Vec<_>>().join(" | ")
    };
    for tier in first.tiers.iter().map(|t| t.tier) {
        let t = move |x: &Projection| x.tiers.iter().find(|y| y.tier == tier).cloned();
        let _ = writeln!(
            out,
            "| {tier} CPU (cores) | {} | {} µs per request |",
            cells(&|x| t(x)?.cores, 3),
            basis(&|x| num(t(x).and_then(|y| y.cpu_us_per_request), 1))
        );
        let _ = writeln!(
            out,
            "| {tier} memory (MiB, at most) | {} | {} MiB RSS mean at {} in flight |",
            cells(&|x| t(x)?.rss_mib_at_most, 1),
            basis(&|x| num(t(x).and_then(|y| y.rss_mib_measured), 1)),
            basis(&|x| num(x.in_flight_measured, 1))
        );
    }
    let _ = writeln!(
        out,
        "| requests in flight | {} | mean latency {} ms (Little's law) |",
        cells(&|x| x.in_flight_planned, 1),
        basis(&|x| num(x.latency_mean_ms, 2))
    );
    for (what, e) in [("caller → downstream", 0), ("downstream → caller", 1)] {
        let pick = move |x: &Projection| if e == 0 { x.request_egress.clone() } else { x.response_egress.clone() };
        let _ = writeln!(
            out,
            "| internal hop {what} (GB/day) | {} | {} wire B per request |",
            cells(&|x| pick(x).gb_per_day, 2),
            basis(&|x| num(pick(x).bytes_per_request, 0))
        );
    }
    let _ = writeln!(
        out,
        "\nCPU and egress scale the measured per-request costs linearly (GB = 10⁹ bytes; `--plan-qps` sets the \
         rate). Memory: one measured rate cannot separate a tier's fixed resident set from what each request in \
         flight adds, so at or below the measured in-flight count the figure is the measured RSS, and above it \
         the RSS scaled in proportion to requests in flight; both are upper bounds."
    );
    out
}

#[cfg(test)]
mod tests {
    use crate::judge::difference::{Method, Row, Verdict};
    use crate::judge::inference::Interval;
    use crate::judge::metrics::by_key;

    fn row(key: &str, a: f64, b: f64, half: f64, verdict: Verdict, noise: Option<f64>) -> Row {
        let d = b - a;
        Row {
            metric: by_key(key).unwrap(),
            a: Some(a),
            b: Some(b),
            diff: Some(Interval { estimate: d, lo: d - half, hi: d + half }),
            method: Method::PairedT,
            rounds: 3,
            verdict,
            noise_percent: noise,
        }
    }

    #[test]
    fn a_count_is_said_as_a_count_and_a_small_finding_beside_its_noise() {
        let errors = row("errors", 1.0, 53.0, 12.0, Verdict::ABetter, None);
        assert_eq!(
            super::sentence(&errors, "gRPC", "REST"),
            "REST's errors (all classes): 52 more than gRPC's (53 vs 1; 95% CI +40 to +64)."
        );
        assert_eq!(super::difference_cell(&errors), "+52 (+40 to +64)");
        // 8% apart, where two rounds of one arm differ by 5%: called, and marked.
        let cpu = row("cpu_us_per_request.caller", 100.0, 92.0, 3.0, Verdict::BBetter, Some(5.0));
        let text = super::sentence(&cpu, "gRPC", "REST");
        assert!(text.starts_with("REST's caller CPU per request is 8.0% lower than gRPC's"), "{text}");
        assert!(text.ends_with("It is under twice the A/A noise of CPU rows in this run (2 × 5.0%: two rounds of one arm differ by 5.0% on this machine), so it may be noise."), "{text}");
        let quiet = row("cpu_us_per_request.caller", 100.0, 92.0, 3.0, Verdict::BBetter, Some(1.0));
        assert!(!super::sentence(&quiet, "gRPC", "REST").contains("noise"));
        let unknown = row("cpu_us_per_request.caller", 100.0, 92.0, 3.0, Verdict::BBetter, None);
        assert!(super::sentence(&unknown, "gRPC", "REST").ends_with("could not be measured in this run."));
        // No difference: what the rounds could have seen, relative or as a count.
        let none = row("p99", 200.0, 201.0, 8.0, Verdict::NoDifference, None);
        assert_eq!(super::verdict_cell(&none, "gRPC", "REST"), "no detectable difference (could have seen ±4.0%)");
        let none = row("errors", 0.0, 1.0, 1.5, Verdict::NoDifference, None);
        assert_eq!(super::detectable_text(&none), "±1.5");
    }

    #[test]
    fn labels_split_into_name_and_unit() {
        use super::name_and_unit;
        assert_eq!(name_and_unit("caller CPU per request (µs)"), ("caller CPU per request", "µs"));
        assert_eq!(name_and_unit("errors (all classes)"), ("errors (all classes)", ""));
        assert_eq!(name_and_unit("internal hop wire bytes per request, caller → downstream").1, "B");
        assert_eq!(name_and_unit("requests sent"), ("requests sent", ""));
    }
}
