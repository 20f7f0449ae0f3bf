//! The link emulator as a process of its own (`harness __tier link`), placed
//! in front of a tier: started after the tier behind it, stopped before it.
//! It is not a measured tier: the sampler records its CPU and memory under
//! `link` / `link_front`, never mixed into a tier's figures.

use std::net::{IpAddr, SocketAddr};

use crate::config::Link;
use crate::result::TierName;
use crate::tiers::process::{Tier, TierError, spawn};

/// How the emulator works, for `run.json` and the reports.
pub const DESCRIPTION: &str = "user-space link emulator (crates/linkemu): a loopback TCP relay process; \
each direction is one serialiser shared by all connections (departure = max(arrival, previous departure) + \
bytes × 8 / rate), each chunk delivered at departure + RTT/2 by an OS thread sleeping on a high-resolution \
timer (timer slack 1 µs); per connection and direction at most max(64 KiB, bandwidth-delay product) is \
buffered, so TCP backpressure reaches the sender. Not emulated: loss, reordering, jitter, the TCP handshake";

/// Starts an emulator for `link` in front of `upstream`, listening on loopback.
pub async fn start(name: TierName, link: &Link, upstream: SocketAddr) -> Result<(Tier, serde_json::Value), TierError> {
    let mut args = vec![
        "--listen".to_owned(),
        "127.0.0.1:0".to_owned(),
        "--upstream".to_owned(),
        upstream.to_string(),
        "--rtt-us".to_owned(),
        link.rtt.as_micros().to_string(),
    ];
    if let Some(rate) = link.rate_bits_per_second {
        args.extend(["--rate-bits".to_owned(), rate.to_string()]);
    }
    let tier = spawn(name, args).await?;
    let listen = tier.ready.listeners.get("link").copied();
    let s = link.settings();
    let settings = serde_json::json!({
        "emulator": DESCRIPTION,
        "hop": if name == TierName::LinkFront { "front" } else { "internal" },
        "listen": listen.map(|a| a.to_string()),
        "upstream": upstream.to_string(),
        "rtt_us": link.rtt.as_micros() as u64,
        "rate_bits_per_second": link.rate_bits_per_second,
        "queue_limit_bytes": s.queue_limit_bytes(),
        "chunk_bytes": s.chunk_bytes(),
    });
    Ok((tier, settings))
}

/// The pass-through relay between two foreign tiers: the emulator with no
/// delay and no rate, counting the internal hop's bytes and serving them on
/// its `stats` listener. Its CPU is its own (`link`), never a tier's.
pub async fn start_counting(bind: IpAddr, upstream: SocketAddr) -> Result<(Tier, serde_json::Value), TierError> {
    let (to, listen) = (upstream.to_string(), SocketAddr::new(bind, 0).to_string());
    let args = ["--listen", listen.as_str(), "--upstream", to.as_str(), "--rtt-us", "0", "--stats"];
    let tier = spawn(TierName::Link, args.iter().map(|a| (*a).to_owned()).collect()).await?;
    let settings = serde_json::json!({
        "emulator": "pass-through relay (crates/linkemu, no delay, no rate): counts the internal hop's bytes between two foreign tiers",
        "hop": "internal",
        "listen": tier.ready.listeners.get("link").map(ToString::to_string),
        "upstream": upstream.to_string(),
        // Where the harness reads the relay's counters.
        "stats": tier.ready.listeners.get("stats").map(ToString::to_string),
        "rtt_us": 0,
        "rate_bits_per_second": null,
    });
    Ok((tier, settings))
}
