//! The sentences that say how the internal hop's bytes were carried beyond
//! the contract: TLS (what the downstream's handshakes negotiated, how many,
//! how many resumed) and compression. Shared by `report.md` and
//! `comparison.md`; nothing for a plaintext, uncompressed run.

use std::collections::BTreeSet;

use crate::config::{Compression, TlsMode};
use crate::result::RunResult;

/// `TLS (server-authenticated): TLSv1.3 TLS13_AES_256_GCM_SHA384 ALPN h2; 2
/// handshakes over the rounds (0 resumed, 0 failed)`, or `None` without TLS.
pub fn tls_text(run: &RunResult) -> Option<String> {
    let mode = match run.config.hop.tls {
        TlsMode::None => return None,
        TlsMode::Tls => "TLS (server certificate from the run's CA)",
        TlsMode::Mtls => "mutual TLS (server and client certificates from the run's CA)",
    };
    let tallies: Vec<_> = run.rounds.iter().filter_map(|r| r.bytes.internal.tls.as_ref()).collect();
    if tallies.is_empty() {
        return Some(format!("{mode}; negotiated parameters and handshakes not measured"));
    }
    let negotiated: BTreeSet<&str> = tallies.iter().flat_map(|t| t.negotiated.keys().map(String::as_str)).collect();
    let sum = |f: fn(&telemetry::TlsSnapshot) -> u64| tallies.iter().map(|t| f(t)).sum::<u64>();
    let (full, resumed, failed) =
        (sum(|t| t.handshakes_full), sum(|t| t.handshakes_resumed), sum(|t| t.handshakes_failed));
    let negotiated = if negotiated.is_empty() {
        "no handshake inside the rounds (connections made during warm-up)".to_owned()
    } else {
        negotiated.into_iter().collect::<Vec<_>>().join(", ")
    };
    Some(format!(
        "{mode}: {negotiated}; {} handshakes inside the rounds ({resumed} resumed, {failed} failed); wire bytes \
         include TLS records; certificates in `tls/`",
        full + resumed
    ))
}

/// `gzip (gRPC message compression / HTTP Content-Encoding, requests and
/// responses)`, or `None` without compression.
pub fn compression_text(compression: Compression) -> Option<String> {
    (compression != Compression::None).then(|| {
        format!(
            "{compression} (gRPC: grpc-encoding; REST: Content-Encoding; requests and responses); message bytes are \
             the uncompressed payload, wire bytes what was sent"
        )
    })
}
