//! One measured run of the embedded topology: start the tiers, warm up, drive
//! the rounds, sample, snapshot the tiers' counters at every round boundary,
//! drain, stop the tiers, and assemble the [`RunResult`].
//!
//! Measuring and rendering never overlap: this module only measures; `export`
//! turns the result into files afterwards.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use telemetry::{CountersSnapshot, ProcessSnapshot, ProcessStats, StatsSnapshot};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::env::Environment;
use crate::load::{Live, Schedule, Target, dispatch};
use crate::progress::Progress;
use crate::record::{Phases, RoundRecord, collect};
use crate::result::{
    HopBytes, Hops, Latency, LoadSample, Requests, ResourceSample, Resources, RoundResult, RunResult, RunStatus,
    SCHEMA, Throughput, TierInfo,
};
use crate::sample::Sampler;
use crate::stats::{encode_histogram, mean_peak, summarize};
use crate::topology::{Tier, Topology};

/// Grace for in-flight requests after an interrupt or a tier failure.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How often tier liveness is checked while the load runs.
const LIVENESS_POLL: Duration = Duration::from_millis(100);

/// The counters and process figures of every tier at one instant.
#[derive(Debug, Clone)]
struct Snapshot {
    at: Instant,
    downstream: Option<StatsSnapshot>,
    caller: Option<StatsSnapshot>,
    harness: ProcessSnapshot,
}

struct Admin {
    http: reqwest::Client,
    harness: ProcessStats,
}

impl Admin {
    async fn stats(&self, tier: &Tier) -> Option<StatsSnapshot> {
        let resp = self.http.get(format!("{}/stats", tier.admin_url())).send().await.ok()?;
        resp.json().await.ok()
    }

    async fn snapshot(&self, topology: &Topology) -> Snapshot {
        let at = Instant::now();
        let (downstream, caller) = tokio::join!(self.stats(&topology.downstream), self.stats(&topology.caller));
        Snapshot { at, downstream, caller, harness: self.harness.snapshot() }
    }
}

/// Why the load stopped before its end.
enum Stop {
    Interrupted,
    TierDied(String),
}

/// Waits until `at`, watching the tiers and the interrupt token.
async fn wait_until(
    at: Instant,
    topology: &mut Topology,
    interrupt: &CancellationToken,
    t0: Instant,
) -> Result<(), Stop> {
    loop {
        for tier in [&mut topology.downstream, &mut topology.caller] {
            if let Some(status) = tier.exited() {
                let when = Instant::now().saturating_duration_since(t0).as_secs_f64();
                return Err(Stop::TierDied(format!(
                    "the {} (pid {}) exited at t={when:.1}s with {status}; its last stderr lines:\n{}",
                    tier.name,
                    tier.pid(),
                    tier.stderr_tail()
                )));
            }
        }
        let now = Instant::now();
        if now >= at {
            return Ok(());
        }
        tokio::select! {
            _ = interrupt.cancelled() => return Err(Stop::Interrupted),
            _ = tokio::time::sleep((at - now).min(LIVENESS_POLL)) => {}
        }
    }
}

