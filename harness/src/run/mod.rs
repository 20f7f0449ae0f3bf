//! One measured run, end to end, in phases a reader can hold in mind:
//!
//! 1. start every arm's tiers ([`arms`]) and record their settings;
//! 2. start sampling ([`sampling`]) and the live display ([`progress`]);
//! 3. run the segments: warm-ups and counterbalanced rounds ([`segments`]);
//! 4. drain, stop sampling, stop the tiers;
//! 5. turn each measured round into figures (`judge::round`) and each arm
//!    into one [`RunResult`], its validity judged once.
//!
//! Measuring and rendering never overlap: this module measures and hands
//! samples to a sink as they come; it never writes a file or renders a report.

mod arms;
pub mod interrupt;
pub mod progress;
mod remote;
pub mod sampling;
mod scaling;
mod segments;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::config::{Config, Plan, Segment, TlsFiles};
use crate::judge::input::RoundInput;
use crate::judge::round::assemble;

use crate::measure::sampler::{ArmSample, of_arm};
use crate::measure::tier_stats::{Deltas, TierStatsReader};
use crate::result::{
    Environment, ErrorReason, Generator, Instrument, LinkReport, LoadSample, RoundResult, RunResult, RunStatus, SCHEMA,
    TierInfo, TierName,
};
use arms::{Stop, confirmed_dead_tier, describe, start_arms, watched};
use interrupt::Interrupt;
use progress::{Progress, Status};
use sampling::{SampleSink, Sampling};
use segments::{ARM_SWITCH_PAUSE, Driver, PendingRound, STOP_GRACE, drain};

/// What every arm's result shares.
struct Common {
    started_at: String,
    environment: Environment,
    instrument: Instrument,
    link: Option<LinkReport>,
    status: RunStatus,
    reason: Option<String>,
    samples: Vec<ArmSample>,
    load_samples: Vec<LoadSample>,
    origin: Instant,
    /// This generator, when it is one of several or started at a set time.
    generator: Option<Generator>,
    /// What a team's own contract loaded, for `run.json`.
    contract: Option<contract::Report>,
}

/// Runs the whole plan. Errors only for failures before any load (tiers that
/// do not start); later failures end the run with partial results.
/// `contract`: a team's own, compiled and loaded by the app beside the plan.
pub async fn run(
    plan: &Plan,
    tls: Option<&TlsFiles>,
    contract: Option<&Arc<contract::Loaded>>,
    started_at: String,
    interrupt: &Interrupt,
    sink: Option<SampleSink>,
) -> anyhow::Result<Vec<RunResult>> {
    let cfg = &plan.config;
    let environment = crate::measure::environment::capture();
    let link = cfg.link.as_ref().map(crate::measure::link::probe);
    let reader = TierStatsReader::new()?;
    let instrument = instrument(cfg).await;
    let mut arms = start_arms(plan, tls, contract).await?;
    describe(&mut arms, &reader, plan).await;
    if let Err(e) = remote::describe(&mut arms, &reader, cfg.output.quiet).await {
        for arm in arms {
            arm.topology.stop(interrupt.cut_token()).await;
        }
        return Err(e);
    }
    let (origin, late_seconds) = start(cfg, interrupt).await;
    let generator = generator(cfg, late_seconds, &environment);
    let status = Arc::new(Status::default());
    let (local, remote) = (watched(&arms), remote::watched(&arms));
    let sampling = Sampling::start(&local, remote, cfg.load.sample_interval, origin, status.live.clone(), sink);
    let progress = Progress::start(cfg.output.quiet, plan.load_duration(), status.clone());
    *status.qps.lock().unwrap_or_else(|e| e.into_inner()) = cfg.generators.share_of(cfg.load.qps);
    let driver = Driver {
        config: cfg,
        tls,
        arms: &mut arms,
        reader: &reader,
        status: status.clone(),
        interrupt,
        origin,
        stop_load: CancellationToken::new(),
        sampling: &sampling,
        alarms: crate::load::Alarms::ready(),
    };
    let (mut pending, stopped) = driver.run(&plan.order()).await;

    // Drain: requests already sent get their answer or their timeout; after a
    // stop only a short grace. An interrupt during the drain shortens it to
    // that grace (and marks the run interrupted); a second one ends it.
    drain(&status.live, if stopped.is_some() { STOP_GRACE } else { cfg.load.timeout + STOP_GRACE }, interrupt).await;
    // A tier that died in the load's last moments or in the drain (a container's
    // watcher takes a moment to say how) ends the run as one that died measured.
    let stopped = match stopped {
        None if interrupt.is_stopped() => Some(Stop::Interrupted),
        None => confirmed_dead_tier(&mut arms, origin).await,
        other => other,
    };
    progress.finish().await;
    let (samples, load_samples) = sampling.finish().await;
    let mut finished = Vec::with_capacity(arms.len());
    for (a, arm) in arms.into_iter().enumerate() {
        segments::settle_before_stop(&mut pending, a, &arm.topology, &reader, interrupt).await;
        arm.topology.stop(interrupt.cut_token()).await;
        finished.push((arm.config, arm.tiers, arm.target.reasons.snapshot()));
    }
    foreign_notes(&mut finished);

    let (status, reason) = outcome(stopped, interrupt);
    let common = Common {
        started_at,
        environment,
        instrument,
        link,
        status,
        reason,
        samples,
        load_samples,
        origin,
        generator,
        contract: contract.map(|l| l.report()),
    };
    Ok(crate::judge::difference::in_compared_order(results(finished, pending, &common, interrupt.cut_token()).await))
}

