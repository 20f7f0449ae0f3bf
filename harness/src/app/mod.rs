//! The command line: flags, subcommands, the hidden tier role, signals and
//! exit codes. Thin: it validates, wires the stages together (the run, its
//! time-series sink, the exporters) and maps the outcome onto an exit code.
//!
//! * [`single`]: one measured run (one or both transports) into one folder;
//! * [`sweep`]: a rate sweep, one full run per step, and its capacity report;
//! * [`compare`]: `harness compare` over saved folders;
//! * [`adr`]: `harness adr`, the decision record of a saved comparison;
//! * [`report`]: `harness report`, a saved folder's reports rendered again
//!   (`--html`: its report.html);
//! * [`rerun`]: `harness rerun`, a saved run's configuration measured again;
//! * [`plan`]: `harness plan`, an experiment: a plan file's matrix of runs, resumable, and
//!   a search for where a verdict flips;
//! * [`conform`]: `harness conform`, whether a running or commanded tier
//!   speaks the contract, one line per check;
//! * [`tier`]: the hidden `__tier` role that runs a service in this process
//!   (and `__reaper`, the containers' reaper, `tiers::reaper::reap`);
//! * [`exit`]: the exit codes.

pub mod adr;
pub mod compare;
pub mod conform;
pub mod exit;
pub mod merge;
pub mod plan;
pub mod report;
pub mod rerun;
pub mod single;
pub mod sweep;
pub mod tier;

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use tokio::signal::unix::{SignalKind, signal};

use crate::config::{GateArgs, Plan, RunArgs, TlsFiles};
use crate::export::files::TimeseriesFile;
use crate::export::timeseries;
use crate::judge::gate::{self, Gate};
use crate::run::interrupt::Interrupt;
use crate::run::sampling::{SampleBatch, SampleSink};
use crate::tiers::TIER_ROLE_ARG;
use compare::CompareArgs;
use exit::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE};

/// Stands up caller and downstream as separate processes on loopback, drives
/// them at a fixed rate (open loop, latency from the intended send time), and
/// writes run.json, report.md, report.html, latency histograms, charts and (for
/// `--transport both`) comparison.md to a new folder under --out.
#[derive(Debug, Parser)]
#[command(
    name = "harness",
    version,
    args_conflicts_with_subcommands = true,
    disable_help_flag = true,
    after_help = "Each heading names the guide page that explains its flags in full; \
                  docs/README.md is the guide. --help-all prints every flag's long help here."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
    /// Print help: one line per flag, grouped by subject.
    #[arg(short = 'h', long = "help", action = clap::ArgAction::HelpShort)]
    help: Option<bool>,
    /// Print every flag's long help.
    #[arg(long = "help-all", action = clap::ArgAction::HelpLong)]
    help_all: Option<bool>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compare saved runs: metric | A | B | difference, from run folders (a
    /// `--transport both` folder counts as its two arms).
    Compare(CompareArgs),
    /// Write the MADR 4.0 decision record of a saved comparison (a
    /// `--transport both` folder): options, measured pros and cons, the
    /// command that reproduces it; the outcome only with --prefer.
    Adr(adr::AdrArgs),
    /// Measure a saved run's configuration again, exactly, into a new folder,
    /// and say what differs in the environment (commit, kernel, CPU).
    Rerun(rerun::RerunArgs),
    /// Put the folders of one run's segments (--segment I/N, one per
    /// generator) together into one run folder: histograms added bucket by
    /// bucket, counts summed, the tiers' figures from the generator that
    /// sampled them.
    Merge(merge::MergeArgs),
    /// Run an experiment: a plan file's base configuration crossed (or
    /// zipped) with its axes, one plain run folder per cell in one
    /// experiment folder, and its summary; or a search for where a verdict
    /// flips. --check validates without running; --resume DIR finishes one.
    Plan(plan::PlanArgs),
    /// Render a saved folder's report again; with --html, write its
    /// report.html (one self-contained page), also for folders saved by
    /// earlier versions.
    Report(report::ReportArgs),
    /// Check that a tier, ours or a team's own stack, speaks the built-in
    /// contract on every arm it serves: answers verified, REST route and
    /// error shapes, gRPC status and trailers, health, reflection. One line
    /// per check with a fix for each failure; exit 1 when one fails.
    Conform(conform::ConformArgs),
}

pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == TIER_ROLE_ARG) {
        return tier::tier_main(&args[2..]);
    }
    if args.get(1).is_some_and(|a| a == crate::tiers::reaper::REAPER_ROLE_ARG) {
        // The containers' reaper (see `tiers::containers`): its one argument
        // is the harness's pid.
        match args.get(2).and_then(|a| a.to_str()?.parse().ok()) {
            Some(pid) => crate::tiers::reaper::reap(pid),
            None => return ExitCode::from(EXIT_USAGE),
        }
        return ExitCode::SUCCESS;
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => match value_refusal(&e) {
            Some(line) => {
                eprintln!("harness: {line}");
                return ExitCode::from(EXIT_USAGE);
            }
            None => e.exit(),
        },
    };
    match cli.command {
        Some(Command::Compare(args)) => return ExitCode::from(compare::compare(&args)),
        Some(Command::Adr(args)) => return ExitCode::from(adr::adr(&args)),
        Some(Command::Rerun(args)) => return ExitCode::from(rerun::rerun(&args)),
        Some(Command::Merge(args)) => return ExitCode::from(merge::merge_main(&args)),
        Some(Command::Plan(args)) => return ExitCode::from(plan::plan_main(&args)),
        Some(Command::Report(args)) => return ExitCode::from(report::report(&args)),
        Some(Command::Conform(args)) => return ExitCode::from(conform::conform(&args)),
        None => {}
    }
    // The contract is compiled and its data read before the output folder
    // is made: a refusal leaves nothing behind.
    let checked = Plan::from_args(&cli.run)
        .map_err(|e| e.to_string())
        .and_then(|p| load_contract(&p).map(|c| (p, c)))
        .and_then(|(p, c)| {
            crate::measure::environment::check_open_files(&p).map(|()| (p, c)).map_err(|e| e.to_string())
        })
        .and_then(|(p, c)| {
            crate::export::files::check_out(&p.config.output.out, p.expected_output_bytes())
                .map(|()| (p, c))
                .map_err(|e| e.to_string())
        });
    let (plan, contract) = match checked {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("harness: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let gates = match Gates::from_args(&cli.run.output.gates, &plan) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("harness: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let Some(runtime) = runtime("harness", Some(cli.run.load.load_threads)) else { return ExitCode::from(EXIT_FAILED) };
    ExitCode::from(runtime.block_on(measure_main(plan, contract, gates)))
}

/// Compiles a team's own contract and reads its data (`--proto`) before
/// anything starts: a file that does not compile, a method that is not
/// there or streams, a data line that does not fit the schema is refused
/// here, with the file, the line and the field.
/// What it loaded travels beside the plan, never inside it.
pub(crate) fn load_contract(plan: &Plan) -> Result<Option<Arc<contract::Loaded>>, String> {
    // A sweep over data files: every file is read and checked now, and
    // each step loads its own again when it runs.
    if let Some(sweep) = plan.payload.as_ref().filter(|s| s.axis.is_data()) {
        let mut first = None;
        for &number in &sweep.sizes {
            let step = load_contract(&plan.payload_step(sweep.axis, number))?;
            first = first.or(step);
        }
        return first.map(Some).ok_or_else(|| "--proto: no contract was given".to_owned());
    }
    let Some(section) = plan.config.contract.as_ref() else { return Ok(None) };
    let loaded = section.args().load().map_err(|e| e.to_string())?.ok_or("--proto: no contract was given")?;
    // What the downstream would refuse at start or on every call, refused
    // now: a route its REST listener cannot hold, and, for a downstream
    // started here with its default limits, a request over its body limit.
    downstream::server::check_custom_route(&loaded.contract)?;
    if plan.config.deploy.downstream_url.is_none() {
        loaded
            .check_request_sizes(payload::Limits::default().max_encoded_request_bytes())
            .map_err(|e| e.to_string())?;
    }
    Ok(Some(Arc::new(loaded)))
}

/// A value a flag's own parser refused (a duration), as the harness states
/// every refused flag: `--flag: problem`, one line. Other clap errors
/// (unknown flags, `--help`) keep clap's own text.
fn value_refusal(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else { return None };
    let flag = arg.split_whitespace().next()?;
    let problem = std::error::Error::source(e)?;
    Some(format!("{flag}: {problem}"))
}

/// The CI gates of a run, parsed and checked against its arms before it starts.
#[derive(Debug, Default)]
pub struct Gates {
    pub fail_if: Vec<Gate>,
    pub fail_on_invalid: bool,
}

impl Gates {
    pub fn from_args(args: &GateArgs, plan: &Plan) -> Result<Gates, String> {
        let gates = Gates::parse(args, &plan.arms)?;
        if plan.is_sweep() && (!gates.fail_if.is_empty() || gates.fail_on_invalid) {
            return Err("--fail-if and --fail-on-invalid go with one rate, not a sweep".into());
        }
        Ok(gates)
    }

    /// The gates' texts parsed, each checked to name only transports in `arms`.
    pub fn parse(args: &GateArgs, arms: &[caller::Transport]) -> Result<Gates, String> {
        let fail_on_invalid = args.fail_on_invalid;
        let fail_if = args
            .fail_if
            .iter()
            .map(|t| gate::parse(t).and_then(|g| gate::check_arms(&g, arms).map(|()| g)))
            .collect::<Result<Vec<Gate>, _>>()
            .map_err(|e| e.to_string())?;
        Ok(Gates { fail_if, fail_on_invalid })
    }

    /// Says each breach on stderr and returns how many there were.
    pub fn report(&self, runs: &[crate::result::RunResult]) -> usize {
        let names = crate::export::arm_names(&runs.iter().collect::<Vec<_>>());
        let named: Vec<(&str, &crate::result::RunResult)> = names.iter().map(String::as_str).zip(runs).collect();
        let mut lines = gate::breaches(&self.fail_if, &named);
        if self.fail_on_invalid {
            lines.extend(gate::invalid(&named));
        }
        for line in &lines {
            eprintln!("harness: {line}");
        }
        lines.len()
    }
}

async fn measure_main(plan: Plan, contract: Option<Arc<contract::Loaded>>, gates: Gates) -> u8 {
    if !crate::result::optimising(crate::measure::environment::OPT_LEVEL) && !plan.config.output.quiet {
        eprintln!(
            "\n  WARNING: this harness was built without optimisation (opt-level {}). Figures from it are\n  \
             not representative and every output is flagged. Use: cargo run --release -p harness -- ...\n",
            crate::measure::environment::OPT_LEVEL
        );
    }
    if let Some(text) = crate::export::markdown::exposure(&plan.config) {
        // Said even with --quiet: it is about who can reach this machine.
        eprintln!("harness: WARNING: {text}");
    }
    let interrupt = match interrupt_on_signals() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("harness: listening for Ctrl-C and SIGTERM: {e}");
            return EXIT_FAILED;
        }
    };
    if plan.is_sweep() {
        sweep::sweep_main(&plan, contract.as_ref(), &interrupt).await
    } else {
        single::single_main(&plan, contract.as_ref(), &interrupt, &gates).await
    }
}

