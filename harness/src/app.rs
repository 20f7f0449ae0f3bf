//! The command line: flags, the hidden tier role, signals and exit codes.
//!
//! Exit codes: 0 a complete run; 1 a run that failed or was aborted by a tier
//! (whatever was measured is still written); 2 bad flags (nothing started,
//! nothing written); 130 interrupted by Ctrl-C (partial report written).

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, RunArgs};
use crate::result::RunStatus;
use crate::topology::TIER_ROLE_ARG;

/// Stands up caller and downstream as separate processes on loopback, drives
/// them at a fixed rate (open loop, latency from the intended send time), and
/// writes run.json, report.md and latency.hgrm to a new folder under --out.
#[derive(Debug, Parser)]
#[command(name = "harness", version)]
pub struct Cli {
    #[command(flatten)]
    pub run: RunArgs,
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
    let cfg = match Config::from_args(&cli.run) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("harness: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("harness: starting the async runtime: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    ExitCode::from(runtime.block_on(run_main(cfg)))
}

async fn run_main(cfg: Config) -> u8 {
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
    let result = match crate::run::run(&cfg, interrupt).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("harness: {e:#}");
            return EXIT_FAILED;
        }
    };
    let folder = match crate::export::write_run(&result, &cfg.out) {
        Ok(f) => Some(f),
        Err(e) => {
            eprintln!("harness: writing the run folder under {}: {e}", cfg.out.display());
            None
        }
    };
    if cfg.json {
        println!("{}", crate::export::summary::json(&result, folder.as_deref()));
    } else if !cfg.quiet {
        print!("{}", crate::export::summary::text(&result, folder.as_deref()));
    }
    match (result.status, folder) {
        (_, None) => EXIT_FAILED,
        (RunStatus::Complete, _) => EXIT_OK,
        (RunStatus::Interrupted, _) => EXIT_INTERRUPTED,
        (RunStatus::Aborted, _) => EXIT_FAILED,
    }
}

/// `harness __tier downstream|caller [flags]`: run a tier in this process.
fn tier_main(args: &[OsString]) -> ExitCode {
    let Some(role) = args.first().and_then(|a| a.to_str()) else {
        eprintln!("harness {TIER_ROLE_ARG}: name a tier (downstream or caller)");
        return ExitCode::from(EXIT_USAGE);
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{role}: starting the async runtime: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
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
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{role}: {e:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}