/// When the first segment is due, and with `--start-at` how many seconds
/// after that instant it is: the pause after the tiers are ready, or the
/// start instant when it is still ahead (waited for, unless interrupted).
/// How the run ended, and why when it did not complete.
fn outcome(stopped: Option<Stop>, interrupt: &Interrupt) -> (RunStatus, Option<String>) {
    match stopped {
        None => (RunStatus::Complete, None),
        Some(Stop::Interrupted) => (RunStatus::Interrupted, Some(interrupt.reason())),
        Some(Stop::TierDied(reason)) => (RunStatus::Aborted, Some(reason)),
    }
}

async fn start(cfg: &Config, interrupt: &Interrupt) -> (Instant, Option<f64>) {
    let Some(at) = cfg.generators.start_instant() else { return (Instant::now() + ARM_SWITCH_PAUSE, None) };
    if let Ok(ahead) = at.duration_since(SystemTime::now()) {
        if !cfg.output.quiet {
            let ms = std::time::Duration::from_millis(ahead.as_millis() as u64);
            eprintln!(
                "waiting {} for --start-at {}",
                crate::config::hd(ms),
                cfg.generators.start_at.as_deref().unwrap_or("")
            );
        }
        tokio::select! {
            _ = tokio::time::sleep(ahead.saturating_sub(ARM_SWITCH_PAUSE)) => {}
            _ = interrupt.stopped() => {}
        }
    }
    let now = (SystemTime::now(), Instant::now());
    match at.duration_since(now.0) {
        Ok(ahead) => (now.1 + ahead, Some(0.0)),
        Err(late) => {
            let late = late.duration() + ARM_SWITCH_PAUSE;
            (now.1 + ARM_SWITCH_PAUSE, Some(late.as_secs_f64()))
        }
    }
}

/// This generator as run.json records it: one of several (`--segment`),
/// or one started at a set time.
fn generator(cfg: &Config, late_seconds: Option<f64>, environment: &Environment) -> Option<Generator> {
    let g = &cfg.generators;
    if g.segment.is_none() && g.start_at.is_none() {
        return None;
    }
    let s = g.segment.unwrap_or(Segment { index: 0, count: 1, sample_tiers: true });
    Some(Generator {
        segment: s.index,
        count: s.count,
        sampled_tiers: s.sample_tiers,
        hostname: environment.hostname.clone(),
        start_at: g.start_at.clone(),
        late_seconds,
        own: None,
    })
}

