//! What a run is asked to do: the one validated [`Config`] (and [`Plan`] of
//! arms and rates) that the flags become before anything starts
//! (hyperfine's `Options::from_cli_arguments` habit). The rest of the harness
//! never sees clap.
//!
//! Each subject owns one file, whole: its flags (a clap `Args` flattened
//! into [`RunArgs`] under a help heading), its validated section of
//! [`Config`], its checks, its part of the command line `harness rerun`
//! replays, and the flags it gives each tier:
//!
//! | file | subject |
//! |---|---|
//! | `arms.rs` | `--transport`, `--baseline` |
//! | `load.rs` | the schedule and rounds: `--qps`, `--duration`, `--rounds`, … |
//! | `work.rs` | what each request asks of the tiers: `--delay`, `--items`, … |
//! | `deploy/` | where the tiers run: `--target`, remote URLs, containers, proxy, bind |
//! | `launchers.rs` | what each launcher (`--isolation`) cannot give, in one table |
//! | `link.rs` | `--link`, `--link-hop` |
//! | `hop.rs` | the internal hop's TLS, compression, connections, h2c |
//! | `output.rs` | `--out`, `--label`, `--quiet`, `--json`, `--plan-qps`, gates |
//! | `generators.rs` | `--segment`, `--start-at`, `--sample-tiers` |
//! | `replicas.rs` | `--downstream-replicas`, `--balance`, the connection age, each replica's capacity |
//! | `contract.rs` | a team's own contract: `--proto`, `--call`, its data files |
//! | `streams.rs` | the streaming arms: `--stream-items`, `--stream-interval`, `--page-size`, `--consumer-delay` |
//!
//! | `claims.rs` | a plan's `[[claim]]` tables: the published result it reproduces, where, and its ratio |
//! | `experiment.rs` | a plan file (`harness plan`): its base and axes, read with their lines |
//! | `matrix.rs` | a plan's cells (crossed, zipped) and a crossover's probes, as argument lists |
//!
//! `args.rs` puts them together. This module depends on nothing else in the
//! harness.

mod args;
mod arms;
pub mod claims;
mod contract;
mod deploy;
pub mod experiment;
mod generators;
pub mod hop;
pub mod launchers;
mod link;
mod load;
pub mod matrix;
mod output;
mod plan;
mod rates;
mod replicas;
mod streams;
#[cfg(test)]
mod tests;
mod work;

use std::time::Duration;

use caller::Transport;
use serde::{Deserialize, Serialize};

pub use args::{RunArgs, command_line};
pub use arms::TransportArg;
pub use contract::Contract;
pub use deploy::{
    Deploy, Foreign, HugePages, Isolation, PLACEHOLDERS, ProxyHop, ProxyKind, Remote, TargetTier, TierLimits,
    command_words,
};
pub use generators::{Generators, MAX_SEGMENTS, Segment};
pub use hop::{Hop, TlsFiles, TlsMode};
pub use link::{Link, LinkHop, PROFILES as LINK_PROFILES, rate_text};
pub use load::{DEFAULT_LOAD_THREADS, Load};
pub use output::{GateArgs, Output, OutputArgs};
pub use plan::{Plan, arm_dirs, compared_order, recorded_baseline};
pub use rates::parse_rates;
pub use replicas::{Balance, MAX_REPLICAS, Replicas, ScaleStep};
pub use service::Compression;
pub use streams::{DEFAULT_STREAM_ITEMS, Streams};
pub use work::{PayloadAxis, PayloadSweep, Work};

/// A flag that cannot be used, with the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag}: {problem}")]
pub struct ConfigError {
    pub flag: &'static str,
    pub problem: String,
}

pub(crate) fn bad(flag: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError { flag, problem: problem.into() }
}

/// Everything one arm of a run needs, validated, by subject. Serialized into
/// `run.json` with every section flattened, so its keys are those of the flat
/// configuration older builds wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub transport: Transport,
    /// The arm the others are judged against (`--baseline`), recorded only
    /// where [`compared_order`] would not put it first by itself; absent from
    /// run.json otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Transport>,
    #[serde(flatten)]
    pub load: Load,
    #[serde(flatten)]
    pub work: Work,
    #[serde(flatten)]
    pub deploy: Deploy,
    /// A link (round-trip time, rate) on one or both hops (`--link`). Absent
    /// from run.json without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<Link>,
    #[serde(flatten)]
    pub hop: Hop,
    #[serde(flatten)]
    pub output: Output,
    /// This generator's share of a run split across several, and when it
    /// was to start (`--segment`, `--start-at`).
    #[serde(flatten)]
    pub generators: Generators,
    /// The downstream's replicas and how calls reach them; absent from
    /// run.json for one replica reached directly.
    #[serde(flatten)]
    pub replicas: Replicas,
    /// A team's own contract (`--proto`); absent from run.json for the
    /// built-in `bench.v1.Downstream/Fetch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<Contract>,
    /// The streaming arms' items, interval, page size and consumer delay;
    /// absent from run.json for unary arms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<Streams>,
}

/// A tier the harness starts, as the configuration gives it flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TierRole {
    Downstream,
    Caller,
}