/// The run's TLS certificates, made and written into the run folder at
/// `dir` (none without `--tls` / `--mtls`).
fn tls_files(plan: &Plan, dir: &Path) -> Result<Option<TlsFiles>, String> {
    let mode = plan.config.hop.tls;
    if !mode.is_on() {
        return Ok(None);
    }
    // Containers reach each other by the nodes' host names.
    let names: Vec<String> = match plan.config.deploy.isolation {
        crate::config::Isolation::Containers => plan
            .arms
            .iter()
            .flat_map(|&t| {
                let arm = plan.arm(t);
                crate::tiers::layout::layout(&arm).host_names(&arm)
            })
            .collect(),
        crate::config::Isolation::Processes => Vec::new(),
    };
    let material = crate::tiers::tls::generate(plan.config.deploy.bind, &names, mode == crate::config::TlsMode::Mtls)
        .map_err(|e| e.to_string())?;
    let tls_dir = crate::export::files::write_tls(dir, &material)
        .map_err(|e| format!("writing the run's certificates under {}: {e}", dir.display()))?;
    Ok(Some(crate::tiers::tls::at(&tls_dir, &material)))
}

/// Ctrl-C (SIGINT) and SIGTERM (what `timeout`, CI cancel and `docker stop`
/// send) alike: the first stops the run, the second cuts what is left of it
/// short so the finished rounds are written at once, a third exits on the
/// spot (the tiers die with the harness: parent-death signal).
fn interrupt_on_signals() -> std::io::Result<Interrupt> {
    let interrupt = Interrupt::new();
    let (mut int, mut term) = (signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?);
    let seen = interrupt.clone();
    tokio::spawn(async move {
        loop {
            let name = tokio::select! {
                Some(()) = int.recv() => "SIGINT",
                Some(()) = term.recv() => "SIGTERM",
                else => return,
            };
            match seen.signal(name) {
                1 => eprintln!(
                    "\nharness: {name}: stopping the load and draining (again to stop waiting and write what was \
                     finished at once)"
                ),
                2 => eprintln!(
                    "harness: {name} again: cutting the drain short and writing what was finished (again to exit at once)"
                ),
                _ => {
                    // No destructor runs past `exit`: the unfinished run
                    // folder goes first, then the containers (they do not
                    // die with the harness as child processes do).
                    crate::export::files::remove_unfinished();
                    crate::tiers::reaper::remove_now();
                    std::process::exit(i32::from(EXIT_INTERRUPTED))
                }
            }
        }
    });
    Ok(interrupt)
}

