//! Sweeps: every step a full measured run (fresh tiers per arm, warm-up,
//! rounds) in its own sub-folder, then the sweep's report.
//!
//! * a rate sweep (`--qps` list or range) writes the capacity report; an arm
//!   whose last two steps both failed is not run at higher rates;
//! * a payload sweep (`--items` or `--request-bytes` list) runs every arm at
//!   every size, one rate, and writes the payload report.

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use ::payload::JsonCodec;
use caller::Transport;

use super::exit::{EXIT_FAILED, exit_code};
use super::{report_abort, timeseries_sink};
use crate::config::{PayloadAxis, PayloadSweep, Plan, TlsFiles};
use crate::export::files::{RunFolder, write_capacity, write_payload, write_results};
use crate::export::markdown::shape;
use crate::export::numbers::num;
use crate::export::{capacity, folder_name, payload, qps_part};
use crate::judge::capacity::{ArmCapacity, Capacity, Interruption, not_run, should_stop, step, sweep_status};
use crate::judge::payload::{ArmPayload, PayloadInterruption, PayloadReport};
use crate::result::{RunResult, RunStatus};
use crate::run::interrupt::Interrupt;

/// A new sweep folder named for its `load`, and the run's TLS certificates
/// (written into the folder) when the internal hop uses TLS; `None` (said on
/// stderr) if either cannot be made.
fn create_folder(plan: &Plan, started_at: &str, load: &str) -> Option<(RunFolder, Option<TlsFiles>)> {
    let cfg = &plan.config;
    let name = folder_name(started_at, &plan.transport_name(), load, cfg.output.label.as_deref());
    let folder = match RunFolder::create(&cfg.output.out, &name) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("harness: creating the sweep folder under {}: {e}", cfg.output.out.display());
            return None;
        }
    };
    match super::tls_files(plan, folder.path()) {
        Ok(tls) => Some((folder, tls)),
        Err(e) => {
            eprintln!("harness: {e}");
            None
        }
    }
}

pub async fn sweep_main(plan: &Plan, contract: Option<&Arc<contract::Loaded>>, interrupt: &Interrupt) -> u8 {
    if let Some(sweep) = &plan.payload {
        return payload_sweep(plan, contract, sweep, interrupt).await;
    }
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let (first, last) = (plan.rates[0], plan.rates[plan.rates.len() - 1]);
    let load = format!("sweep-{}-{}", first, qps_part(last));
    let Some((folder, tls)) = create_folder(plan, &started_at, &load) else { return EXIT_FAILED };
    let cfg = &plan.config;
    let mut arms: Vec<ArmCapacity> = plan
        .arms
        .iter()
        .map(|&transport| ArmCapacity {
            transport,
            steps: Vec::new(),
            knee_qps: None,
            sustained_above_knee_qps: Vec::new(),
            stopped_early: None,
        })
        .collect();
    let mut last_status = RunStatus::Complete;
    let mut run_shape = String::new();
    for &rate in &plan.rates {
        let active: Vec<Transport> =
            plan.arms.iter().zip(&arms).filter(|(_, a)| a.stopped_early.is_none()).map(|(t, _)| *t).collect();
        if active.is_empty() || interrupt.is_stopped() {
            break;
        }
        let (step_plan, name) = (plan.step(rate, &active), step_name(rate));
        let what = format!("{rate} req/s");
        let at = StepAt { name: &name, what: &what, sweep_folder: folder.path(), started_at: &started_at };
        let Some(runs) = run_step(&step_plan, tls.as_ref(), contract, &at, interrupt).await else {
            last_status = RunStatus::Aborted;
            break;
        };
        if run_shape.is_empty() {
            run_shape = shape(&runs[0]);
        }
        record_step(&mut arms, &runs, rate, plan.config.load.slo_p99.as_secs_f64() * 1e3);
        last_status = runs.first().map_or(RunStatus::Aborted, |r| r.status);
        if last_status != RunStatus::Complete {
            break;
        }
    }
    for arm in &mut arms {
        arm.judge_knee();
    }
    // Interrupted between two steps, the last step that ran may be complete:
    // the sweep is not.
    last_status = sweep_status(last_status, interrupt.is_stopped());
    let interrupted = (last_status == RunStatus::Interrupted)
        .then(|| Interruption { reason: interrupt.reason(), not_run_qps: not_run(&plan.rates, &arms) });
    let capacity = Capacity {
        offered_qps: plan.rates.clone(),
        slo_p99_ms: cfg.load.slo_p99.as_secs_f64() * 1e3,
        arms,
        interrupted,
    };
    let setup =
        if run_shape.is_empty() { String::new() } else { format!("offered {first} … {last} req/s, {run_shape}") };
    let written = write_capacity(folder.path(), &capacity, &setup);
    let (json, text) = (serde_json::json!({ "capacity": capacity }), capacity::terminal(&capacity));
    finish(folder, written, cfg, json, &text, last_status)
}

