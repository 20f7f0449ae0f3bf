//! A rate sweep: every step a full measured run (fresh tiers per arm, warm-up,
//! rounds) in its own sub-folder, then the capacity report. An arm whose last
//! two steps both failed is not run at higher rates.

use std::path::Path;
use std::time::SystemTime;

use caller::Transport;

use super::exit::{EXIT_FAILED, exit_code};
use super::{report_abort, timeseries_sink};
use crate::config::Plan;
use crate::export::files::{RunFolder, write_capacity, write_results};
use crate::export::markdown::{num, shape};
use crate::export::{capacity, folder_name, qps_part};
use crate::judge::capacity::{ArmCapacity, Capacity, Interruption, knee, not_run, should_stop, step, sweep_status};
use crate::result::{RunResult, RunStatus};
use crate::run::interrupt::Interrupt;

pub async fn sweep_main(plan: &Plan, interrupt: &Interrupt) -> u8 {
    let cfg = &plan.config;
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let (first, last) = (plan.rates[0], plan.rates[plan.rates.len() - 1]);
    let load = format!("sweep-{}-{}", first, qps_part(last));
    let name = folder_name(&started_at, plan.transport_name(), &load, cfg.label.as_deref());
    let folder = match RunFolder::create(&cfg.out, &name) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("harness: creating the sweep folder under {}: {e}", cfg.out.display());
            return EXIT_FAILED;
        }
    };
    let plan = &match super::with_tls(plan, folder.path()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("harness: {e}");
            return EXIT_FAILED;
        }
    };
    let mut arms: Vec<ArmCapacity> = plan
        .arms
        .iter()
        .map(|&transport| ArmCapacity { transport, steps: Vec::new(), knee_qps: None, stopped_early: None })
        .collect();
    let mut last_status = RunStatus::Complete;
    let mut run_shape = String::new();
    for &rate in &plan.rates {
        let active: Vec<Transport> =
            plan.arms.iter().zip(&arms).filter(|(_, a)| a.stopped_early.is_none()).map(|(t, _)| *t).collect();
        if active.is_empty() || interrupt.is_stopped() {
            break;
        }
        let Some(runs) = run_step(plan, rate, &active, folder.path(), &started_at, interrupt).await else {
            last_status = RunStatus::Aborted;
            break;
        };
        if run_shape.is_empty() {
            run_shape = shape(&runs[0]);
        }
        record_step(&mut arms, &runs, rate, plan.config.slo_p99.as_secs_f64() * 1e3);
        last_status = runs.first().map_or(RunStatus::Aborted, |r| r.status);
        if last_status != RunStatus::Complete {
            break;
        }
    }
    for arm in &mut arms {
        arm.knee_qps = knee(&arm.steps);
    }
    // Interrupted between two steps, the last step that ran may be complete:
    // the sweep is not.
    last_status = sweep_status(last_status, interrupt.is_stopped());
    let interrupted = (last_status == RunStatus::Interrupted)
        .then(|| Interruption { reason: interrupt.reason(), not_run_qps: not_run(&plan.rates, &arms) });
    let capacity = Capacity { slo_p99_ms: cfg.slo_p99.as_secs_f64() * 1e3, arms, interrupted };
    let setup =
        if run_shape.is_empty() { String::new() } else { format!("offered {first} … {last} req/s, {run_shape}") };
    let path = match write_capacity(folder.path(), &capacity, &setup).and_then(|()| folder.commit()) {
        Ok(p) => Some(p),
        Err(e) => {
            // The unfinished folder removed itself (RunFolder's drop).
            eprintln!("harness: writing the sweep folder under {}: {e}; nothing was kept", cfg.out.display());
            None
        }
    };
    if cfg.json {
        println!("{}", serde_json::json!({ "folder": path, "capacity": capacity, "status": last_status }));
    } else if !cfg.quiet {
        print!("{}", capacity::terminal(&capacity));
        if let Some(p) = &path {
            println!("written to {}", p.display());
        }
    }
    exit_code(last_status, path.is_some())
}

/// The folder of the step at `rate`, relative to the sweep folder.
fn step_name(rate: f64) -> String {
    format!("step-{}qps", num(Some(rate), if rate.fract() == 0.0 { 0 } else { 2 }))
}

/// Runs one step over the `active` arms and writes its folder; `None` when
/// its tiers could not be started.
async fn run_step(
    plan: &Plan,
    rate: f64,
    active: &[Transport],
    sweep_folder: &Path,
    started_at: &str,
    interrupt: &Interrupt,
) -> Option<Vec<RunResult>> {
    let step_plan = plan.step(rate, active);
    let dir = sweep_folder.join(step_name(rate));
    let sink =
        std::fs::create_dir_all(&dir).ok().and_then(|()| timeseries_sink(&dir.join("timeseries.csv"), &step_plan));
    if !plan.config.quiet {
        eprintln!("sweep: {rate} req/s ({})", active.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", "));
    }
    let runs = match crate::run::run(&step_plan, started_at.to_owned(), interrupt, sink).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("harness: step {rate} req/s: {e:#}");
            return None;
        }
    };
    report_abort(&runs);
    if let Err(e) = write_results(&dir, &runs) {
        eprintln!("harness: writing {}: {e}", dir.display());
    }
    Some(runs)
}

/// Judges each arm's run at `rate` as a step, and stops an arm after two
/// failed steps in a row.
fn record_step(arms: &mut [ArmCapacity], runs: &[RunResult], rate: f64, slo_ms: f64) {
    let name = step_name(rate);
    for run in runs {
        let Some(arm) = arms.iter_mut().find(|a| a.transport == run.config.transport) else { continue };
        let folder_rel = if runs.len() > 1 { format!("{name}/{}", arm.transport) } else { name.clone() };
        arm.steps.push(step(run, slo_ms, folder_rel));
        if should_stop(&arm.steps) {
            arm.stopped_early = Some(format!(
                "The sweep stopped early for this arm after two steps in a row were not sustained (last: {rate} req/s)."
            ));
        }
    }
}
