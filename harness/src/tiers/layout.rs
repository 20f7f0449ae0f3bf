//! Where an arm's graph is decided: one pure function turns the
//! configuration into the nodes the arm runs (the downstream's replicas, a
//! balancer, a proxy, link emulators, the caller) and the node the load
//! goes to, each node naming its upstreams, its settings and the listeners
//! it opens. Launchers (`launch.rs`) only start what this lists, in its
//! order; `Topology` walks it once for either of them.
//!
//! Computes; starts nothing, reads no file.

use std::fmt;

use crate::config::{Balance, Config, ProxyHop, ProxyKind, TargetTier, TierRole};
use crate::result::TierName;
use crate::tiers::proxy_config::Protocol;

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One of the downstream's replicas.
    Downstream,
    /// nginx spreading calls over the replicas (`--balance l4|l7`).
    Balancer(Balance),
    /// nginx or caddy on one hop (`--proxy`).
    Proxy(ProxyKind, ProxyHop),
    /// The link emulator on one hop (`--link`).
    Link(ProxyHop),
    Caller,
}

/// One process (or container) of the arm.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub kind: Kind,
    /// The tier name its figures are filed under.
    pub name: TierName,
    /// Which of the downstream's replicas it is, for an arm that has
    /// several (or a balancer): `downstream#0`, …
    pub replica: Option<u32>,
    /// The nodes it sends to, by index into [`Layout::nodes`]: always
    /// earlier in the list. The caller balancing by itself has several.
    pub upstreams: Vec<usize>,
    /// How a proxy, balancer or link speaks (HTTP/2 cleartext, streams).
    pub protocol: Protocol,
}

impl Node {
    /// The listeners it opens, by the names its ready line gives them.
    pub fn listeners(&self) -> &'static [&'static str] {
        match self.kind {
            Kind::Downstream => &["grpc", "rest", "admin"],
            Kind::Caller => &["front", "admin"],
            Kind::Balancer(_) => &["balancer"],
            Kind::Proxy(..) => &["proxy"],
            Kind::Link(_) => &["link"],
        }
    }

    /// The role whose flags it is started with, for the two services.
    pub fn role(&self) -> Option<TierRole> {
        match self.kind {
            Kind::Downstream => Some(TierRole::Downstream),
            Kind::Caller => Some(TierRole::Caller),
            _ => None,
        }
    }

    /// Its name as peers and reports call it: `downstream`, `downstream-1`,
    /// `balancer`, `caller`, …: a container's host name too.
    pub fn host_name(&self) -> String {
        match self.replica {
            Some(i) if i > 0 => format!("{}-{i}", self.name.as_str()),
            _ => self.name.as_str().replace('_', "-"),
        }
    }
}

/// The arm's nodes in start order (every node after its upstreams; stopped
/// in reverse), and where the load goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub nodes: Vec<Node>,
    /// The node the load is sent to.
    pub entry: usize,
    /// Its listener the load is sent to: the caller's front door (or a
    /// proxy's or link's in front of it), or with `--target downstream`
    /// the downstream's listener for the transport.
    pub entry_listener: &'static str,
    /// The path requests are sent to, empty when the target is the downstream.
    pub path: &'static str,
}

/// The listener of `upstream` a node sends to: the downstream's for the
/// arm's transport, or the one listener a relay opens.
pub fn reached_listener(cfg: &Config, upstream: &Node) -> &'static str {
    match upstream.kind {
        Kind::Downstream => cfg.transport.listener(),
        Kind::Caller => "front",
        _ => upstream.listeners()[0],
    }
}

/// The caller's front door for the arm: `/v1/call`, or the streaming
/// arms' `/v1/stream`.
pub fn front_path(cfg: &Config) -> &'static str {
    if cfg.streams.is_some() { caller::relay::STREAM_PATH } else { "/v1/call" }
}

/// How the internal hop's proxy or balancer speaks: HTTP/2 cleartext for
/// gRPC and REST over h2c, and streams passed on item by item.
pub fn internal_protocol(cfg: &Config) -> Protocol {
    Protocol { h2c: cfg.transport.is_grpc() || cfg.hop.rest_http2, streams: cfg.streams.is_some() }
}

