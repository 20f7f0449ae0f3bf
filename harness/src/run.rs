//! One measured run: start every arm's tiers, then run the segments (one
//! warm-up per arm before its first round, then the rounds, arms alternating),
//! sample all processes, snapshot the tiers' counters at every round boundary,
//! drain, stop the tiers, and assemble one [`RunResult`] per arm.
//!
//! Measuring and rendering never overlap: this module only measures (and
//! appends samples to the time-series file as they come, so a crash loses at
//! most one interval); `export` turns the results into files afterwards.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use anyhow::Context;
use caller::Transport;
use telemetry::{CountersSnapshot, ProcessSnapshot, ProcessStats, StatsSnapshot};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Plan};
use crate::env::Environment;
use crate::export::timeseries::TimeseriesWriter;
use crate::load::{Endpoint, Schedule, Target, closed_loop, dispatch};
use crate::progress::{Progress, Status};
use crate::record::{RoundRecord, collect};
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
/// Pause between the drain of one arm and the first request of the next.
const ARM_SWITCH_PAUSE: Duration = Duration::from_millis(100);

/// The counters and process figures of one arm's tiers at one instant.
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
    /// A tier's `/stats`, tried twice: a snapshot that cannot be read leaves
    /// its figures unmeasured for the whole round.
    async fn stats(&self, tier: Option<&Tier>) -> Option<StatsSnapshot> {
        let url = format!("{}/stats", tier?.admin_url());
        for _ in 0..2 {
            if let Ok(resp) = self.http.get(&url).send().await
                && let Ok(stats) = resp.json().await
            {
                return Some(stats);
            }
        }
        None
    }

    async fn snapshot(&self, topology: &Topology) -> Snapshot {
        let at = Instant::now();
        let (downstream, caller) =
            tokio::join!(self.stats(topology.downstream.as_ref()), self.stats(topology.caller.as_ref()));
        Snapshot { at, downstream, caller, harness: self.harness.snapshot() }
    }
}

/// Why the load stopped before its end.
enum Stop {
    Interrupted,
    TierDied(String),
}

/// One arm: its configuration, its tiers and its load target.
struct Arm {
    config: Config,
    topology: Topology,
    target: Target,
    tiers: BTreeMap<String, TierInfo>,
}

/// A measured round whose requests may still be finishing.
struct PendingRound {
    arm: usize,
    round: u32,
    start: Snapshot,
    end: Snapshot,
    complete: bool,
    scheduled: JoinHandle<u64>,
    collector: JoinHandle<RoundRecord>,
    finish: CancellationToken,
}

fn transport_title(t: Transport) -> &'static str {
    match t {
        Transport::Grpc => "gRPC",
        Transport::Rest => "REST",
    }
}

