//! What a listener's TLS handshakes negotiated ([`TlsTally`]), counted per
//! listener as they finish and served in `/stats` as a [`TlsSnapshot`]. The
//! TLS configuration itself belongs to the `service` crate.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use rustls::ServerConnection;
use serde::{Deserialize, Serialize};

/// What one listener's TLS handshakes negotiated, counted as they finish.
#[derive(Debug, Default)]
pub struct TlsTally {
    full: AtomicU64,
    resumed: AtomicU64,
    failed: AtomicU64,
    /// `version cipher-suite ALPN` → handshakes.
    negotiated: Mutex<BTreeMap<String, u64>>,
}

impl TlsTally {
    /// Counts a finished handshake and what it negotiated.
    pub fn handshake(&self, conn: &ServerConnection) {
        match conn.handshake_kind() {
            Some(rustls::HandshakeKind::Resumed) => self.resumed.fetch_add(1, Relaxed),
            _ => self.full.fetch_add(1, Relaxed),
        };
        let version = conn.protocol_version().map_or("unknown version".into(), |v| format!("{v:?}"));
        let suite = conn.negotiated_cipher_suite().map_or("unknown suite".into(), |s| format!("{:?}", s.suite()));
        let alpn = conn.alpn_protocol().map_or("no ALPN".into(), |p| format!("ALPN {}", String::from_utf8_lossy(p)));
        let key = format!("{} {suite} {alpn}", version.replace('_', "."));
        *self.negotiated.lock().unwrap_or_else(|e| e.into_inner()).entry(key).or_default() += 1;
    }

    /// Counts a handshake that did not complete (wrong protocol, no client
    /// certificate, timeout).
    pub fn failed(&self) {
        self.failed.fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self) -> TlsSnapshot {
        TlsSnapshot {
            handshakes_full: self.full.load(Relaxed),
            handshakes_resumed: self.resumed.load(Relaxed),
            handshakes_failed: self.failed.load(Relaxed),
            negotiated: self.negotiated.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }
}

/// A copy of a [`TlsTally`], as served in `/stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsSnapshot {
    /// Handshakes with a full key exchange.
    pub handshakes_full: u64,
    /// Handshakes that resumed an earlier session (a ticket or the session cache).
    pub handshakes_resumed: u64,
    /// Handshakes that did not complete.
    pub handshakes_failed: u64,
    /// `TLSv1.3 TLS13_AES_256_GCM_SHA384 ALPN h2` → handshakes that negotiated it.
    pub negotiated: BTreeMap<String, u64>,
}

impl TlsSnapshot {
    /// `self - earlier`, field by field.
    pub fn since(&self, earlier: &TlsSnapshot) -> TlsSnapshot {
        TlsSnapshot {
            handshakes_full: self.handshakes_full.saturating_sub(earlier.handshakes_full),
            handshakes_resumed: self.handshakes_resumed.saturating_sub(earlier.handshakes_resumed),
            handshakes_failed: self.handshakes_failed.saturating_sub(earlier.handshakes_failed),
            negotiated: self
                .negotiated
                .iter()
                .map(|(k, v)| (k.clone(), v.saturating_sub(earlier.negotiated.get(k).copied().unwrap_or(0))))
                .filter(|(_, v)| *v > 0)
                .collect(),
        }
    }

    /// Completed handshakes, full and resumed.
    pub fn handshakes(&self) -> u64 {
        self.handshakes_full + self.handshakes_resumed
    }
}

impl std::ops::Add for &TlsSnapshot {
    type Output = TlsSnapshot;

    /// Two listeners' tallies as one, field by field.
    fn add(self, other: &TlsSnapshot) -> TlsSnapshot {
        let mut negotiated = self.negotiated.clone();
        for (k, v) in &other.negotiated {
            *negotiated.entry(k.clone()).or_default() += v;
        }
        TlsSnapshot {
            handshakes_full: self.handshakes_full + other.handshakes_full,
            handshakes_resumed: self.handshakes_resumed + other.handshakes_resumed,
            handshakes_failed: self.handshakes_failed + other.handshakes_failed,
            negotiated,
        }
    }
}
