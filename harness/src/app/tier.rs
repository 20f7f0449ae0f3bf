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
    /// Serve the bytes relayed as `/stats` on a loopback listener of its own
    /// (`stats` in the ready line): the pass-through relay between two
    /// foreign tiers.
    #[arg(long)]
    stats: bool,
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
    let counters = std::sync::Arc::new(linkemu::RelayCounters::default());
    let stats = match a.stats.then(|| serve_counters(counters.clone())).transpose() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{role}: binding the stats listener: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let ready = match relay.local_addr() {
        Ok(addr) => service::ReadyLine::new("link", [("link", addr)].into_iter().chain(stats.map(|s| ("stats", s)))),
        Err(e) => {
            eprintln!("{role}: reading the listener's address: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    if let Err(e) = service::print_ready(&ready) {
        eprintln!("{role}: printing the ready line: {e}");
        return ExitCode::from(EXIT_FAILED);
    }
    relay.run_counted(&counters);
    ExitCode::SUCCESS
}

/// Answers every connection on a loopback listener of its own with the
/// relay's counters as a `/stats` body (one listener, `relay`: bytes towards
/// the tier behind it are its bytes in), then closes it. Its own traffic is
/// not relayed, so never counted.
fn serve_counters(counters: std::sync::Arc<linkemu::RelayCounters>) -> std::io::Result<SocketAddr> {
    use std::io::{Read, Write};
    use std::sync::atomic::Ordering::Relaxed;
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
            let _ = conn.read(&mut buf);
            let relay = telemetry::CountersSnapshot {
                bytes_in: Some(counters.bytes_up.load(Relaxed)),
                bytes_out: Some(counters.bytes_down.load(Relaxed)),
                connections: counters.connections.load(Relaxed),
                ..telemetry::CountersSnapshot::default()
            };
            let mut stats = telemetry::Registry::new("relay").snapshot();
            stats.listeners.insert("relay".into(), relay);
            let body = serde_json::to_vec(&stats).unwrap_or_default();
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes()).and_then(|()| conn.write_all(&body));
        }
    });
    Ok(addr)
}
