//! Launchers start nodes. One trait, [`Launcher`]: start a node of the
//! layout with its arguments and its upstreams' addresses, stop it, say
//! which of its nodes died; what it started reports its pid (a child
//! process) or its admin endpoint, host pid and cgroup (a container).
//! [`Processes`], here, starts every node as a child process;
//! `containers.rs` starts the two services in containers and the relays
//! as processes on the host. Neither decides the graph: `layout.rs` does.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, TlsFiles};
use crate::result::{ProxyInfo, TierName};
use crate::tiers::command::{Placement, Upstreams, tier_args};
use crate::tiers::layout::{Kind, Node};
use crate::tiers::process::{Tier, TierError, spawn};
use crate::tiers::{balancer, foreign, link, proxy};

/// A tier the harness did not start as a child process: measured only
/// through its admin endpoint (and, in a container, its cgroup).
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
    /// What it was started as, when it is a foreign image (`--downstream-image`).
    pub foreign: Option<crate::tiers::process::Foreign>,
}

/// How a node that is not a child process ended (a container).
#[derive(Debug, Clone)]
pub struct Death {
    /// When it stopped, by Docker's `FinishedAt` (when Docker was asked, if
    /// that could not be read).
    pub at: Instant,
    /// Docker's account: exit code, OOM killer, the engine's own error.
    pub why: String,
    /// The last lines it wrote to stderr.
    pub stderr: String,
}

/// One node a launcher started.
#[derive(Debug)]
pub struct Running {
    pub node: Node,
    /// Each listener's address, as its peers reach it.
    pub listeners: BTreeMap<String, SocketAddr>,
    /// The name its peers put in URLs in place of its address (a container
    /// reached over TLS: the run's certificate names it).
    pub host: Option<String>,
    /// A child process of the harness, sampled by its pid.
    pub process: Option<Tier>,
    /// A service in a container, sampled through its admin endpoint.
    pub remote: Option<RemoteTier>,
    /// A proxy's or balancer's configuration and what the report says of it.
    pub proxy: Option<ProxyInfo>,
    /// A link emulator's settings, as `run.json` records them.
    pub link: Option<serde_json::Value>,
}

impl Running {
    /// A node that is a child process, reached at the addresses its ready line gave.
    pub fn process(node: &Node, tier: Tier) -> Running {
        Running {
            node: node.clone(),
            listeners: tier.ready.listeners.clone(),
            host: None,
            process: Some(tier),
            remote: None,
            proxy: None,
            link: None,
        }
    }

    /// The URL of one of its listeners, as its peers write it.
    pub fn url(&self, listener: &str, tls: bool) -> String {
        let scheme = if tls { "https" } else { "http" };
        match (self.listeners.get(listener), &self.host) {
            (Some(a), Some(host)) => format!("{scheme}://{host}:{}", a.port()),
            (Some(a), None) => format!("{scheme}://{a}"),
            (None, _) => String::new(),
        }
    }

    /// Its admin endpoint, for the two services.
    pub fn admin_url(&self) -> Option<String> {
        match (&self.process, &self.remote) {
            (_, Some(r)) => r.admin_url.clone(),
            // A foreign tier serves /stats only where it was given `{admin_addr}`.
            (Some(t), None) if self.node.role().is_some() && t.ready.listeners.contains_key("admin") => {
                Some(t.admin_url())
            }
            _ => None,
        }
    }

    /// The replica index its figures are filed under: 0 for a lone downstream.
    pub fn replica(&self) -> u32 {
        self.node.replica.unwrap_or(0)
    }
}

/// A node stopping: a future of its own, so that replicas drain together
/// and one taken out during a round drains while the round goes on.
pub type Stopping = BoxFuture<'static, ()>;

/// A node starting, until it is ready.
pub type Starting<'a> = BoxFuture<'a, Result<Running, TierError>>;

/// Starts and stops the nodes of a layout.
pub trait Launcher: Send + Sync + std::fmt::Debug {
    /// Starts `node`, sending to `upstreams`, and waits until it is ready.
    fn start<'a>(
        &'a mut self,
        cfg: &'a Config,
        tls: Option<&'a TlsFiles>,
        node: &'a Node,
        upstreams: Upstreams,
    ) -> Starting<'a>;

    /// Stops one node: SIGTERM and up to `grace` for its drain (none once
    /// `cut`). It no longer counts as dead from here on.
    fn stop(&mut self, running: Running, grace: Duration, cut: CancellationToken) -> Stopping;

    /// Removes what the launcher made beside its nodes (a network, and any
    /// container still there), once every node has been stopped.
    fn close(self: Box<Self>) -> Stopping;

    /// A node that is not a child process found stopped: its tier, what
    /// it ran in, and how it ended.
    fn dead(&self) -> Option<(TierName, String, &Death)> {
        None
    }

    /// Asks once, and waits for the answer, whether any node that is not a
    /// child process has stopped, so that [`Launcher::dead`] knows of a stop
    /// its watcher has not yet heard of.
    fn confirm_dead(&self) -> Stopping {
        Box::pin(async {})
    }
}

