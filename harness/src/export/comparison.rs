//! `comparison.md` and the compact terminal table: metric | A | B | difference,
//! each metric's value the mean over its rounds, the difference relative and
//! signed on the side that is worse, marked when it is inside the
//! round-to-round noise. A pure function of the runs it is given, so
//! `harness compare` on saved folders reproduces what a `--transport both` run
//! wrote.

use std::fmt::Write;

use crate::export::markdown::{charts_section, environment_table, num, setup};
use crate::judge::metrics::{Better, Metric, metrics};
use crate::judge::stats::mean;
use crate::result::RunResult;

/// One side of a comparison.
#[derive(Debug, Clone, Copy)]
pub struct Arm<'a> {
    pub name: &'a str,
    pub run: &'a RunResult,
}

/// How `b` differs from `a` on metric `m`.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub text: String,
    /// The name of the worse side, when there is one.
    pub worse: Option<String>,
}

fn values(m: &Metric, run: &RunResult) -> Vec<f64> {
    run.rounds.iter().filter_map(|r| (m.get)(r)).collect()
}

fn spread(v: &[f64]) -> f64 {
    let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
    if v.is_empty() { 0.0 } else { hi - lo }
}

/// The difference of `b` against `a`: relative to the better side, signed as
/// the worse side compares to it (`REST +135.2%`: REST is 135.2% higher where
/// lower is better). With at least two rounds on each side, a difference no
/// larger than the round-to-round spread (max − min) of either side is marked
/// as within noise.
pub fn difference(m: &Metric, a: Arm<'_>, b: Arm<'_>) -> Difference {
    let (va, vb) = (values(m, a.run), values(m, b.run));
    let (Some(ma), Some(mb)) = (mean(va.iter().copied()), mean(vb.iter().copied())) else {
        return Difference { text: "n/a".into(), worse: None };
    };
    let rel = |worse: f64, better: f64| {
        if better == 0.0 { None } else { Some((worse - better) / better.abs() * 100.0) }
    };
    let (text, worse) = if ma == mb {
        ("=".to_owned(), None)
    } else {
        let (worse_name, worse_v, better_v) = match m.better {
            Better::Lower if mb > ma => (b.name, mb, ma),
            Better::Lower => (a.name, ma, mb),
            Better::Higher if mb < ma => (b.name, mb, ma),
            Better::Higher => (a.name, ma, mb),
            // No better side: how B compares to A.
            Better::Neither => (b.name, mb, ma),
        };
        let text = match rel(worse_v, better_v) {
            Some(r) if r.abs() < 0.05 => format!("{worse_name} {}<0.1%", if r < 0.0 { "-" } else { "+" }),
            Some(r) => format!("{worse_name} {r:+.1}%"),
            None => format!("{worse_name} (from 0)"),
        };
        (text, (m.better != Better::Neither).then(|| worse_name.to_owned()))
    };
    let noisy = va.len() >= 2 && vb.len() >= 2 && (ma - mb).abs() <= spread(&va).max(spread(&vb));
    if noisy && text != "=" {
        Difference { text: format!("{text} (within noise)"), worse: None }
    } else {
        Difference { text, worse }
    }
}

