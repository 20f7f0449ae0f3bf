//! The tiers of one arm: the layout (`layout.rs`) walked once, each node
//! started by the arm's launcher (`launch.rs`: processes or containers)
//! after its upstreams, with their addresses; stopped in reverse, the
//! replicas together. Scaling (`--scale-at`) starts or takes out replicas
//! and reloads the balancer with the replicas left.

use std::path::Path;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::{Config, Isolation, TlsFiles};
use crate::result::TierName;
use crate::tiers::balancer;
use crate::tiers::command::Upstreams;
use crate::tiers::containers::Containers;
use crate::tiers::launch::{Death, Launcher, Processes, RemoteTier, Running};
use crate::tiers::layout::{self, Kind, Layout, Node};
use crate::tiers::process::{Tier, TierError};

/// How long a tier that failed a later start-up step gets to stop.
const ABANDON_GRACE: Duration = Duration::from_secs(2);
/// How long each tier gets to drain when the run ends.
const STOP_GRACE: Duration = Duration::from_secs(6);

/// The tiers of one arm. With `--downstream-url` or `--caller-url`, none are
/// started and the load goes to the given tier.
#[derive(Debug)]
pub struct Topology {
    launcher: Option<Box<dyn Launcher>>,
    /// The nodes started, in start order; replicas added by scaling last.
    running: Vec<Running>,
    /// Tiers already running elsewhere, given by URL.
    given: Vec<RemoteTier>,
    /// The final `/stats` of replicas removed during the round
    /// (`--scale-at`), by index: their counters still count.
    pub retired: Vec<(u32, telemetry::StatsSnapshot)>,
    /// The index the next replica gets: never reused.
    next_replica: u32,
    /// Where the load goes: the caller's front door (or a relay's in front
    /// of it) or the downstream's listener for the transport.
    pub target_url: String,
    /// The downstream's listener the arm reaches (`grpc`, `rest`).
    pub internal_listener: &'static str,
}

impl Topology {
    /// No tiers at all: what an arm holds between stopping its tiers and
    /// starting fresh ones.
    pub fn empty() -> Topology {
        Topology {
            launcher: None,
            running: Vec::new(),
            given: Vec::new(),
            retired: Vec::new(),
            next_replica: 1,
            target_url: String::new(),
            internal_listener: "",
        }
    }

    /// Starts the arm's layout with the launcher `--isolation` names, or
    /// records the tiers given by URL. A failure stops whatever was started.
    /// `tls`: the run's certificate files, when the internal hop uses TLS.
    pub async fn start(cfg: &Config, tls: Option<&TlsFiles>) -> Result<Topology, TierError> {
        let mut topology = Topology { internal_listener: cfg.transport.listener(), ..Topology::empty() };
        if topology.given(cfg) {
            return Ok(topology);
        }
        let launcher: Box<dyn Launcher> = match cfg.deploy.isolation {
            Isolation::Processes => Box::new(Processes::new(cfg)),
            Isolation::Containers => Box::new(Containers::new(cfg, tls).await?),
        };
        topology.launcher = Some(launcher);
        match topology.walk(cfg, tls, &layout::layout(cfg)).await {
            Ok(()) => Ok(topology),
            Err(e) => {
                topology.stop_within(ABANDON_GRACE, &CancellationToken::new()).await;
                Err(e)
            }
        }
    }

    /// The tiers `--downstream-url` or `--caller-url` give: none to start.
    fn given(&mut self, cfg: &Config) -> bool {
        let remote = |name, admin_url: Option<&str>| RemoteTier {
            name,
            replica: None,
            admin_url: admin_url.map(str::to_owned),
            container: None,
            cpu_stat: None,
            host_pid: None,
            foreign: None,
        };
        let downstream_admin = cfg.deploy.remote.downstream_admin.as_deref();
        if let Some(url) = &cfg.deploy.downstream_url {
            self.target_url = url.clone();
            self.given.extend(downstream_admin.map(|a| remote(TierName::Downstream, Some(a))));
        } else if let Some(url) = cfg.remote_caller() {
            self.target_url = format!("{url}{}", layout::front_path(cfg));
            self.given.push(remote(TierName::Downstream, downstream_admin));
            self.given.push(remote(TierName::Caller, cfg.remote_caller_admin()));
        } else {
            return false;
        }
        true
    }

