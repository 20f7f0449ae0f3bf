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

    /// From the next sample on, arm `arm`'s tiers are `watched` (each
    /// tier's together); a tier read before keeps its last reading.
    pub fn rewatch(&mut self, arm: usize, watched: Vec<RemoteWatched>) {
        let before: Vec<(RemoteWatched, CpuWindow)> = self.watched.drain(..).zip(self.windows.drain(..)).collect();
        let window = |w: &RemoteWatched| before.iter().find(|(b, _)| b == w).map(|(_, c)| *c).unwrap_or_default();
        let kept = before.iter().filter(|(w, _)| w.arm != arm).map(|(w, _)| w.clone());
        let mut all: Vec<RemoteWatched> = kept.chain(watched).collect();
        all.sort_by_key(|w| (w.arm, w.tier));
        self.windows = all.iter().map(window).collect();
        self.watched = all;
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
        let mut out: Vec<ArmSample> = Vec::with_capacity(stats.len());
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
            let arm = Some(self.watched[i].arm);
            // The downstream's replicas (watched one after another) are one
            // tier: their figures summed, unmeasured if any one is.
            match out.last_mut().filter(|last| last.arm == arm && last.sample.tier == sample.tier) {
                Some(last) => add_to(&mut last.sample, &sample),
                None => out.push(ArmSample { arm, sample }),
            }
        }
        out
    }
}

/// Adds `b`'s CPU and memory to `a`'s: two processes of one tier. The CPU
/// window is the longer of the two.
fn add_to(a: &mut ResourceSample, b: &ResourceSample) {
    let sum = |x: Option<f64>, y: Option<f64>| Some(x? + y?);
    a.cpu_percent = sum(a.cpu_percent, b.cpu_percent);
    a.cpu_seconds = sum(a.cpu_seconds, b.cpu_seconds);
    a.cpu_window_seconds = a.cpu_window_seconds.zip(b.cpu_window_seconds).map(|(x, y)| x.max(y));
    a.rss_bytes = a.rss_bytes.zip(b.rss_bytes).map(|(x, y)| x + y);
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

    #[tokio::test]
    async fn an_arms_replicas_are_one_tier_their_figures_summed() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let w = |arm, tier| RemoteWatched { arm, tier, admin_url: format!("http://127.0.0.1:{port}") };
        let watched = vec![w(0, TierName::Downstream), w(0, TierName::Downstream), w(0, TierName::Caller)];
        let mut s = RemoteSampler::new([watched, vec![w(1, TierName::Downstream)]].concat()).unwrap();
        let got: Vec<_> = s.sample(Instant::now()).await.into_iter().map(|a| (a.arm, a.sample.tier)).collect();
        assert_eq!(
            got,
            [(Some(0), TierName::Downstream), (Some(0), TierName::Caller), (Some(1), TierName::Downstream)]
        );

        let sample = |cpu: Option<f64>, rss: u64, window: f64| ResourceSample {
            t_seconds: 1.0,
            tier: TierName::Downstream,
            cpu_percent: cpu,
            cpu_window_seconds: Some(window),
            rss_bytes: Some(rss),
            cpu_seconds: cpu.map(|c| c / 100.0),
        };
        let mut a = sample(Some(40.0), 10, 0.5);
        add_to(&mut a, &sample(Some(20.0), 5, 0.6));
        assert_eq!((a.cpu_percent, a.rss_bytes, a.cpu_window_seconds), (Some(60.0), Some(15), Some(0.6)));
        // One replica unread: the tier's CPU is not measured, never a part of it.
        add_to(&mut a, &sample(None, 5, 0.5));
        assert_eq!((a.cpu_percent, a.cpu_seconds, a.rss_bytes), (None, None, Some(20)));
    }
}