/// Waits until `at`, watching every tier and the interrupt token.
async fn wait_until(at: Instant, arms: &mut [Arm], interrupt: &CancellationToken, origin: Instant) -> Result<(), Stop> {
    loop {
        for arm in arms.iter_mut() {
            let label = transport_title(arm.config.transport);
            for tier in arm.topology.tiers_mut() {
                if let Some(status) = tier.exited() {
                    let when = Instant::now().saturating_duration_since(origin).as_secs_f64();
                    return Err(Stop::TierDied(format!(
                        "the {} of the {label} arm (pid {}) exited at t={when:.1}s with {status}; its last stderr lines:\n{}",
                        tier.name,
                        tier.pid(),
                        tier.stderr_tail()
                    )));
                }
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

/// Starts every arm's tiers; on a failure stops the ones already started.
async fn start_arms(plan: &Plan) -> anyhow::Result<Vec<Arm>> {
    let mut arms: Vec<Arm> = Vec::new();
    for &transport in &plan.arms {
        let config = plan.arm(transport);
        let topology = match Topology::start(&config).await {
            Ok(t) => t,
            Err(e) => {
                for arm in arms {
                    arm.topology.stop().await;
                }
                return Err(e.into());
            }
        };
        let target = load_target(&config, &topology.target_url)?;
        arms.push(Arm { config, topology, target, tiers: BTreeMap::new() });
    }
    Ok(arms)
}

/// Runs the whole plan. Errors only for failures before any load (tiers that do
/// not start); later failures end the run with partial results.
pub async fn run(
    plan: &Plan,
    started_at: String,
    interrupt: CancellationToken,
    mut timeseries: Option<TimeseriesWriter>,
) -> anyhow::Result<Vec<RunResult>> {
    let quiet = plan.config.quiet;
    let environment = Environment::capture();
    let mut arms = start_arms(plan).await?;
    let admin = Admin {
        // A fresh connection per read: an idle keep-alive connection may have
        // been closed by the tier's header-read timeout between two snapshots.
        http: reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(0)
            .timeout(Duration::from_secs(5))
            .build()?,
        harness: ProcessStats::current(),
    };
    for arm in arms.iter_mut() {
        if !quiet {
            let prefix =
                if plan.arms.len() > 1 { format!("tiers ({})", arm.config.transport.as_str()) } else { "tiers".into() };
            let named: Vec<String> = arm
                .topology
                .tiers()
                .map(|t| format!("{} pid {} ({})", t.name, t.pid(), listeners(t)))
                .chain(std::iter::once(format!("harness pid {}", std::process::id())))
                .collect();
            eprintln!("{prefix}: {}; load goes to {}", named.join(", "), arm.topology.target_url);
        }
        for tier in arm.topology.tiers() {
            let settings = match (tier.name, &arm.topology.proxy_settings) {
                ("proxy", Some(s)) => s.clone(),
                _ => admin.stats(Some(tier)).await.map(|s| s.settings).unwrap_or(serde_json::Value::Null),
            };
            arm.tiers.insert(tier.name.to_owned(), TierInfo { pid: tier.pid(), settings });
        }
    }

    let cfg = &plan.config;
    let origin = Instant::now() + ARM_SWITCH_PAUSE;
    let status = Arc::new(Status::default());
    let stop_sampling = CancellationToken::new();
    let mut watched: Vec<(String, u32)> = Vec::new();
    for (i, arm) in arms.iter().enumerate() {
        for tier in arm.topology.tiers() {
            watched.push((format!("{i}/{}", tier.name), tier.pid()));
        }
    }
    watched.push(("harness".into(), std::process::id()));
    let arm_names: Vec<String> = arms.iter().map(|a| a.config.transport.as_str().to_owned()).collect();
    let sampler = {
        let watched: Vec<(&str, u32)> = watched.iter().map(|(n, p)| (n.as_str(), *p)).collect();
        let sampler = Sampler::new(&watched);
        let (status, stop, ts, interval) =
            (status.clone(), stop_sampling.clone(), timeseries.take(), cfg.sample_interval);
        tokio::spawn(sample_loop(sampler, interval, origin, status, stop, ts, arm_names))
    };
    let total = (cfg.warmup + cfg.duration * cfg.rounds) * plan.arms.len() as u32;
    let progress = Progress::start(quiet, total, status.clone());
    *status.qps.lock().unwrap_or_else(|e| e.into_inner()) = cfg.qps;

    let stop_load = CancellationToken::new();
    let mut pending: Vec<PendingRound> = Vec::new();
    let mut warmed = vec![false; arms.len()];
    let mut cursor = origin;
    let mut previous_arm = None;
    let mut stopped = None;
    // Closed-loop request ids: a fresh range per segment.
    let mut next_index = 0u64;
    'segments: for (a, round) in plan.order() {
        if previous_arm.is_some_and(|p| p != a) {
            // Let the other arm's tail finish so the two never overlap.
            drain(&status, cfg.timeout + STOP_GRACE).await;
            cursor = Instant::now() + ARM_SWITCH_PAUSE;
        }
        previous_arm = Some(a);
        let title = transport_title(arms[a].config.transport);
        let mut segments = Vec::new();
        if !warmed[a] && !cfg.warmup.is_zero() {
            segments.push((None, cfg.warmup));
        }
        warmed[a] = true;
        segments.push((Some(round), cfg.duration));
        for (measured, length) in segments {
            status.set_phase(match measured {
                None => format!("{title} warm-up"),
                Some(r) => format!("{title} round {}/{}", r + 1, cfg.rounds),
            });
            let (tx, rx) = mpsc::unbounded_channel();
            let finish = CancellationToken::new();
            let collector = tokio::spawn(collect(rx, status.p99_us.clone(), finish.clone()));
            let live = status.live.clone();
            let segment_stop = stop_load.child_token();
            let target = arms[a].target.clone();
            let max_in_flight = cfg.max_in_flight;
            let t0 = cursor;
            let (end_at, scheduled) = if cfg.closed_loop {
                let until = t0 + length;
                let (connections, first) = (cfg.connections, next_index);
                next_index += 1 << 40;
                let task = tokio::spawn(async move {
                    tokio::time::sleep_until(t0.into()).await;
                    closed_loop(connections, until, target, live, tx, segment_stop, first).await
                });
                (until, task)
            } else {
                let n = (length.as_secs_f64() * cfg.qps).round() as u64;
                let schedule = Schedule { t0, qps: cfg.qps };
                let task =
                    tokio::spawn(
                        async move { dispatch(schedule, n, max_in_flight, target, live, tx, segment_stop).await },
                    );
                (schedule.due(n), task)
            };
            cursor = end_at;
            if let Err(why) = wait_until(t0, &mut arms, &interrupt, origin).await {
                stopped = Some(why);
            }
            // Only measured rounds need the tiers' counters at their boundaries.
            let start = match measured {
                Some(_) => Some(admin.snapshot(&arms[a].topology).await),
                None => None,
            };
            if stopped.is_none()
                && let Err(why) = wait_until(end_at, &mut arms, &interrupt, origin).await
            {
                stopped = Some(why);
            }
            if stopped.is_some() {
                stop_load.cancel();
            }
            match (measured, start) {
                (Some(round), Some(start)) => {
                    let end = admin.snapshot(&arms[a].topology).await;
                    pending.push(PendingRound {
                        arm: a,
                        round,
                        start,
                        end,
                        complete: stopped.is_none(),
                        scheduled,
                        collector,
                        finish,
                    });
                }
                _ => {
                    // Warm-up records are not kept; the collector ends with its senders.
                    finish.cancel();
                    drop(collector);
                }
            }
            if stopped.is_some() {
                break 'segments;
            }
        }
    }

    // Drain: requests already sent get their answer or their timeout; after a
    // stop only a short grace.
    drain(&status, if stopped.is_some() { STOP_GRACE } else { cfg.timeout + STOP_GRACE }).await;
    progress.finish().await;
    stop_sampling.cancel();
    let (samples, load_samples) = sampler.await.unwrap_or_default();
    let mut finished = Vec::with_capacity(arms.len());
    for arm in arms {
        arm.topology.stop().await;
        finished.push((arm.config, arm.tiers));
    }

    let (run_status, reason) = match stopped {
        None => (RunStatus::Complete, None),
        Some(Stop::Interrupted) => (RunStatus::Interrupted, Some("interrupted by the user (SIGINT)".to_owned())),
        Some(Stop::TierDied(reason)) => (RunStatus::Aborted, Some(reason)),
    };
    let mut rounds_by_arm: Vec<Vec<RoundResult>> = vec![Vec::new(); finished.len()];
    for p in pending {
        // Requests still unanswered after the drain are left out; everything
        // recorded so far is kept.
        p.finish.cancel();
        let record = p.collector.await.unwrap_or_default();
        let scheduled = p.scheduled.await.unwrap_or(0);
        let samples_of_arm = arm_samples(&samples, p.arm);
        rounds_by_arm[p.arm].push(assemble_round(
            &finished[p.arm].0,
            p.round,
            p.complete,
            scheduled,
            &p.start,
            &p.end,
            &record,
            &samples_of_arm,
            origin,
        ));
    }
    let results = finished
        .into_iter()
        .zip(rounds_by_arm)
        .enumerate()
        .map(|(i, ((config, tiers), mut rounds))| {
            rounds.sort_by_key(|r| r.index);
            let mut result = RunResult {
                schema: SCHEMA.to_owned(),
                tool_version: env!("CARGO_PKG_VERSION").to_owned(),
                status: run_status,
                status_reason: reason.clone(),
                started_at: started_at.clone(),
                config,
                environment: environment.clone(),
                tiers,
                rounds,
                samples: arm_samples(&samples, i),
                load_samples: load_samples.clone(),
                validity: Vec::new(),
            };
            result.validity = crate::analysis::validity(&result);
            result
        })
        .collect();
    Ok(results)
}

/// Waits until nothing is in flight, at most `limit`.
async fn drain(status: &Status, limit: Duration) {
    let deadline = Instant::now() + limit;
    while status.live.in_flight.load(Relaxed) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The samples of arm `i`'s tiers (renamed `caller`/`downstream`) and of the harness.
fn arm_samples(samples: &[ResourceSample], i: usize) -> Vec<ResourceSample> {
    let prefix = format!("{i}/");
    samples
        .iter()
        .filter_map(|s| match s.tier.strip_prefix(&prefix) {
            Some(tier) => Some(ResourceSample { tier: tier.to_owned(), ..s.clone() }),
            None if s.tier == "harness" => Some(s.clone()),
            None => None,
        })
        .collect()
}

/// The load target of an arm: the caller's front door, or the downstream
/// directly through the caller's own client for the transport.
fn load_target(config: &Config, url: &str) -> anyhow::Result<Target> {
    use crate::config::TargetTier;
    let c = config;
    if c.target == TargetTier::Caller {
        return Target::front(url.to_owned(), c.items, c.fanout, c.timeout, c.connections)
            .context("building the load client");
    }
    // The harness's own client counters are not reported: the downstream's
    // listener counts the hop.
    let counters = Arc::new(telemetry::Counters::new("harness", caller::outbound::OUTCOMES));
    let client: Arc<dyn caller::outbound::Outbound> = match c.transport {
        Transport::Grpc => Arc::new(
            caller::grpc::GrpcClient::new(url, c.grpc_connections as usize, counters)
                .with_context(|| format!("building the gRPC client for {url}"))?,
        ),
        Transport::Rest => Arc::new(
            caller::rest::RestClient::new(url, c.rest_http2, counters)
                .with_context(|| format!("building the REST client for {url}"))?,
        ),
    };
    Ok(Target::with(Endpoint::Direct(client), c.items, 1, c.timeout, if c.closed_loop { 0 } else { c.connections }))
}

fn listeners(tier: &Tier) -> String {
    tier.ready.listeners.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
}

/// Samples every process each `interval` until `stop`, appending each batch to
/// the time-series file as it comes.
async fn sample_loop(
    mut sampler: Sampler,
    interval: Duration,
    origin: Instant,
    status: Arc<Status>,
    stop: CancellationToken,
    mut timeseries: Option<TimeseriesWriter>,
    arm_names: Vec<String>,
) -> (Vec<ResourceSample>, Vec<LoadSample>) {
    let (mut samples, mut load) = (Vec::new(), Vec::<LoadSample>::new());
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
        let live = &status.live;
        let point = LoadSample {
            t_seconds,
            in_flight: live.in_flight.load(Relaxed) as u64,
            sent: live.sent.load(Relaxed),
            ok: live.ok.load(Relaxed),
            errors: live.errors.load(Relaxed),
            dropped: live.dropped.load(Relaxed),
        };
        let ok_rate = load
            .last()
            .map(|prev| (point.ok.saturating_sub(prev.ok)) as f64 / (point.t_seconds - prev.t_seconds).max(1e-3));
        if let Some(ts) = timeseries.as_mut() {
            for s in &batch {
                let (arm, tier) = match s.tier.split_once('/') {
                    Some((i, tier)) => {
                        (i.parse::<usize>().ok().and_then(|i| arm_names.get(i)).map_or("-", |n| n.as_str()), tier)
                    }
                    None => ("-", s.tier.as_str()),
                };
                ts.append(s, arm, tier, point.in_flight, ok_rate);
            }
            ts.flush();
        }
        samples.extend(batch);
        load.push(point);
    }
    (samples, load)
}

#[allow(clippy::too_many_arguments)]
fn assemble_round(
    cfg: &Config,
    round: u32,
    complete: bool,
    scheduled: u64,
    start: &Snapshot,
    end: &Snapshot,
    rec: &RoundRecord,
    samples: &[ResourceSample],
    origin: Instant,
) -> RoundResult {
    let rel = |at: Instant| at.saturating_duration_since(origin).as_secs_f64();
    let window = end.at.saturating_duration_since(start.at).as_secs_f64().max(1e-9);
    let requests = Requests { scheduled, sent: rec.sent, ok: rec.ok, errors: rec.errors.clone() };
    let throughput = Throughput {
        target_qps: (!cfg.closed_loop).then_some(cfg.qps),
        send_rate: rec.sent as f64 / window,
        ok_per_second: rec.ok as f64 / window,
        achieved_ratio: (!cfg.closed_loop).then(|| rec.ok as f64 / window / cfg.qps),
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
    let in_window: Vec<&ResourceSample> = samples.iter().filter(|s| s.t_seconds >= from && s.t_seconds <= to).collect();
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
    let cpu_delta =
        |a: Option<&StatsSnapshot>, b: Option<&StatsSnapshot>| Some(b?.process.cpu_seconds? - a?.process.cpu_seconds?);
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
    // The proxy has no /stats of its own: its CPU time comes from the samples.
    let proxy: Vec<f64> = in_window.iter().filter(|s| s.tier == "proxy").filter_map(|s| s.cpu_seconds).collect();
    if !proxy.is_empty() {
        let cpu = (proxy.len() > 1).then(|| proxy[proxy.len() - 1] - proxy[0]);
        resources.insert("proxy".to_owned(), resources_of("proxy", cpu, rec.ok));
    }

    let bytes = Hops {
        front: hop_bytes("front", start.caller.as_ref(), end.caller.as_ref()),
        internal: hop_bytes(cfg.transport.as_str(), start.downstream.as_ref(), end.downstream.as_ref()),
    };
    RoundResult {
        index: round + 1,
        complete,
        started_seconds: from,
        window_seconds: window,
        requests,
        throughput,
        latency,
        histograms,
        resources,
        bytes,
    }
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
