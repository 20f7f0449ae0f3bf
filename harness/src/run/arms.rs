//! The arms of a run: each transport's tiers and load target, started
//! together before any load, watched for liveness while the load runs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::interrupt::Interrupt;
use crate::config::{Config, Plan, TlsFiles};
use crate::load::Target;
use crate::measure::sampler::Watched;
use crate::measure::tier_stats::TierStatsReader;
use crate::result::{TierInfo, TierName};
use crate::tiers::Topology;

/// How often tier liveness is checked while the load runs.
const LIVENESS_POLL: Duration = Duration::from_millis(100);

/// One arm: its configuration, its tiers and its load target.
pub(super) struct Arm {
    pub config: Config,
    pub topology: Topology,
    pub target: Target,
    /// Each tier's pid and reported settings, for `run.json`.
    pub tiers: BTreeMap<TierName, TierInfo>,
    /// A team's own contract, loaded beside the configuration.
    pub contract: Option<Arc<contract::Loaded>>,
}

/// Why the load stopped before its end.
pub(super) enum Stop {
    Interrupted,
    TierDied(String),
}

/// Starts every arm's tiers; on a failure stops the ones already started.
pub(super) async fn start_arms(
    plan: &Plan,
    tls: Option<&TlsFiles>,
    contract: Option<&Arc<contract::Loaded>>,
) -> anyhow::Result<Vec<Arm>> {
    let mut arms: Vec<Arm> = Vec::new();
    for &transport in &plan.arms {
        let config = plan.arm(transport);
        let started = match Topology::start(&config, tls).await {
            Ok(topology) => {
                Target::for_arm(&config, &topology.target_url, tls, contract.cloned()).map(|target| (topology, target))
            }
            Err(e) => Err(e.into()),
        };
        match started {
            Ok((topology, target)) => {
                let (tiers, contract) = (BTreeMap::new(), contract.cloned());
                arms.push(Arm { config, topology, target, tiers, contract })
            }
            Err(e) => {
                for arm in arms {
                    arm.topology.stop(&CancellationToken::new()).await;
                }
                return Err(e);
            }
        }
    }
    Ok(arms)
}

/// Records each tier's pid and settings (the services' own `/stats`
/// settings; the proxy's from how it was started), and names them on stderr.
pub(super) async fn describe(arms: &mut [Arm], reader: &TierStatsReader, plan: &Plan) {
    for arm in arms.iter_mut() {
        if !plan.config.output.quiet {
            let prefix = if plan.arms.len() > 1 { format!("tiers ({})", arm.config.transport) } else { "tiers".into() };
            let named: Vec<String> = arm
                .topology
                .tiers()
                .map(|t| format!("{} pid {} ({})", t.name, t.pid(), t.listeners_text()))
                .chain(std::iter::once(format!("harness pid {}", std::process::id())))
                .collect();
            eprintln!("{prefix}: {}; load goes to {}", named.join(", "), arm.topology.target_url);
        }
        for tier in arm.topology.tiers() {
            if arm.tiers.contains_key(&tier.name) {
                // The downstream's other replicas: the first one's settings
                // stand for all (they are started alike); their pids are in
                // each round's replica figures.
                continue;
            }
            let settings = match tier.name {
                _ if arm.topology.outside(tier.name).is_some() => {
                    outside_settings(&arm.config, tier.name, tier.pid(), tier.foreign.as_ref())
                }
                TierName::Proxy | TierName::Balancer | TierName::Link | TierName::LinkFront => {
                    arm.topology.relay_settings(tier.name).unwrap_or(serde_json::Value::Null)
                }
                _ => reader.stats(Some(tier)).await.map(|s| s.settings).unwrap_or(serde_json::Value::Null),
            };
            arm.tiers.insert(tier.name, TierInfo::local(tier.pid(), settings));
        }
    }
}

