//! What the harness prints when a run ends: a compact table for people, or a
//! JSON summary for machines (`--json`).

use std::fmt::Write;
use std::path::Path;

use serde::Serialize;

use crate::export::comparison::{Arm, terminal, terminal_findings};
use crate::export::markdown::title;
use crate::export::numbers::num;
use crate::result::{Latency, RoundResult, RunResult, RunStatus, Throughput, TierName};

/// With several arms the findings first; then the summary of every arm, then
/// (with several) the comparison table.
pub fn text(runs: &[RunResult], folder: Option<&Path>, color: bool) -> String {
    let mut out = String::new();
    let names = crate::export::arm_names(&runs.iter().collect::<Vec<_>>());
    let arms: Vec<Arm<'_>> = names.iter().zip(runs).map(|(name, run)| Arm { name, run }).collect();
    if runs.len() > 1 {
        out.push_str(&terminal_findings(&arms));
        out.push('\n');
    }
    for run in runs {
        out.push_str(&arm_text(run));
    }
    if runs.len() > 1 {
        out.push('\n');
        out.push_str(&terminal(&arms, color));
    }
    if let Some(f) = folder {
        let _ = writeln!(out, "written to {}", f.display());
    }
    out
}

fn arm_text(run: &RunResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "grpc-vs-rest: {}", title(run));
    for r in &run.rounds {
        out.push_str(&round_text(run, r));
    }
    match run.status {
        RunStatus::Complete => {}
        _ => {
            let _ = writeln!(out, "run {:?}: {}", run.status, run.status_reason.as_deref().unwrap_or(""));
        }
    }
    if run.is_valid() {
        let _ = writeln!(out, "valid measurement");
    } else {
        for p in &run.validity {
            let _ = writeln!(out, "NOT VALID: {p}");
        }
    }
    out
}

/// A round in four to seven lines: rate, latency, each tier, the internal hop.
fn round_text(run: &RunResult, r: &RoundResult) -> String {
    let mut out = String::new();
    let l = r.latency.corrected.as_ref();
    let g = |f: fn(&crate::result::Summary) -> f64| num(l.map(f), 1);
    let errors = if r.requests.errors.is_empty() {
        "none".to_owned()
    } else {
        r.requests.errors.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
    };
    let rate = match (r.throughput.target_qps, r.throughput.achieved_ratio) {
        (Some(target), Some(ratio)) => format!(
            "{} ok/s of {} target ({}%)",
            num(Some(r.throughput.ok_per_second), 1),
            num(Some(target), 0),
            num(Some(ratio * 100.0), 1)
        ),
        _ => format!(
            "{} ok/s over {} connections (closed loop: latency not corrected for coordinated omission)",
            num(Some(r.throughput.ok_per_second), 1),
            run.config.load.connections
        ),
    };
    let _ = writeln!(
        out,
        "round {}{}: {rate} · sent {} · errors {errors}",
        r.index,
        if r.complete { "" } else { " (partial)" },
        r.requests.sent,
    );
    let _ = writeln!(
        out,
        "  latency ms    min {} · p50 {} · p90 {} · p99 {} · p99.9 {} · max {}   (downstream hop p50 {}{})",
        g(|s| s.min_ms),
        g(|s| s.p50_ms),
        g(|s| s.p90_ms),
        g(|s| s.p99_ms),
        g(|s| s.p999_ms),
        g(|s| s.max_ms),
        num(r.latency.downstream_hop.as_ref().map(|s| s.p50_ms), 1),
        if r.cpu_throttling.get(&TierName::Caller).is_some_and(|t| t.bound()) {
            ", measured inside a throttled caller"
        } else {
            ""
        }
    );
    for tier in [TierName::Caller, TierName::Downstream, TierName::Proxy, TierName::Harness] {
        // A tier this run did not have (no caller with --target downstream) is left out.
        if let Some(res) = r.resources.get(&tier).filter(|res| res.samples > 0 || res.cpu_seconds.is_some()) {
            let _ = writeln!(
                out,
                "  {:<12}  RSS {} MiB mean / {} peak · CPU {} s, {}% mean · {} µs/request{}",
                tier.as_str(),
                num(res.rss_mib_mean, 1),
                num(res.rss_mib_peak, 1),
                num(res.cpu_seconds, 2),
                num(res.cpu_percent_mean, 1),
                num(res.cpu_us_per_request, 0),
                r.cpu_throttling.get(&tier).map_or_else(String::new, |t| format!(
                    " · limit {} cores, throttled in {} of {} periods ({:.1} s)",
                    t.cpus, t.throttled_periods, t.periods, t.throttled_seconds
                ))
            );
        }
    }
    let hop = &r.bytes.internal;
    let _ = writeln!(
        out,
        "  internal hop  {} B → / {} B ← wire per request · {} B → / {} B ← message · {} connections open",
        num(hop.request_wire_bytes_per_request, 0),
        num(hop.response_wire_bytes_per_request, 0),
        num(hop.request_message_bytes_per_request, 0),
        num(hop.response_message_bytes_per_request, 0),
        num(hop.connections_open_at_end.map(|c| c as f64), 0)
    );
    out
}

