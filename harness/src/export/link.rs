//! The "Link" section of `report.md` and `comparison.md`: the link a run
//! had (`--link`), how it was made (the user-space emulator, and whether
//! the kernel's netem could have made it), and the settings that govern
//! traffic over it. Only bytes: everything comes from `run.json`.

use std::fmt::Write;

use crate::result::RunResult;

/// The section, or nothing for a run without a link. `arms` pairs each
/// arm's name with its run; the link and the settings are the run's, the
/// connection counts each arm's own.
pub fn section(arms: &[(&str, &RunResult)]) -> String {
    let Some((_, first)) = arms.first() else { return String::new() };
    let Some(link) = &first.link else { return String::new() };
    let mut out = String::new();
    let hops = match link.hop.as_str() {
        "both" => "both hops (harness → caller and caller → downstream), each a link of its own",
        "front" => "the front hop (harness → caller)",
        _ => "the internal hop (caller → downstream)",
    };
    let _ = writeln!(out, "\n## Link\n");
    let _ = writeln!(out, "- **{}** on {hops}.", link.description);
    let netem = match link.netem.available {
        Some(false) => format!("the kernel has no netem ({})", link.netem.how),
        Some(true) => format!("the kernel has netem ({}), but this build always uses the emulator", link.netem.how),
        None => format!("netem availability {}", link.netem.how),
    };
    let _ = writeln!(out, "- Made by a **user-space emulator**, not the kernel: {netem}.");
    let _ = writeln!(out, "- Emulator: {}.", link.emulator);
    let bdp = link.bdp_bytes.map_or("none (no rate)".to_owned(), |b| format!("{b} B"));
    let _ = writeln!(
        out,
        "- Emulator buffers: at most {} B per connection and direction; reads of at most {} B; bandwidth-delay product {bdp}. Its own CPU and memory are recorded under `link` / `link_front`, never in a tier's figures.",
        link.queue_limit_bytes, link.chunk_bytes
    );
    let windows = |v: &serde_json::Value| {
        format!(
            "stream window {} B, connection window {} B, adaptive window {}",
            v["initial_stream_window_bytes"], v["initial_connection_window_bytes"], v["adaptive_window"]
        )
    };
    let _ = writeln!(
        out,
        "- HTTP/2 flow control, set explicitly: clients {}; servers {} ({}).",
        windows(&link.http2.client),
        windows(&link.http2.server),
        link.http2.applies_to
    );
    let text = |v: &Option<String>| v.clone().unwrap_or_else(|| "not readable".into());
    let _ = writeln!(
        out,
        "- Kernel TCP: net.ipv4.tcp_rmem `{}`, tcp_wmem `{}` (min default max, bytes), congestion control `{}`.",
        text(&link.tcp.rmem),
        text(&link.tcp.wmem),
        text(&link.tcp.congestion_control)
    );
    for (name, run) in arms {
        let opened = |f: fn(&crate::result::Hops) -> &crate::result::HopBytes| {
            let counts: Vec<String> = run
                .rounds
                .iter()
                .map(|r| f(&r.bytes).connections_opened.map_or("n/a".to_owned(), |c| c.to_string()))
                .collect();
            counts.join(", ")
        };
        let _ = writeln!(
            out,
            "- {name}: connections opened per round, internal hop {}; front hop {}.",
            opened(|h| &h.internal),
            opened(|h| &h.front)
        );
    }
    out
}