/// A list of command-line flags as sections write them: the part of the
/// command line `harness rerun` replays, or the flags a tier is started with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags(pub Vec<String>);

impl Flags {
    pub fn flag(&mut self, name: &str, value: impl Into<String>) {
        self.0.push(name.to_owned());
        self.0.push(value.into());
    }

    /// A flag without a value, given only when `on`.
    pub fn switch(&mut self, on: bool, name: &str) {
        if on {
            self.0.push(name.to_owned());
        }
    }

    /// A duration as a value that parses back to the same figure (whole
    /// microseconds; `300ms`, `1500us`).
    pub fn duration(&mut self, name: &str, d: Duration) {
        self.flag(name, duration_text(d));
    }
}

/// `d` as a flag's value: whole milliseconds (`1500ms`), else microseconds.
pub fn duration_text(d: Duration) -> String {
    let us = (d.as_secs_f64() * 1e6).round() as u64;
    if us.is_multiple_of(1000) { format!("{}ms", us / 1000) } else { format!("{us}us") }
}

impl Config {
    /// Unrecorded load an arm gets again before a round that follows the
    /// other arm's: by then its connections may have idled out and nothing is
    /// in flight, so without it the round would start cold. One service time
    /// plus a second for connection set-up, never more than `--warmup` (and
    /// none when warm-up is off).
    pub fn rewarm(&self) -> Duration {
        (self.service_time() + Duration::from_secs(1)).min(self.load.warmup)
    }

    /// How long one request takes at the least: the downstream's slowest
    /// service time, and for a stream every item after it.
    pub fn service_time(&self) -> Duration {
        let service = self.work.service_time();
        self.streams.as_ref().map_or(service, |s| s.length(service, s.items))
    }

    /// About how many requests are in flight at the target rate: rate times
    /// the slowest service time, plus a margin, capped by `--max-in-flight`.
    pub fn expected_in_flight(&self) -> u64 {
        let per_request = self.service_time().as_secs_f64() + 0.1;
        ((self.load.qps * per_request).ceil() as u64 + 16).min(self.load.max_in_flight as u64)
    }

    /// Open files the busiest process (the caller) needs: its front
    /// connections, its outbound ones (one per call in flight over HTTP/1.1,
    /// a fixed few over HTTP/2), and a margin for everything else.
    pub fn expected_open_files(&self) -> u64 {
        let in_flight =
            if self.load.closed_loop { self.load.connections as u64 + 16 } else { self.expected_in_flight() };
        let front = if self.load.connections == 0 { in_flight } else { in_flight.min(self.load.connections as u64) };
        let outbound = match self.transport {
            t if t.is_grpc() => u64::from(self.hop.grpc_connections),
            _ if !self.hop.rest_http2 => in_flight * u64::from(self.work.fanout),
            _ => 1,
        };
        front + outbound + 128
    }

    /// The front door of the already running caller of this arm
    /// (`--caller-url`), `/v1/call` not included.
    pub fn remote_caller(&self) -> Option<&str> {
        self.deploy.remote.caller_url.get(self.transport.as_str()).map(String::as_str)
    }

    /// The admin endpoint of this arm's already running caller.
    pub fn remote_caller_admin(&self) -> Option<&str> {
        self.deploy.remote.caller_admin.get(self.transport.as_str()).map(String::as_str)
    }

    /// The flags a tier of this arm is started with, whatever starts it (a
    /// child process or a container): every section's part, in one order.
    /// Where it listens and where its peer is are the launcher's to add.
    pub fn tier_flags(&self, role: TierRole, tls: Option<&TlsFiles>) -> Flags {
        let mut flags = Flags::default();
        if role == TierRole::Caller {
            flags.flag("--transport", self.transport.as_str());
        }
        self.work.tier_flags(role, &mut flags);
        self.load.tier_flags(role, &mut flags);
        self.hop.tier_flags(role, tls, &mut flags);
        self.replicas.tier_flags(role, &mut flags);
        if self.deploy.huge_pages != Default::default() {
            flags.flag("--huge-pages", self.deploy.huge_pages.as_str());
        }
        if let Some(c) = &self.contract {
            c.tier_flags(role, &mut flags);
        }
        if let Some(s) = &self.streams {
            s.tier_flags(role, &mut flags);
        }
        flags
    }
}

/// The longest any one duration flag may be. Longer values overflow the
/// clocks they are added to (`Instant + d`) and no measurement needs them.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The value parser of every duration flag: a humantime duration (`500ms`,
/// `2m`, `1h 30m`), at most [`MAX_DURATION`]. Clap names the flag and exits
/// with status 2 when it fails.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text.trim())
        .map_err(|e| format!("{text:?} is not a duration ({e}); write it like 500ms, 60s or 2m"))?;
    if d > MAX_DURATION {
        return Err(format!(
            "{} is longer than the {} any duration may be",
            text.trim(),
            humantime::format_duration(MAX_DURATION)
        ));
    }
    Ok(d)
}

/// A duration as people write it (`500ms`, `1m 30s`).
pub(crate) fn hd(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(d)
}

/// Durations as fractional seconds in JSON.
pub(crate) mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v).map_err(serde::de::Error::custom)
    }
}

pub(crate) fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}