/// The instrument's precision and, when the load goes through the front
/// client, its measured floor.
async fn instrument(cfg: &Config) -> Instrument {
    let front = cfg.deploy.target == crate::config::TargetTier::Caller;
    let floor = if front {
        crate::measure::calibrate::client_floor(cfg.work.items, cfg.work.shape, cfg.work.fanout).await
    } else {
        None
    };
    Instrument {
        significant_digits: crate::measure::histogram::SIGNIFICANT_DIGITS,
        client_floor: floor.as_ref().and_then(crate::judge::stats::summarize),
        client_floor_requests: if front { crate::measure::calibrate::FLOOR_REQUESTS } else { 0 },
        cpu_clock: Some("clock_process_cputime".into()),
    }
}

/// What the foreign tiers' stops left to say (one ignored SIGTERM), by name
/// on stderr (a warning, said with --quiet too) and in its arm's
/// `tiers.<tier>.settings.foreign.stops`.
fn foreign_notes(finished: &mut [(Config, BTreeMap<TierName, TierInfo>, Vec<ErrorReason>)]) {
    for note in crate::tiers::foreign::take_notes() {
        eprintln!("{}", note.text);
        let arm = finished.iter_mut().find(|(c, _, _)| c.transport.as_str() == note.arm);
        if let Some(info) = arm.and_then(|(_, tiers, _)| tiers.get_mut(&note.tier))
            && let Some(foreign) = info.settings.get_mut("foreign").and_then(|f| f.as_object_mut())
        {
            let stops = foreign.entry("stops").or_insert_with(|| serde_json::json!([]));
            if let Some(list) = stops.as_array_mut() {
                list.push(note.text.into());
            }
        }
    }
}

/// Each arm's result: its rounds turned into figures, in round order.
async fn results(
    finished: Vec<(Config, BTreeMap<TierName, TierInfo>, Vec<ErrorReason>)>,
    pending: Vec<PendingRound>,
    common: &Common,
    cut: &CancellationToken,
) -> Vec<RunResult> {
    let mut rounds_by_arm: Vec<Vec<RoundResult>> = vec![Vec::new(); finished.len()];
    for p in pending {
        let arm_samples = of_arm(&common.samples, p.arm);
        let config = &finished[p.arm].0;
        let rel = |at: Instant| at.saturating_duration_since(common.origin).as_secs_f64();
        let (from_seconds, to_seconds) = (rel(p.start.at), rel(p.end.at));
        let bounded = p.quiet_start && p.settled_alone && crate::judge::own_calls_apply(config);
        let deltas = Deltas::between(&p.start, &p.end, config.transport.listener()).with_own_calls(
            &p.start,
            p.settled.as_ref(),
            (p.segment, bounded),
            config.transport.listener(),
        );
        let (arm, round, complete, pids) = (p.arm, p.round, p.complete, p.pids.clone());
        let scaling = p.scaling.clone();
        let (compact, scheduled) = p.settle(cut).await;
        let record = compact.expand();
        let input = RoundInput {
            config,
            round,
            complete,
            scheduled,
            from_seconds,
            to_seconds,
            record: &record,
            deltas: &deltas,
            samples: &arm_samples,
            load: &common.load_samples,
        };
        let mut result = RoundResult { pids, ..assemble(&input) };
        if let Some(set) = result.replicas.as_mut() {
            set.scaling = scaling;
        }
        rounds_by_arm[arm].push(result);
    }
    finished
        .into_iter()
        .zip(rounds_by_arm)
        .enumerate()
        .map(|(i, ((config, tiers, error_reasons), mut rounds))| {
            rounds.sort_by_key(|r| r.index);
            let mut result = RunResult {
                schema: SCHEMA.to_owned(),
                tool_version: env!("CARGO_PKG_VERSION").to_owned(),
                status: common.status,
                status_reason: common.reason.clone(),
                started_at: common.started_at.clone(),
                config,
                environment: common.environment.clone(),
                tiers,
                rounds,
                samples: of_arm(&common.samples, i),
                load_samples: common.load_samples.clone(),
                instrument: Some(common.instrument.clone()),
                link: common.link.clone(),
                error_reasons,
                generators: common.generator.iter().cloned().collect(),
                contract: common.contract.clone(),
                validity: Vec::new(),
            };
            result.validity = crate::judge::validity(&result);
            result
        })
        .collect()
}
