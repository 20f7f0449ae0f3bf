//! `capacity.md`, `capacity.json` and the capacity charts of a rate sweep,
//! as bytes; `files` writes them.

use std::fmt::Write;

use crate::export::charts::{Series, line_chart};
use crate::export::numbers::num;
use crate::judge::capacity::Capacity;
use crate::result::TierName;

pub fn render(c: &Capacity, setup: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# grpc-vs-rest capacity sweep\n\n{setup}\n");
    let _ = writeln!(
        out,
        "A step is *sustained* when the arm achieved at least 99% of the offered rate with no errors or drops and a \
         p99 under {:.0} ms (`--slo-p99`). The knee is the highest offered rate sustained with every lower step \
         sustained too. Figures are means over \
         the step's rounds; each step's full report is in its folder.\n",
        c.slo_p99_ms
    );
    if let Some(i) = &c.interrupted {
        let _ = writeln!(out, "> **Sweep interrupted** ({}): {}\n", i.reason, not_run_text(&i.not_run_qps));
    }
    for arm in &c.arms {
        let name = arm.transport.title();
        let _ = writeln!(out, "## {name}\n");
        match arm.knee_qps {
            Some(k) => {
                let _ = writeln!(out, "**Knee: {} req/s.**\n", num(Some(k), 0));
            }
            None => {
                let _ = writeln!(out, "**Knee: none** — no step was sustained.\n");
            }
        }
        if let Some(text) = above_knee_text(&arm.sustained_above_knee_qps) {
            let _ = writeln!(out, "> {text}\n");
        }
        if let Some(why) = &arm.stopped_early {
            let _ = writeln!(out, "> {why}\n");
        }
        let _ = writeln!(
            out,
            "| offered (req/s) | achieved (ok/s) | p50 (ms) | p99 (ms) | errors | dropped | caller CPU (µs/req) | downstream CPU (µs/req) | caller RSS (MiB) | downstream RSS (MiB) | sustained | report |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
        );
        for s in &arm.steps {
            let tier =
                |m: &std::collections::BTreeMap<TierName, Option<f64>>, t: TierName| m.get(&t).copied().flatten();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | [{}]({}/report.md) |",
                num(Some(s.offered_qps), 0),
                num(s.achieved_ok_per_second, 1),
                num(s.p50_ms, 1),
                num(s.p99_ms, 1),
                s.errors,
                s.dropped,
                num(tier(&s.cpu_us_per_request, TierName::Caller), 0),
                num(tier(&s.cpu_us_per_request, TierName::Downstream), 0),
                num(tier(&s.rss_mib, TierName::Caller), 1),
                num(tier(&s.rss_mib, TierName::Downstream), 1),
                if s.sustained { "yes".to_owned() } else { format!("no ({})", s.shortfalls.join(", ")) },
                s.folder,
                s.folder,
            );
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "![Achieved vs offered](capacity-rate.svg)\n\n![p99 vs offered](capacity-p99.svg)");
    out
}

/// What an interruption left out, said the same way in the report and the terminal.
fn not_run_text(not_run: &[f64]) -> String {
    if not_run.is_empty() {
        return "every step ran, the last one possibly cut short; each knee is over the steps shown".to_owned();
    }
    let rates: Vec<String> = not_run.iter().map(|r| num(Some(*r), if r.fract() == 0.0 { 0 } else { 2 })).collect();
    format!(
        "the steps at {} req/s never ran; each knee is over the steps that ran only, not the arm's capacity",
        rates.join(", ")
    )
}

/// The charts: achieved vs offered and p99 vs offered, arms overlaid.
pub fn charts(c: &Capacity) -> Vec<(&'static str, String)> {
    let max_offered = c.arms.iter().flat_map(|a| a.steps.iter().map(|s| s.offered_qps)).fold(0.0, f64::max);
    let mut rate = vec![Series { name: "offered".into(), points: vec![(0.0, 0.0), (max_offered, max_offered)] }];
    let mut p99 = Vec::new();
    for arm in &c.arms {
        let name = arm.transport.title().to_owned();
        rate.push(Series {
            name: name.clone(),
            points: arm.steps.iter().filter_map(|s| Some((s.offered_qps, s.achieved_ok_per_second?))).collect(),
        });
        p99.push(Series { name, points: arm.steps.iter().filter_map(|s| Some((s.offered_qps, s.p99_ms?))).collect() });
    }
    p99.push(Series { name: "SLO".into(), points: vec![(0.0, c.slo_p99_ms), (max_offered, c.slo_p99_ms)] });
    vec![
        ("capacity-rate.svg", line_chart("Achieved vs offered rate", "offered (req/s)", "achieved (ok/s)", &rate)),
        ("capacity-p99.svg", line_chart("p99 latency vs offered rate", "offered (req/s)", "p99 (ms)", &p99)),
    ]
}