/// Commits a sweep's folder once its report is `written`, says where (or the
/// report as `json`, or nothing with --quiet), and gives the exit code.
fn finish(
    folder: RunFolder,
    written: std::io::Result<()>,
    cfg: &crate::config::Config,
    mut json: serde_json::Value,
    text: &str,
    status: RunStatus,
) -> u8 {
    let path = match written.and_then(|()| folder.commit()) {
        Ok(p) => Some(p),
        Err(e) => {
            // The unfinished folder removed itself (RunFolder's drop).
            eprintln!("harness: writing the sweep folder under {}: {e}; nothing was kept", cfg.output.out.display());
            None
        }
    };
    if cfg.output.json {
        json["folder"] = serde_json::json!(path);
        json["status"] = serde_json::json!(status);
        println!("{json}");
    } else if !cfg.output.quiet {
        print!("{text}");
        if let Some(p) = &path {
            println!("written to {}", p.display());
        }
    }
    exit_code(status, path.is_some())
}

/// The folder of the step at `rate`, relative to the sweep folder.
fn step_name(rate: f64) -> String {
    format!("step-{}qps", num(Some(rate), if rate.fract() == 0.0 { 0 } else { 2 }))
}

/// Where one step of a sweep is written, and what it is called.
struct StepAt<'a> {
    /// Its folder, relative to the sweep folder.
    name: &'a str,
    /// What it measures, e.g. `100 req/s`.
    what: &'a str,
    sweep_folder: &'a Path,
    started_at: &'a str,
}