    /// Starts every node of `layout` in its order, each told where its
    /// upstreams are.
    async fn walk(&mut self, cfg: &Config, tls: Option<&TlsFiles>, layout: &Layout) -> Result<(), TierError> {
        let launcher = self.launcher.as_mut().expect("a walked topology has a launcher");
        for node in &layout.nodes {
            let upstreams = upstreams_of(cfg, tls.is_some(), node, &self.running);
            let running = launcher.start(cfg, tls, node, upstreams).await?;
            self.running.push(running);
        }
        self.next_replica = layout.replicas().count() as u32;
        let entry = &self.running[layout.entry];
        let addr = entry.listeners.get(layout.entry_listener).map(ToString::to_string).unwrap_or_default();
        let scheme = if layout.path.is_empty() && tls.is_some() { "https" } else { "http" };
        self.target_url = format!("{scheme}://{addr}{}", layout.path);
        Ok(())
    }

    /// The replicas running, each with its index: `downstream#0` first.
    pub fn live_replicas(&self) -> impl Iterator<Item = (u32, &Running)> {
        self.running.iter().filter(|r| r.node.kind == Kind::Downstream).map(|r| (r.replica(), r))
    }

    /// Adds `change` replicas (or, negative, takes the newest out of the
    /// balancer, never `downstream#0`) and reloads the balancer with the
    /// replicas left. Returns the indexes added and the replicas taken
    /// out, still running: the caller reads their last figures and stops
    /// them ([`Topology::stop_node`]).
    pub async fn scale(
        &mut self,
        cfg: &Config,
        tls: Option<&TlsFiles>,
        change: i32,
    ) -> Result<(Vec<u32>, Vec<Running>), TierError> {
        let launcher = self.launcher.as_mut().expect("a scaled topology has a launcher");
        let (mut added, mut removed) = (Vec::new(), Vec::new());
        for _ in 0..change.max(0) {
            let node = layout::replica_node(Some(self.next_replica), layout::internal_protocol(cfg));
            self.running.push(launcher.start(cfg, tls, &node, Upstreams::None).await?);
            added.push(self.next_replica);
            self.next_replica += 1;
        }
        for _ in 0..change.min(0).unsigned_abs() {
            let newest = self.running.iter().rposition(|r| r.node.kind == Kind::Downstream && r.replica() > 0);
            removed.extend(newest.map(|i| self.running.remove(i)));
        }
        let upstreams: Vec<_> =
            self.live_replicas().filter_map(|(_, r)| r.listeners.get(cfg.transport.listener()).copied()).collect();
        let balancer = self.running.iter_mut().find(|r| matches!(r.node.kind, Kind::Balancer(_)));
        if let Some(Running { process: Some(tier), proxy: Some(info), .. }) = balancer {
            balancer::reload(cfg.replicas.balance, tier, info, &upstreams, layout::internal_protocol(cfg))?;
        }
        Ok((added, removed))
    }

    /// Stops a replica taken out by [`Topology::scale`]: a future of its own.
    pub fn stop_node(&mut self, running: Running, cut: &CancellationToken) -> crate::tiers::launch::Stopping {
        match self.launcher.as_mut() {
            Some(l) => l.stop(running, STOP_GRACE, cut.clone()),
            None => Box::pin(async {}),
        }
    }

    /// The admin endpoints of the downstream's running replicas, by index
    /// (`downstream#0` first); empty for one replica reached directly.
    pub fn replica_admin_urls(&self) -> Vec<(u32, String)> {
        let several = self.live_replicas().filter(|(_, r)| r.node.replica.is_some());
        several.filter_map(|(i, r)| Some((i, r.admin_url()?))).collect()
    }

    /// The admin endpoint of a tier: a started one's, or the one given for
    /// a tier elsewhere; none for a container that has stopped (its address
    /// is gone: a read would wait for its timeout).
    pub fn admin_url(&self, name: TierName) -> Option<String> {
        if self.dead().is_some_and(|(tier, _, _)| tier == name) {
            return None;
        }
        let started = self.running.iter().filter(|r| r.node.name == name).find_map(Running::admin_url);
        started.or_else(|| self.given.iter().find(|r| r.name == name).and_then(|r| r.admin_url.clone()))
    }

    /// A node of this arm that stopped and is not a child process (a
    /// container): its tier, what it ran in, and how it ended.
    pub fn dead(&self) -> Option<(TierName, String, &Death)> {
        self.launcher.as_ref()?.dead()
    }

    /// Learns, waiting for the answer, whether a node that is not a child
    /// process has stopped ([`Topology::dead`] then says so).
    pub async fn confirm_dead(&self) {
        if let Some(l) = self.launcher.as_ref() {
            l.confirm_dead().await;
        }
    }