/// The warning for sustained steps above the knee, if there are any.
fn above_knee_text(rates: &[f64]) -> Option<String> {
    let list: Vec<String> = rates.iter().map(|r| num(Some(*r), 0)).collect();
    (!list.is_empty()).then(|| {
        format!(
            "**Not stable:** sustained again at {} req/s, above a lower step that was not; the knee is the highest rate below the \
             first step that was not, and the rates above it are not capacity to plan on.",
            list.join(", ")
        )
    })
}

/// `capacity.json`.
pub fn json(c: &Capacity) -> String {
    serde_json::to_string_pretty(c).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The knees and each arm's steps, compactly, for the terminal.
pub fn terminal(c: &Capacity) -> String {
    let mut out = String::new();
    if let Some(i) = &c.interrupted {
        let _ = writeln!(out, "sweep interrupted ({}): {}", i.reason, not_run_text(&i.not_run_qps));
    }
    for arm in &c.arms {
        let _ = writeln!(
            out,
            "{}: knee {}{}",
            arm.transport.title(),
            arm.knee_qps.map_or("none".to_owned(), |k| format!("{k:.0} req/s")),
            arm.stopped_early.as_ref().map_or(String::new(), |w| format!(" ({w})"))
        );
        if let Some(text) = above_knee_text(&arm.sustained_above_knee_qps) {
            let _ = writeln!(out, "  {text}");
        }
        for s in &arm.steps {
            let _ = writeln!(
                out,
                "  {:>9} req/s → {:>9} ok/s · p99 {:>8} ms · errors {} · dropped {} · {}",
                num(Some(s.offered_qps), 0),
                num(s.achieved_ok_per_second, 1),
                num(s.p99_ms, 1),
                s.errors,
                s.dropped,
                if s.sustained {
                    "sustained".to_owned()
                } else {
                    format!("not sustained: {}", s.shortfalls.join(", "))
                }
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::capacity::{ArmCapacity, step};
    use crate::testing;
    use caller::Transport;

    fn capacity(p99s: &[(f64, f64)]) -> Capacity {
        let steps: Vec<_> = p99s
            .iter()
            .map(|&(q, p99)| {
                let mut run = testing::run(Transport::Rest, 1.0);
                run.config.load.qps = q;
                run.rounds = vec![testing::round(1, p99, 1.0)];
                run.rounds[0].throughput.ok_per_second = q;
                step(&run, 600.0, format!("step-{q}qps"))
            })
            .collect();
        let mut arm = ArmCapacity {
            transport: Transport::Rest,
            steps,
            knee_qps: None,
            sustained_above_knee_qps: Vec::new(),
            stopped_early: None,
        };
        arm.judge_knee();
        Capacity {
            offered_qps: p99s.iter().map(|p| p.0).collect(),
            slo_p99_ms: 600.0,
            arms: vec![arm],
            interrupted: None,
        }
    }

    #[test]
    fn a_rate_sustained_above_a_failed_step_is_flagged_beside_the_knee() {
        let c = capacity(&[(8000.0, 500.0), (10000.0, 1250.0), (12000.0, 500.0)]);
        let (md, text) = (render(&c, ""), terminal(&c));
        assert!(md.contains("**Knee: 8000 req/s.**"), "{md}");
        assert!(
            md.contains("**Not stable:** sustained again at 12000 req/s") && text.contains("Not stable"),
            "{md}\n{text}"
        );
        assert!(text.contains("knee 8000 req/s"), "{text}");
        // A sweep that held up to its knee says nothing of the kind.
        let steady = capacity(&[(8000.0, 500.0), (10000.0, 500.0), (12000.0, 1250.0)]);
        assert!(!render(&steady, "").contains("Not stable") && !terminal(&steady).contains("Not stable"));
    }
}