/// Runs the whole measurement. Errors only for failures before any load
/// (tiers that do not start); later failures end the run with a partial result.
pub async fn run(cfg: &Config, interrupt: CancellationToken) -> anyhow::Result<RunResult> {
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let environment = Environment::capture();
    let mut topology = Topology::start(cfg).await?;
    if !cfg.quiet {
        eprintln!(
            "tiers: downstream pid {} ({}), caller pid {} ({}), harness pid {}",
            topology.downstream.pid(),
            listeners(&topology.downstream),
            topology.caller.pid(),
            listeners(&topology.caller),
            std::process::id()
        );
    }
    let admin = Admin {
        http: reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(5)).build()?,
        harness: ProcessStats::current(),
    };
    let mut tiers = BTreeMap::new();
    for tier in [&topology.downstream, &topology.caller] {
        let settings = admin.stats(tier).await.map(|s| s.settings).unwrap_or(serde_json::Value::Null);
        tiers.insert(tier.name.to_owned(), TierInfo { pid: tier.pid(), settings });
    }

    let phases = Phases {
        warmup_requests: (cfg.warmup.as_secs_f64() * cfg.qps).round() as u64,
        requests_per_round: cfg.requests_per_round(),
        rounds: cfg.rounds,
    };
    let schedule = Schedule { t0: Instant::now() + Duration::from_millis(100), qps: cfg.qps };
    let live = Arc::new(Live::default());
    let live_p99_us = Arc::new(AtomicU64::new(0));
    let (shots_tx, shots_rx) = mpsc::unbounded_channel();
    let finish_collecting = CancellationToken::new();
    let collector = tokio::spawn(collect(shots_rx, phases, live_p99_us.clone(), finish_collecting.clone()));
    let target = Target::new(topology.front_url(), cfg.items, cfg.fanout, cfg.timeout, cfg.connections)
        .context("building the load client")?;
    let stop_load = CancellationToken::new();
    let dispatcher = tokio::spawn(dispatch(
        schedule,
        phases.total(),
        cfg.max_in_flight,
        target,
        live.clone(),
        shots_tx,
        stop_load.clone(),
    ));

    let stop_sampling = CancellationToken::new();
    let sampler = tokio::spawn(sample_loop(
        Sampler::new(&[
            ("downstream", topology.downstream.pid()),
            ("caller", topology.caller.pid()),
            ("harness", std::process::id()),
        ]),
        cfg.sample_interval,
        schedule.t0,
        live.clone(),
        stop_sampling.clone(),
    ));
    let progress = Progress::start(cfg, schedule.t0, phases, live.clone(), live_p99_us.clone());

    // Round boundaries: a snapshot at the start of every round and at the end.
    let mut boundaries = Vec::new();
    let mut stopped = None;
    for k in 0..=cfg.rounds {
        let at = schedule.due(phases.first_of_round(k));
        if let Err(why) = wait_until(at, &mut topology, &interrupt, schedule.t0).await {
            stopped = Some(why);
            break;
        }
        boundaries.push(admin.snapshot(&topology).await);
    }
    let complete_boundaries = boundaries.len();
    if stopped.is_some() {
        stop_load.cancel();
        // Close the partial round at the moment the load stopped.
        if !boundaries.is_empty() {
            boundaries.push(admin.snapshot(&topology).await);
        }
    }
    let dispatched = dispatcher.await.unwrap_or(0);

    // Drain: requests already sent get their answer or their timeout; after a
    // stop only a short grace.
    let drain_limit = if stopped.is_some() { STOP_GRACE } else { cfg.timeout + STOP_GRACE };
    let drain_deadline = Instant::now() + drain_limit;
    while live.in_flight.load(Relaxed) > 0 && Instant::now() < drain_deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    progress.finish().await;
    // Requests still unanswered after the drain are left out; everything
    // recorded so far is kept.
    finish_collecting.cancel();
    let records: Vec<RoundRecord> =
        collector.await.unwrap_or_else(|_| vec![RoundRecord::default(); cfg.rounds as usize]);
    stop_sampling.cancel();
    let (samples, load_samples) = sampler.await.unwrap_or_default();
    topology.stop().await;

    let (status, status_reason) = match stopped {
        None => (RunStatus::Complete, None),
        Some(Stop::Interrupted) => (RunStatus::Interrupted, Some("interrupted by the user (SIGINT)".to_owned())),
        Some(Stop::TierDied(reason)) => (RunStatus::Aborted, Some(reason)),
    };
    let rounds =
        assemble_rounds(cfg, phases, dispatched, &boundaries, complete_boundaries, &records, &samples, schedule.t0);
    let mut result = RunResult {
        schema: SCHEMA.to_owned(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        status,
        status_reason,
        started_at,
        config: cfg.clone(),
        environment,
        tiers,
        rounds,
        samples,
        load_samples,
        validity: Vec::new(),
    };
    result.validity = crate::export::validity(&result);
    Ok(result)
}

fn listeners(tier: &Tier) -> String {
    tier.ready.listeners.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
}

async fn sample_loop(
    mut sampler: Sampler,
    interval: Duration,
    origin: Instant,
    live: Arc<Live>,
    stop: CancellationToken,
) -> (Vec<ResourceSample>, Vec<LoadSample>) {
    let (mut samples, mut load) = (Vec::new(), Vec::new());
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = ticker.tick() => {}
        }
        let batch = sampler.sample(origin);
        let t_seconds = batch.first().map_or(0.0, |s| s.t_seconds);
        samples.extend(batch);
        load.push(LoadSample {
            t_seconds,
            in_flight: live.in_flight.load(Relaxed) as u64,
            sent: live.sent.load(Relaxed),
            ok: live.ok.load(Relaxed),
            errors: live.errors.load(Relaxed),
            dropped: live.dropped.load(Relaxed),
        });
    }
    (samples, load)
}

