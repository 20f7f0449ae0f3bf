//! An experiment's `summary.md` and charts: a table of its cells with
//! their key rows per arm, one chart per axis (the row against the axis
//! value, one line per arm with its 95% interval as two thin lines), and a
//! crossover search's bracket with every probe. Only bytes.

use std::fmt::Write as _;

use super::arm_names;
use super::charts::{Series, line_chart};
use super::numbers::num;
use crate::judge::experiment::{Crossover, Outcome, arm_mean};
use crate::judge::metrics::{Metric, by_key};
use crate::result::RunResult;

/// The rows the cell table shows for each arm.
pub const KEY_ROWS: &[&str] = &[
    "p50",
    "p99",
    "throughput",
    "cpu_us_per_request.caller",
    "cpu_us_per_request.downstream",
    "internal.response_wire_bytes",
    "rss_mib_mean.caller",
];

/// The rows charted against each axis when no search names one.
pub const CHART_ROWS: &[&str] = &["p50", "cpu_us_per_request.downstream"];

/// One cell as the summary shows it.
#[derive(Debug)]
pub struct CellShown {
    pub id: String,
    /// Each axis flag and the value this cell gives it.
    pub values: Vec<(String, String)>,
    /// Its run folder, relative to the experiment folder.
    pub folder: Option<String>,
    /// Its runs in compared order (none when it did not finish).
    pub runs: Vec<RunResult>,
    /// `finished`, `not run`, `interrupted`, or why it failed.
    pub state: String,
}

/// An experiment as its summary shows it.
#[derive(Debug)]
pub struct Shown<'a> {
    pub plan_file: &'a str,
    pub axes: Vec<String>,
    pub cells: Vec<CellShown>,
    pub crossover: Option<Crossover>,
    pub interrupted: bool,
}

/// `summary.md`.
pub fn render(e: &Shown<'_>) -> String {
    let mut out = String::new();
    let finished = e.cells.iter().filter(|c| !c.runs.is_empty()).count();
    let _ = writeln!(out, "# Experiment: {}\n", e.plan_file);
    let _ = writeln!(
        out,
        "{} of {} cells finished{}. Each cell is a plain run folder under `cells/`: `harness compare`, `harness adr` \
         and `harness rerun` take it as they take any run.\n",
        finished,
        e.cells.len(),
        if e.interrupted {
            "; the experiment was interrupted (`harness plan FILE --resume DIR` runs the rest)"
        } else {
            ""
        }
    );
    if let Some(c) = &e.crossover {
        crossover(&mut out, c);
    }
    cells(&mut out, e);
    let charts = chart_files(e);
    if !charts.is_empty() {
        let _ = writeln!(out, "## Charts\n");
        for (file, _) in &charts {
            let _ = writeln!(out, "![{file}]({file})\n");
        }
    }
    out
}

fn metric(key: &str) -> Option<&'static Metric> {
    by_key(key)
}

fn cells(out: &mut String, e: &Shown<'_>) {
    let rows: Vec<&Metric> = KEY_ROWS.iter().filter_map(|k| metric(k)).collect();
    let _ = writeln!(out, "## Cells\n");
    let mut head = String::from("| cell |");
    for a in &e.axes {
        let _ = write!(head, " {a} |");
    }
    head.push_str(" arm |");
    for m in &rows {
        let _ = write!(head, " {} |", m.label);
    }
    head.push_str(" folder |");
    let _ = writeln!(out, "{head}");
    let _ = writeln!(out, "|{}", "---|".repeat(e.axes.len() + rows.len() + 3));
    for c in &e.cells {
        let values: String = e
            .axes
            .iter()
            .map(|a| c.values.iter().find(|(f, _)| f == a).map_or("", |(_, v)| v.as_str()))
            .map(|v| format!(" {v} |"))
            .collect();
        if c.runs.is_empty() {
            let _ = writeln!(out, "| {} |{values} {} |{} |", c.id, c.state, " |".repeat(rows.len() + 1));
            continue;
        }
        let names = arm_names(&c.runs.iter().collect::<Vec<_>>());
        for (name, run) in names.iter().zip(&c.runs) {
            let figures: String =
                rows.iter().map(|m| format!(" {} |", num(arm_mean(run, m).map(|i| i.estimate), m.decimals))).collect();
            let folder = c.folder.as_deref().map_or(String::new(), |f| format!("[{f}]({f})"));
            let _ = writeln!(out, "| {} |{values} {name} |{figures} {folder} |", c.id);
        }
    }
    let _ = writeln!(out);
}