/// Runs one step into its folder and writes it; `None` when its tiers
/// could not be started. `contract`: the step's own, loaded beside it.
async fn run_step(
    step_plan: &Plan,
    tls: Option<&TlsFiles>,
    contract: Option<&Arc<contract::Loaded>>,
    at: &StepAt<'_>,
    interrupt: &Interrupt,
) -> Option<Vec<RunResult>> {
    let StepAt { name, what, sweep_folder, started_at } = *at;
    let dir = sweep_folder.join(name);
    let sink =
        std::fs::create_dir_all(&dir).ok().and_then(|()| timeseries_sink(&dir.join("timeseries.csv"), step_plan));
    if !step_plan.config.output.quiet {
        let arms: Vec<&str> = step_plan.arms.iter().map(|t| t.as_str()).collect();
        eprintln!("sweep: {what} ({})", arms.join(", "));
    }
    let runs = match crate::run::run(step_plan, tls, contract, started_at.to_owned(), interrupt, sink).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("harness: step {what}: {e:#}");
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

/// The sentence payload.md opens with: the arms, the load, the work, what
/// the sweep varies and over what (`files`: the data files, numbered).
fn payload_setup(plan: &Plan, sweep: &PayloadSweep, files: &[String]) -> String {
    let (cfg, axis, sizes) = (&plan.config, sweep.axis, &sweep.sizes);
    let load_text = if cfg.load.closed_loop {
        format!("closed loop, {} connections", cfg.load.connections)
    } else if cfg.streams.is_some() {
        format!("{} streams/s", cfg.load.qps)
    } else {
        format!("{} req/s", cfg.load.qps)
    };
    let what = match (&cfg.contract, &cfg.streams) {
        (Some(c), _) => c.call.clone(),
        (None, Some(s)) => format!("items{}", crate::export::setup::stream_detail(s, false)),
        (None, None) => format!("{} records", cfg.work.shape),
    };
    let mut setup = format!(
        "{} at {load_text}, {} ms delay, {what}, fan-out {}; {} from {} to {}",
        plan.arms.iter().map(|t| t.title()).collect::<Vec<_>>().join(" vs "),
        cfg.work.delay.as_millis(),
        cfg.work.fanout,
        axis.unit(),
        sizes[0],
        sizes[sizes.len() - 1]
    );
    match axis {
        PayloadAxis::Items if cfg.work.request_bytes > 0 => {
            setup.push_str(&format!(", {} B uploaded per call", cfg.work.request_bytes));
        }
        PayloadAxis::RequestBytes => setup.push_str(&format!(", {} items per response", cfg.work.items)),
        PayloadAxis::Items => {}
        PayloadAxis::StreamItems => {}
        PayloadAxis::RequestData | PayloadAxis::ResponseData => {
            setup.push_str(&format!(" ({})", files.join("; ")));
        }
    }
    if plan.codecs.len() > 1 {
        let names: Vec<&str> = plan.codecs.iter().map(|c| c.as_str()).collect();
        setup.push_str(&format!(", each arm with the JSON codecs {} in turn", names.join(", ")));
    }
    if let Some(label) = &cfg.output.label {
        setup.push_str(&format!(" ({label})"));
    }
    setup.push('.');
    setup
}

/// `2 = orders-medium.jsonl (8 messages, median …)`: step `number` of a
/// sweep over data files.
fn data_file_text(axis: PayloadAxis, number: u32, report: &contract::Report) -> String {
    let side = if axis == PayloadAxis::RequestData { &report.requests } else { &report.answers };
    format!("{number} = {}", crate::export::setup::data_text(side, false))
}

/// The folder of the step at `size` of a payload sweep.
fn payload_step_name(axis: PayloadAxis, size: u32) -> String {
    match axis {
        PayloadAxis::Items => format!("step-{size}items"),
        PayloadAxis::RequestBytes => format!("step-{size}B"),
        PayloadAxis::RequestData => format!("step-requests-{size}"),
        PayloadAxis::ResponseData => format!("step-answers-{size}"),
        PayloadAxis::StreamItems => format!("step-{size}per-stream"),
    }
}

/// A payload sweep: every arm at every size, at one rate, each size a full
/// measured step; then `payload.md`, `payload.json` and the charts.
async fn payload_sweep(
    plan: &Plan,
    contract: Option<&Arc<contract::Loaded>>,
    sweep: &PayloadSweep,
    interrupt: &Interrupt,
) -> u8 {
    let cfg = &plan.config;
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let (axis, sizes) = (sweep.axis, &sweep.sizes);
    let rate = if cfg.load.closed_loop { format!("{}conn", cfg.load.connections) } else { qps_part(cfg.load.qps) };
    let what = match axis {
        PayloadAxis::Items => "items",
        PayloadAxis::RequestBytes => "bytes",
        PayloadAxis::RequestData => "requests",
        PayloadAxis::ResponseData => "answers",
        PayloadAxis::StreamItems => "stream-items",
    };
    let load = format!("{what}-{}-{}-{rate}", sizes[0], sizes[sizes.len() - 1]);
    let Some((folder, tls)) = create_folder(plan, &started_at, &load) else { return EXIT_FAILED };
    let slo_ms = cfg.load.slo_p99.as_secs_f64() * 1e3;
    let codecs = plan.step_codecs();
    let mut arms: Vec<ArmPayload> = codecs
        .iter()
        .flat_map(|&c| plan.arms.iter().map(move |&transport| (transport, c)))
        .map(|(transport, c)| ArmPayload { transport, json_codec: labelled(&codecs, c), steps: Vec::new() })
        .collect();
    let sweep_at = SweepAt {
        folder: folder.path(),
        started_at: &started_at,
        tls: tls.as_ref(),
        interrupt,
        slo_ms,
        axis,
        codecs: &codecs,
    };
    let mut last_status = RunStatus::Complete;
    let mut files = Vec::new();
    for &size in sizes {
        if interrupt.is_stopped() {
            break;
        }
        let (step_plan, name) = (plan.payload_step(axis, size), payload_step_name(axis, size));
        // A sweep over data files: each step's own contract data.
        let step_contract = match axis.is_data() {
            true => match super::load_contract(&step_plan) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("harness: step {size}: {e}");
                    last_status = RunStatus::Aborted;
                    break;
                }
            },
            false => contract.cloned(),
        };
        let at = SizeAt { size, name: &name, step_contract: step_contract.as_ref() };
        last_status = run_codecs(&sweep_at, &step_plan, &at, &mut arms, &mut files).await;
        if last_status != RunStatus::Complete {
            break;
        }
    }
    last_status = sweep_status(last_status, interrupt.is_stopped());
    let interrupted = (last_status == RunStatus::Interrupted).then(|| PayloadInterruption {
        reason: interrupt.reason(),
        not_run_sizes: crate::judge::payload::not_run(sizes, &arms),
    });
    let report = PayloadReport {
        axis,
        shape: cfg.work.shape,
        sizes: sizes.clone(),
        qps: cfg.load.qps,
        slo_p99_ms: slo_ms,
        arms,
        interrupted,
    };
    let setup = payload_setup(plan, sweep, &files);
    let written = write_payload(folder.path(), &report, &setup);
    let (json, text) = (serde_json::json!({ "payload": report }), payload::terminal(&report));
    finish(folder, written, cfg, json, &text, last_status)
}

