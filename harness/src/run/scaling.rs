//! Replicas added and removed during a measured round (`--scale-at`): at
//! each step's time the arm's topology starts or takes out replicas and
//! reloads the balancer; a replica taken out has its last figures read
//! before it stops, so its calls still count; and the replicas added are
//! watched through their `/stats` until they answer their share of the
//! calls, or the round ends.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::arms::{Stop, wait_until};
use super::segments::Driver;
use crate::result::ScaleEvent;

/// How often the replicas' calls are read while a new one is watched.
const WATCH_EVERY: Duration = Duration::from_millis(250);
/// The shortest window a share is measured over.
const SHARE_WINDOW: Duration = Duration::from_secs(1);
/// The part of their fair share the added replicas must answer.
const SHARE_REACHED: f64 = 0.5;

/// The replicas added by one step, watched until they receive their share.
struct Watch {
    event: usize,
    added: Vec<u32>,
    since: Instant,
    /// (when, calls answered by each replica so far).
    history: Vec<(Instant, BTreeMap<u32, u64>)>,
}

impl Watch {
    /// The added replicas' share of the calls over the newest window of at
    /// least [`SHARE_WINDOW`], and the replicas the calls fell on.
    fn share(&self) -> Option<f64> {
        let (t1, last) = self.history.last()?;
        let (_, first) = self.history.iter().rev().find(|(t, _)| t1.saturating_duration_since(*t) >= SHARE_WINDOW)?;
        let moved = |i: &u32| last.get(i).copied().unwrap_or(0).saturating_sub(first.get(i).copied().unwrap_or(0));
        let all: u64 = last.keys().map(moved).sum();
        let new: u64 = self.added.iter().map(moved).sum();
        (all > 0).then(|| new as f64 / all as f64)
    }
}

impl Driver<'_> {
    /// Waits until `end`, making arm `a`'s scale steps at their times after
    /// `t0` and watching the replicas each one adds. Returns what happened,
    /// and why the wait stopped early if it did.
    pub(super) async fn wait_scaling(
        &mut self,
        a: usize,
        t0: Instant,
        end: Instant,
    ) -> (Vec<ScaleEvent>, Result<(), Stop>) {
        let steps = self.arms[a].config.replicas.scale_at.clone();
        let mut events: Vec<ScaleEvent> = Vec::new();
        let mut watch: Option<Watch> = None;
        for step in steps.iter().filter(|s| t0 + s.at < end) {
            if let Err(stop) = self.wait_watching(a, t0 + step.at, &mut watch, &mut events).await {
                return (events, Err(stop));
            }
            match self.scale(a, step.change, t0).await {
                Ok(event) => {
                    if !event.added.is_empty() {
                        let since = Instant::now();
                        watch =
                            Some(Watch { event: events.len(), added: event.added.clone(), since, history: Vec::new() });
                    }
                    events.push(event);
                }
                Err(stop) => return (events, Err(stop)),
            }
        }
        let waited = self.wait_watching(a, end, &mut watch, &mut events).await;
        let now = Instant::now();
        for e in &mut events {
            e.watched_seconds = (now.saturating_duration_since(t0).as_secs_f64() - e.at_seconds).max(0.0);
        }
        (events, waited)
    }

    /// Waits until `until`, reading the replicas' calls every
    /// [`WATCH_EVERY`] while replicas are watched, and noting when they
    /// reach their share.
    async fn wait_watching(
        &mut self,
        a: usize,
        until: Instant,
        watch: &mut Option<Watch>,
        events: &mut [ScaleEvent],
    ) -> Result<(), Stop> {
        loop {
            let Some(w) = watch.as_mut() else {
                return wait_until(until, self.arms, self.interrupt, self.origin).await;
            };
            wait_until(until.min(Instant::now() + WATCH_EVERY), self.arms, self.interrupt, self.origin).await?;
            let calls = self.replica_calls(a).await;
            w.history.push((Instant::now(), calls));
            let event = &mut events[w.event];
            let answered: u64 = w.added.iter().filter_map(|i| w.history.last()?.1.get(i)).sum();
            if event.first_call_seconds.is_none() && answered > 0 {
                event.first_call_seconds = Some(w.since.elapsed().as_secs_f64());
            }
            let fair = w.added.len() as f64 / f64::from(event.replicas);
            if w.share().is_some_and(|s| s >= SHARE_REACHED * fair) {
                event.time_to_share_seconds = Some(w.since.elapsed().as_secs_f64());
                *watch = None;
            }
            if Instant::now() >= until {
                return Ok(());
            }
        }
    }

    /// The calls each running replica of arm `a` has answered on the arm's
    /// listener, as its `/stats` says now.
    async fn replica_calls(&self, a: usize) -> BTreeMap<u32, u64> {
        let topology = &self.arms[a].topology;
        let listener = self.arms[a].config.transport.listener();
        let urls = topology.replica_admin_urls();
        // Read together, as a round's snapshot reads them: one slow replica
        // does not delay the others' reading.
        let reads = futures::future::join_all(urls.iter().map(|(_, url)| self.reader.stats_at(Some(url)))).await;
        urls.iter()
            .zip(reads)
            .filter_map(|((i, _), stats)| Some((*i, stats?.listeners.get(listener).map_or(0, |c| c.requests_total()))))
            .collect()
    }

    /// One step: replicas started (or taken out, their last figures kept and
    /// their processes stopped), the balancer reloaded, the sampler told.
    async fn scale(&mut self, a: usize, change: i32, t0: Instant) -> Result<ScaleEvent, Stop> {
        let arm = &mut self.arms[a];
        let title = arm.config.transport.title();
        let (added, removed) = arm
            .topology
            .scale(&arm.config, self.tls, change)
            .await
            .map_err(|e| Stop::TierDied(format!("scaling the {title} arm's replicas by {change:+} failed: {e}")))?;
        let at_seconds = Instant::now().saturating_duration_since(t0).as_secs_f64();
        let mut removed_indexes = Vec::new();
        for replica in removed {
            let i = replica.replica();
            // Its counters so far; calls it finishes while it drains are not counted.
            if let Some(last) = self.reader.stats_at(replica.admin_url().as_deref()).await {
                arm.topology.retired.push((i, last));
            }
            removed_indexes.push(i);
            tokio::spawn(arm.topology.stop_node(replica, self.interrupt.cut_token()));
        }
        self.sampling.rewatch(super::arms::watched_of(a, &arm.topology));
        self.sampling.rewatch_remote(a, super::remote::watched_of(a, &arm.topology));
        Ok(ScaleEvent {
            at_seconds,
            change,
            added,
            removed: removed_indexes,
            replicas: arm.topology.live_replicas().count() as u32,
            first_call_seconds: None,
            time_to_share_seconds: None,
            watched_seconds: 0.0,
        })
    }
}