fn crossover(out: &mut String, c: &Crossover) {
    let label = metric(&c.row).map_or(c.row.as_str(), |m| m.label);
    let _ = writeln!(out, "## Where the verdict flips: {label}, {} against {}, over {}\n", c.b, c.a, c.flag);
    let probe = |v: f64| c.probes.iter().find(|p| p.value == v);
    let interval = |v: f64| {
        probe(v)
            .and_then(|p| p.diff)
            .map_or("n/a".to_owned(), |d| format!("{:+.2} [{:+.2}, {:+.2}]", d.estimate, d.lo, d.hi))
    };
    let side = |s: i8| if s > 0 { "higher" } else { "lower" };
    match &c.outcome {
        Outcome::Bracket { below, above } | Outcome::OutOfProbes { below, above } => {
            let (sb, sa) = (probe(*below).map_or(0, |p| p.sign), probe(*above).map_or(0, |p| p.sign));
            let _ = writeln!(
                out,
                "{}'s {label} is {} than {}'s at {} {below} and below, and {} from {} {above} on \
                 (B − A with its 95% interval: {} at {below}, {} at {above}){}.\n",
                c.b,
                side(sb),
                c.a,
                c.flag,
                side(sa),
                c.flag,
                interval(*below),
                interval(*above),
                if matches!(c.outcome, Outcome::OutOfProbes { .. }) {
                    "; the probes allowed ran out before the resolution asked for"
                } else {
                    ""
                }
            );
        }
        Outcome::NoneInRange => {
            let said = |v: f64| match probe(v).map_or(0, |p| p.sign) {
                0 => "no detectable difference".to_owned(),
                s => format!("{} {}", c.b, side(s)),
            };
            let _ = writeln!(
                out,
                "No crossover in range: the verdict does not change sign between {flag} {} ({}: B − A {}) and \
                 {flag} {} ({}: B − A {}).\n",
                c.low,
                said(c.low),
                interval(c.low),
                c.high,
                said(c.high),
                interval(c.high),
                flag = c.flag,
            );
        }
        Outcome::Stopped { reason } => {
            let _ = writeln!(out, "The search stopped before an answer: {reason}.\n");
        }
    }
    let _ = writeln!(
        out,
        "| {} | {} | {} | B − A [95% interval] | rounds | cell |\n|---|---|---|---|---|---|",
        c.flag, c.a, c.b
    );
    let mut probes = c.probes.clone();
    probes.sort_by(|x, y| x.value.total_cmp(&y.value));
    for p in &probes {
        let d = p.diff.map_or("n/a".to_owned(), |d| format!("{:+.2} [{:+.2}, {:+.2}]", d.estimate, d.lo, d.hi));
        let _ = writeln!(out, "| {} | {} | {} | {d} | {} | {} |", p.value, num(p.a, 2), num(p.b, 2), p.rounds, p.cell);
    }
    let _ = writeln!(out);
}

/// One chart per axis and charted row: the row's mean per arm against the
/// axis value (log10 of it when the values span more than a hundredfold),
/// with each arm's 95% interval as two more lines.
pub fn chart_files(e: &Shown<'_>) -> Vec<(String, String)> {
    let rows: Vec<&str> = match &e.crossover {
        Some(c) => vec![c.row.as_str()],
        None => CHART_ROWS.to_vec(),
    };
    let mut files = Vec::new();
    for axis in &e.axes {
        let xs: Vec<(f64, &CellShown)> = e
            .cells
            .iter()
            .filter_map(|c| Some((c.values.iter().find(|(f, _)| f == axis)?.1.parse::<f64>().ok()?, c)))
            .collect();
        let (lo, hi) = xs.iter().fold((f64::MAX, f64::MIN), |(l, h), (x, _)| (l.min(*x), h.max(*x)));
        let log = lo > 0.0 && hi / lo > 100.0;
        for key in &rows {
            let Some(m) = metric(key) else { continue };
            let mut series: Vec<Series> = Vec::new();
            for (x, c) in &xs {
                let x = if log { x.log10() } else { *x };
                let names = arm_names(&c.runs.iter().collect::<Vec<_>>());
                for (name, run) in names.iter().zip(&c.runs) {
                    let Some(i) = arm_mean(run, m) else { continue };
                    for (suffix, y) in [("", i.estimate), (" 95% low", i.lo), (" 95% high", i.hi)] {
                        let label = format!("{name}{suffix}");
                        match series.iter_mut().find(|s| s.name == label) {
                            Some(s) => s.points.push((x, y)),
                            None => series.push(Series { name: label, points: vec![(x, y)] }),
                        }
                    }
                }
            }
            if series.is_empty() {
                continue;
            }
            for s in &mut series {
                s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
            let x_desc = if log { format!("log10 of {axis}") } else { axis.clone() };
            let svg = line_chart(&format!("{} against {axis}", m.label), &x_desc, m.label, &series);
            files.push((format!("chart-{axis}-{}.svg", key.replace('.', "-")), svg));
        }
    }
    files
}