/// Differences in configuration that make a comparison questionable.
pub fn config_warnings(arms: &[Arm<'_>]) -> Vec<String> {
    let Some(first) = arms.first() else { return Vec::new() };
    let mut warnings = Vec::new();
    let base = &first.run.config;
    for other in &arms[1..] {
        let c = &other.run.config;
        let mut check = |what: &str, x: String, y: String| {
            if x != y {
                warnings.push(format!("{what} differs: {} has {x}, {} has {y}", first.name, other.name));
            }
        };
        check("rate", format!("{} req/s", base.qps), format!("{} req/s", c.qps));
        check("delay", format!("{:?}", base.delay), format!("{:?}", c.delay));
        check("items", base.items.to_string(), c.items.to_string());
        check("fan-out", base.fanout.to_string(), c.fanout.to_string());
        check("duration", format!("{:?}", base.duration), format!("{:?}", c.duration));
        check("build profile", first.run.environment.build_text(), other.run.environment.build_text());
        check(
            "machine",
            format!("{:?} × {:?}", first.run.environment.cpu_model, first.run.environment.logical_cores),
            format!("{:?} × {:?}", other.run.environment.cpu_model, other.run.environment.logical_cores),
        );
    }
    warnings
}

/// `comparison.md`. With `charts`, it links the charts written beside it.
pub fn render(arms: &[Arm<'_>], charts: bool) -> String {
    let mut out = String::new();
    let names: Vec<&str> = arms.iter().map(|a| a.name).collect();
    let _ = writeln!(out, "# grpc-vs-rest comparison: {}\n", names.join(" vs "));
    if let Some(first) = arms.first() {
        let _ = writeln!(out, "{}\n", setup(first.run));
    }
    out.push_str(&warnings_quote(arms));
    out.push_str(&table(arms));
    out.push_str(&method_note(arms));
    out.push_str(&validity_section(arms));
    out.push_str(&configuration_section(arms));
    if charts {
        out.push_str(&charts_section());
    }
    out
}

fn warnings_quote(arms: &[Arm<'_>]) -> String {
    let mut out = String::new();
    let warnings = config_warnings(arms);
    if !warnings.is_empty() {
        let _ = writeln!(out, "> **The configurations differ:**");
        for w in &warnings {
            let _ = writeln!(out, "> - {w}");
        }
        let _ = writeln!(out);
    }
    out
}

/// metric | each arm's mean over rounds | each difference against the first arm.
fn table(arms: &[Arm<'_>]) -> String {
    let mut out = String::new();
    let _ = write!(out, "| metric |");
    for a in arms {
        let _ = write!(out, " {} |", a.name);
    }
    for b in arms.iter().skip(1) {
        let _ = write!(
            out,
            " {} |",
            if arms.len() == 2 { "difference".to_owned() } else { format!("{} vs {}", b.name, arms[0].name) }
        );
    }
    let _ = write!(out, "\n|---|");
    for _ in 0..arms.len() * 2 - 1 {
        let _ = write!(out, "---:|");
    }
    let _ = writeln!(out);
    for m in metrics().iter().filter(|m| m.shown_for(arms.iter().map(|a| a.run))) {
        let _ = write!(out, "| {} |", m.label);
        for a in arms {
            let _ = write!(out, " {} |", num(mean(values(m, a.run)), m.decimals));
        }
        for b in arms.iter().skip(1) {
            let _ = write!(out, " {} |", difference(m, arms[0], *b).text);
        }
        let _ = writeln!(out);
    }
    out
}

/// How to read the table: what the values and differences are.
fn method_note(arms: &[Arm<'_>]) -> String {
    let mut out = String::new();
    let rounds: Vec<String> = arms.iter().map(|a| format!("{} {}", a.name, a.run.rounds.len())).collect();
    let _ = writeln!(
        out,
        "\nValues are means over rounds ({}). The difference names the worse side and how much worse it is, \
         relative to the better one; lower is better for memory, latency, errors, CPU and bytes, higher for \
         throughput. Rows without a better side compare {} to {}. *Within noise*: the difference is no larger \
         than the round-to-round spread (max − min) of either side{}.",
        rounds.join(", "),
        arms.get(1).map_or("", |a| a.name),
        arms[0].name,
        if arms.iter().any(|a| a.run.rounds.len() < 2) {
            "; it needs two rounds on each side, so it is not judged here"
        } else {
            ""
        }
    );

    out
}

fn validity_section(arms: &[Arm<'_>]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n## Validity\n");
    for a in arms {
        if a.run.is_valid() {
            let _ = writeln!(out, "- **{}**: valid.", a.name);
        } else {
            let _ = writeln!(out, "- **{}**: not a valid measurement:", a.name);
            for p in &a.run.validity {
                let _ = writeln!(out, "  - {p}");
            }
        }
    }

    out
}

fn configuration_section(arms: &[Arm<'_>]) -> String {
    let mut out = String::new();
    if let Some(first) = arms.first() {
        let c = &first.run.config;
        let _ = writeln!(out, "\n## Configuration\n");
        let _ = writeln!(
            out,
            "{} req/s open loop for {} rounds of {} after {} of warm-up; {} service delay ({} jitter); {} items per response; fan-out {}; timeout {}; front connections {}; gRPC connections {}; REST over {}.",
            c.qps,
            c.rounds,
            humantime::format_duration(c.duration),
            humantime::format_duration(c.warmup),
            humantime::format_duration(c.delay),
            humantime::format_duration(c.jitter),
            c.items,
            c.fanout,
            humantime::format_duration(c.timeout),
            if c.connections == 0 { "one per request in flight".to_owned() } else { c.connections.to_string() },
            c.grpc_connections,
            if c.rest_http2 { "HTTP/2 cleartext" } else { "HTTP/1.1" }
        );
        for a in arms {
            for (tier, info) in &a.run.tiers {
                let _ = writeln!(out, "\n- {} {tier} settings: `{}`", a.name, info.settings);
            }
        }
        let _ = writeln!(out, "\n## Environment\n");
        out.push_str(&environment_table(first.run));
    }
    out
}

/// The comparison as a compact, aligned terminal table; the worse side in red
/// when `color`.
pub fn terminal(arms: &[Arm<'_>], color: bool) -> String {
    let mut rows: Vec<Vec<(String, bool)>> = Vec::new();
    let mut header: Vec<(String, bool)> = vec![("metric".into(), false)];
    header.extend(arms.iter().map(|a| (a.name.to_owned(), false)));
    header.extend(arms.iter().skip(1).map(|_| ("difference".to_owned(), false)));
    rows.push(header);
    for m in metrics().iter().filter(|m| m.shown_for(arms.iter().map(|a| a.run))) {
        let mut row = vec![(m.label.to_owned(), false)];
        row.extend(arms.iter().map(|a| (num(mean(values(m, a.run)), m.decimals), false)));
        for b in arms.iter().skip(1) {
            let d = difference(m, arms[0], *b);
            row.push((d.text, d.worse.is_some()));
        }
        rows.push(row);
    }
    let cols = rows[0].len();
    let widths: Vec<usize> =
        (0..cols).map(|c| rows.iter().map(|r| r[c].0.chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in rows {
        for (c, (cell, worse)) in row.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            let text = if c == 0 { format!("{cell}{}", " ".repeat(pad)) } else { format!("{}{cell}", " ".repeat(pad)) };
            if *worse && color {
                let _ = write!(out, "\x1b[31m{text}\x1b[0m  ");
            } else {
                let _ = write!(out, "{text}  ");
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    }
    out
}