/// What `run.json` says of a foreign tier measured from outside: its
/// command, which figures came from outside and from where, which from our
/// side of its hops, and what was not measured; its tree as it was when ready.
pub(super) fn outside_settings(
    cfg: &Config,
    name: TierName,
    pid: u32,
    foreign: Option<&crate::tiers::process::Foreign>,
) -> serde_json::Value {
    let at_ready = crate::measure::tree::read(pid);
    let relay = !cfg.deploy.foreign.caller_cmd.is_empty() && !cfg.deploy.foreign.downstream_cmd.is_empty();
    let (bytes, not_measured): (&str, Vec<&str>) = match (name, relay) {
        (TierName::Downstream, true) => (
            "internal hop wire bytes: the pass-through relay on that hop (bytes.relay and bytes.internal), per OK call",
            vec!["internal hop message bytes", "requests by outcome as the tier counted them", "its settings"],
        ),
        (TierName::Downstream, false) if cfg.transport.is_grpc() => (
            "internal hop bytes: our caller's gRPC client counters (wire and message bytes, calls by outcome)",
            vec!["its settings"],
        ),
        (TierName::Downstream, false) => (
            "internal hop message bytes and calls: our caller's REST client counters",
            vec!["internal hop wire bytes (our REST client, reqwest, cannot count its sockets)", "its settings"],
        ),
        _ => (
            "front hop: latency and answers from the harness",
            vec!["front hop bytes", "the downstream hop's time inside the caller", "its settings"],
        ),
    };
    serde_json::json!({
        "foreign": {
            "command": foreign.map(|f| f.command.clone()),
            "measured_from_outside": [
                "cpu_seconds and cpu %: its process tree from /proc (every descendant's CPU clock, plus the children it has waited for: cutime + cstime)",
                "rss: its process tree's, summed (/proc/<pid>/status VmRSS)",
            ],
            "from_our_side": bytes,
            "not_measured": not_measured,
            // As its kernel reported it once ready (`--huge-pages`, set
            // before the command ran).
            "transparent_huge_pages": service::huge_pages::settings_of(pid)["transparent_huge_pages"],
            "at_ready": at_ready.map(|r| serde_json::json!({
                "processes": r.processes,
                "rss_bytes": r.rss_bytes,
                "pss_bytes": r.pss_bytes,
                "connections": r.connections,
            })),
        }
    })
}

/// Every process to sample: each arm's tiers, and the harness.
pub(super) fn watched(arms: &[Arm]) -> Vec<Watched> {
    let tiers = arms.iter().enumerate().flat_map(|(i, arm)| watched_of(i, &arm.topology));
    tiers
        .chain(std::iter::once(Watched { arm: None, tier: TierName::Harness, pid: std::process::id(), foreign: false }))
        .collect()
}

/// Arm `arm`'s processes on this host to sample: the tiers it started as
/// processes, and the first process of each foreign image measured from
/// outside (its container's, as this host sees it).
pub(super) fn watched_of(arm: usize, topology: &crate::tiers::Topology) -> Vec<Watched> {
    let images = topology
        .remote()
        .filter(|r| r.foreign.is_some() && r.admin_url.is_none())
        .filter_map(|r| Some(Watched { arm: Some(arm), tier: r.name, pid: r.host_pid?, foreign: true }));
    topology.tiers().map(|t| Watched::tier(arm, t)).chain(images).collect()
}

/// [`dead_tier`] once every arm's nodes that are not child processes have
/// been asked how they are, waiting for the answer: a container that died
/// in the load's last moments, before its watcher heard, is found.
pub(super) async fn confirmed_dead_tier(arms: &mut [Arm], origin: Instant) -> Option<Stop> {
    for arm in arms.iter() {
        arm.topology.confirm_dead().await;
    }
    dead_tier(arms, origin)
}

/// The first tier of any arm found dead, described for the report.
pub(super) fn dead_tier(arms: &mut [Arm], origin: Instant) -> Option<Stop> {
    for arm in arms.iter_mut() {
        let title = arm.config.transport.title();
        for tier in arm.topology.tiers_mut() {
            if let Some(status) = tier.exited() {
                let when = Instant::now().saturating_duration_since(origin).as_secs_f64();
                return Some(Stop::TierDied(format!(
                    "the {} of the {title} arm (pid {}) exited at t={when:.1}s with {status}; its last stderr lines:\n{}",
                    tier.foreign.as_ref().map_or(tier.name.to_string(), |f| format!("{} (`{}`)", tier.name, f.command)),
                    tier.pid(),
                    tier.stderr_tail()
                )));
            }
        }
        if let Some((tier, container, death)) = arm.topology.dead() {
            let when = death.at.saturating_duration_since(origin).as_secs_f64();
            return Some(Stop::TierDied(format!(
                "the {tier} of the {title} arm (container {container}) {} at t={when:.1}s; its last stderr lines:\n{}",
                death.why, death.stderr
            )));
        }
    }
    None
}

/// Waits until `at`, watching every tier and the interrupt token.
pub(super) async fn wait_until(
    at: Instant,
    arms: &mut [Arm],
    interrupt: &Interrupt,
    origin: Instant,
) -> Result<(), Stop> {
    loop {
        if let Some(stop) = dead_tier(arms, origin) {
            return Err(stop);
        }
        let now = Instant::now();
        if now >= at {
            return Ok(());
        }
        tokio::select! {
            _ = interrupt.stopped() => return Err(Stop::Interrupted),
            _ = tokio::time::sleep((at - now).min(LIVENESS_POLL)) => {}
        }
    }
}
