//! What a run with `--link` records about the link and the settings that
//! govern traffic over it: whether the kernel could have made the link
//! (netem, checked in a throwaway network namespace when root), the
//! emulator's queue and chunk sizes, the HTTP/2 windows the clients and
//! servers set, and the kernel's TCP buffer and congestion-control settings.

use std::process::{Command, Stdio};

use crate::config::Link;
use crate::result::{Http2Windows, LinkReport, NetemCheck, TcpSettings};

/// Everything `run.json`'s `link` section says, probed now.
pub fn probe(link: &Link) -> LinkReport {
    let s = link.settings();
    LinkReport {
        description: link.describe(),
        hop: link.hop.as_str().to_owned(),
        rtt_ms: link.rtt.as_secs_f64() * 1e3,
        rate_bits_per_second: link.rate_bits_per_second,
        emulator: crate::tiers::link::DESCRIPTION.to_owned(),
        queue_limit_bytes: s.queue_limit_bytes() as u64,
        chunk_bytes: s.chunk_bytes() as u64,
        bdp_bytes: s.bdp_bytes(),
        netem: netem_check(),
        http2: Http2Windows {
            client: service::h2::windows_json(true),
            server: service::h2::windows_json(false),
            applies_to: "gRPC (tonic channel → hyper server) and REST over HTTP/2 (--rest-http2: reqwest → hyper \
                         server); REST over HTTP/1.1 has no flow control above TCP"
                .to_owned(),
        },
        tcp: TcpSettings {
            rmem: sysctl("net/ipv4/tcp_rmem"),
            wmem: sysctl("net/ipv4/tcp_wmem"),
            congestion_control: sysctl("net/ipv4/tcp_congestion_control"),
        },
    }
}

/// A value under /proc/sys, whitespace collapsed; `None` if unreadable.
fn sysctl(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/sys/{path}")).ok()?;
    Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Whether the kernel has netem: when root, by adding a netem qdisc to the
/// loopback of a network namespace made for it and deleted at once;
/// otherwise not checked.
fn netem_check() -> NetemCheck {
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the effective user.
    if !std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) {
        return NetemCheck { available: None, how: "not checked (not root: no network namespace to try it in)".into() };
    }
    let ns = format!("grpcvsrest-netem-{}", std::process::id());
    let run = |args: &[&str]| {
        Command::new(args[0])
            .args(&args[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
    };
    match run(&["ip", "netns", "add", &ns]) {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            let why = String::from_utf8_lossy(&o.stderr).trim().to_owned();
            return NetemCheck { available: None, how: format!("not checked (`ip netns add` failed: {why})") };
        }
        Err(e) => return NetemCheck { available: None, how: format!("not checked (running `ip`: {e})") },
    }
    let tried = run(&["ip", "netns", "exec", &ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]);
    // Removed on every path.
    let _ = run(&["ip", "netns", "del", &ns]);
    match tried {
        Ok(o) if o.status.success() => NetemCheck {
            available: Some(true),
            how: "`tc qdisc add dev lo root netem delay 1ms` succeeded in a throwaway network namespace".into(),
        },
        Ok(o) => NetemCheck {
            available: Some(false),
            how: format!(
                "`tc qdisc add dev lo root netem delay 1ms` in a throwaway network namespace failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
        },
        Err(e) => NetemCheck { available: None, how: format!("not checked (running `tc`: {e})") },
    }
}
