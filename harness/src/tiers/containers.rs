//! `--isolation containers`: the container launcher. The downstream's
//! replicas and the caller each run in a Docker container of their own on a
//! private network of the arm's, with `--tier-cpus` / `--tier-memory`
//! limits; the relays (balancer, proxy) run on the host as processes,
//! listening on the network's gateway, where the containers reach them.
//! The engine is Docker's: this runs the `docker` command line.
//!
//! Every container and network carries the harness's labels and is
//! removed when the arm stops, on a failed start and when dropped (a
//! panic); what a killed harness leaves is the reaper's (`reaper.rs`). The
//! image is `image.rs`'s; a container's state, `container_state.rs`'s.
//!
//! With `--tls`, the caller names its upstreams by host name (`downstream`,
//! `balancer`, …, the names the run's certificate is made for), written
//! into its hosts file; the certificate files are mounted read-only at the
//! paths the tiers' flags name, as a team's contract files are.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::{Config, TlsFiles};
use crate::result::TierName;
use crate::tiers::command::Upstreams;
use crate::tiers::container_state::{
    Watched, confirm_all, cpu_stat_path, exited, host_pid, wait_listening, wait_ready,
};
use crate::tiers::docker::{NAME_PREFIX, docker, labels};
use crate::tiers::launch::{
    Death, Launcher, Listen, Processes, RemoteTier, Running, Starting, Stopping, service_args, stop_process,
};
use crate::tiers::layout::Node;
use crate::tiers::process::{Foreign, TierError};
use crate::tiers::{foreign, image, reaper};

/// Fixed ports inside a container: its network is its own.
pub const GRPC_PORT: u16 = 50051;
pub const REST_PORT: u16 = 8080;
pub const FRONT_PORT: u16 = 8000;
pub const ADMIN_PORT: u16 = 9090;

/// Each listener's fixed port, by the layout's name for it.
const PORTS: [(&str, u16); 4] =
    [("grpc", GRPC_PORT), ("rest", REST_PORT), ("front", FRONT_PORT), ("admin", ADMIN_PORT)];

/// Numbers the networks of one harness process.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// One arm's network and containers.
#[derive(Debug)]
pub struct Containers {
    network: String,
    /// The tiers' image (this executable's).
    image: String,
    /// The relays, on the host at the network's gateway.
    host: Processes,
    /// Whether peers name the services (`--tls`).
    tls: bool,
    watched: Vec<Watched>,
    /// Every container name it ran, stopped or not: removed at the end.
    names: Vec<String>,
    closed: bool,
}

/// A service's arguments inside its container: every listener on the fixed
/// port of its own network namespace.
pub fn container_args(cfg: &Config, tls: Option<&TlsFiles>, upstreams: &Upstreams) -> Vec<String> {
    let any = |port: u16| format!("0.0.0.0:{port}");
    let listen = Listen { grpc: any(GRPC_PORT), rest: any(REST_PORT), front: any(FRONT_PORT), admin: any(ADMIN_PORT) };
    service_args(cfg, tls, upstreams, listen)
}

