//! The load generators of a run split across several (`--segment`): in a
//! segment's report, which share it holds; in a merged run's, every
//! generator with what it sent and saw on its own, the worst send lag and
//! instrument floor named, and how far apart they began.

use std::fmt::Write;

use super::numbers::num;
use crate::result::{Generator, RunResult, Summary};

/// The `## Generators` section, or nothing for a run of one generator.
pub fn section(run: &RunResult) -> String {
    let mut out = String::new();
    match run.generators.as_slice() {
        [] => {}
        [one] if one.own.is_none() => {
            let _ = writeln!(out, "\n## Generators\n");
            if one.count > 1 {
                let _ = writeln!(
                    out,
                    "This run is segment {}/{} of a run split across {} generators: it holds one request in every \
                     {} of the schedule (its rates and counts are its share), and the tiers' figures are {}. \
                     `harness merge` puts the {} segments' folders together into the run.",
                    one.segment,
                    one.count,
                    one.count,
                    one.count,
                    if one.sampled_tiers { "of every generator's load" } else { "not sampled by this generator" },
                    one.count
                );
            }
            if let Some(at) = &one.start_at {
                let _ = writeln!(out, "\n{}", start_text(one, at));
            }
        }
        all => merged(run, all, &mut out),
    }
    out
}

fn start_text(g: &Generator, at: &str) -> String {
    match g.late_seconds {
        Some(late) => format!("Asked to begin at {at} (--start-at); began {late:.3} s after it."),
        None => format!("Asked to begin at {at} (--start-at)."),
    }
}

fn merged(run: &RunResult, all: &[Generator], out: &mut String) {
    let _ = writeln!(out, "\n## Generators\n");
    let sent: u64 = all.iter().filter_map(|g| g.own.as_ref()).map(|o| o.sent).sum();
    let scheduled: u64 = all.iter().filter_map(|g| g.own.as_ref()).map(|o| o.scheduled).sum();
    let _ = writeln!(
        out,
        "{} generators sent one schedule at {} req/s together, each one request in every {} (`--segment I/{}`): {sent} \
         of {scheduled} requests due in the measured rounds. Latency above is their histograms added bucket by \
         bucket; the tiers' figures are the readings of the generator marked *sampled*.\n",
        all.len(),
        num(Some(run.config.load.qps), 0),
        all.len(),
        all.len()
    );
    let _ = writeln!(
        out,
        "| generator | host | began late (s) | scheduled | sent | OK | p50 ms | p99 ms | send lag p99 ms | floor p50 ms | \
         CPU s | status |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for g in all {
        let Some(o) = &g.own else { continue };
        let p = |s: &Option<Summary>, f: fn(&Summary) -> f64| num(s.as_ref().map(f), 3);
        let status = o.status.map_or("?".to_owned(), |s| format!("{s:?}").to_lowercase());
        let _ = writeln!(
            out,
            "| {}/{}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {status} (`{}`) |",
            g.segment,
            g.count,
            if g.sampled_tiers { " (sampled)" } else { "" },
            g.hostname.as_deref().unwrap_or("?"),
            num(g.late_seconds, 3),
            o.scheduled,
            o.sent,
            o.ok,
            p(&o.latency, |s| s.p50_ms),
            p(&o.latency, |s| s.p99_ms),
            p(&o.send_lag, |s| s.p99_ms),
            p(&o.client_floor, |s| s.p50_ms),
            num(o.cpu_seconds, 2),
            o.folder
        );
    }
    let worst = |f: fn(&Generator) -> Option<f64>| {
        all.iter().filter_map(|g| Some((g, f(g)?))).max_by(|a, b| a.1.total_cmp(&b.1))
    };
    if let Some((g, lag)) = worst(|g| g.own.as_ref()?.send_lag.as_ref().map(|s| s.p99_ms)) {
        let _ = write!(out, "\nWorst send lag: generator {}/{} (p99 {lag:.3} ms).", g.segment, g.count);
    }
    if let Some((g, floor)) = worst(|g| g.own.as_ref()?.client_floor.as_ref().map(|s| s.p50_ms)) {
        let _ = write!(
            out,
            " Highest instrument floor: generator {}/{} (p50 {floor:.3} ms), the one the instrument note uses.",
            g.segment, g.count
        );
    }
    let late: Vec<f64> = all.iter().filter_map(|g| g.late_seconds).collect();
    if let (Some(at), false) = (all[0].start_at.as_deref(), late.is_empty()) {
        let spread = late.iter().copied().fold(f64::MIN, f64::max) - late.iter().copied().fold(f64::MAX, f64::min);
        let _ = write!(out, " Asked to begin at {at}; their starts spread over {spread:.3} s.");
    }
    let _ = writeln!(out);
}
