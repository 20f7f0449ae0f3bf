//! The sampling task: every `interval`, one CPU/RSS sample of each process
//! and one reading of the generator's live counters, kept for `run.json` and
//! handed as it comes to an optional sink (the app appends it to
//! `timeseries.csv`, so a crash loses at most one interval). This module does
//! not know what the sink writes.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::load::Live;
use crate::measure::remote::{RemoteSampler, RemoteWatched};
use crate::measure::sampler::{ArmSample, Sampler, Watched};
use crate::result::LoadSample;

/// One interval's readings, as handed to the sink.
#[derive(Debug)]
pub struct SampleBatch<'a> {
    pub samples: &'a [ArmSample],
    pub load: &'a LoadSample,
    /// OK responses per second since the previous batch.
    pub ok_rate: Option<f64>,
}

/// Where batches go as they are taken.
pub type SampleSink = Box<dyn FnMut(&SampleBatch<'_>) + Send>;

/// A running sampling task.
pub(super) struct Sampling {
    stop: CancellationToken,
    task: JoinHandle<(Vec<ArmSample>, Vec<LoadSample>)>,
    /// Sets of processes to sample in place of the ones of the same arm and
    /// tier, one set per restart, in order.
    rewatch: Rewatch,
}

/// New sets of what to sample, taken by the sampling task before its next sample.
#[derive(Clone, Default)]
struct Rewatch {
    /// Sets of processes, one set per restart, in order.
    local: Arc<Mutex<Vec<Vec<Watched>>>>,
    /// Arms whose tiers sampled through their admin endpoints changed, with
    /// the new set, in order.
    remote: Arc<Mutex<Vec<ArmRemotes>>>,
}

/// One arm's tiers read through their admin endpoints.
type ArmRemotes = (usize, Vec<RemoteWatched>);

impl Sampling {
    /// Samples `watched` processes on this machine and `remote` tiers through
    /// their admin endpoints.
    pub fn start(
        watched: &[Watched],
        remote: Vec<RemoteWatched>,
        interval: Duration,
        origin: Instant,
        live: Arc<Live>,
        sink: Option<SampleSink>,
    ) -> Sampling {
        let stop = CancellationToken::new();
        // The closing sample, taken when sampling stops, is usually a
        // fraction of an interval after the previous one: its CPU % is taken
        // over a window at least half an interval long.
        let sampler = Sampler::new(watched).cpu_window_at_least(interval / 2);
        let remote = RemoteSampler::new(remote).ok().map(|r| r.cpu_window_at_least(interval / 2));
        let rewatch = Rewatch::default();
        let task =
            tokio::spawn(sample_loop((sampler, remote), interval, origin, live, stop.clone(), sink, rewatch.clone()));
        Sampling { stop, task, rewatch }
    }

    /// From the next sample on, each arm's tier named in `watched` is
    /// sampled as the processes given for it there.
    pub fn rewatch(&self, watched: Vec<Watched>) {
        self.rewatch.local.lock().unwrap_or_else(|e| e.into_inner()).push(watched);
    }

    /// From the next sample on, arm `arm`'s tiers read through their admin
    /// endpoints are `watched` (replicas started or taken out, containers
    /// started afresh).
    pub fn rewatch_remote(&self, arm: usize, watched: Vec<RemoteWatched>) {
        self.rewatch.remote.lock().unwrap_or_else(|e| e.into_inner()).push((arm, watched));
    }

    /// Stops sampling and returns every sample taken.
    pub async fn finish(self) -> (Vec<ArmSample>, Vec<LoadSample>) {
        self.stop.cancel();
        self.task.await.unwrap_or_default()
    }
}

async fn sample_loop(
    (mut sampler, mut remote): (Sampler, Option<RemoteSampler>),
    interval: Duration,
    origin: Instant,
    live: Arc<Live>,
    stop: CancellationToken,
    mut sink: Option<SampleSink>,
    rewatch: Rewatch,
) -> (Vec<ArmSample>, Vec<LoadSample>) {
    let (mut samples, mut load) = (Vec::new(), Vec::<LoadSample>::new());
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        // The last reading is taken when sampling stops (after the drain), so
        // the series covers the whole run.
        let last = tokio::select! {
            _ = stop.cancelled() => true,
            _ = ticker.tick() => false,
        };
        for w in std::mem::take(&mut *rewatch.local.lock().unwrap_or_else(|e| e.into_inner())) {
            sampler.rewatch(&w);
        }
        for (arm, w) in std::mem::take(&mut *rewatch.remote.lock().unwrap_or_else(|e| e.into_inner())) {
            if let Some(remote) = remote.as_mut() {
                remote.rewatch(arm, w);
            }
        }
        let mut batch = sampler.sample(origin);
        if let Some(remote) = remote.as_mut().filter(|r| !r.is_empty()) {
            batch.extend(remote.sample(origin).await);
        }
        let point = LoadSample {
            t_seconds: batch.first().map_or(0.0, |s| s.sample.t_seconds),
            in_flight: live.in_flight.load(Relaxed) as u64,
            sent: live.sent.load(Relaxed),
            ok: live.ok.load(Relaxed),
            errors: live.errors.load(Relaxed),
            dropped: live.dropped.load(Relaxed),
            other_cores: sampler.other_cores(),
        };
        if let Some(sink) = sink.as_mut() {
            let ok_rate = load.last().map(|prev| point.ok_rate_since(prev));
            sink(&SampleBatch { samples: &batch, load: &point, ok_rate });
        }
        samples.extend(batch);
        load.push(point);
        if last {
            break;
        }
    }
    (samples, load)
}
