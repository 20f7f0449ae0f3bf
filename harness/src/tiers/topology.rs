//! The tiers of one arm: the downstream, the caller pointed at it, and an
//! optional reverse proxy on one hop, started in that order and stopped in
//! reverse. Each tier is its own OS process so its CPU and memory are measured
//! as a team would see them in production.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::{Balance, Config, Isolation, ProxyHop, TargetTier, TlsFiles};
use crate::result::ProxyInfo;
use crate::result::TierName;
use crate::tiers::command::{Placement, tier_args};
use crate::tiers::containers::{self, Containers};
use crate::tiers::process::{Tier, TierError, spawn};
use crate::tiers::proxy::Protocol;
use crate::tiers::{balancer, proxy};

/// How long a tier that failed a later start-up step gets to stop.
const ABANDON_GRACE: Duration = Duration::from_secs(2);
/// How long each tier gets to drain when the run ends.
const STOP_GRACE: Duration = Duration::from_secs(6);

/// The tiers of one arm. With `--downstream-url` or `--caller-url`, none are
/// started and the load goes to the given tier; with `--isolation
/// containers`, the tiers run in containers.
#[derive(Debug)]
pub struct Topology {
    /// The downstream, or its first replica (`downstream#0`).
    pub downstream: Option<Tier>,
    /// The downstream's other replicas, each with its index
    /// (`downstream#1`, …), with `--downstream-replicas`; an index is never
    /// reused, so a replica added after one was removed gets a new one.
    pub replicas: Vec<(u32, Tier)>,
    /// The final `/stats` of replicas removed during the round
    /// (`--scale-at`), by index: their counters still count.
    pub retired: Vec<(u32, telemetry::StatsSnapshot)>,
    /// The index the next replica gets.
    next_replica: u32,
    /// The balancer in front of the replicas (`--balance l4|l7`), and what
    /// the report says about it.
    pub balancer: Option<(Tier, ProxyInfo)>,
    pub caller: Option<Tier>,
    /// A reverse proxy on one hop, and what the report says about it.
    pub proxy: Option<(Tier, ProxyInfo)>,
    /// The link emulators on the internal and the front hop (`--link`), with
    /// the settings `run.json` records for each.
    pub links: Vec<(Tier, serde_json::Value)>,
    /// Tiers that are not child processes of the harness (already running
    /// elsewhere, or in containers): measured only through their admin
    /// endpoints.
    pub remote: Vec<RemoteTier>,
    /// The containers of this arm, with `--isolation containers`.
    containers: Option<Containers>,
    /// Where the load goes: the caller's front door or the downstream's
    /// listener for the transport.
    pub target_url: String,
}

/// A tier the harness did not start as a child process.
#[derive(Debug, Clone)]
pub struct RemoteTier {
    pub name: TierName,
    /// Which of the downstream's replicas it is, for an arm with several
    /// (or a balancer): `downstream#0`, …
    pub replica: Option<u32>,
    /// Its admin endpoint (`http://host:port`), if known.
    pub admin_url: Option<String>,
    /// The container it runs in, when the harness started one
    /// (`settings.container` in `run.json`).
    pub container: Option<serde_json::Value>,
    /// Its cgroup's `cpu.stat` and its limit in cores, for a container
    /// with `--tier-cpus`.
    pub cpu_stat: Option<(PathBuf, f64)>,
    /// Its pid on this host, for a container the harness started.
    pub host_pid: Option<u32>,
}

fn url_of(tier: &Tier, listener: &str, tls: Option<&TlsFiles>) -> String {
    let scheme = if tls.is_some() { "https" } else { "http" };
    tier.ready.listeners.get(listener).map(|a| format!("{scheme}://{a}")).unwrap_or_default()
}

impl Topology {
    /// No tiers at all: what an arm holds between stopping its tiers and
    /// starting fresh ones.
    pub fn empty() -> Topology {
        Topology {
            downstream: None,
            replicas: Vec::new(),
            retired: Vec::new(),
            next_replica: 1,
            balancer: None,
            caller: None,
            proxy: None,
            links: Vec::new(),
            remote: Vec::new(),
            containers: None,
            target_url: String::new(),
        }
    }

