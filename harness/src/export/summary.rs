//! What the harness prints when a run ends: a compact table for people, or a
//! JSON summary for machines (`--json`).

use std::fmt::Write;
use std::path::Path;

use serde::Serialize;

use crate::export::comparison::{Arm, terminal};
use crate::export::markdown::{num, title};
use crate::result::{Latency, RoundResult, RunResult, RunStatus, Throughput, TierName};

/// The summary of every arm, then (with several) the comparison table.
pub fn text(runs: &[RunResult], folder: Option<&Path>, color: bool) -> String {
    let mut out = String::new();
    for run in runs {
        out.push_str(&arm_text(run));
    }
    if runs.len() > 1 {
        let names = crate::export::arm_names(&runs.iter().collect::<Vec<_>>());
        let arms: Vec<Arm<'_>> = names.iter().zip(runs).map(|(name, run)| Arm { name, run }).collect();
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
            run.config.connections
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
        "  latency ms    min {} · p50 {} · p90 {} · p99 {} · p99.9 {} · max {}   (downstream hop p50 {})",
        g(|s| s.min_ms),
        g(|s| s.p50_ms),
        g(|s| s.p90_ms),
        g(|s| s.p99_ms),
        g(|s| s.p999_ms),
        g(|s| s.max_ms),
        num(r.latency.downstream_hop.as_ref().map(|s| s.p50_ms), 1)
    );
    for tier in [TierName::Caller, TierName::Downstream, TierName::Proxy, TierName::Harness] {
        // A tier this run did not have (no caller with --target downstream) is left out.
        if let Some(res) = r.resources.get(&tier).filter(|res| res.samples > 0 || res.cpu_seconds.is_some()) {
            let _ = writeln!(
                out,
                "  {:<12}  RSS {} MiB mean / {} peak · CPU {} s, {}% mean · {} µs/request",
                tier.as_str(),
                num(res.rss_mib_mean, 1),
                num(res.rss_mib_peak, 1),
                num(res.cpu_seconds, 2),
                num(res.cpu_percent_mean, 1),
                num(res.cpu_us_per_request, 0)
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
    let s = JsonSummary { folder, arms: runs.iter().map(json_arm).collect() };
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