    /// Tiers that are not child processes of the harness (given by URL, or
    /// in containers): measured only through their admin endpoints.
    pub fn remote(&self) -> impl Iterator<Item = &RemoteTier> {
        self.given.iter().chain(self.running.iter().filter_map(|r| r.remote.as_ref()))
    }

    /// Each tier with a CPU limit whose cgroup was found: its `cpu.stat`
    /// and its limit in cores; each replica on its own, with its index.
    pub fn cpu_limited(&self) -> impl Iterator<Item = (TierName, Option<u32>, &Path, f64)> {
        self.remote().filter_map(|r| r.cpu_stat.as_ref().map(|(p, cpus)| (r.name, r.replica, p.as_path(), *cpus)))
    }

    /// The first process of tier `name` when it is foreign and serves no
    /// `/stats`: measured from outside, as its process tree.
    pub fn outside(&self, name: TierName) -> Option<u32> {
        let r = self.running.iter().find(|r| r.node.name == name)?;
        if let Some(c) = r.remote.as_ref().filter(|c| c.foreign.is_some()) {
            // A foreign image's first process, as this host sees it.
            return c.host_pid.filter(|_| c.admin_url.is_none());
        }
        let t = r.process.as_ref().filter(|t| t.foreign.is_some())?;
        (!t.ready.listeners.contains_key("admin")).then(|| t.pid())
    }

    /// The `/stats` of the pass-through relay between two foreign tiers.
    pub fn relay_stats_url(&self) -> Option<String> {
        let r = self.running.iter().find(|r| r.node.name == TierName::Link)?;
        r.listeners.get("stats").map(|a| format!("http://{a}"))
    }

    /// The tiers this arm started as child processes.
    pub fn tiers(&self) -> impl Iterator<Item = &Tier> {
        self.running.iter().filter_map(|r| r.process.as_ref())
    }

    pub fn tiers_mut(&mut self) -> impl Iterator<Item = &mut Tier> {
        self.running.iter_mut().filter_map(|r| r.process.as_mut())
    }

    /// What `run.json` records of a relay the harness started: a proxy's or
    /// balancer's configuration, a link emulator's settings.
    pub fn relay_settings(&self, name: TierName) -> Option<serde_json::Value> {
        let r = self.running.iter().find(|r| r.node.name == name)?;
        r.proxy.as_ref().map(|p| p.to_settings()).or_else(|| r.link.clone())
    }

    /// Stops every node in reverse start order (the caller before the
    /// relays behind it), the replicas last and together; once `cut`,
    /// without waiting for their drain.
    pub async fn stop(self, cut: &CancellationToken) {
        self.stop_within(STOP_GRACE, cut).await;
    }

    async fn stop_within(mut self, grace: Duration, cut: &CancellationToken) {
        let Some(mut launcher) = self.launcher.take() else { return };
        let (replicas, others): (Vec<Running>, Vec<Running>) =
            self.running.drain(..).partition(|r| r.node.kind == Kind::Downstream);
        for r in others.into_iter().rev() {
            launcher.stop(r, grace, cut.clone()).await;
        }
        let draining: Vec<_> = replicas.into_iter().map(|r| launcher.stop(r, grace, cut.clone())).collect();
        futures::future::join_all(draining).await;
        launcher.close().await;
    }
}

/// Where `node` sends, from the nodes already running (its upstreams come
/// before it): the caller gets URLs (a downstream's gRPC and REST
/// listeners, or the one relay's for both), a relay the addresses of the
/// listeners it forwards to.
fn upstreams_of(cfg: &Config, tls: bool, node: &Node, running: &[Running]) -> Upstreams {
    let ups: Vec<&Running> = node.upstreams.iter().map(|&u| &running[u]).collect();
    match node.kind {
        Kind::Downstream => Upstreams::None,
        Kind::Caller => {
            let (grpc, rest): (Vec<String>, Vec<String>) = ups
                .iter()
                .map(|r| match r.node.kind {
                    Kind::Downstream => (r.url("grpc", tls), r.url("rest", tls)),
                    _ => {
                        let url = r.url(layout::reached_listener(cfg, &r.node), tls);
                        (url.clone(), url)
                    }
                })
                .unzip();
            let hosts = ups.iter().filter_map(|r| Some((r.host.clone()?, r.listeners.values().next()?.ip()))).collect();
            Upstreams::Urls { grpc: grpc.join(","), rest: rest.join(","), hosts }
        }
        _ => Upstreams::Relay(
            ups.iter().filter_map(|r| r.listeners.get(layout::reached_listener(cfg, &r.node)).copied()).collect(),
        ),
    }
}
