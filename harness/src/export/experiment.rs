//! An experiment's `summary.md` and charts: a table of its cells with
//! their key rows per arm, one chart per axis (the row against the axis
//! value, one line per arm with its 95% interval as two thin lines), and a
//! crossover search's bracket with every probe. Only bytes.

use std::fmt::Write as _;

use super::arm_names;
use super::charts::{Series, line_chart};
use super::conditions::{Context, claims_section, decision as conditions};
use super::numbers::num;
use crate::config::claims::Claim;
use crate::judge::conditions::CellRuns;
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
    /// The claims the plan reproduces, checked in the summary.
    pub claims: &'a [Claim],
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
    let runs = cell_runs(e);
    let checked: Vec<_> = e.claims.iter().map(|c| crate::judge::claims::check(c, &runs)).collect();
    out.push_str(&claims_section(&checked));
    let _ = writeln!(out, "Where each option wins, row by row: [decision.md](decision.md).\n");
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

fn cell_runs<'a>(e: &'a Shown<'_>) -> Vec<CellRuns<'a>> {
    e.cells.iter().map(|c| CellRuns { values: &c.values, runs: &c.runs }).collect()
}

/// The axis decision.md walks: the crossover's, else the first whose
/// values are all numbers, else the first.
fn decision_axis<'a>(e: &'a Shown<'_>) -> Option<&'a str> {
    if let Some(c) = &e.crossover {
        return Some(c.flag.as_str());
    }
    let numeric = |a: &str| e.cells.iter().all(|c| c.values.iter().any(|(f, v)| f == a && v.parse::<f64>().is_ok()));
    e.axes.iter().find(|a| numeric(a.as_str())).or(e.axes.first()).map(String::as_str)
}

/// The experiment's `decision.md`: where each option wins.
pub fn decision(e: &Shown<'_>) -> String {
    let runs = cell_runs(e);
    // The arms by transport: a proxy or link an axis varies is a cell's, not an arm's.
    let names: Vec<String> = match e.cells.iter().find(|c| !c.runs.is_empty()) {
        Some(c) => {
            let titles: Vec<String> = c.runs.iter().map(|r| r.config.transport.title().to_owned()).collect();
            let unique = titles.iter().enumerate().all(|(i, t)| !titles[..i].contains(t));
            if unique { titles } else { arm_names(&c.runs.iter().collect::<Vec<_>>()) }
        }
        None => Vec::new(),
    };
    conditions(&Context {
        plan_file: e.plan_file,
        axis: decision_axis(e),
        cells: &runs,
        names: &names,
        crossover: e.crossover.as_ref(),
    })
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
    head.push_str(" valid | folder |");
    let _ = writeln!(out, "{head}");
    let _ = writeln!(out, "|{}", "---|".repeat(e.axes.len() + rows.len() + 4));
    for c in &e.cells {
        let values: String = e
            .axes
            .iter()
            .map(|a| c.values.iter().find(|(f, _)| f == a).map_or("", |(_, v)| v.as_str()))
            .map(|v| format!(" {v} |"))
            .collect();
        if c.runs.is_empty() {
            let _ = writeln!(out, "| {} |{values} {} |{} |", c.id, c.state, " |".repeat(rows.len() + 2));
            continue;
        }
        let names = arm_names(&c.runs.iter().collect::<Vec<_>>());
        for (name, run) in names.iter().zip(&c.runs) {
            let figures: String =
                rows.iter().map(|m| format!(" {} |", num(arm_mean(run, m).map(|i| i.estimate), m.decimals))).collect();
            let folder = c.folder.as_deref().map_or(String::new(), |f| format!("[{f}]({f})"));
            // A run that was not a fair measurement says so (report.md says why).
            let valid = if run.is_valid() { "yes" } else { "no" };
            let _ = writeln!(out, "| {} |{values} {name} |{figures} {valid} | {folder} |", c.id);
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
                 (B − A with its 95% interval: {} at {below}, {} at {above}){}{}.\n",
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
                },
                between(c, *below, *above),
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

/// What the probes strictly inside a bracket found: no detectable difference.
fn between(c: &Crossover, below: f64, above: f64) -> String {
    let inside = c.probes.iter().filter(|p| p.value > below && p.value < above).count();
    match inside {
        0 => String::new(),
        n => format!("; the {n} probe{} between them found no detectable difference", if n == 1 { "" } else { "s" }),
    }
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
            mark_bracket(&mut series, e.crossover.as_ref().filter(|c| c.flag == *axis), log);
            let x_desc = if log { format!("log10 of {axis}") } else { axis.clone() };
            let svg = line_chart(&format!("{} against {axis}", m.label), &x_desc, m.label, &series);
            files.push((format!("chart-{axis}-{}.svg", key.replace('.', "-")), svg));
        }
    }
    files
}

/// The crossover's bracket on its axis's chart: a vertical line at each end.
fn mark_bracket(series: &mut Vec<Series>, c: Option<&Crossover>, log: bool) {
    let Some(c) = c else { return };
    let (Outcome::Bracket { below, above } | Outcome::OutOfProbes { below, above }) = c.outcome else { return };
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (lo, hi) = ys.fold((f64::MAX, f64::MIN), |(l, h), y| (l.min(y), h.max(y)));
    if lo > hi {
        return;
    }
    for (name, x) in [("crossover: last probe before", below), ("crossover: first probe after", above)] {
        let x = if log { x.log10() } else { x };
        series.push(Series { name: name.to_owned(), points: vec![(x, lo), (x, hi)] });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::probe;

    fn cell(id: &str, items: &str, rest_scale: f64) -> CellShown {
        let (g, r) = crate::testing::both(3, 1.0, rest_scale);
        CellShown {
            id: id.into(),
            values: vec![("items".into(), items.into())],
            folder: Some(format!("cells/{id}/x")),
            runs: vec![g, r],
            state: "finished".into(),
        }
    }

    #[test]
    fn the_summary_tables_each_arm_of_each_cell_and_states_the_bracket() {
        let crossover = crate::testing::bracket_32_40(vec![
            probe(1.0, "p01", -1),
            probe(1000.0, "p02", 1),
            probe(32.0, "p03", -1),
            probe(40.0, "p04", 1),
        ]);
        let cells = vec![cell("p01-items-1", "1", 0.9), cell("p02-items-1000", "1000", 1.1)];
        let e = Shown {
            plan_file: "x.toml",
            axes: vec!["items".into()],
            cells,
            crossover: Some(crossover),
            interrupted: false,
            claims: &[],
        };
        let md = render(&e);
        assert!(md.starts_with("# Experiment: x.toml\n\n2 of 2 cells finished."), "{md}");
        assert!(
            md.contains(
                "REST's downstream CPU per request (µs) is lower than gRPC's at items 32 and below, and higher from \
                 items 40 on (B − A with its 95% interval: -10.00 [-12.00, -8.00] at 32, +10.00 [+8.00, +12.00] at 40)."
            ),
            "{md}"
        );
        assert!(md.contains("| 32 | 100.00 | 90.00 | -10.00 [-12.00, -8.00] | 3 | p03 |"), "{md}");
        assert!(md.contains("| p01-items-1 | 1 | gRPC |") && md.contains("| p02-items-1000 | 1000 | REST |"), "{md}");
        let charts = chart_files(&e);
        assert_eq!(charts.len(), 1);
        assert_eq!(charts[0].0, "chart-items-cpu_us_per_request-downstream.svg");
        // Both arms, each with its interval, and the bracket's two ends.
        assert!(charts[0].1.contains("REST 95% high") && charts[0].1.contains("crossover: first probe after"));
    }
}
