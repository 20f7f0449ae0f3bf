//! The command line: flags, the hidden tier role, signals and exit codes.
//!
//! Exit codes: 0 a complete run; 1 a run that failed or was aborted by a tier
//! (whatever was measured is still written); 2 bad flags (nothing started,
//! nothing written); 130 interrupted by Ctrl-C (partial report written).

use std::ffi::OsString;
use std::process::ExitCode;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::SystemTime;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::config::{Plan, RunArgs};
use crate::export::folder::RunFolder;
use crate::export::timeseries::TimeseriesWriter;
use crate::result::{RunResult, RunStatus};
use crate::topology::TIER_ROLE_ARG;

/// Stands up caller and downstream as separate processes on loopback, drives
/// them at a fixed rate (open loop, latency from the intended send time), and
/// writes run.json, report.md, latency histograms, charts and (for
/// `--transport both`) comparison.md to a new folder under --out.
#[derive(Debug, Parser)]
#[command(name = "harness", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compare saved runs: metric | A | B | difference, from run folders (a
    /// `--transport both` folder counts as its two arms).
    Compare(CompareArgs),
}

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// Run folders written by the harness (at least two runs in all).
    #[arg(required = true)]
    pub folders: Vec<PathBuf>,
    /// Write comparison.md and the overlaid charts into this folder instead of
    /// printing the comparison.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_INTERRUPTED: u8 = 130;

pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == TIER_ROLE_ARG) {
        return tier_main(&args[2..]);
    }
    let cli = Cli::parse();
    if let Some(Command::Compare(args)) = cli.command {
        return ExitCode::from(compare(&args));
    }
    let plan = match Plan::from_args(&cli.run).and_then(|p| crate::env::check_open_files(&p).map(|()| p)) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("harness: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let Some(runtime) = runtime("harness") else { return ExitCode::from(EXIT_FAILED) };
    ExitCode::from(runtime.block_on(run_main(plan)))
}

async fn run_main(plan: Plan) -> u8 {
    let cfg = plan.config.clone();
    if crate::env::is_debug_build() && !cfg.quiet {
        eprintln!(
            "\n  WARNING: this harness is a DEBUG build. Figures from it are not representative\n  \
             and every output is flagged. Use: cargo run --release -p harness -- ...\n"
        );
    }
    let interrupt = CancellationToken::new();
    let token = interrupt.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nharness: interrupted; stopping the load and draining (Ctrl-C again to exit at once)");
            token.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                // The tiers die with us: they were started with a parent-death signal.
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            }
        }
    });
    if plan.is_sweep() {
        return sweep_main(&plan, interrupt).await;
    }
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let load = if cfg.closed_loop { format!("{}conn", cfg.connections) } else { crate::export::qps_part(cfg.qps) };
    let name = crate::export::folder_name(&started_at, plan.transport_name(), &load, cfg.label.as_deref());
    let folder = match RunFolder::create(&cfg.out, &name) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("harness: creating the run folder under {}: {e}", cfg.out.display());
            return EXIT_FAILED;
        }
    };
    let timeseries = match TimeseriesWriter::create(&folder.path().join("timeseries.csv")) {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!("harness: timeseries.csv will be missing: {e}");
            None
        }
    };
    let runs = match crate::run::run(&plan, started_at, interrupt, timeseries).await {
        Ok(r) => r,
        Err(e) => {
            folder.discard();
            eprintln!("harness: {e:#}");
            return EXIT_FAILED;
        }
    };
    let written = crate::export::write_results(folder.path(), &runs).and_then(|()| folder.commit());
    let folder = match written {
        Ok(f) => Some(f),
        Err(e) => {
            eprintln!("harness: writing the run folder under {}: {e}", cfg.out.display());
            None
        }
    };
    if cfg.json {
        println!("{}", crate::export::summary::json(&runs, folder.as_deref()));
    } else if !cfg.quiet {
        print!("{}", crate::export::summary::text(&runs, folder.as_deref(), std::io::stdout().is_terminal()));
    }
    exit_code(&runs, folder.is_some())
}

