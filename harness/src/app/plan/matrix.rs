//! The experiment folder and its cells in order: `plan.toml` (the file as
//! given), `plan.json` (its normalised form, which `--resume` holds the
//! plan file to), `cells/<cell>/<run folder>`, then `summary.md`, its
//! charts and `experiment.json`. A cell whose folder already holds a
//! complete run is kept, never run again; a crossover search replays its
//! finished probes from their folders and runs on from there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::PlanArgs;
use super::cells::{self, CellEnd, Where};
use super::check::{Checked, cell_estimate, value_text};
use crate::config::experiment::PlanFile;
use crate::config::matrix::Cell;
use crate::export::experiment::{CellShown, Shown};
use crate::export::files::{create_experiment, read_plan, write_experiment, write_plan};
use crate::judge::crossover::{Probe, Search, Step, most_probes, next};
use crate::judge::experiment::{Crossover, Outcome, ProbeShown, judge_probe};
use crate::run::interrupt::Interrupt;

/// The plan as `plan.json` keeps it: each base key and each axis, in words.
pub fn normalise(file: &PlanFile) -> BTreeMap<String, String> {
    let mut n: BTreeMap<String, String> = file.base.iter().map(|s| (s.flag.clone(), s.value.text())).collect();
    for a in &file.axes {
        let values: Vec<String> = a.values.iter().map(|(v, _)| v.text()).collect();
        let mut text = format!("values [{}]{}", values.join(", "), if a.zip { ", zipped" } else { "" });
        if let Some(f) = &a.find {
            text = format!("crossover over [{}, {}] of {} to within {}", f.low, f.high, f.row, f.resolution);
        }
        n.insert(format!("axis {}", a.flag), text);
    }
    n
}

/// What differs between the plan an experiment was started with and now.
pub fn changes(then: &BTreeMap<String, String>, now: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in then {
        match now.get(k) {
            None => out.push(format!("{k}: {v} then, not given now")),
            Some(w) if w != v => out.push(format!("{k}: {v} then, {w} now")),
            _ => {}
        }
    }
    out.extend(
        now.iter().filter(|(k, _)| !then.contains_key(*k)).map(|(k, w)| format!("{k}: not given then, {w} now")),
    );
    out
}

/// The experiment folder: a new one under `--out`, or the one `--resume`
/// names, its plan checked to be this one.
fn open(args: &PlanArgs, text: &str, normal: &BTreeMap<String, String>) -> Result<PathBuf, String> {
    if let Some(dir) = &args.resume {
        let saved = read_plan(dir).map_err(|e| format!("{}: not an experiment folder ({e})", dir.display()))?;
        let then: BTreeMap<String, String> = serde_json::from_str(&saved)
            .map_err(|e| format!("{}/plan.json is not a plan this harness wrote: {e}", dir.display()))?;
        let changed = changes(&then, normal);
        if !changed.is_empty() {
            return Err(format!(
                "the plan changed since {} was started; run it as a new experiment, or undo: {}",
                dir.display(),
                changed.join("; ")
            ));
        }
        return Ok(dir.clone());
    }
    let stamp: String = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let stamp: String = stamp.chars().filter(|c| !matches!(c, '-' | ':')).collect();
    let stem = args.file.file_stem().map_or("plan".into(), |s| s.to_string_lossy().into_owned());
    let stem: String =
        stem.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).take(64).collect();
    let dir = create_experiment(&args.out, &format!("{stamp}-plan-{stem}"))
        .map_err(|e| format!("creating the experiment folder under {}: {e}", args.out.display()))?;
    let json = serde_json::to_string_pretty(normal).unwrap_or_default();
    write_plan(&dir, text, &json).map_err(|e| format!("writing the plan into {}: {e}", dir.display()))?;
    Ok(dir)
}

pub async fn run(checked: &Checked, text: &str, args: &PlanArgs) -> u8 {
    let dir = match open(args, text, &normalise(&checked.file)) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("harness plan: {e}");
            return super::super::exit::EXIT_USAGE;
        }
    };
    eprintln!("harness plan: experiment folder {}", dir.display());
    let interrupt = match super::super::interrupt_on_signals() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("harness plan: listening for Ctrl-C and SIGTERM: {e}");
            return super::super::exit::EXIT_FAILED;
        }
    };
    let (cells, crossover) = match &checked.search {
        Some(s) => search(checked, s, &dir, &interrupt).await,
        None => (matrix(checked, &dir, &interrupt).await, None),
    };
    let failed = cells.iter().any(|c| c.state.starts_with("failed"));
    let axes: Vec<String> = checked.file.axes.iter().map(|a| a.flag.clone()).collect();
    let plan_file = args.file.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned());
    let shown = Shown {
        plan_file: &plan_file,
        axes,
        cells,
        crossover,
        interrupted: interrupt.is_stopped(),
        claims: &checked.file.claims,
    };
    let json = experiment_json(&shown);
    if let Err(e) = write_experiment(&dir, &shown, &json) {
        eprintln!("harness plan: writing the summary into {}: {e}", dir.display());
        return super::super::exit::EXIT_FAILED;
    }
    if let Some(c) = &shown.crossover {
        eprintln!("harness plan: {}", outcome_line(c));
    }
    println!("experiment written to {}", dir.display());
    match () {
        () if interrupt.is_stopped() => super::super::exit::EXIT_INTERRUPTED,
        () if failed => super::super::exit::EXIT_FAILED,
        () => super::super::exit::EXIT_OK,
    }
}

