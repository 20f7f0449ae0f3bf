//! `harness plan --check`: a plan file read, and every cell turned into the
//! argument list the flags would be and put through the flags' own parser
//! (clap's `RunArgs`, the same [`Cli`]) and rules (`Plan::from_args`, the
//! contract loaded). Every error is collected, each with its file, line and
//! key, none stops the others.

use std::time::Duration;

use clap::{CommandFactory, Parser};

use super::super::{Cli, load_contract, value_refusal};
use crate::config::Plan;
use crate::config::experiment::{self, FlagValue, PlanError, PlanFile};
use crate::config::matrix::Cell;
use crate::judge::crossover::{Search, most_probes};

/// Time an estimate adds for each start of an arm's tiers (processes
/// started, ready, stopped): a few hundred milliseconds on this project's
/// machines, rounded up.
const START_ESTIMATE: Duration = Duration::from_secs(2);

/// A plan that passed its check: the file, its cells and their plans (for
/// a crossover, the probes at its two bounds), and the time it will take.
#[derive(Debug)]
pub struct Checked {
    pub file: PlanFile,
    pub cells: Vec<(Cell, Plan)>,
    pub search: Option<Search>,
    pub estimate: Duration,
}

/// Whether a run has the long flag `flag`, and whether it takes a value.
pub fn flag_kind(flag: &str) -> Option<bool> {
    let cmd = Cli::command();
    let arg = cmd.get_arguments().find(|a| a.get_long() == Some(flag))?;
    Some(arg.get_action().takes_values())
}

/// The plan in `text`, checked; every error found otherwise.
pub fn check(text: &str) -> Result<Checked, Vec<PlanError>> {
    let (file, mut errors) = experiment::parse_all(text, &flag_kind);
    let Some(mut file) = file else { return Err(errors) };
    errors.extend(values(&file));
    // The cells are checked without the values already refused, so that a
    // rule they break is said too.
    let refused: Vec<usize> = errors.iter().filter_map(|e| e.line).collect();
    file.base.retain(|s| !refused.contains(&s.line));
    for a in &mut file.axes {
        a.values.retain(|(_, line)| !refused.contains(line));
    }
    let search = file.crossover().map(|(axis, find)| Search {
        low: find.low,
        high: find.high,
        resolution: find.resolution,
        whole: find.low.fract() == 0.0 && find.high.fract() == 0.0 && axis.flag != "qps",
        max_probes: experiment::MAX_PROBES,
    });
    if let Some((_, find)) = file.crossover()
        && crate::judge::metrics::by_key(&find.row).is_none()
    {
        let problem = format!("{:?} is not a report row (gate keys: p50, p99, cpu_us_per_request.caller, …)", find.row);
        errors.push(PlanError::at(find.row_line, "row", problem));
    }
    let cells = match &search {
        Some(s) => [s.low, s.high].iter().enumerate().filter_map(|(n, v)| file.probe(n + 1, &value_text(*v))).collect(),
        None => file.cells().unwrap_or_else(|e| {
            errors.extend(e);
            Vec::new()
        }),
    };
    // Every cell too: a cell's error where a key's own was already said
    // would only repeat it.
    let said: Vec<Option<usize>> = errors.iter().map(|e| e.line).collect();
    let mut checked = Vec::new();
    for cell in cells {
        match cell_plan(&file, &cell) {
            Ok(plan) => checked.push((cell, plan)),
            Err(e) if e.line.is_some() && said.contains(&e.line) => {}
            Err(e) => errors.push(e),
        }
    }
    if let Some((_, plan)) = checked.first() {
        errors.extend(claims(&file, &plan.arms));
    }
    dedupe(&mut errors);
    errors.sort_by_key(|e| e.line);
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut estimate: Duration = checked.iter().map(|(_, p)| cell_estimate(p)).sum();
    if let (Some(s), Some((_, first))) = (&search, checked.first()) {
        estimate = cell_estimate(first) * most_probes(s) as u32;
    }
    Ok(Checked { file, cells: checked, search, estimate })
}

/// What the run's own tables refuse of the plan's claims: a row that is no
/// report row, an option that is none of the arms (`arms`, every cell's).
fn claims(file: &PlanFile, arms: &[caller::Transport]) -> Vec<PlanError> {
    let names: Vec<&str> = arms.iter().map(|t| t.as_str()).collect();
    let mut errors = Vec::new();
    for c in &file.claims {
        if crate::judge::metrics::by_key(&c.row).is_none() {
            let problem =
                format!("{:?} is not a report row (gate keys: p50, p99, cpu_us_per_request.caller, …)", c.row);
            errors.push(PlanError::at(c.line_of("row"), "row", problem));
        }
        if c.across.is_some() {
            continue;
        }
        for (key, arm) in [("better", Some(&c.better)), ("than", c.than.as_ref())] {
            match arm {
                Some(a) if !names.contains(&a.as_str()) => {
                    let problem = format!("{a:?} is not an arm of this plan ({})", names.join(", "));
                    errors.push(PlanError::at(c.line_of(key), key, problem));
                }
                None if names.len() != 2 => {
                    let problem = format!("with {} arms, a claim names what it beat: than = \"...\"", names.len());
                    errors.push(PlanError::at(c.line_of(key), key, problem));
                }
                _ => {}
            }
        }
        let twice = names.iter().enumerate().any(|(i, n)| names[..i].contains(n));
        if twice {
            errors.push(PlanError::at(
                c.line_of("better"),
                "better",
                "the plan measures one arm twice: a claim cannot tell them apart",
            ));
        }
    }
    errors
}

