//! The tiers of a run that are not child processes of the harness (already
//! running elsewhere, or in containers): what `run.json` records about each
//! (its reported host name, pid and settings, the admin endpoint it is
//! sampled through) and which endpoints the sampler reads. The host name
//! every tier reports is recorded here too.

use crate::measure::remote::RemoteWatched;
use crate::measure::tier_stats::TierStatsReader;
use crate::result::{SampledVia, TierInfo};

use super::arms::Arm;

/// Records each remote tier of every arm, and the host name each started
/// tier reports; names the remote tiers on stderr. A remote caller that
/// serves another transport than its arm's is an error: its figures would
/// be filed under the wrong arm.
pub(super) async fn describe(arms: &mut [Arm], reader: &TierStatsReader, quiet: bool) -> anyhow::Result<()> {
    for arm in arms.iter_mut() {
        for tier in arm.topology.tiers() {
            let hostname = reader.stats(Some(tier)).await.and_then(|s| s.hostname);
            if let Some(info) = arm.tiers.get_mut(&tier.name) {
                info.hostname = hostname;
            }
        }
        for remote in arm.topology.remote() {
            let stats = reader.stats_at(remote.admin_url.as_deref()).await;
            // A foreign image with no /stats: measured from outside, as its tree on this host.
            let outside = arm.topology.outside(remote.name);
            let mut settings = match outside {
                Some(pid) => super::arms::outside_settings(&arm.config, remote.name, pid, remote.foreign.as_ref()),
                None => stats.as_ref().map_or(serde_json::Value::Null, |s| s.settings.clone()),
            };
            if let (Some(container), Some(map)) = (&remote.container, settings.as_object_mut()) {
                map.insert("container".into(), container.clone());
            }
            let serves = stats.as_ref().and_then(|s| s.settings.get("transport")?.as_str().map(str::to_owned));
            let transport = arm.config.transport.as_str();
            if remote.name == crate::result::TierName::Caller
                && let Some(other) = serves.filter(|t| t != transport)
            {
                anyhow::bail!(
                    "the caller whose admin endpoint is {} serves {other}, but it was given for the {transport} arm \
                     (--caller-url / --caller-admin)",
                    remote.admin_url.as_deref().unwrap_or("?")
                );
            }
            if let Some(loaded) = arm.contract.as_deref() {
                check_contract(loaded, remote, stats.as_ref(), transport)?;
            }
            if !quiet && let Some(pid) = outside {
                eprintln!("{} ({}): measured from outside, host pid {pid}", remote.name, arm.config.transport);
            } else if !quiet {
                let at = remote.admin_url.as_deref().unwrap_or("no admin endpoint given");
                let host = stats.as_ref().and_then(|s| s.hostname.as_deref()).unwrap_or("host unknown");
                let state = if stats.is_some() { host } else { "not reachable: its figures are not measured" };
                let replica = remote.replica.map(|i| format!("#{i}")).unwrap_or_default();
                eprintln!("{}{replica} ({}): sampled through {at} ({state})", remote.name, arm.config.transport);
            }
            if remote.replica.is_some_and(|i| i > 0) {
                // As for replicas started as processes: the first one's
                // settings stand for all; each round holds every replica's figures.
                continue;
            }
            let info = TierInfo {
                pid: outside.or(stats.as_ref().map(|s| s.process.pid)),
                hostname: stats.as_ref().and_then(|s| s.hostname.clone()),
                settings,
                sampled_via: outside
                    .is_none()
                    .then(|| SampledVia { admin_url: remote.admin_url.clone(), reachable: stats.is_some() }),
            };
            arm.tiers.insert(remote.name, info);
        }
    }
    Ok(())
}

/// A tier the harness did not start must serve the run's own contract:
/// the same method, the same compiled descriptor set and the same messages
/// on the side it sends (the caller's requests, the downstream's answers),
/// as its `/stats` reports them. One it cannot read is refused too: what it
/// serves cannot be checked.
fn check_contract(
    loaded: &contract::Loaded,
    remote: &crate::tiers::RemoteTier,
    stats: Option<&telemetry::StatsSnapshot>,
    transport: &str,
) -> anyhow::Result<()> {
    let at = remote.admin_url.as_deref().unwrap_or("no admin endpoint given");
    let replica = remote.replica.map(|i| format!("#{i}")).unwrap_or_default();
    let Some(stats) = stats else {
        anyhow::bail!(
            "the {}{replica} of the {transport} arm cannot be read at {at}, so the contract it serves cannot be checked \
             against --proto",
            remote.name
        );
    };
    let side =
        if remote.name == crate::result::TierName::Caller { contract::Side::Requests } else { contract::Side::Answers };
    if let Some(why) = loaded.differs_from(stats.settings.get("contract"), side) {
        anyhow::bail!("the {}{replica} of the {transport} arm (sampled through {at}) {why}", remote.name);
    }
    Ok(())
}

/// Every remote tier with an admin endpoint, to sample.
pub(super) fn watched(arms: &[Arm]) -> Vec<RemoteWatched> {
    arms.iter().enumerate().flat_map(|(i, arm)| watched_of(i, &arm.topology)).collect()
}

/// Arm `arm`'s remote tiers with an admin endpoint, each tier's together
/// (the downstream's replicas are summed as one tier's figures).
pub(super) fn watched_of(arm: usize, topology: &crate::tiers::Topology) -> Vec<RemoteWatched> {
    let mut watched: Vec<RemoteWatched> = topology
        .remote()
        .filter_map(|r| Some(RemoteWatched { arm, tier: r.name, admin_url: r.admin_url.clone()? }))
        .collect();
    watched.sort_by_key(|w| w.tier);
    watched
}
