//! The downstream as several replicas behind a balancer: how many
//! (`--downstream-replicas`), how the caller's calls reach them
//! (`--balance`), how long a gRPC connection may live
//! (`--grpc-max-connection-age`) and how many requests each replica takes
//! at once (`--replica-capacity`). The downstream is given the age and the
//! capacity; the caller, with client-side balancing, every replica's
//! address (the launcher's to say).

use std::time::Duration;

use clap::Args;
use serde::{Deserialize, Serialize};

use super::{
    ConfigError, Deploy, Flags, Hop, Link, Load, ProxyHop, TargetTier, TierRole, bad, duration, duration_text,
};

/// The most replicas one arm may run (each is a process with its own runtime).
pub const MAX_REPLICAS: u32 = 16;

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Downstream replicas and balancing (docs/replicas.md)")]
pub struct ReplicaArgs {
    /// Downstream processes behind the internal hop, each measured as its own tier (downstream#0,
    /// downstream#1, …).
    ///
    /// the downstream's figures are their sum.
    #[arg(long, default_value_t = 1)]
    pub downstream_replicas: u32,
    /// How the caller's calls reach the replicas.
    ///
    /// `l4` (nginx's stream module, round robin per TCP connection, as a Kubernetes Service or a network
    /// load balancer), `l7` (nginx's http module, round robin per call: grpc_pass or proxy_pass), `client`
    /// (the caller takes the replicas' addresses in turn, as over a headless Service), `none` (one replica,
    /// reached directly).
    #[arg(long, value_enum)]
    pub balance: Option<Balance>,
    /// The downstream ends gRPC connections older than this (±10%) with a GOAWAY.
    ///
    /// the caller reconnects (grpc-go's MaxConnectionAge, the usual fix for gRPC pinned behind an L4
    /// balancer).
    #[arg(long, value_parser = duration)]
    pub grpc_max_connection_age: Option<Duration>,
    /// Most requests each replica works on at once.
    ///
    /// more are shed (503 / RESOURCE_EXHAUSTED), so a pinned replica shows in errors, not only in counts.
    /// Default: the downstream's own limit.
    #[arg(long)]
    pub replica_capacity: Option<u64>,
    /// Add or remove replicas during every measured round.
    ///
    /// T:+K adds K replicas T after the round starts, T:-K removes the newest K, T=N makes it N (e.g.
    /// 10s:+1, 10s:+1,30s:-1 or 10s=5); the balancer is reloaded with the new set, and the report says how
    /// long each new replica took to receive its share. With --balance l4 or l7.
    #[arg(long)]
    pub scale_at: Option<String>,
}

/// One change to the replicas during a round (`--scale-at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScaleStep {
    /// After the round's start.
    #[serde(with = "super::secs")]
    pub at: Duration,
    /// Replicas added (positive) or removed (negative).
    pub change: i32,
}

impl ScaleStep {
    /// `10000ms:+1` (durations as [`Flags::duration`] writes them).
    fn text(&self) -> String {
        format!("{}:{:+}", duration_text(self.at), self.change)
    }
}

/// `--scale-at`: steps in time order, each within the round, the replicas
/// between 1 and [`MAX_REPLICAS`] after every one.
fn scale_steps(text: &str, replicas: u32, round: Duration) -> Result<Vec<ScaleStep>, ConfigError> {
    let flag = "--scale-at";
    let mut steps = Vec::new();
    let mut count = i64::from(replicas);
    for part in text.split(',').map(str::trim) {
        // T=N: to N replicas, the change from the count before it.
        let to = part.rsplit_once('=').and_then(|(t, n)| {
            let n: i64 = n.trim().parse().ok()?;
            Some((duration(t).ok()?, i32::try_from(n - count).ok().filter(|c| *c != 0)?))
        });
        let parsed = to.or_else(|| {
            let (t, k) = part.rsplit_once(':')?;
            let change: i32 = k.strip_prefix('+').unwrap_or(k).parse().ok().filter(|c| *c != 0)?;
            (k.starts_with('+') || k.starts_with('-')).then_some(())?;
            Some((duration(t).ok()?, change))
        });
        let Some((at, change)) = parsed else {
            return Err(bad(
                flag,
                format!(
                    "{part:?} is not T:+K, T:-K or T=N (N other than the {count} replicas before it); e.g. \
                     --scale-at 10s:+1, 10s:+1,30s:-1 or 10s=5"
                ),
            ));
        };
        if at >= round || at.is_zero() {
            return Err(bad(
                flag,
                format!("{part}: the time must fall inside the round (after 0 and before --duration)"),
            ));
        }
        if steps.last().is_some_and(|s: &ScaleStep| s.at >= at) {
            return Err(bad(flag, "list the steps in time order"));
        }
        count += i64::from(change);
        if !(1..=i64::from(MAX_REPLICAS)).contains(&count) {
            return Err(bad(flag, format!("{part} leaves {count} replicas; keep between 1 and {MAX_REPLICAS}")));
        }
        steps.push(ScaleStep { at, change });
    }
    Ok(steps)
}