#[allow(clippy::too_many_arguments)]
fn assemble_rounds(
    cfg: &Config,
    phases: Phases,
    dispatched: u64,
    boundaries: &[Snapshot],
    complete_boundaries: usize,
    records: &[RoundRecord],
    samples: &[ResourceSample],
    t0: Instant,
) -> Vec<RoundResult> {
    let rel = |at: Instant| at.saturating_duration_since(t0).as_secs_f64();
    boundaries
        .windows(2)
        .enumerate()
        .filter_map(|(k, pair)| {
            let (start, end) = (&pair[0], &pair[1]);
            let rec = records.get(k)?;
            let window = end.at.saturating_duration_since(start.at).as_secs_f64().max(1e-9);
            let scheduled = phases.requests_per_round.min(dispatched.saturating_sub(phases.first_of_round(k as u32)));
            let requests = Requests { scheduled, sent: rec.sent, ok: rec.ok, errors: rec.errors.clone() };
            let throughput = Throughput {
                target_qps: cfg.qps,
                send_rate: rec.sent as f64 / window,
                ok_per_second: rec.ok as f64 / window,
                achieved_ratio: rec.ok as f64 / window / cfg.qps,
            };
            let latency = Latency {
                corrected: summarize(&rec.corrected),
                service: summarize(&rec.service),
                send_lag: summarize(&rec.send_lag),
                downstream_hop: summarize(&rec.downstream_hop),
                caller_overhead: summarize(&rec.caller_overhead),
            };
            let histograms = [
                ("corrected", &rec.corrected),
                ("service", &rec.service),
                ("send_lag", &rec.send_lag),
                ("downstream_hop", &rec.downstream_hop),
                ("caller_overhead", &rec.caller_overhead),
            ]
            .into_iter()
            .map(|(k, h)| (k.to_owned(), encode_histogram(h)))
            .collect();
            let (from, to) = (rel(start.at), rel(end.at));
            let in_window: Vec<&ResourceSample> =
                samples.iter().filter(|s| s.t_seconds >= from && s.t_seconds <= to).collect();
            let resources_of = |tier: &str, cpu: Option<f64>, per: u64| {
                let tier_samples: Vec<_> = in_window.iter().filter(|s| s.tier == tier).collect();
                let (cpu_mean, cpu_peak) = mean_peak(tier_samples.iter().filter_map(|s| s.cpu_percent));
                let (rss_mean, rss_peak) =
                    mean_peak(tier_samples.iter().filter_map(|s| s.rss_bytes).map(|b| b as f64 / (1024.0 * 1024.0)));
                Resources {
                    cpu_seconds: cpu,
                    cpu_percent_mean: cpu_mean,
                    cpu_percent_peak: cpu_peak,
                    cpu_us_per_request: cpu.filter(|_| per > 0).map(|c| c * 1e6 / per as f64),
                    rss_mib_mean: rss_mean,
                    rss_mib_peak: rss_peak,
                    samples: tier_samples.len() as u32,
                }
            };
            let cpu_delta = |a: Option<&StatsSnapshot>, b: Option<&StatsSnapshot>| {
                Some(b?.process.cpu_seconds? - a?.process.cpu_seconds?)
            };
            let mut resources = BTreeMap::new();
            resources.insert(
                "downstream".to_owned(),
                resources_of("downstream", cpu_delta(start.downstream.as_ref(), end.downstream.as_ref()), rec.ok),
            );
            resources.insert(
                "caller".to_owned(),
                resources_of("caller", cpu_delta(start.caller.as_ref(), end.caller.as_ref()), rec.ok),
            );
            let harness_cpu = end.harness.cpu_seconds.zip(start.harness.cpu_seconds).map(|(b, a)| b - a);
            resources.insert("harness".to_owned(), resources_of("harness", harness_cpu, rec.sent));

            let bytes = Hops {
                front: hop_bytes("front", start.caller.as_ref(), end.caller.as_ref()),
                internal: hop_bytes(cfg.transport.as_str(), start.downstream.as_ref(), end.downstream.as_ref()),
            };
            Some(RoundResult {
                index: k as u32 + 1,
                complete: k + 1 < complete_boundaries,
                window_seconds: window,
                requests,
                throughput,
                latency,
                histograms,
                resources,
                bytes,
            })
        })
        .collect()
}

/// Byte and connection deltas of one listener between two snapshots; figures
/// that could not be read stay `None`.
fn hop_bytes(listener: &str, a: Option<&StatsSnapshot>, b: Option<&StatsSnapshot>) -> HopBytes {
    let delta: Option<CountersSnapshot> = (|| Some(b?.listeners.get(listener)?.since(a?.listeners.get(listener)?)))();
    let Some(d) = delta else { return HopBytes { listener: listener.to_owned(), ..HopBytes::default() } };
    let n = d.requests_total();
    let per = |v: Option<u64>| v.filter(|_| n > 0).map(|v| v as f64 / n as f64);
    HopBytes {
        listener: listener.to_owned(),
        requests: n,
        request_wire_bytes: d.bytes_in,
        response_wire_bytes: d.bytes_out,
        request_message_bytes: Some(d.message_bytes_in),
        response_message_bytes: Some(d.message_bytes_out),
        request_wire_bytes_per_request: per(d.bytes_in),
        response_wire_bytes_per_request: per(d.bytes_out),
        request_message_bytes_per_request: per(Some(d.message_bytes_in)),
        response_message_bytes_per_request: per(Some(d.message_bytes_out)),
        connections_opened: Some(d.connections),
        connections_open_at_end: d.connections_open,
    }
}