    /// Starts the downstream, then (for the three-tier topology) an
    /// internal-hop proxy, the caller, and a front-hop proxy. A failure stops
    /// whatever was started.
    /// `tls`: the run's certificate files, when the internal hop uses TLS.
    pub async fn start(cfg: &Config, tls: Option<&TlsFiles>) -> Result<Topology, TierError> {
        let mut topology = Topology::empty();
        let remote = |name, admin_url: Option<&str>| RemoteTier {
            name,
            replica: None,
            admin_url: admin_url.map(str::to_owned),
            container: None,
            cpu_stat: None,
            host_pid: None,
        };
        if let Some(url) = &cfg.deploy.downstream_url {
            topology.target_url = url.clone();
            if let Some(admin) = cfg.deploy.remote.downstream_admin.as_deref() {
                topology.remote.push(remote(TierName::Downstream, Some(admin)));
            }
            return Ok(topology);
        }
        if let Some(url) = cfg.remote_caller() {
            topology.target_url = format!("{url}{}", front_path(cfg));
            topology.remote.push(remote(TierName::Downstream, cfg.deploy.remote.downstream_admin.as_deref()));
            topology.remote.push(remote(TierName::Caller, cfg.remote_caller_admin()));
            return Ok(topology);
        }
        if cfg.deploy.isolation == Isolation::Containers {
            let mut set = Containers::start_downstream(cfg).await?;
            let started = topology.start_in_containers(cfg, &mut set).await;
            topology.containers = Some(set);
            return match started {
                Ok(()) => Ok(topology),
                Err(e) => {
                    topology.stop_within(ABANDON_GRACE, &CancellationToken::new()).await;
                    Err(e)
                }
            };
        }
        match topology.start_tiers(cfg, tls).await {
            Ok(()) => Ok(topology),
            Err(e) => {
                topology.stop_within(ABANDON_GRACE, &CancellationToken::new()).await;
                Err(e)
            }
        }
    }

    /// With the downstream's replicas running in `set`: the balancer on the
    /// host, listening on the arm's network (`--balance l4|l7`), then the
    /// caller's container pointed at it, or at every replica (`client`), or
    /// at the one replica; each container becomes a remote tier.
    async fn start_in_containers(&mut self, cfg: &Config, set: &mut Containers) -> Result<(), TierError> {
        let several = cfg.replicas.downstream_replicas > 1 || cfg.replicas.balance != Balance::None;
        let urls = |port: u16| set.replicas().map(|t| t.url(port)).collect::<Vec<_>>().join(",");
        let (mut grpc, mut rest) = (urls(containers::GRPC_PORT), urls(containers::REST_PORT));
        let mode = cfg.replicas.balance;
        if mode.has_balancer() {
            let port = if cfg.transport.is_grpc() { containers::GRPC_PORT } else { containers::REST_PORT };
            let upstreams: Vec<SocketAddr> = set.replicas().map(|t| SocketAddr::new(t.ip, port)).collect();
            let protocol = internal_protocol(cfg);
            let (tier, info) = balancer::start(mode, set.gateway().await?, &upstreams, protocol).await?;
            grpc = format!("http://{}", info.listen);
            rest = grpc.clone();
            self.balancer = Some((tier, info));
        }
        set.start_caller(cfg, grpc, rest).await?;
        for t in &set.tiers {
            self.remote.push(RemoteTier {
                name: t.tier,
                replica: (several && t.tier == TierName::Downstream).then_some(t.replica),
                admin_url: Some(t.url(containers::ADMIN_PORT)),
                container: Some(t.description.clone()),
                cpu_stat: t.cpu_stat.clone(),
                host_pid: t.host_pid,
            });
            if t.tier == TierName::Caller {
                self.target_url = format!("{}{}", t.url(containers::FRONT_PORT), front_path(cfg));
            }
        }
        Ok(())
    }