/// A rate sweep: every step a full measured run (fresh tiers per arm, warm-up,
/// rounds) in its own sub-folder, then the capacity report. An arm whose last
/// two steps both failed is not run at higher rates.
async fn sweep_main(plan: &Plan, interrupt: CancellationToken) -> u8 {
    use crate::capacity::{ArmCapacity, Capacity, knee, should_stop, step};
    let cfg = &plan.config;
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let (first, last) = (plan.rates[0], plan.rates[plan.rates.len() - 1]);
    let load = format!("sweep-{}-{}", first, crate::export::qps_part(last));
    let name = crate::export::folder_name(&started_at, plan.transport_name(), &load, cfg.label.as_deref());
    let folder = match RunFolder::create(&cfg.out, &name) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("harness: creating the sweep folder under {}: {e}", cfg.out.display());
            return EXIT_FAILED;
        }
    };
    let slo_ms = cfg.slo_p99.as_secs_f64() * 1e3;
    let mut arms: Vec<ArmCapacity> = plan
        .arms
        .iter()
        .map(|t| ArmCapacity {
            transport: t.as_str().to_owned(),
            steps: Vec::new(),
            knee_qps: None,
            stopped_early: None,
        })
        .collect();
    let mut last_status = RunStatus::Complete;
    let mut setup = String::new();
    for &rate in &plan.rates {
        let active: Vec<_> =
            plan.arms.iter().zip(&arms).filter(|(_, a)| a.stopped_early.is_none()).map(|(t, _)| *t).collect();
        if active.is_empty() || interrupt.is_cancelled() {
            break;
        }
        let step_plan = plan.step(rate, &active);
        let step_name =
            format!("step-{}qps", crate::export::markdown::num(Some(rate), if rate.fract() == 0.0 { 0 } else { 2 }));
        let dir = folder.path().join(&step_name);
        let timeseries =
            std::fs::create_dir_all(&dir).and_then(|()| TimeseriesWriter::create(&dir.join("timeseries.csv"))).ok();
        if !cfg.quiet {
            eprintln!("sweep: {rate} req/s ({})", active.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", "));
        }
        let runs = match crate::run::run(&step_plan, started_at.clone(), interrupt.clone(), timeseries).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("harness: step {rate} req/s: {e:#}");
                last_status = RunStatus::Aborted;
                break;
            }
        };
        if let Err(e) = crate::export::write_results(&dir, &runs) {
            eprintln!("harness: writing {}: {e}", dir.display());
        }
        if setup.is_empty() {
            setup = crate::export::markdown::setup(&runs[0]);
        }
        for run in &runs {
            let Some(arm) = arms.iter_mut().find(|a| a.transport == run.config.transport.as_str()) else { continue };
            let folder_rel = if runs.len() > 1 { format!("{step_name}/{}", arm.transport) } else { step_name.clone() };
            arm.steps.push(step(run, slo_ms, folder_rel));
            if should_stop(&arm.steps) {
                arm.stopped_early = Some(format!(
                    "The sweep stopped early for this arm after two steps in a row were not sustained (last: {rate} req/s)."
                ));
            }
        }
        last_status = runs.first().map_or(RunStatus::Aborted, |r| r.status);
        if last_status != RunStatus::Complete {
            break;
        }
    }
    for arm in &mut arms {
        arm.knee_qps = knee(&arm.steps);
    }
    let capacity = Capacity { slo_p99_ms: slo_ms, arms };
    let setup = setup
        .split(" req/s, ")
        .nth(1)
        .map_or(setup.clone(), |rest| format!("offered {} … {} req/s, {rest}", first, last));
    let written = crate::export::capacity::write(folder.path(), &capacity, &setup).and_then(|()| folder.commit());
    let path = match written {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("harness: writing the sweep folder: {e}");
            None
        }
    };
    if cfg.json {
        println!("{}", serde_json::json!({ "folder": path, "capacity": capacity, "status": last_status }));
    } else if !cfg.quiet {
        print!("{}", crate::export::capacity::terminal(&capacity));
        if let Some(p) = &path {
            println!("written to {}", p.display());
        }
    }
    match (last_status, path.is_some()) {
        (_, false) => EXIT_FAILED,
        (RunStatus::Complete, _) => EXIT_OK,
        (RunStatus::Interrupted, _) => EXIT_INTERRUPTED,
        (RunStatus::Aborted, _) => EXIT_FAILED,
    }
}

