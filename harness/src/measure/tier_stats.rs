//! The tiers' own counters, read from their admin listeners (`/stats`) at the
//! boundaries of every measured round: CPU seconds, wire and message bytes per
//! listener, connections. The differences between two reads are what a round
//! used ([`Deltas`]); a read that failed leaves its figures unmeasured.

use std::time::{Duration, Instant};

use telemetry::{CountersSnapshot, ProcessSnapshot, ProcessStats, StatsSnapshot};

use crate::result::TierName;
use crate::tiers::{Tier, Topology};

/// The counters and process figures of one arm's tiers at one instant.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub at: Instant,
    pub downstream: Option<StatsSnapshot>,
    pub caller: Option<StatsSnapshot>,
    pub harness: ProcessSnapshot,
}

/// Reads the tiers' `/stats` and the harness's own process figures.
pub struct TierStatsReader {
    http: reqwest::Client,
    harness: ProcessStats,
}

impl TierStatsReader {
    pub fn new() -> reqwest::Result<Self> {
        Ok(TierStatsReader {
            // A fresh connection per read: an idle keep-alive connection may
            // have been closed by the tier's header-read timeout between two
            // snapshots.
            http: reqwest::Client::builder()
                .no_proxy()
                .pool_max_idle_per_host(0)
                .timeout(Duration::from_secs(5))
                .tls_backend_preconfigured(caller::hop::plaintext_only())
                .build()?,
            harness: ProcessStats::current(),
        })
    }

    /// A tier's `/stats`, tried twice: a snapshot that cannot be read leaves
    /// its figures unmeasured for the whole round.
    pub async fn stats(&self, tier: Option<&Tier>) -> Option<StatsSnapshot> {
        self.stats_at(Some(&tier?.admin_url())).await
    }

    /// The `/stats` of the admin endpoint at `admin_url` (`http://host:port`).
    pub async fn stats_at(&self, admin_url: Option<&str>) -> Option<StatsSnapshot> {
        let url = format!("{}/stats", admin_url?);
        for _ in 0..2 {
            if let Ok(resp) = self.http.get(&url).send().await
                && let Ok(stats) = resp.json().await
            {
                return Some(stats);
            }
        }
        None
    }

    /// [`TierStatsReader::snapshot`], or once `cut` a snapshot whose tier
    /// figures are unmeasured (a stopped tier would hold the read for seconds).
    pub async fn snapshot_until(&self, topology: &Topology, cut: &tokio_util::sync::CancellationToken) -> Snapshot {
        let at = Instant::now();
        tokio::select! {
            snapshot = self.snapshot(topology) => snapshot,
            _ = cut.cancelled() => Snapshot { at, downstream: None, caller: None, harness: self.harness.snapshot() },
        }
    }

    pub async fn snapshot(&self, topology: &Topology) -> Snapshot {
        let at = Instant::now();
        let (d, c) = (topology.admin_url(TierName::Downstream), topology.admin_url(TierName::Caller));
        let (downstream, caller) = tokio::join!(self.stats_at(d.as_deref()), self.stats_at(c.as_deref()));
        Snapshot { at, downstream, caller, harness: self.harness.snapshot() }
    }
}

/// What the counters moved by between two snapshots. `None` wherever either
/// read is missing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Deltas {
    pub caller_cpu_seconds: Option<f64>,
    pub downstream_cpu_seconds: Option<f64>,
    pub harness_cpu_seconds: Option<f64>,
    /// The caller's front listener.
    pub front: Option<CountersSnapshot>,
    /// The downstream's listener for the transport.
    pub internal: Option<CountersSnapshot>,
}

impl Deltas {
    /// `end - start`, the internal hop read from the downstream's
    /// `internal_listener` (`grpc` or `rest`).
    pub fn between(start: &Snapshot, end: &Snapshot, internal_listener: &str) -> Deltas {
        let cpu = |a: Option<&StatsSnapshot>, b: Option<&StatsSnapshot>| {
            Some(b?.process.cpu_seconds? - a?.process.cpu_seconds?)
        };
        let listener = |a: Option<&StatsSnapshot>, b: Option<&StatsSnapshot>, name: &str| {
            Some(b?.listeners.get(name)?.since(a?.listeners.get(name)?))
        };
        let (s, e) = (start, end);
        Deltas {
            caller_cpu_seconds: cpu(s.caller.as_ref(), e.caller.as_ref()),
            downstream_cpu_seconds: cpu(s.downstream.as_ref(), e.downstream.as_ref()),
            harness_cpu_seconds: e.harness.cpu_seconds.zip(s.harness.cpu_seconds).map(|(b, a)| b - a),
            front: listener(s.caller.as_ref(), e.caller.as_ref(), "front"),
            internal: listener(s.downstream.as_ref(), e.downstream.as_ref(), internal_listener),
        }
    }
}