/// Every node a child process on this machine: the services' listeners on
/// `--bind` (admin on `--admin-bind`), any free port but the caller's
/// `--caller-port`; relays on `bind`.
#[derive(Debug)]
pub struct Processes {
    /// Where the balancer and the proxy listen.
    pub bind: IpAddr,
}

impl Processes {
    pub fn new(cfg: &Config) -> Processes {
        Processes { bind: cfg.deploy.bind }
    }

    /// Starts a balancer, proxy or link as a child process, listening on `self.bind`.
    pub async fn start_relay(&self, cfg: &Config, node: &Node, to: &[SocketAddr]) -> Result<Running, TierError> {
        let missing = || TierError::Spawn { tier: node.name, reason: "it was given nothing to forward to".into() };
        let first = *to.first().ok_or_else(missing)?;
        let (tier, info, settings) = match node.kind {
            Kind::Balancer(mode) => {
                let (tier, info) = balancer::start(mode, self.bind, to, node.protocol).await?;
                (tier, Some(info), None)
            }
            Kind::Proxy(kind, hop) => {
                let (tier, info) = proxy::start(kind, hop, self.bind, first, node.protocol).await?;
                (tier, Some(info), None)
            }
            Kind::Link(_) if cfg.link.is_none() && !cfg.deploy.foreign.caller_cmd.is_empty() => {
                let (tier, settings) = link::start_counting(self.bind, first).await?;
                (tier, None, Some(settings))
            }
            Kind::Link(_) => {
                let link = cfg.link.as_ref().ok_or_else(missing)?;
                let (tier, settings) = link::start(node.name, link, first).await?;
                (tier, None, Some(settings))
            }
            Kind::Downstream | Kind::Caller => unreachable!("the services are not relays"),
        };
        Ok(Running { proxy: info, link: settings, ..Running::process(node, tier) })
    }
}

/// Where a service listens, as its launcher places it: the downstream's
/// listeners, the caller's front door, either's admin.
pub struct Listen {
    pub grpc: String,
    pub rest: String,
    pub front: String,
    pub admin: String,
}

/// A service's arguments: the caller when it is given URLs, else a
/// downstream replica, each listening where `listen` says.
pub fn service_args(cfg: &Config, tls: Option<&TlsFiles>, upstreams: &Upstreams, listen: Listen) -> Vec<String> {
    let Listen { grpc, rest, front, admin } = listen;
    let placement = match upstreams {
        Upstreams::Urls { grpc: downstream_grpc, rest: downstream_rest, .. } => Placement::Caller {
            front,
            admin,
            downstream_grpc: downstream_grpc.clone(),
            downstream_rest: downstream_rest.clone(),
        },
        _ => Placement::Downstream { grpc, rest, admin },
    };
    tier_args(cfg, tls, &placement)
}

/// The services' arguments as processes: their listeners on `--bind`, any
/// free port (the caller's front door on `--caller-port`), admin where
/// `--admin-bind` says.
pub fn process_args(cfg: &Config, tls: Option<&TlsFiles>, upstreams: &Upstreams) -> Vec<String> {
    let any = SocketAddr::new(cfg.deploy.bind, 0).to_string();
    let listen = Listen {
        grpc: any.clone(),
        rest: any,
        front: SocketAddr::new(cfg.deploy.bind, cfg.deploy.caller_port).to_string(),
        admin: SocketAddr::new(cfg.deploy.admin_bind, 0).to_string(),
    };
    service_args(cfg, tls, upstreams, listen)
}

impl Launcher for Processes {
    fn start<'a>(
        &'a mut self,
        cfg: &'a Config,
        tls: Option<&'a TlsFiles>,
        node: &'a Node,
        upstreams: Upstreams,
    ) -> Starting<'a> {
        Box::pin(async move {
            match (&upstreams, node.role()) {
                (Upstreams::Relay(to), None) => self.start_relay(cfg, node, to).await,
                (_, Some(_)) => {
                    if let Some(cmd) = foreign::command_of(cfg, node) {
                        return Ok(Running::process(node, foreign::start(cfg, node, cmd, &upstreams).await?));
                    }
                    let tier = spawn(node.name, process_args(cfg, tls, &upstreams)).await?;
                    Ok(Running::process(node, tier))
                }
                _ => Err(TierError::Spawn {
                    tier: node.name,
                    reason: "a relay needs the addresses it forwards to".into(),
                }),
            }
        })
    }

    fn stop(&mut self, running: Running, grace: Duration, cut: CancellationToken) -> Stopping {
        Box::pin(stop_process(running, grace, cut))
    }

    fn close(self: Box<Self>) -> Stopping {
        Box::pin(async {})
    }
}

/// Stops a node that is a child process; a proxy's or balancer's temporary
/// and log files go with it (its configuration is in the report).
pub async fn stop_process(running: Running, grace: Duration, cut: CancellationToken) {
    if let Some(tier) = running.process {
        if tier.foreign.is_some() {
            crate::tiers::foreign::stop(tier, grace, &cut).await;
        } else {
            tier.stop(grace, &cut).await;
        }
    }
    if let Some(info) = running.proxy {
        let _ = std::fs::remove_dir_all(&info.work_dir);
    }
}
