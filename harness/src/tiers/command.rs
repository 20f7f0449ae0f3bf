//! The command line of a tier the harness starts, whatever starts it (a
//! child process or a container): where it listens and where its peer is,
//! which is the launcher's to say ([`Placement`]), then every flag the
//! configuration gives it (`Config::tier_flags`). Both launchers build their
//! tiers' arguments here and nowhere else.

use std::net::{IpAddr, SocketAddr};

use crate::config::{Config, TierRole, TlsFiles};

/// Where a node sends its calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstreams {
    /// A downstream replica sends to nobody.
    None,
    /// The caller: its gRPC and REST clients' URLs (comma-joined for a
    /// caller balancing by itself), and each host name in them with the
    /// address it stands for (a container resolves them through its hosts file).
    Urls { grpc: String, rest: String, hosts: Vec<(String, IpAddr)> },
    /// A balancer, proxy or link: the addresses it forwards to.
    Relay(Vec<SocketAddr>),
}

/// Where a tier listens and where its peer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    Downstream { grpc: String, rest: String, admin: String },
    Caller { front: String, admin: String, downstream_grpc: String, downstream_rest: String },
}

/// The flags a [`Placement`] gives: addresses, never settings.
pub const PLACEMENT_FLAGS: [&str; 6] =
    ["--grpc-addr", "--rest-addr", "--admin-addr", "--listen", "--downstream-grpc", "--downstream-rest"];

impl Placement {
    pub fn role(&self) -> TierRole {
        match self {
            Placement::Downstream { .. } => TierRole::Downstream,
            Placement::Caller { .. } => TierRole::Caller,
        }
    }

    fn pairs(&self) -> [(&'static str, &str); 4] {
        match self {
            Placement::Downstream { grpc, rest, admin } => {
                [("--grpc-addr", grpc), ("--rest-addr", rest), ("--admin-addr", admin), ("", "")]
            }
            Placement::Caller { front, admin, downstream_grpc, downstream_rest } => [
                ("--listen", front),
                ("--admin-addr", admin),
                ("--downstream-grpc", downstream_grpc),
                ("--downstream-rest", downstream_rest),
            ],
        }
    }
}

/// The arguments a tier of `cfg`'s arm is started with at `placement`.
pub fn tier_args(cfg: &Config, tls: Option<&TlsFiles>, placement: &Placement) -> Vec<String> {
    let mut args: Vec<String> = placement
        .pairs()
        .into_iter()
        .filter(|(flag, _)| !flag.is_empty())
        .flat_map(|(flag, value)| [flag.to_owned(), value.to_owned()])
        .collect();
    args.extend(cfg.tier_flags(placement.role(), tls).0);
    args
}

/// `args` without the placement's flags and their values: what the
/// configuration alone gave the tier.
pub fn settings_only(args: &[String]) -> Vec<String> {
    let mut kept = Vec::new();
    let mut skip = false;
    for a in args {
        if std::mem::take(&mut skip) {
            continue;
        }
        if PLACEMENT_FLAGS.contains(&a.as_str()) {
            skip = true;
        } else {
            kept.push(a.clone());
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use caller::Transport;

    use super::*;
    use crate::config::Compression;
    use crate::testing;
    use crate::tiers::command::Upstreams;
    use crate::tiers::containers::container_args;
    use crate::tiers::launch::process_args;

    /// An arm with every setting a tier is given away from its default.
    fn unusual(transport: Transport) -> Config {
        let mut cfg = testing::config(transport);
        cfg.work.delay = Duration::from_millis(40);
        cfg.work.jitter = Duration::from_millis(5);
        cfg.work.items = 3;
        cfg.work.fanout = 2;
        cfg.load.timeout = Duration::from_secs(7);
        cfg.hop.compression = Compression::Gzip;
        cfg.hop.grpc_connections = 3;
        cfg.hop.rest_http2 = true;
        cfg.deploy.huge_pages = crate::config::HugePages::Machine;
        cfg
    }

    fn value_of<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
        args.iter().position(|a| a == flag).map(|i| args[i + 1].as_str())
    }

    #[test]
    fn processes_and_containers_give_each_tier_the_same_settings() {
        for transport in [Transport::Grpc, Transport::Rest] {
            let cfg = unusual(transport);
            let process_downstream = process_args(&cfg, None, &Upstreams::None);
            let container_downstream = container_args(&cfg, None, &Upstreams::None);
            assert_eq!(settings_only(&process_downstream), settings_only(&container_downstream));

            let urls =
                |grpc: &str, rest: &str| Upstreams::Urls { grpc: grpc.into(), rest: rest.into(), hosts: Vec::new() };
            let process_caller = process_args(&cfg, None, &urls("http://a", "http://b"));
            let container_caller =
                container_args(&cfg, None, &urls("http://172.18.0.2:50051", "http://172.18.0.2:8080"));
            assert_eq!(settings_only(&process_caller), settings_only(&container_caller));

            // The settings reach both tiers: a drift in either launcher, or
            // a section that stops handing its flag on, fails here.
            for args in [&container_downstream, &container_caller] {
                assert_eq!(value_of(args, "--compression"), Some("gzip"), "{args:?}");
                assert_eq!(value_of(args, "--huge-pages"), Some("machine"), "{args:?}");
            }
            assert_eq!(value_of(&container_downstream, "--delay"), Some("40ms"), "{container_downstream:?}");
            assert_eq!(value_of(&container_caller, "--fanout"), Some("2"), "{container_caller:?}");
            assert_eq!(value_of(&container_caller, "--grpc-connections"), Some("3"), "{container_caller:?}");
        }
    }

    #[test]
    fn placement_flags_are_the_launchers_and_nothing_else() {
        let cfg = unusual(Transport::Grpc);
        let urls = Upstreams::Urls { grpc: "http://d:1".into(), rest: "http://d:2".into(), hosts: Vec::new() };
        let args = process_args(&cfg, None, &urls);
        let kept = settings_only(&args);
        assert!(PLACEMENT_FLAGS.iter().all(|f| !kept.iter().any(|a| a == f)), "{kept:?}");
        assert!(!kept.iter().any(|a| a.starts_with("http://d")), "{kept:?}");
        assert_eq!(args.len(), kept.len() + 8, "four placement flags and their values: {args:?}");
    }
}
