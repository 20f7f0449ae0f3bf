//! The sampling task: every `interval`, one CPU/RSS sample of each process
//! and one reading of the generator's live counters, kept for `run.json` and
//! handed as it comes to an optional sink (the app appends it to
//! `timeseries.csv`, so a crash loses at most one interval). This module does
//! not know what the sink writes.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
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
}

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
        let sampler = Sampler::new(watched);
        let remote = RemoteSampler::new(remote).ok();
        let task = tokio::spawn(sample_loop((sampler, remote), interval, origin, live, stop.clone(), sink));
        Sampling { stop, task }
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
