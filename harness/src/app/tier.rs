//! `harness __tier downstream|caller|link [flags]`: a tier (or the link
//! emulator) in this process, so `cargo run -p harness` needs nothing else
//! built.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use super::exit::{EXIT_FAILED, EXIT_USAGE};
use super::runtime;
use crate::tiers::TIER_ROLE_ARG;

pub fn tier_main(args: &[OsString]) -> ExitCode {
    let Some(role) = args.first().and_then(|a| a.to_str()) else {
        eprintln!("harness {TIER_ROLE_ARG}: name a tier (downstream, caller or link)");
        return ExitCode::from(EXIT_USAGE);
    };
    let argv = std::iter::once(OsString::from(role)).chain(args[1..].iter().cloned());
    if role == "link" || role == "link_front" {
        // Plain OS threads: the emulator's timing must not ride on tokio's
        // 1 ms timer wheel.
        return link_main(role, LinkArgs::parse_from(argv));
    }
    let Some(runtime) = runtime(role, None) else { return ExitCode::from(EXIT_FAILED) };
    let result = match role {
        "downstream" => runtime.block_on(downstream::cli::run(downstream::cli::Args::parse_from(argv))),
        "caller" => runtime.block_on(caller::cli::run(caller::cli::Args::parse_from(argv))),
        other => {
            eprintln!("harness {TIER_ROLE_ARG}: unknown tier {other:?} (downstream, caller or link)");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    service::exit_code(role, result)
}

/// The link emulator's flags (set by `tiers::link`).
#[derive(Debug, Parser)]
struct LinkArgs {
    /// Loopback address to listen on.
    #[arg(long)]
    listen: SocketAddr,
    /// The tier behind the link.
    #[arg(long)]
    upstream: SocketAddr,
    /// Round-trip time, microseconds.
    #[arg(long)]
    rtt_us: u64,
    /// Rate per direction, bits per second (left out: not limited).
    #[arg(long)]
    rate_bits: Option<u64>,
}

/// Binds, prints the ready line, relays until SIGTERM ends the process
/// (its default action: the relay holds nothing that needs a drain).
fn link_main(role: &str, a: LinkArgs) -> ExitCode {
    let settings = linkemu::LinkSettings { rtt: Duration::from_micros(a.rtt_us), rate_bits_per_second: a.rate_bits };
    let relay = match linkemu::Relay::bind(a.listen, a.upstream, settings) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{role}: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let ready = match relay.local_addr() {
        Ok(addr) => service::ReadyLine::new("link", [("link", addr)]),
        Err(e) => {
            eprintln!("{role}: reading the listener's address: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    if let Err(e) = service::print_ready(&ready) {
        eprintln!("{role}: printing the ready line: {e}");
        return ExitCode::from(EXIT_FAILED);
    }
    relay.run();
    ExitCode::SUCCESS
}
