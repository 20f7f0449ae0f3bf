//! The command line of a tier the harness starts, whatever starts it (a
//! child process or a container): where it listens and where its peer is,
//! which is the launcher's to say ([`Placement`]), then every flag the
//! configuration gives it (`Config::tier_flags`). Both launchers build their
//! tiers' arguments here and nowhere else.

use crate::config::{Config, TierRole, TlsFiles};

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