#[derive(Debug, Serialize)]
struct JsonSummary<'a> {
    folder: Option<&'a Path>,
    arms: Vec<JsonArm<'a>>,
    /// With several arms: every other arm against the first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    comparisons: Vec<JsonComparison>,
    /// With several arms: each arm's cost at the planned rate.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    projection: Vec<crate::judge::projection::Projection>,
}

#[derive(Debug, Serialize)]
struct JsonComparison {
    a: String,
    b: String,
    paired: bool,
    findings: Vec<String>,
    rows: Vec<JsonRow>,
}

/// One judged row: B − A with its 95% interval, absolute and relative to A.
#[derive(Debug, Serialize)]
struct JsonRow {
    key: &'static str,
    label: &'static str,
    a: Option<f64>,
    b: Option<f64>,
    difference: Option<f64>,
    ci_low: Option<f64>,
    ci_high: Option<f64>,
    relative_percent: Option<f64>,
    relative_ci_low: Option<f64>,
    relative_ci_high: Option<f64>,
    method: &'static str,
    rounds: usize,
    /// The smallest difference the rounds could have detected at 95% (the
    /// interval's half-width), absolute and relative to A.
    detectable: Option<f64>,
    detectable_relative_percent: Option<f64>,
    /// No detectable difference, but the rounds could not have seen one of
    /// the findings' threshold (5%; a count: one).
    inconclusive: bool,
    /// The A/A noise of the row's type in these runs, in percent.
    aa_noise_percent: Option<f64>,
    /// `a_better`, `b_better`, `no_detectable_difference`, `below_resolution`,
    /// `b_higher`, `b_lower`, `not_judged`, `not_measured`.
    verdict: &'static str,
}

fn json_comparisons(runs: &[RunResult]) -> Vec<JsonComparison> {
    use crate::judge::difference::{Method, Verdict, compare, findings, paired};
    let names = crate::export::arm_names(&runs.iter().collect::<Vec<_>>());
    runs.iter()
        .enumerate()
        .skip(1)
        .map(|(i, b)| {
            let rows = compare(&runs[0], b);
            let invalid: Vec<&str> = [(&runs[0], names[0].as_str()), (b, names[i].as_str())]
                .iter()
                .filter(|(run, _)| !run.is_valid())
                .map(|(_, name)| *name)
                .collect();
            let mark = crate::export::findings::validity_mark(&invalid);
            let sentences = findings(&rows)
                .iter()
                .map(|r| format!("{}{mark}", crate::export::findings::sentence(r, &names[0], &names[i])))
                .collect();
            let rows = rows
                .iter()
                .map(|r| JsonRow {
                    key: r.metric.key,
                    label: r.metric.label,
                    a: r.a,
                    b: r.b,
                    difference: r.diff.map(|d| d.estimate),
                    ci_low: r.diff.map(|d| d.lo),
                    ci_high: r.diff.map(|d| d.hi),
                    relative_percent: r.relative().map(|d| d.estimate),
                    relative_ci_low: r.relative().map(|d| d.lo),
                    relative_ci_high: r.relative().map(|d| d.hi),
                    method: match r.method {
                        Method::PairedT => "paired_t",
                        Method::WelchT => "welch_t",
                    },
                    rounds: r.rounds,
                    detectable: r.detectable(),
                    detectable_relative_percent: r.detectable_percent(),
                    inconclusive: r.inconclusive(),
                    aa_noise_percent: r.noise_percent,
                    verdict: match r.verdict {
                        Verdict::ABetter => "a_better",
                        Verdict::BBetter => "b_better",
                        Verdict::NoDifference => "no_detectable_difference",
                        Verdict::BelowResolution => "below_resolution",
                        Verdict::BHigher => "b_higher",
                        Verdict::BLower => "b_lower",
                        Verdict::NotJudged { .. } => "not_judged",
                        Verdict::NotMeasured => "not_measured",
                        Verdict::OneProcess => "not_judged_one_process",
                    },
                })
                .collect();
            JsonComparison {
                a: names[0].clone(),
                b: names[i].clone(),
                paired: paired(&runs[0], b),
                findings: sentences,
                rows,
            }
        })
        .collect()
}