    async fn start_tiers(&mut self, cfg: &Config, tls: Option<&TlsFiles>) -> Result<(), TierError> {
        let downstream = self.downstream.insert(spawn(TierName::Downstream, downstream_args(cfg, tls)).await?);
        if cfg.deploy.target == TargetTier::Downstream {
            self.target_url = url_of(downstream, cfg.transport.listener(), tls);
            return Ok(());
        }
        let (mut grpc_url, mut rest_url) = (url_of(downstream, "grpc", tls), url_of(downstream, "rest", tls));
        let downstream_addr = |name| listener(downstream, name);
        let internal_upstream = downstream_addr(cfg.transport.listener());
        let link_upstream = downstream_addr(cfg.transport.as_str());
        if cfg.replicas.downstream_replicas > 1 || cfg.replicas.balance != Balance::None {
            (grpc_url, rest_url) = self.start_replicas(cfg, tls).await?;
        }
        if let (Some(kind), ProxyHop::Internal) = (cfg.deploy.proxy, cfg.deploy.proxy_hop) {
            // Between the caller and the downstream's listener for the transport.
            let upstream = internal_upstream?;
            let protocol = internal_protocol(cfg);
            let (tier, info) = proxy::start(kind, ProxyHop::Internal, cfg.deploy.bind, upstream, protocol).await?;
            grpc_url = format!("http://{}", info.listen);
            rest_url = grpc_url.clone();
            self.proxy = Some((tier, info));
        }
        let link = cfg.link.as_ref();
        if let Some(link) = link.filter(|l| l.hop.internal()) {
            // Between the caller and the downstream's listener for the transport.
            let upstream = link_upstream?;
            let (tier, settings) = crate::tiers::link::start(TierName::Link, link, upstream).await?;
            let scheme = if tls.is_some() { "https" } else { "http" };
            grpc_url = format!("{scheme}://{}", listener(&tier, "link")?);
            rest_url = grpc_url.clone();
            self.links.push((tier, settings));
        }
        let caller = self.caller.insert(spawn(TierName::Caller, caller_args(cfg, tls, grpc_url, rest_url)).await?);
        let front = listener(caller, "front")?;
        self.target_url = format!("http://{front}{}", front_path(cfg));
        if let Some(link) = link.filter(|l| l.hop.front()) {
            // Between the harness and the caller.
            let (tier, settings) = crate::tiers::link::start(TierName::LinkFront, link, front).await?;
            self.target_url = format!("http://{}{}", listener(&tier, "link")?, front_path(cfg));
            self.links.push((tier, settings));
        }
        if let (Some(kind), ProxyHop::Front) = (cfg.deploy.proxy, cfg.deploy.proxy_hop) {
            // Between the harness and the caller.
            let (tier, info) = proxy::start(
                kind,
                ProxyHop::Front,
                cfg.deploy.bind,
                front,
                Protocol { h2c: false, streams: cfg.streams.is_some() },
            )
            .await?;
            self.target_url = format!("http://{}{}", info.listen, front_path(cfg));
            self.proxy = Some((tier, info));
        }
        Ok(())
    }

    /// Starts the other replicas, then the balancer in front of all of them
    /// (or none, for client-side balancing); returns the gRPC and REST URLs
    /// the caller is given.
    async fn start_replicas(&mut self, cfg: &Config, tls: Option<&TlsFiles>) -> Result<(String, String), TierError> {
        self.add_replicas(cfg, tls, cfg.replicas.downstream_replicas.saturating_sub(1)).await?;
        let all: Vec<&Tier> = self.live_replicas().map(|(_, t)| t).collect();
        let urls = |listener: &str| all.iter().map(|t| url_of(t, listener, tls)).collect::<Vec<_>>().join(",");
        let mode = cfg.replicas.balance;
        if !mode.has_balancer() {
            return Ok((urls("grpc"), urls("rest")));
        }
        let upstreams = self.upstreams(cfg)?;
        let protocol = internal_protocol(cfg);
        let (tier, info) = balancer::start(mode, cfg.deploy.bind, &upstreams, protocol).await?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{}", info.listen);
        self.balancer = Some((tier, info));
        Ok((url.clone(), url))
    }

