//! `harness __tier downstream|caller [flags]`: a tier in this process, so
//! `cargo run -p harness` needs nothing else built.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

use super::exit::{EXIT_FAILED, EXIT_USAGE};
use super::runtime;
use crate::tiers::TIER_ROLE_ARG;

pub fn tier_main(args: &[OsString]) -> ExitCode {
    let Some(role) = args.first().and_then(|a| a.to_str()) else {
        eprintln!("harness {TIER_ROLE_ARG}: name a tier (downstream or caller)");
        return ExitCode::from(EXIT_USAGE);
    };
    let Some(runtime) = runtime(role) else { return ExitCode::from(EXIT_FAILED) };
    let argv = std::iter::once(OsString::from(role)).chain(args[1..].iter().cloned());
    let result = match role {
        "downstream" => runtime.block_on(downstream::cli::run(downstream::cli::Args::parse_from(argv))),
        "caller" => runtime.block_on(caller::cli::run(caller::cli::Args::parse_from(argv))),
        other => {
            eprintln!("harness {TIER_ROLE_ARG}: unknown tier {other:?} (downstream or caller)");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    telemetry::exit_code(role, result)
}