/// What every step of a payload sweep shares.
struct SweepAt<'a> {
    folder: &'a Path,
    started_at: &'a str,
    tls: Option<&'a TlsFiles>,
    interrupt: &'a Interrupt,
    slo_ms: f64,
    axis: PayloadAxis,
    codecs: &'a [JsonCodec],
}

/// One size of a payload sweep: its folder's name and its own contract.
struct SizeAt<'a> {
    size: u32,
    name: &'a str,
    step_contract: Option<&'a Arc<contract::Loaded>>,
}

/// An arm's codec label: `Some` only in a sweep over several codecs.
fn labelled(codecs: &[JsonCodec], codec: JsonCodec) -> Option<JsonCodec> {
    (codecs.len() > 1).then_some(codec)
}

/// Runs one size of a payload sweep with each of the sweep's codecs in
/// turn, each into its own folder when there are several, adding every
/// arm's step; the status of the last run (a codec that did not complete
/// ends the size there).
async fn run_codecs(
    sweep: &SweepAt<'_>,
    step_plan: &Plan,
    at: &SizeAt<'_>,
    arms: &mut [ArmPayload],
    files: &mut Vec<String>,
) -> RunStatus {
    let (axis, codecs, size) = (sweep.axis, sweep.codecs, at.size);
    let mut last_status = RunStatus::Complete;
    for &codec in codecs {
        let name = if codecs.len() > 1 { format!("{}/{codec}", at.name) } else { at.name.to_owned() };
        let what = match codecs.len() {
            1 => format!("{size} {}", axis.unit()),
            _ => format!("{size} {}, {codec}", axis.unit()),
        };
        let step_at = StepAt { name: &name, what: &what, sweep_folder: sweep.folder, started_at: sweep.started_at };
        let codec_plan = step_plan.clone().with_codec(codec);
        let Some(runs) = run_step(&codec_plan, sweep.tls, at.step_contract, &step_at, sweep.interrupt).await else {
            return RunStatus::Aborted;
        };
        if let Some(report) = runs.first().and_then(|r| r.contract.as_ref()).filter(|_| codec == codecs[0]) {
            files.push(data_file_text(axis, size, report));
        }
        for run in &runs {
            let ours =
                |a: &&mut ArmPayload| a.transport == run.config.transport && a.json_codec == labelled(codecs, codec);
            let Some(arm) = arms.iter_mut().find(ours) else { continue };
            let folder_rel = if runs.len() > 1 { format!("{name}/{}", arm.transport) } else { name.clone() };
            arm.steps.push(crate::judge::payload::step(run, size, sweep.slo_ms, folder_rel));
        }
        last_status = runs.first().map_or(RunStatus::Aborted, |r| r.status);
        if last_status != RunStatus::Complete {
            break;
        }
    }
    last_status
}