/// A probe's value as a flag's text: a whole number without a point.
pub fn value_text(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 { format!("{}", v as i64) } else { format!("{v}") }
}

/// How long a cell takes: its load, and a start of its tiers for each arm
/// (each round's, with fresh tiers).
pub fn cell_estimate(plan: &Plan) -> Duration {
    let load = &plan.config.load;
    let starts = plan.arms.len() as u32 * if load.fresh_tiers { load.rounds } else { 1 };
    plan.load_duration() + START_ESTIMATE * starts
}

/// Each value of the file given to its flag alone: what the flag's own
/// parser refuses, with its message.
fn values(file: &PlanFile) -> Vec<PlanError> {
    let base = file.base.iter().map(|s| (&s.flag, &s.value, s.line));
    let axes = file.axes.iter().flat_map(|a| a.values.iter().map(move |(v, line)| (&a.flag, v, *line)));
    base.chain(axes)
        .filter_map(|(flag, value, line)| {
            let FlagValue::Text(text) = value else { return None };
            let e = Cli::try_parse_from(["harness", &format!("--{flag}"), text]).err()?;
            Some(PlanError::at(line, flag, value_refusal(&e)?))
        })
        .collect()
}

/// The plan of one cell, as a run with its argument list would make it.
fn cell_plan(file: &PlanFile, cell: &Cell) -> Result<Plan, PlanError> {
    let in_cell = |e: PlanError| PlanError { problem: format!("{} (cell {})", e.problem, cell.id), ..e };
    let cli =
        Cli::try_parse_from(std::iter::once("harness".to_owned()).chain(cell.args.iter().cloned())).map_err(|e| {
            let text = value_refusal(&e).unwrap_or_else(|| first_line(&e.render().to_string()));
            in_cell(locate(file, cell, &text, flag_named(&e)))
        })?;
    let plan = Plan::from_args(&cli.run).map_err(|e| in_cell(locate(file, cell, &e.to_string(), Some(e.flag))))?;
    if plan.is_sweep() {
        let flag =
            if plan.rates.len() > 1 { "--qps" } else { plan.payload.as_ref().map_or("--items", |p| p.axis.flag()) };
        let problem =
            format!("{flag}: a cell is one run: give the list as an axis (flag = \"{}\", values = [...])", &flag[2..]);
        return Err(in_cell(locate(file, cell, &problem, Some(flag))));
    }
    load_contract(&plan).map_err(|e| in_cell(locate(file, cell, &e, Some("--proto"))))?;
    Ok(plan)
}

/// The flag a clap error names (`--x`), if any.
fn flag_named(e: &clap::Error) -> Option<&str> {
    use clap::error::{ContextKind, ContextValue};
    match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => arg.split_whitespace().next(),
        _ => None,
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim_start_matches("error: ").to_owned()
}

/// An error about `flag` in `cell` placed where the file sets that flag:
/// the axis value the cell took, else the base key, else the file.
fn locate(file: &PlanFile, cell: &Cell, problem: &str, flag: Option<&str>) -> PlanError {
    let key = flag.map(|f| f.trim_start_matches('-').to_owned());
    let line = key.as_deref().and_then(|k| {
        let axis = file.axes.iter().find(|a| a.flag == k);
        let taken = cell.values.iter().find(|(f, _)| f == k).map(|(_, v)| v);
        let on_axis = axis.and_then(|a| {
            let value = a.values.iter().find(|(v, _)| Some(&v.text()) == taken).map(|(_, l)| *l);
            value.or(Some(a.line))
        });
        on_axis.or_else(|| file.base.iter().find(|s| s.flag == k).map(|s| s.line))
    });
    let key = key.filter(|_| line.is_some());
    PlanError { line, key, problem: problem.to_owned() }
}

/// One error for each place and problem, however many cells share it: the
/// first cell named, with how many more.
fn dedupe(errors: &mut Vec<PlanError>) {
    let strip = |p: &str| p.rsplit_once(" (cell ").map_or(p.to_owned(), |(head, _)| head.to_owned());
    let mut kept: Vec<(PlanError, usize)> = Vec::new();
    for e in errors.drain(..) {
        match kept
            .iter_mut()
            .find(|(k, _)| k.line == e.line && k.key == e.key && strip(&k.problem) == strip(&e.problem))
        {
            Some((_, n)) => *n += 1,
            None => kept.push((e, 0)),
        }
    }
    errors.extend(kept.into_iter().map(|(mut e, more)| {
        if more > 0 {
            e.problem = format!("{} and {more} more", e.problem.trim_end_matches(')'));
            e.problem.push(')');
        }
        e
    }));
}