/// The graph of the arm `cfg` describes, for tiers the harness starts
/// (`--downstream-url` and `--caller-url` start none, and have no layout).
pub fn layout(cfg: &Config) -> Layout {
    let n = cfg.replicas.downstream_replicas.max(1);
    let several = n > 1 || cfg.replicas.balance != Balance::None;
    let internal = internal_protocol(cfg);
    let mut nodes: Vec<Node> = (0..n).map(|i| replica_node(several.then_some(i), internal)).collect();
    if cfg.deploy.target == TargetTier::Downstream {
        return Layout { nodes, entry: 0, entry_listener: cfg.transport.listener(), path: "" };
    }
    let mut reach: Vec<usize> = (0..nodes.len()).collect();
    let push = |nodes: &mut Vec<Node>, kind: Kind, name: TierName, upstreams: Vec<usize>, protocol: Protocol| {
        nodes.push(Node { kind, name, replica: None, upstreams, protocol });
        vec![nodes.len() - 1]
    };
    if cfg.replicas.balance.has_balancer() {
        reach = push(&mut nodes, Kind::Balancer(cfg.replicas.balance), TierName::Balancer, reach, internal);
    }
    if let (Some(kind), ProxyHop::Internal) = (cfg.deploy.proxy, cfg.deploy.proxy_hop) {
        reach = push(&mut nodes, Kind::Proxy(kind, ProxyHop::Internal), TierName::Proxy, reach, internal);
    }
    // Between two foreign tiers, a pass-through relay counts the hop's bytes.
    let foreign = &cfg.deploy.foreign;
    let arm = cfg.transport.as_str();
    let relay = foreign.downstream_cmd.contains_key(arm) && foreign.caller_cmd.contains_key(arm);
    if cfg.link.as_ref().is_some_and(|l| l.hop.internal()) || relay {
        reach = push(&mut nodes, Kind::Link(ProxyHop::Internal), TierName::Link, reach, internal);
    }
    let front = Protocol { h2c: false, streams: cfg.streams.is_some() };
    let mut entry = push(&mut nodes, Kind::Caller, TierName::Caller, reach, internal);
    if cfg.link.as_ref().is_some_and(|l| l.hop.front()) {
        entry = push(&mut nodes, Kind::Link(ProxyHop::Front), TierName::LinkFront, entry, front);
    }
    if let (Some(kind), ProxyHop::Front) = (cfg.deploy.proxy, cfg.deploy.proxy_hop) {
        entry = push(&mut nodes, Kind::Proxy(kind, ProxyHop::Front), TierName::Proxy, entry, front);
    }
    let entry = entry[0];
    let entry_listener = if nodes[entry].kind == Kind::Caller { "front" } else { nodes[entry].listeners()[0] };
    Layout { nodes, entry, entry_listener, path: front_path(cfg) }
}

/// A replica of the downstream: `Some(index)` when the arm has several.
pub fn replica_node(replica: Option<u32>, protocol: Protocol) -> Node {
    Node { kind: Kind::Downstream, name: TierName::Downstream, replica, upstreams: Vec::new(), protocol }
}

impl Layout {
    /// The downstream's replicas' indexes into [`Layout::nodes`].
    pub fn replicas(&self) -> impl Iterator<Item = usize> + '_ {
        self.nodes.iter().enumerate().filter(|(_, n)| n.kind == Kind::Downstream).map(|(i, _)| i)
    }

    /// Every name a node of the arm may be reached by, the replicas that
    /// `--scale-at` adds during a round included: the names the run's
    /// server certificate is made for, beside loopback.
    pub fn host_names(&self, cfg: &Config) -> Vec<String> {
        let started = cfg.replicas.downstream_replicas
            + cfg.replicas.scale_at.iter().map(|s| s.change.max(0) as u32).sum::<u32>();
        let mut names: Vec<String> = self.nodes.iter().map(Node::host_name).collect();
        names.extend((1..started).map(|i| format!("downstream-{i}")));
        names.sort();
        names.dedup();
        names
    }
}

/// One line per node, `name <- upstreams`, then where the load goes: the
/// form the tests pin today's graphs in.
impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let label = |n: &Node| {
            let what = match n.kind {
                Kind::Balancer(b) => format!(" ({})", b.as_str()),
                Kind::Proxy(k, hop) => format!(" ({} on the {} hop)", k.as_str(), hop.as_str()),
                _ => String::new(),
            };
            let h2c = if n.protocol.h2c && !matches!(n.kind, Kind::Downstream | Kind::Caller) { " h2c" } else { "" };
            format!("{}{what}{h2c}", n.host_name())
        };
        for n in &self.nodes {
            write!(f, "{}", label(n))?;
            if !n.upstreams.is_empty() {
                let to: Vec<String> = n.upstreams.iter().map(|&u| self.nodes[u].host_name()).collect();
                write!(f, " -> {}", to.join(", "))?;
            }
            writeln!(f)?;
        }
        write!(f, "load -> {} {}{}", self.nodes[self.entry].host_name(), self.entry_listener, self.path)
    }
}

#[cfg(test)]
mod tests;