/// How calls reach the replicas.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Balance {
    /// One replica, reached directly.
    #[default]
    None,
    /// A TCP balancer: each connection to one replica.
    L4,
    /// A request-level balancer: each call to a replica.
    L7,
    /// The caller balances over the replicas' addresses.
    Client,
}

impl Balance {
    pub fn as_str(self) -> &'static str {
        match self {
            Balance::None => "none",
            Balance::L4 => "l4",
            Balance::L7 => "l7",
            Balance::Client => "client",
        }
    }

    /// The mode in words, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Balance::None => "one replica, reached directly",
            Balance::L4 => "an L4 balancer (nginx stream, round robin per TCP connection)",
            Balance::L7 => "an L7 balancer (nginx http, round robin per call)",
            Balance::Client => "client-side balancing (the caller round-robins over the replicas' addresses)",
        }
    }

    /// A balancer process between the caller and the replicas.
    pub fn has_balancer(self) -> bool {
        matches!(self, Balance::L4 | Balance::L7)
    }
}

/// The replicas section of [`super::Config`]; absent from run.json for one
/// replica reached directly (and in runs made before it existed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replicas {
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub downstream_replicas: u32,
    #[serde(default, skip_serializing_if = "is_none")]
    pub balance: Balance,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "secs_opt")]
    pub grpc_max_connection_age: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_capacity: Option<u64>,
    /// Changes to the replicas during every measured round (`--scale-at`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scale_at: Vec<ScaleStep>,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn is_none(b: &Balance) -> bool {
    *b == Balance::None
}

impl Default for Replicas {
    fn default() -> Self {
        Replicas {
            downstream_replicas: 1,
            balance: Balance::None,
            grpc_max_connection_age: None,
            replica_capacity: None,
            scale_at: Vec::new(),
        }
    }
}

impl Replicas {
    /// Validates the flags against where the tiers run, the rounds, the
    /// link and the hop.
    pub fn from_args(
        a: &ReplicaArgs,
        deploy: &Deploy,
        load: &Load,
        link: Option<&Link>,
        hop: &Hop,
    ) -> Result<Replicas, ConfigError> {
        let n = a.downstream_replicas;
        if !(1..=MAX_REPLICAS).contains(&n) {
            return Err(bad("--downstream-replicas", format!("must be between 1 and {MAX_REPLICAS}")));
        }
        let balance = match (a.balance, n) {
            (None, 1) => Balance::None,
            (None | Some(Balance::None), _) => {
                return Err(bad(
                    "--balance",
                    format!("{n} replicas need a way to reach them: --balance l4, l7 or client"),
                ));
            }
            (Some(b), _) => b,
        };
        if a.replica_capacity == Some(0) {
            return Err(bad("--replica-capacity", "must be at least 1"));
        }
        // The downstream is given it in whole microseconds at least, and
        // refuses zero: an age under a millisecond would start no tier.
        if a.grpc_max_connection_age.is_some_and(|d| d < Duration::from_millis(1)) {
            return Err(bad("--grpc-max-connection-age", "must be at least 1ms"));
        }
        let several = n > 1 || balance != Balance::None;
        let conflicts = [
            ("--caller-url", !deploy.remote.caller_url.is_empty()),
            ("--downstream-url", deploy.downstream_url.is_some()),
            ("--target", deploy.target != TargetTier::Caller),
        ];
        if several && let Some((flag, _)) = conflicts.iter().find(|(_, given)| *given) {
            return Err(bad(
                flag,
                "does not go with --downstream-replicas or --balance: replicas are processes or containers the \
                 harness starts behind the caller it starts; leave out one of them",
            ));
        }
        let internal_relay = (deploy.proxy.is_some() && deploy.proxy_hop == ProxyHop::Internal)
            || link.is_some_and(|l| l.hop.internal());
        if balance == Balance::Client && internal_relay {
            return Err(bad(
                "--balance",
                "client does not go with a proxy or link on the internal hop: the caller would balance over the one \
                 address in front of the replicas; use l4 or l7, or put the proxy on the front hop",
            ));
        }
        if balance == Balance::L7 && hop.tls.is_on() {
            return Err(bad(
                "--balance",
                "l7 does not go with --tls: the balancer would end the caller's TLS and open its own; use l4 \
                 (TLS passes through) or client",
            ));
        }
        let scale_at = match a.scale_at.as_deref() {
            None => Vec::new(),
            Some(text) => scale_at(text, n, balance, load)?,
        };
        Ok(Replicas {
            downstream_replicas: n,
            balance,
            grpc_max_connection_age: a.grpc_max_connection_age,
            replica_capacity: a.replica_capacity,
            scale_at,
        })
    }