    /// Starts `n` more replicas; returns their indexes.
    async fn add_replicas(&mut self, cfg: &Config, tls: Option<&TlsFiles>, n: u32) -> Result<Vec<u32>, TierError> {
        let mut added = Vec::new();
        for _ in 0..n {
            let tier = spawn(TierName::Downstream, downstream_args(cfg, tls)).await?;
            let index = self.next_replica;
            self.next_replica += 1;
            self.replicas.push((index, tier));
            added.push(index);
        }
        Ok(added)
    }

    /// The replicas running, each with its index: `downstream#0` first.
    pub fn live_replicas(&self) -> impl Iterator<Item = (u32, &Tier)> {
        self.downstream.iter().map(|t| (0, t)).chain(self.replicas.iter().map(|(i, t)| (*i, t)))
    }

    /// Each running replica's listener for the arm's transport.
    fn upstreams(&self, cfg: &Config) -> Result<Vec<SocketAddr>, TierError> {
        self.live_replicas().map(|(_, t)| listener(t, cfg.transport.listener())).collect()
    }

    /// Adds `change` replicas (or, negative, takes the newest out of the
    /// balancer) and reloads the balancer with the replicas left. Returns
    /// the indexes added and the replicas taken out, still running: the
    /// caller reads their last figures and stops them.
    pub async fn scale(
        &mut self,
        cfg: &Config,
        tls: Option<&TlsFiles>,
        change: i32,
    ) -> Result<(Vec<u32>, Vec<(u32, Tier)>), TierError> {
        let (added, removed) = if change > 0 {
            (self.add_replicas(cfg, tls, change.unsigned_abs()).await?, Vec::new())
        } else {
            let keep = self.replicas.len().saturating_sub(change.unsigned_abs() as usize);
            (Vec::new(), self.replicas.split_off(keep))
        };
        let upstreams = self.upstreams(cfg)?;
        if let Some((tier, info)) = self.balancer.as_mut() {
            balancer::reload(cfg.replicas.balance, tier, info, &upstreams, internal_protocol(cfg))?;
        }
        Ok((added, removed))
    }

    /// The admin endpoints of the downstream's running replicas, by index
    /// (`downstream#0` first); empty for one replica reached directly.
    pub fn replica_admin_urls(&self) -> Vec<(u32, String)> {
        let in_containers: Vec<(u32, String)> =
            self.remote.iter().filter_map(|r| Some((r.replica?, r.admin_url.clone()?))).collect();
        if !in_containers.is_empty() {
            return in_containers;
        }
        if self.replicas.is_empty() && self.balancer.is_none() && self.retired.is_empty() {
            return Vec::new();
        }
        self.live_replicas().map(|(i, t)| (i, t.admin_url())).collect()
    }

    /// The admin endpoint of a tier: a started one's, or the one given for
    /// a tier elsewhere; none for a container that has stopped (its address
    /// is gone: a read would wait for its timeout).
    pub fn admin_url(&self, name: TierName) -> Option<String> {
        if self.dead_container().is_some_and(|(t, _)| t.tier == name) {
            return None;
        }
        let started = match name {
            TierName::Downstream => self.downstream.as_ref(),
            TierName::Caller => self.caller.as_ref(),
            _ => None,
        };
        match started {
            Some(tier) => Some(tier.admin_url()),
            None => self.remote.iter().find(|r| r.name == name).and_then(|r| r.admin_url.clone()),
        }
    }

    /// A container of this arm that has stopped, and how it ended.
    pub fn dead_container(&self) -> Option<(&containers::Started, &containers::Death)> {
        self.containers.as_ref()?.dead()
    }

    /// Each tier with a CPU limit whose cgroup was found: its `cpu.stat`
    /// and its limit in cores; each replica on its own, with its index.
    pub fn cpu_limited(&self) -> impl Iterator<Item = (TierName, Option<u32>, &Path, f64)> {
        self.remote.iter().filter_map(|r| r.cpu_stat.as_ref().map(|(p, cpus)| (r.name, r.replica, p.as_path(), *cpus)))
    }