/// `experiment.json`: every cell's state and folder, and the search.
fn experiment_json(e: &Shown<'_>) -> String {
    let cells: Vec<serde_json::Value> = e
        .cells
        .iter()
        .map(|c| serde_json::json!({ "cell": c.id, "values": c.values, "folder": c.folder, "state": c.state }))
        .collect();
    let json = serde_json::json!({ "plan_file": e.plan_file, "axes": e.axes, "cells": cells, "crossover": e.crossover, "interrupted": e.interrupted });
    serde_json::to_string_pretty(&json).unwrap_or_default()
}

fn outcome_line(c: &Crossover) -> String {
    match &c.outcome {
        Outcome::Bracket { below, above } => {
            format!("crossover of {} between {} {below} and {above} ({} probes)", c.row, c.flag, c.probes.len())
        }
        Outcome::OutOfProbes { below, above } => format!(
            "crossover of {} between {} {below} and {above}; probes ran out ({})",
            c.row,
            c.flag,
            c.probes.len()
        ),
        Outcome::NoneInRange => {
            format!("no crossover of {} in range {} {} … {} ({} probes)", c.row, c.flag, c.low, c.high, c.probes.len())
        }
        Outcome::Stopped { reason } => format!("search stopped: {reason}"),
    }
}

/// Runs (or keeps) `cell` in `dir/cells/<id>`: its shown state.
async fn one(cell: &Cell, dir: &Path, at: &Where<'_>, interrupt: &Interrupt) -> CellShown {
    let cell_dir = dir.join("cells").join(&cell.id);
    let relative = |f: &Path| f.strip_prefix(dir).unwrap_or(f).display().to_string();
    let shown = |folder: Option<String>, runs, state: &str| CellShown {
        id: cell.id.clone(),
        values: cell.values.clone(),
        folder,
        runs,
        state: state.to_owned(),
    };
    if let Some((folder, runs)) = cells::finished(&cell_dir) {
        eprintln!("harness plan: {}: finished earlier, kept", at.prefix(std::time::Instant::now()));
        return shown(Some(relative(&folder)), runs, "finished");
    }
    if interrupt.is_stopped() {
        return shown(None, Vec::new(), "not run");
    }
    match cells::run(cell, &cell_dir, at, interrupt).await {
        CellEnd::Finished(folder) => {
            let runs = cells::finished(&cell_dir).map(|(_, r)| r).unwrap_or_default();
            shown(Some(relative(&folder)), runs, "finished")
        }
        CellEnd::Interrupted => shown(None, Vec::new(), "interrupted"),
        CellEnd::Failed(why) => {
            eprintln!("harness plan: {why}");
            shown(None, Vec::new(), &format!("failed: {why}"))
        }
    }
}

/// Every cell of the matrix in order.
async fn matrix(checked: &Checked, dir: &Path, interrupt: &Interrupt) -> Vec<CellShown> {
    let estimates: Vec<Duration> =
        checked
            .cells
            .iter()
            .map(|(c, p)| {
                if cells::finished(&dir.join("cells").join(&c.id)).is_some() {
                    Duration::ZERO
                } else {
                    cell_estimate(p)
                }
            })
            .collect();
    let mut shown = Vec::new();
    for (i, (cell, _)) in checked.cells.iter().enumerate() {
        let at = Where {
            number: i + 1,
            total: checked.cells.len(),
            this: estimates[i],
            after: estimates[i + 1..].iter().sum(),
            id: &cell.id,
        };
        shown.push(one(cell, dir, &at, interrupt).await);
    }
    shown
}

/// A crossover search: probes chosen by [`next`] from the probes judged so far.
async fn search(
    checked: &Checked,
    s: &Search,
    dir: &Path,
    interrupt: &Interrupt,
) -> (Vec<CellShown>, Option<Crossover>) {
    let Some((axis, find)) = checked.file.crossover() else { return (Vec::new(), None) };
    let Some(metric) = crate::judge::metrics::by_key(&find.row) else { return (Vec::new(), None) };
    let per_probe = checked.cells.first().map_or(Duration::ZERO, |(_, p)| cell_estimate(p));
    let (mut probes, mut shown_probes, mut shown): (Vec<Probe>, Vec<ProbeShown>, Vec<CellShown>) = Default::default();
    let mut arms = (String::from("A"), String::from("B"));
    let outcome = loop {
        let v = match next(s, &probes) {
            Step::Probe(v) => v,
            done => break Outcome::from(done),
        };
        let n = probes.len() + 1;
        let Some(cell) = checked.file.probe(n, &value_text(v)) else {
            break Outcome::Stopped { reason: "no crossover axis".into() };
        };
        let left = per_probe * most_probes(s).saturating_sub(n) as u32;
        let at = Where { number: n, total: most_probes(s), this: per_probe, after: left, id: &cell.id };
        let c = one(&cell, dir, &at, interrupt).await;
        let judged = judge_probe(v, &c.runs, metric);
        if let [a, b] = c.runs.as_slice() {
            let names = crate::export::arm_names(&[a, b]);
            arms = (names[0].clone(), names[1].clone());
        }
        let state = c.state.clone();
        shown.push(c);
        match judged {
            Some(p) => {
                shown_probes.push(ProbeShown::new(&cell.id, &p));
                probes.push(p);
            }
            None if state == "finished" => {
                break Outcome::Stopped {
                    reason: format!("probe {} has not two arms to compare ({})", cell.id, axis.flag),
                };
            }
            None => {
                break Outcome::Stopped {
                    reason: format!("probe {} at {} {}: {state}", cell.id, axis.flag, value_text(v)),
                };
            }
        }
    };
    let crossover = Crossover {
        flag: axis.flag.clone(),
        row: find.row.clone(),
        a: arms.0,
        b: arms.1,
        low: s.low,
        high: s.high,
        resolution: s.resolution,
        outcome,
        probes: shown_probes,
    };
    (shown, Some(crossover))
}