fn exit_code(runs: &[RunResult], written: bool) -> u8 {
    let status = runs.first().map_or(RunStatus::Aborted, |r| r.status);
    match (status, written) {
        (_, false) => EXIT_FAILED,
        (RunStatus::Complete, _) => EXIT_OK,
        (RunStatus::Interrupted, _) => EXIT_INTERRUPTED,
        (RunStatus::Aborted, _) => EXIT_FAILED,
    }
}

/// `harness compare A B [C …]`.
fn compare(args: &CompareArgs) -> u8 {
    let mut runs = Vec::new();
    for folder in &args.folders {
        match crate::export::read_runs(folder) {
            Ok(r) => runs.extend(r),
            Err(e) => {
                eprintln!("harness compare: {e}");
                return EXIT_USAGE;
            }
        }
    }
    if runs.len() < 2 {
        eprintln!("harness compare: these folders hold {} run(s); a comparison needs at least two", runs.len());
        return EXIT_USAGE;
    }
    let refs: Vec<&RunResult> = runs.iter().collect();
    let names = crate::export::arm_names(&refs);
    let arms: Vec<crate::export::comparison::Arm<'_>> =
        names.iter().zip(&runs).map(|(name, run)| crate::export::comparison::Arm { name, run }).collect();
    for w in crate::export::comparison::config_warnings(&arms) {
        eprintln!("harness compare: warning: {w}");
    }
    match &args.out {
        Some(out) => {
            if let Err(e) = std::fs::create_dir_all(out).and_then(|()| crate::export::write_comparison(out, &refs)) {
                eprintln!("harness compare: writing into {}: {e}", out.display());
                return EXIT_FAILED;
            }
            println!("written to {}", out.join("comparison.md").display());
        }
        None => print!("{}", crate::export::comparison::render(&arms, false)),
    }
    EXIT_OK
}

/// `harness __tier downstream|caller [flags]`: run a tier in this process.
fn tier_main(args: &[OsString]) -> ExitCode {
    let Some(role) = args.first().and_then(|a| a.to_str()) else {
        eprintln!("harness {TIER_ROLE_ARG}: name a tier (downstream or caller)");
        return ExitCode::from(EXIT_USAGE);
    };
    let Some(runtime) = runtime(role) else { return ExitCode::from(EXIT_FAILED) };
    let rest = &args[1..];
    let result = match role {
        "downstream" => {
            let a = downstream::cli::Args::parse_from(
                std::iter::once(OsString::from("downstream")).chain(rest.iter().cloned()),
            );
            runtime.block_on(downstream::cli::run(a))
        }
        "caller" => {
            let a =
                caller::cli::Args::parse_from(std::iter::once(OsString::from("caller")).chain(rest.iter().cloned()));
            runtime.block_on(caller::cli::run(a))
        }
        other => {
            eprintln!("harness {TIER_ROLE_ARG}: unknown tier {other:?} (downstream or caller)");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    telemetry::exit_code(role, result)
}

/// Logging on stderr and a multi-threaded runtime, for the harness and its tier roles.
fn runtime(name: &str) -> Option<tokio::runtime::Runtime> {
    telemetry::init_logging();
    match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("{name}: starting the async runtime: {e}");
            None
        }
    }
}