/// A sink that appends every sample batch to `timeseries.csv` at `path`, the
/// arm named by its transport; `None` (with a warning) if it cannot be created.
fn timeseries_sink(path: &Path, plan: &Plan) -> Option<SampleSink> {
    let mut file = match TimeseriesFile::create(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("harness: {} will be missing: {e}", path.display());
            return None;
        }
    };
    let arms = plan.arm_dirs();
    Some(Box::new(move |batch: &SampleBatch<'_>| {
        let rows: String = batch
            .samples
            .iter()
            .map(|s| {
                let arm = s.arm.and_then(|i| arms.get(i)).map_or("-", String::as_str);
                timeseries::row(&s.sample, arm, batch.load.in_flight, batch.ok_rate)
            })
            .collect();
        file.append(&rows);
    }))
}

/// Says on stderr why a run was aborted, whatever `--quiet` or `--json` hide
/// on stdout: an error always reaches the terminal.
fn report_abort(runs: &[crate::result::RunResult]) {
    if let Some(run) = runs.iter().find(|r| r.status == crate::result::RunStatus::Aborted) {
        eprintln!("harness: run aborted: {}", run.status_reason.as_deref().unwrap_or("reason unknown"));
    }
}

/// Logging on stderr and a multi-threaded runtime: for a tier role, tokio's
/// default (one worker per core, as a service ships); for the harness itself,
/// `workers` (`--load-threads`). On a shared machine every thread more is a
/// wake-up more per request and time taken from the tiers: with 2 cores at
/// 5,000 req/s, one worker instead of one per core cut the harness's CPU per
/// request by about a tenth and the tiers' by more (bench/README.md).
fn runtime(name: &str, workers: Option<u32>) -> Option<tokio::runtime::Runtime> {
    service::init_logging();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = workers {
        builder.worker_threads(usize::try_from(n).unwrap_or(1).max(1));
    }
    match builder.enable_all().build() {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("{name}: starting the async runtime: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_harness_runtime_has_the_workers_asked_for_and_a_tier_the_default() {
        for n in [1, 3] {
            let rt = super::runtime("harness", Some(n)).unwrap();
            assert_eq!(rt.metrics().num_workers(), n as usize);
        }
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(super::runtime("caller", None).unwrap().metrics().num_workers(), cores);
    }
}