#[derive(Debug, Serialize)]
struct JsonArm<'a> {
    transport: &'a str,
    status: RunStatus,
    status_reason: Option<&'a str>,
    build_profile: &'a str,
    valid: bool,
    validity: &'a [String],
    rounds: Vec<JsonRound<'a>>,
}

#[derive(Debug, Serialize)]
struct JsonRound<'a> {
    index: u32,
    complete: bool,
    throughput: &'a Throughput,
    latency: &'a Latency,
    requests: &'a crate::result::Requests,
    resources: &'a std::collections::BTreeMap<TierName, crate::result::Resources>,
    bytes: &'a crate::result::Hops,
}

pub fn json(runs: &[RunResult], folder: Option<&Path>) -> String {
    let projection = if runs.len() > 1 {
        crate::judge::projection::project_all(&runs.iter().collect::<Vec<_>>())
    } else {
        Vec::new()
    };
    let s = JsonSummary {
        folder,
        arms: runs.iter().map(json_arm).collect(),
        comparisons: if runs.len() > 1 { json_comparisons(runs) } else { Vec::new() },
        projection,
    };
    serde_json::to_string_pretty(&s).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

fn json_arm(run: &RunResult) -> JsonArm<'_> {
    JsonArm {
        transport: run.config.transport.as_str(),
        status: run.status,
        status_reason: run.status_reason.as_deref(),
        build_profile: &run.environment.build_profile,
        valid: run.is_valid(),
        validity: &run.validity,
        rounds: run
            .rounds
            .iter()
            .map(|r| JsonRound {
                index: r.index,
                complete: r.complete,
                throughput: &r.throughput,
                latency: &r.latency,
                requests: &r.requests,
                resources: &r.resources,
                bytes: &r.bytes,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_run_beside_other_load_is_not_called_valid_on_the_terminal() {
        let mut run = crate::testing::run(caller::Transport::Grpc, 1.0);
        run.environment.logical_cores = Some(2);
        run.validity = crate::judge::validity(&run);
        assert!(text(std::slice::from_ref(&run), None, false).contains("\nvalid measurement\n"));
        run.rounds.iter_mut().for_each(|r| r.other_cores = Some(1.9));
        run.validity = crate::judge::validity(&run);
        let out = text(&[run], None, false);
        assert!(!out.contains("\nvalid measurement"), "{out}");
        assert!(out.contains("NOT VALID: round 1: other processes kept 1.90 of 2 cores busy (over 25%"), "{out}");
    }

    #[test]
    fn the_json_of_a_comparison_has_rows_findings_and_the_projection() {
        let (g, r) = crate::testing::both(5, 0.45, 1.0);
        let v: serde_json::Value = serde_json::from_str(&json(&[g, r], None)).unwrap();
        let c = &v["comparisons"][0];
        assert_eq!((c["a"].as_str(), c["b"].as_str(), c["paired"].as_bool()), (Some("gRPC"), Some("REST"), Some(true)));
        let cpu = c["rows"].as_array().unwrap().iter().find(|r| r["key"] == "cpu_us_per_request.caller").unwrap();
        assert_eq!(cpu["verdict"], "a_better");
        assert_eq!(cpu["method"], "paired_t");
        assert!(cpu["ci_low"].as_f64().unwrap() > 0.0);
        assert!(c["findings"][0].as_str().unwrap().contains("2.22×"));
        let p = v["projection"].as_array().unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0]["plan_qps"], 100.0);
        assert!(p[1]["response_egress"]["gb_per_day"].as_f64().unwrap() > 9.0);
        let single: serde_json::Value =
            serde_json::from_str(&json(&[crate::testing::run(caller::Transport::Grpc, 1.0)], None)).unwrap();
        assert!(single.get("comparisons").is_none() && single.get("projection").is_none());
    }
}