impl Containers {
    /// Makes the arm's network (after removing what killed harnesses left,
    /// with the reaper running and the image built).
    pub async fn new(cfg: &Config, tls: Option<&TlsFiles>) -> Result<Containers, TierError> {
        let fail = |reason: String| TierError::Spawn { tier: TierName::Downstream, reason };
        reaper::remove_stale().await;
        reaper::start_reaper().map_err(fail)?;
        let image = image::ensure_image().await.map_err(fail)?;
        let network = format!("{NAME_PREFIX}{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let mut args = vec!["network".to_owned(), "create".into()];
        args.extend(labels());
        args.push(network.clone());
        docker(&args).await.map_err(fail)?;
        reaper::remember(reaper::Kind::Network, &network);
        let mut set = Containers {
            network,
            image,
            host: Processes::new(cfg),
            tls: tls.is_some(),
            watched: Vec::new(),
            names: Vec::new(),
            closed: false,
        };
        match set.gateway().await {
            Ok(ip) => set.host.bind = ip,
            Err(e) => {
                Box::new(set).close().await;
                return Err(e);
            }
        }
        Ok(set)
    }

    /// The host's address on the arm's network (its bridge's gateway).
    async fn gateway(&self) -> Result<IpAddr, TierError> {
        let fail = |reason: String| TierError::Spawn { tier: TierName::Balancer, reason };
        let format = "{{range .IPAM.Config}}{{.Gateway}} {{end}}".to_owned();
        let text = docker(&["network".into(), "inspect".into(), "-f".into(), format, self.network.clone()])
            .await
            .map_err(fail)?;
        text.split_whitespace()
            .find_map(|a| a.parse::<IpAddr>().ok().filter(IpAddr::is_ipv4))
            .ok_or_else(|| fail(format!("network {} names no IPv4 gateway ({text:?})", self.network)))
    }

    /// `docker run` for one service: limits, mounts, labels, its hosts.
    fn run_args(
        &self,
        cfg: &Config,
        tls: Option<&TlsFiles>,
        node: &Node,
        name: &str,
        hosts: &[(String, IpAddr)],
    ) -> Vec<String> {
        let host = node.host_name();
        let mut args: Vec<String> = ["run", "-d", "--name", name, "--hostname", &host, "--network", &self.network]
            .into_iter()
            .map(String::from)
            .collect();
        args.extend(labels());
        let tier = node.name.as_str();
        if let Some(c) = cfg.deploy.tier_limits.cpus.get(tier) {
            args.extend(["--cpus".into(), c.to_string()]);
        }
        if let Some(m) = cfg.deploy.tier_limits.memory_bytes.get(tier) {
            // The same figure for memory and memory plus swap: no swapping
            // past the limit, the OOM killer instead, as in a pod.
            args.extend(["--memory".into(), m.to_string(), "--memory-swap".into(), m.to_string()]);
        }
        // A team's own contract and the run's certificates: read-only at
        // the paths the tier's flags name.
        let contract = cfg.contract.iter().flat_map(|c| c.mounts());
        for path in contract.chain(tls.map(|t| t.dir.clone())) {
            let path = path.display();
            args.extend(["--mount".into(), format!("type=bind,src={path},dst={path},readonly")]);
        }
        for (name, ip) in hosts {
            args.extend(["--add-host".into(), format!("{name}:{ip}")]);
        }
        args
    }

    /// After `docker run`'s flags: our image in `node`'s role with its flags, or
    /// a foreign image and its command's words; the ports it opens, by name.
    fn service_command(
        &self,
        cfg: &Config,
        tls: Option<&TlsFiles>,
        node: &Node,
        upstreams: &Upstreams,
        args: &mut Vec<String>,
    ) -> BTreeMap<String, u16> {
        if let Some((image, cmd)) = foreign::image_of(cfg, node) {
            let (values, ports) = foreign::container_placement(cfg, cmd, upstreams, &PORTS);
            // A local image: nothing is pulled from a registry.
            args.extend(["--pull".into(), "never".into(), image.to_owned()]);
            args.extend(foreign::fill(cmd, &values));
            return ports;
        }
        args.extend([self.image.clone(), super::TIER_ROLE_ARG.to_owned(), node.name.as_str().to_owned()]);
        args.extend(container_args(cfg, tls, upstreams));
        PORTS.iter().map(|(l, p)| ((*l).to_owned(), *p)).collect()
    }

    /// The container's address on the arm's network; a foreign image's once its
    /// listeners accept a connection (one that stopped at once has no address).
    async fn address(
        &self,
        cfg: &Config,
        node: &Node,
        name: &str,
        ports: &BTreeMap<String, u16>,
    ) -> Result<IpAddr, TierError> {
        let fail = |reason: String| TierError::Spawn { tier: node.name, reason };
        let format = format!("{{{{(index .NetworkSettings.Networks \"{}\").IPAddress}}}}", self.network);
        let ip_text = docker(&["inspect".into(), "-f".into(), format, name.to_owned()]).await.map_err(fail)?;
        let ip = ip_text.trim().parse::<IpAddr>();
        let Some((image, cmd)) = foreign::image_of(cfg, node) else {
            return ip.map_err(|_| fail(format!("container {name} has no address ({ip_text:?})")));
        };
        let command = format!("{image} {cmd}");
        let failed = |what| TierError::Foreign { tier: node.name, command, what, stderr: String::new() };
        let Ok(ip) = ip else { return Err(failed(exited(name).await)) };
        let addrs: Vec<SocketAddr> = ports.values().map(|p| SocketAddr::new(ip, *p)).collect();
        wait_listening(name, &addrs, cfg.deploy.foreign.ready_timeout).await.map_err(failed)?;
        Ok(ip)
    }

    /// Starts one service's container and waits for its ready line.
    async fn run_service(
        &mut self,
        cfg: &Config,
        tls: Option<&TlsFiles>,
        node: &Node,
        upstreams: &Upstreams,
    ) -> Result<Running, TierError> {
        let fail = |reason: String| TierError::Spawn { tier: node.name, reason };
        let name = format!("{}-{}", self.network, node.host_name());
        let hosts = match upstreams {
            Upstreams::Urls { hosts, .. } => hosts.as_slice(),
            _ => &[],
        };
        let mut args = self.run_args(cfg, tls, node, &name, hosts);
        let foreign = foreign::image_of(cfg, node);
        let ports = self.service_command(cfg, tls, node, upstreams, &mut args);
        self.names.push(name.clone());
        docker(&args).await.map_err(fail)?;
        reaper::remember(reaper::Kind::Container, &name);
        if foreign.is_none() {
            wait_ready(&name).await.map_err(fail)?;
        }
        let ip = self.address(cfg, node, &name, &ports).await?;
        let cpus = cfg.deploy.tier_limits.cpus.get(node.name.as_str()).copied();
        let memory = cfg.deploy.tier_limits.memory_bytes.get(node.name.as_str()).copied();
        let image = foreign.map_or(self.image.as_str(), |(i, _)| i);
        let description = serde_json::json!({
            "name": name, "image": image, "network": self.network, "address": ip.to_string(),
            "cpus": cpus, "memory_bytes": memory,
        });
        let host_pid = host_pid(&name).await;
        self.watched.push(Watched::start(node.name, &name, memory, host_pid));
        let cpu_stat = match (cpus, host_pid) {
            (Some(c), Some(pid)) => cpu_stat_path(pid).await.map(|p| (p, c)),
            _ => None,
        };
        let listeners: BTreeMap<String, SocketAddr> = ports
            .iter()
            .filter(|(l, _)| node.listeners().contains(&l.as_str()))
            .map(|(l, port)| (l.clone(), SocketAddr::new(ip, *port)))
            .collect();
        let remote = RemoteTier {
            name: node.name,
            replica: node.replica,
            // A foreign image serves /stats only where it was given `{admin_addr}`.
            admin_url: ports.get("admin").map(|p| format!("http://{}", SocketAddr::new(ip, *p))),
            container: Some(description),
            cpu_stat,
            host_pid,
            foreign: foreign
                .map(|(image, cmd)| Foreign { command: format!("{image} {cmd}"), arm: cfg.transport.as_str() }),
        };
        Ok(Running {
            node: node.clone(),
            listeners,
            host: self.tls.then(|| node.host_name()),
            process: None,
            remote: Some(remote),
            proxy: None,
            link: None,
        })
    }
}

impl Launcher for Containers {
    fn start<'a>(
        &'a mut self,
        cfg: &'a Config,
        tls: Option<&'a TlsFiles>,
        node: &'a Node,
        upstreams: Upstreams,
    ) -> Starting<'a> {
        Box::pin(async move {
            match &upstreams {
                Upstreams::Relay(to) => {
                    let running = self.host.start_relay(cfg, node, to).await?;
                    Ok(Running { host: self.tls.then(|| node.host_name()), ..running })
                }
                _ => self.run_service(cfg, tls, node, &upstreams).await,
            }
        })
    }

    fn stop(&mut self, running: Running, grace: Duration, cut: CancellationToken) -> Stopping {
        let Some(remote) = running.remote.as_ref() else { return Box::pin(stop_process(running, grace, cut)) };
        let name = remote.container.as_ref().and_then(|c| c["name"].as_str()).unwrap_or_default().to_owned();
        // Stopped on purpose: not a death.
        if let Some(i) = self.watched.iter().position(|w| w.name == name) {
            self.watched.remove(i).watcher.abort();
        }
        Box::pin(async move {
            if !cut.is_cancelled() {
                let secs = grace.as_secs().max(1).to_string();
                let _ = docker(&["stop".into(), "-t".into(), secs, name.clone()]).await;
            }
            let _ = docker(&["rm".into(), "-f".into(), name.clone()]).await;
            reaper::forget(&[name]);
        })
    }

    fn close(mut self: Box<Self>) -> Stopping {
        self.closed = true;
        for w in self.watched.drain(..) {
            w.watcher.abort();
        }
        let (names, network) = (std::mem::take(&mut self.names), self.network.clone());
        Box::pin(async move {
            if !names.is_empty() {
                let _ = docker(&[vec!["rm".into(), "-f".into()], names.clone()].concat()).await;
            }
            let _ = docker(&["network".into(), "rm".into(), network.clone()]).await;
            reaper::forget(&names);
            reaper::forget(&[network]);
        })
    }

    fn dead(&self) -> Option<(TierName, String, &Death)> {
        self.watched.iter().find_map(|w| w.died.get().map(|d| (w.tier, w.name.clone(), d)))
    }

    fn confirm_dead(&self) -> Stopping {
        confirm_all(&self.watched)
    }
}

impl Drop for Containers {
    fn drop(&mut self) {
        for w in &self.watched {
            w.watcher.abort();
        }
        if !self.closed {
            reaper::remove_blocking(&self.names, &self.network);
            reaper::forget(&self.names);
            reaper::forget(std::slice::from_ref(&self.network));
        }
    }
}
