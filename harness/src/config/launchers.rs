//! What each launcher cannot do, in one table: a run that asks the
//! launcher `--isolation` names for a feature it lacks is refused here, by
//! the launcher and the feature, after every section has been validated.
//! The launchers themselves are `tiers/launch.rs` and `tiers/containers.rs`.

use std::net::IpAddr;

use super::{Config, ConfigError, Isolation, TargetTier, bad};

/// One thing a launcher cannot give, and why.
pub struct Lacks {
    pub launcher: Isolation,
    /// The flag that asks for it.
    pub flag: &'static str,
    pub feature: &'static str,
    pub why: &'static str,
    /// Whether `cfg` asks for it.
    asked: fn(&Config) -> bool,
}

const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// Every feature a launcher lacks.
pub const LACKS: [Lacks; 11] = [
    Lacks {
        launcher: Isolation::Processes,
        flag: "--tier-cpus",
        feature: "a CPU limit per tier",
        why: "a process on this machine has no limit; give it with --isolation containers",
        asked: |c| !c.deploy.tier_limits.cpus.is_empty(),
    },
    Lacks {
        launcher: Isolation::Processes,
        flag: "--tier-memory",
        feature: "a memory limit per tier",
        why: "a process on this machine has no limit; give it with --isolation containers",
        asked: |c| !c.deploy.tier_limits.memory_bytes.is_empty(),
    },
    Lacks {
        launcher: Isolation::Containers,
        flag: "--link",
        feature: "a link emulator",
        why: "the emulator listens on loopback only, and containers reach the host on their network's gateway",
        asked: |c| c.link.is_some(),
    },
    Lacks {
        launcher: Isolation::Containers,
        flag: "--target",
        feature: "the downstream as the load's target",
        why: "the load goes to the caller's front door, the services' other listeners stay on their network",
        asked: |c| c.deploy.target != TargetTier::Caller,
    },
    Lacks {
        launcher: Isolation::Containers,
        flag: "--caller-port",
        feature: "a chosen front-door port",
        why: "each container listens on fixed ports of its own network's address",
        asked: |c| c.deploy.caller_port != 0,
    },
    Lacks {
        launcher: Isolation::Containers,
        flag: "--bind",
        feature: "listeners on a chosen address",
        why: "each container listens on its own network's address",
        asked: |c| c.deploy.bind != LOOPBACK,
    },
    Lacks {
        launcher: Isolation::Containers,
        flag: "--admin-bind",
        feature: "admin listeners on a chosen address",
        why: "each container listens on its own network's address",
        asked: |c| c.deploy.admin_bind != LOOPBACK,
    },
    Lacks {
        launcher: Isolation::Containers,
        flag: "--downstream-cmd",
        feature: "a downstream started as a command on this machine",
        why: "every tier runs in a container: give --downstream-image, the image the command's arguments run in",
        asked: |c| !c.deploy.foreign.downstream_cmd.is_empty() && c.deploy.foreign.downstream_image.is_empty(),
    },
    Lacks {
        launcher: Isolation::Containers,
        flag: "--caller-cmd",
        feature: "a caller started as a command on this machine",
        why: "every tier runs in a container: give --caller-image, the image the command's arguments run in",
        asked: |c| !c.deploy.foreign.caller_cmd.is_empty() && c.deploy.foreign.caller_image.is_empty(),
    },
    Lacks {
        launcher: Isolation::Processes,
        flag: "--downstream-image",
        feature: "a downstream in a container of its image",
        why: "it starts processes on this machine; give --isolation containers",
        asked: |c| !c.deploy.foreign.downstream_image.is_empty(),
    },
    Lacks {
        launcher: Isolation::Processes,
        flag: "--caller-image",
        feature: "a caller in a container of its image",
        why: "it starts processes on this machine; give --isolation containers",
        asked: |c| !c.deploy.foreign.caller_image.is_empty(),
    },
];

/// Refuses the first feature `cfg` asks of its launcher that the launcher lacks.
pub fn check(cfg: &Config) -> Result<(), ConfigError> {
    match LACKS.iter().find(|l| l.launcher == cfg.deploy.isolation && (l.asked)(cfg)) {
        None => Ok(()),
        Some(l) => Err(bad(
            l.flag,
            format!(
                "the {} launcher (--isolation {}) cannot give {}: {}",
                l.launcher.as_str(),
                l.launcher.as_str(),
                l.feature,
                l.why
            ),
        )),
    }
}
