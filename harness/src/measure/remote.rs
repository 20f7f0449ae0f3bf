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

use super::sampler::ArmSample;
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
    /// Each tier's previous reading: its uptime and CPU seconds.
    previous: Vec<Option<(f64, f64)>>,
}

impl RemoteSampler {
    pub fn new(watched: Vec<RemoteWatched>) -> reqwest::Result<Self> {
        let previous = vec![None; watched.len()];
        Ok(RemoteSampler { watched, reader: TierStatsReader::new()?, previous })
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
            let previous = std::mem::replace(&mut self.previous[i], reading);
            let sample = ResourceSample {
                t_seconds,
                tier: self.watched[i].tier,
                cpu_percent: cpu_percent(previous, reading),
                rss_bytes: s.as_ref().and_then(|s| s.process.rss_bytes),
                cpu_seconds: reading.map(|(_, c)| c),
            };
            out.push(ArmSample { arm: Some(self.watched[i].arm), sample });
        }
        out
    }
}

/// % of one core between two (uptime, CPU seconds) readings of one process;
/// `None` without both, or if the process restarted in between.
pub fn cpu_percent(previous: Option<(f64, f64)>, now: Option<(f64, f64)>) -> Option<f64> {
    let ((t0, c0), (t1, c1)) = (previous?, now?);
    (t1 > t0 && c1 >= c0).then(|| (c1 - c0) / (t1 - t0) * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_percent_is_over_the_tiers_own_clock() {
        assert_eq!(cpu_percent(Some((10.0, 1.0)), Some((12.0, 1.5))), Some(25.0));
        assert_eq!(cpu_percent(None, Some((12.0, 1.5))), None);
        assert_eq!(cpu_percent(Some((10.0, 1.0)), None), None);
        // A restarted tier (its clock went back) gives no figure, not a negative one.
        assert_eq!(cpu_percent(Some((10.0, 1.0)), Some((1.0, 0.1))), None);
    }

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
