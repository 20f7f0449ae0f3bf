//! CPU and RSS over time of tiers that are not child processes of the
//! harness (already running elsewhere, or in containers), read from their
//! own admin endpoint (`/stats`) at every sampling interval.
//!
//! CPU % is the CPU seconds the tier reports used since its previous reading
//! over the time its own clock (`uptime_seconds`) says passed, so the delay of
//! the read itself (a CPU-limited container answers late) does not move the
//! figure. A read that fails yields `None` fields, never zeros.

use std::time::Instant;

use telemetry::StatsSnapshot;

use super::sampler::{ArmSample, CpuWindow};
use super::tier_stats::TierStatsReader;
use crate::result::{ResourceSample, TierName};

/// One tier to sample through its admin endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteWatched {
    pub arm: usize,
    pub tier: TierName,
    pub admin_url: String,
}

/// Samples a fixed set of tiers through their `/stats`.
pub struct RemoteSampler {
    watched: Vec<RemoteWatched>,
    reader: TierStatsReader,
    /// Each tier's last readings: its uptime and CPU seconds.
    windows: Vec<CpuWindow>,
    /// The shortest window a CPU % is measured over.
    min_window_seconds: f64,
}

impl RemoteSampler {
    pub fn new(watched: Vec<RemoteWatched>) -> reqwest::Result<Self> {
        let windows = vec![CpuWindow::default(); watched.len()];
        Ok(RemoteSampler { watched, reader: TierStatsReader::new()?, windows, min_window_seconds: 0.0 })
    }

    /// Measures CPU % over windows of at least `d` (see [`CpuWindow`]).
    pub fn cpu_window_at_least(mut self, d: std::time::Duration) -> Self {
        self.min_window_seconds = d.as_secs_f64();
        self
    }

    pub fn is_empty(&self) -> bool {
        self.watched.is_empty()
    }

    /// One sample per tier, stamped `t_seconds` after `origin` when the reads
    /// began; the tiers are read concurrently.
    pub async fn sample(&mut self, origin: Instant) -> Vec<ArmSample> {
        let now = Instant::now();
        let t_seconds = if now >= origin {
            now.duration_since(origin).as_secs_f64()
        } else {
            -origin.duration_since(now).as_secs_f64()
        };
        let reads = self.watched.iter().map(|w| self.reader.stats_at(Some(&w.admin_url)));
        let stats: Vec<Option<StatsSnapshot>> = futures::future::join_all(reads).await;
        let mut out = Vec::with_capacity(stats.len());
        for (i, s) in stats.into_iter().enumerate() {
            let reading = s.as_ref().and_then(|s| Some((s.uptime_seconds, s.process.cpu_seconds?)));
            let cpu = self.windows[i].next(reading, self.min_window_seconds);
            let sample = ResourceSample {
                t_seconds,
                tier: self.watched[i].tier,
                cpu_percent: cpu.map(|(p, _)| p),
                cpu_window_seconds: cpu.map(|(_, w)| w),
                rss_bytes: s.as_ref().and_then(|s| s.process.rss_bytes),
                cpu_seconds: reading.map(|(_, c)| c),
            };
            out.push(ArmSample { arm: Some(self.watched[i].arm), sample });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unreachable_admin_gives_empty_samples() {
        // A port nothing listens on: bind one, read its number, close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let w = RemoteWatched { arm: 0, tier: TierName::Caller, admin_url: format!("http://127.0.0.1:{port}") };
        let mut s = RemoteSampler::new(vec![w]).unwrap();
        let got = s.sample(Instant::now()).await.remove(0);
        assert_eq!(got.arm, Some(0));
        assert_eq!((got.sample.cpu_percent, got.sample.rss_bytes, got.sample.cpu_seconds), (None, None, None));
    }
}
