//! `payload.md`, `payload.json` and the payload charts of a payload sweep, as
//! bytes; `files` writes them.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::export::charts::{Series, stacked_chart};
use crate::export::numbers::num;
use crate::judge::payload::{PayloadReport, PayloadStep};
use crate::result::TierName;

fn tier(m: &BTreeMap<TierName, Option<f64>>, t: TierName) -> Option<f64> {
    m.get(&t).copied().flatten()
}

pub fn render(p: &PayloadReport, setup: &str) -> String {
    let mut out = String::new();
    let unit = p.axis.unit();
    let _ = writeln!(out, "# grpc-vs-rest payload sweep\n\n{setup}\n");
    let _ = writeln!(
        out,
        "Each size ({unit}: {}) ran as a full measured step (fresh tiers per arm, warm-up, rounds) in its own folder; \
         figures are means over the step's rounds. Bytes are the internal hop's (caller → downstream), counted by \
         the downstream's listener and divided by the requests it answered; CPU is per request, per tier. A step is \
         *sustained* as in a rate sweep: at least 99% of the offered rate, no errors or drops, p99 under {:.0} ms. \
         Figures that could not be measured say so.\n",
        p.sizes.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
        p.slo_p99_ms
    );
    if let Some(i) = &p.interrupted {
        let sizes: Vec<String> = i.not_run_sizes.iter().map(u32::to_string).collect();
        let rest = if sizes.is_empty() {
            "every size ran, the last one possibly cut short".to_owned()
        } else {
            format!("the sizes {} never ran", sizes.join(", "))
        };
        let _ = writeln!(out, "> **Sweep interrupted** ({}): {rest}.\n", i.reason);
    }
    if p.arms.len() > 1 {
        side_by_side(&mut out, p);
    }
    for arm in &p.arms {
        let _ = writeln!(out, "## {}\n", arm.title());
        let _ = writeln!(
            out,
            "| {unit} | request wire (B/req) | response wire (B/req) | request message (B/req) | response message (B/req) | achieved (ok/s) | p50 (ms) | p99 (ms) | errors | caller CPU (µs/req) | downstream CPU (µs/req) | caller RSS (MiB) | downstream RSS (MiB) | sustained | report |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
        );
        for s in &arm.steps {
            let st = &s.step;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | [{}]({}/report.md) |",
                s.size,
                num(s.request_wire_bytes, 0),
                num(s.response_wire_bytes, 0),
                num(s.request_message_bytes, 0),
                num(s.response_message_bytes, 0),
                num(st.achieved_ok_per_second, 1),
                num(st.p50_ms, 1),
                num(st.p99_ms, 1),
                st.errors + st.dropped,
                num(tier(&st.cpu_us_per_request, TierName::Caller), 0),
                num(tier(&st.cpu_us_per_request, TierName::Downstream), 0),
                num(tier(&st.rss_mib, TierName::Caller), 1),
                num(tier(&st.rss_mib, TierName::Downstream), 1),
                if st.sustained { "yes".to_owned() } else { format!("no ({})", st.shortfalls.join(", ")) },
                st.folder,
                st.folder,
            );
        }
        let _ = writeln!(out);
    }
    for (file, what) in [
        ("payload-bytes.svg", "Internal hop bytes per request vs payload size"),
        ("payload-cpu.svg", "CPU per request by tier vs payload size"),
        ("payload-latency.svg", "p50 and p99 vs payload size"),
        ("payload-rss.svg", "Memory by tier vs payload size"),
    ] {
        let _ = writeln!(out, "![{what}]({file})\n");
    }
    out
}

/// Wire bytes and CPU per request of every arm at each size, each against
/// the first arm.
fn side_by_side(out: &mut String, p: &PayloadReport) {
    let first = &p.arms[0];
    let _ = writeln!(out, "## Arms side by side\n");
    let _ = writeln!(
        out,
        "Internal hop wire bytes per request (both directions) and CPU µs per request (caller + downstream), each \
         arm beside {}; the ratio is the arm's figure over {}'s.\n",
        first.title(),
        first.title()
    );
    let mut head = format!("| {} |", p.axis.unit());
    let mut rule = String::from("|---:|");
    for arm in &p.arms {
        let t = arm.title();
        let _ = write!(head, " {t} wire (B/req) | {t} CPU (µs/req) |");
        rule.push_str("---:|---:|");
    }
    let _ = writeln!(out, "{head}\n{rule}");
    let cpu = |s: &PayloadStep| {
        Some(
            tier(&s.step.cpu_us_per_request, TierName::Caller)?
                + tier(&s.step.cpu_us_per_request, TierName::Downstream)?,
        )
    };
    for &size in &p.sizes {
        let at = |steps: &[PayloadStep]| steps.iter().find(|s| s.size == size).cloned();
        let Some(base) = at(&first.steps) else { continue };
        let mut row = format!("| {size} |");
        for arm in &p.arms {
            let step = at(&arm.steps);
            let (wire, cpu_us) = (step.as_ref().and_then(PayloadStep::wire_bytes), step.as_ref().and_then(cpu));
            let ratio = |x: Option<f64>, base: Option<f64>| match (x, base) {
                (Some(x), Some(b)) if b > 0.0 && !std::ptr::eq(arm, first) => format!(" ({:.2}×)", x / b),
                _ => String::new(),
            };
            let _ = write!(
                row,
                " {}{} | {}{} |",
                num(wire, 0),
                ratio(wire, base.wire_bytes()),
                num(cpu_us, 0),
                ratio(cpu_us, cpu(&base))
            );
        }
        let _ = writeln!(out, "{row}");
    }
    let _ = writeln!(out);
}