    /// The tiers this arm started as child processes.
    pub fn tiers(&self) -> impl Iterator<Item = &Tier> {
        self.downstream
            .iter()
            .chain(self.replicas.iter().map(|(_, t)| t))
            .chain(self.balancer.iter().map(|(t, _)| t))
            .chain(self.caller.iter())
            .chain(self.proxy.iter().map(|(t, _)| t))
            .chain(self.links.iter().map(|(t, _)| t))
    }

    pub fn tiers_mut(&mut self) -> impl Iterator<Item = &mut Tier> {
        self.downstream
            .iter_mut()
            .chain(self.replicas.iter_mut().map(|(_, t)| t))
            .chain(self.balancer.iter_mut().map(|(t, _)| t))
            .chain(self.caller.iter_mut())
            .chain(self.proxy.iter_mut().map(|(t, _)| t))
            .chain(self.links.iter_mut().map(|(t, _)| t))
    }

    /// Stops the caller first (so the downstream sees no new calls), then the
    /// link emulators, the proxy and the balancer, then the downstream's
    /// replicas; once `cut`, without
    /// waiting for their drain.
    pub async fn stop(self, cut: &CancellationToken) {
        self.stop_within(STOP_GRACE, cut).await;
    }

    async fn stop_within(self, grace: Duration, cut: &CancellationToken) {
        if let Some(set) = self.containers {
            if cut.is_cancelled() { set.remove().await } else { set.stop(grace).await }
        }
        if let Some(c) = self.caller {
            c.stop(grace, cut).await;
        }
        for (link, _) in self.links {
            link.stop(grace, cut).await;
        }
        for (p, info) in self.proxy.into_iter().chain(self.balancer) {
            p.stop(grace, cut).await;
            // Its temporary and log files: the configuration is in the report.
            let _ = std::fs::remove_dir_all(&info.work_dir);
        }
        // The replicas drain together.
        let replicas = self.downstream.into_iter().chain(self.replicas.into_iter().map(|(_, t)| t));
        futures::future::join_all(replicas.map(|d| d.stop(grace, cut))).await;
    }
}

/// A listener a tier announced in its ready line.
fn listener(tier: &Tier, name: &str) -> Result<SocketAddr, TierError> {
    tier.ready
        .listeners
        .get(name)
        .copied()
        .ok_or_else(|| TierError::Spawn { tier: tier.name, reason: format!("its ready line names no {name} listener") })
}

/// The downstream's arguments: its listeners on `--bind`, any free port
/// (admin where `--admin-bind` says, loopback by default, whatever `--bind`
/// exposes).
pub(crate) fn downstream_args(cfg: &Config, tls: Option<&TlsFiles>) -> Vec<String> {
    let any_port = SocketAddr::new(cfg.deploy.bind, 0).to_string();
    let placement = Placement::Downstream {
        grpc: any_port.clone(),
        rest: any_port,
        admin: SocketAddr::new(cfg.deploy.admin_bind, 0).to_string(),
    };
    tier_args(cfg, tls, &placement)
}

/// The caller's arguments: its front door on `--bind` and `--caller-port`,
/// pointed at the downstream's (or the proxy's, or the link's) URLs.
pub(crate) fn caller_args(cfg: &Config, tls: Option<&TlsFiles>, grpc_url: String, rest_url: String) -> Vec<String> {
    let placement = Placement::Caller {
        front: SocketAddr::new(cfg.deploy.bind, cfg.deploy.caller_port).to_string(),
        admin: SocketAddr::new(cfg.deploy.admin_bind, 0).to_string(),
        downstream_grpc: grpc_url,
        downstream_rest: rest_url,
    };
    tier_args(cfg, tls, &placement)
}

/// The caller's front door for the arm: `/v1/call`, or the streaming
/// arms' `/v1/stream`.
fn front_path(cfg: &Config) -> &'static str {
    if cfg.streams.is_some() { caller::relay::STREAM_PATH } else { "/v1/call" }
}

/// How the internal hop's proxy or balancer speaks: HTTP/2 cleartext for
/// gRPC and REST over h2c, and streams passed on item by item.
pub(crate) fn internal_protocol(cfg: &Config) -> Protocol {
    Protocol { h2c: cfg.transport.is_grpc() || cfg.hop.rest_http2, streams: cfg.streams.is_some() }
}