    /// The section's part of the command line `harness rerun` replays.
    pub fn replay(&self, flags: &mut Flags) {
        flags.flag("--downstream-replicas", self.downstream_replicas.to_string());
        if self.balance != Balance::None {
            flags.flag("--balance", self.balance.as_str());
        }
        if let Some(age) = self.grpc_max_connection_age {
            flags.duration("--grpc-max-connection-age", age);
        }
        if let Some(n) = self.replica_capacity {
            flags.flag("--replica-capacity", n.to_string());
        }
        if !self.scale_at.is_empty() {
            flags.flag("--scale-at", self.scale_at.iter().map(ScaleStep::text).collect::<Vec<_>>().join(","));
        }
    }

    /// The most replicas a round runs at once.
    pub fn most_at_once(&self) -> u32 {
        let mut n = i64::from(self.downstream_replicas);
        let mut most = n;
        for s in &self.scale_at {
            n += i64::from(s.change);
            most = most.max(n);
        }
        most as u32
    }

    /// The downstream gets the connection age and its capacity.
    pub fn tier_flags(&self, role: TierRole, flags: &mut Flags) {
        if role != TierRole::Downstream {
            return;
        }
        if let Some(age) = self.grpc_max_connection_age {
            flags.duration("--grpc-max-connection-age", age);
        }
        if let Some(n) = self.replica_capacity {
            flags.flag("--max-in-flight", n.to_string());
        }
    }
}

/// An optional duration as fractional seconds in JSON.
mod secs_opt {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Option::<f64>::deserialize(d)?
            .map(|v| Duration::try_from_secs_f64(v).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// `--scale-at`'s steps, where the run can make them.
fn scale_at(text: &str, n: u32, balance: Balance, load: &Load) -> Result<Vec<ScaleStep>, ConfigError> {
    if !balance.has_balancer() {
        return Err(bad(
            "--scale-at",
            "goes with --balance l4 or l7: the harness reloads the balancer with the new replicas (a \
             caller balancing by itself is given the replicas' addresses when it starts)",
        ));
    }
    if !load.fresh_tiers || load.closed_loop {
        return Err(bad(
            "--scale-at",
            "needs fresh tiers for every round and an open loop (leave out --reuse-tiers and \
             --connections without --qps): every round starts from --downstream-replicas",
        ));
    }
    scale_steps(text, n, load.duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_to_n_replicas_is_the_change_from_the_count_before_it() {
        let steps = scale_steps("10s=5,20s=2,30s:+1", 3, Duration::from_secs(60)).unwrap();
        assert_eq!(steps.iter().map(|s| s.change).collect::<Vec<_>>(), [2, -3, 1]);
        // Replayed as the changes they are.
        assert_eq!(steps.iter().map(ScaleStep::text).collect::<Vec<_>>(), ["10000ms:+2", "20000ms:-3", "30000ms:+1"]);
    }
}