/// The charts, arms overlaid, payload size on x: bytes per request, CPU per
/// request by tier, p50/p99, and RSS by tier.
pub fn charts(p: &PayloadReport) -> Vec<(&'static str, String)> {
    let series = |f: &dyn Fn(&PayloadStep) -> Option<f64>| -> Vec<Series> {
        p.arms
            .iter()
            .map(|a| Series {
                name: a.title(),
                points: a.steps.iter().filter_map(|s| Some((f64::from(s.size), f(s)?))).collect(),
            })
            .collect()
    };
    let x = p.axis.unit();
    let cpu = |t: TierName| move |s: &PayloadStep| tier(&s.step.cpu_us_per_request, t);
    let rss = |t: TierName| move |s: &PayloadStep| tier(&s.step.rss_mib, t);
    vec![
        (
            "payload-bytes.svg",
            stacked_chart(
                ("Response wire bytes per request (downstream → caller)", "bytes", &series(&|s| s.response_wire_bytes)),
                ("Request wire bytes per request (caller → downstream)", "bytes", &series(&|s| s.request_wire_bytes)),
                x,
            ),
        ),
        (
            "payload-cpu.svg",
            stacked_chart(
                ("Caller CPU per request", "µs", &series(&cpu(TierName::Caller))),
                ("Downstream CPU per request", "µs", &series(&cpu(TierName::Downstream))),
                x,
            ),
        ),
        (
            "payload-latency.svg",
            stacked_chart(
                ("p50 latency", "ms", &series(&|s| s.step.p50_ms)),
                ("p99 latency", "ms", &series(&|s| s.step.p99_ms)),
                x,
            ),
        ),
        (
            "payload-rss.svg",
            stacked_chart(
                ("Caller RSS", "MiB", &series(&rss(TierName::Caller))),
                ("Downstream RSS", "MiB", &series(&rss(TierName::Downstream))),
                x,
            ),
        ),
    ]
}

/// `payload.json`.
pub fn json(p: &PayloadReport) -> String {
    serde_json::to_string_pretty(p).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// Each arm's steps, compactly, for the terminal.
pub fn terminal(p: &PayloadReport) -> String {
    let mut out = String::new();
    if let Some(i) = &p.interrupted {
        let _ = writeln!(out, "payload sweep interrupted ({}): sizes not run {:?}", i.reason, i.not_run_sizes);
    }
    for arm in &p.arms {
        let _ = writeln!(out, "{}:", arm.title());
        for s in &arm.steps {
            let _ = writeln!(
                out,
                "  {:>8} {} → wire {:>9} B/req · p99 {:>8} ms · caller {:>6} µs/req · downstream {:>6} µs/req · errors {}",
                s.size,
                p.axis.unit(),
                num(s.wire_bytes(), 0),
                num(s.step.p99_ms, 1),
                num(tier(&s.step.cpu_us_per_request, TierName::Caller), 0),
                num(tier(&s.step.cpu_us_per_request, TierName::Downstream), 0),
                s.step.errors + s.step.dropped,
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use caller::Transport;

    use super::*;
    use crate::config::PayloadAxis;
    use crate::judge::payload::{ArmPayload, step};
    use crate::testing;

    fn report() -> PayloadReport {
        let arm = |t: Transport, scale: f64| ArmPayload {
            transport: t,
            json_codec: None,
            steps: [1u32, 10]
                .into_iter()
                .map(|n| {
                    let mut run = testing::run(t, scale);
                    for r in &mut run.rounds {
                        r.bytes.internal.request_wire_bytes_per_request = Some(60.0);
                        r.bytes.internal.response_wire_bytes_per_request = Some(100.0 * f64::from(n) * scale);
                    }
                    step(&run, n, 600.0, format!("step-{n}items/{t}"))
                })
                .collect(),
        };
        PayloadReport {
            axis: PayloadAxis::Items,
            shape: payload::Shape::Order,
            sizes: vec![1, 10],
            qps: 100.0,
            slo_p99_ms: 600.0,
            arms: vec![arm(Transport::Grpc, 1.0), arm(Transport::Rest, 2.0)],
            interrupted: None,
        }
    }

    #[test]
    fn the_report_has_a_table_per_arm_the_arms_side_by_side_and_the_charts() {
        let p = report();
        let md = render(&p, "setup line");
        assert!(md.contains("## gRPC") && md.contains("## REST") && md.contains("## Arms side by side"), "{md}");
        assert!(md.contains("| 10 | 1060 |") && md.contains("2060 (1.94×)"), "{md}");
        assert!(md.contains("[step-10items/rest](step-10items/rest/report.md)"), "{md}");
        let charts = charts(&p);
        assert_eq!(charts.len(), 4);
        for (file, svg) in charts {
            assert!(md.contains(file), "{file}");
            roxmltree::Document::parse(&svg).unwrap();
        }
        let back: PayloadReport = serde_json::from_str(&json(&p)).unwrap();
        assert_eq!(back, p);
        assert!(terminal(&p).contains("REST:"));
    }
}
