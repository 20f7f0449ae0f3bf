//! What a run is asked to do: the one validated [`Config`] (and [`Plan`] of
//! arms and rates) that the flags become before anything starts
//! (hyperfine's `Options::from_cli_arguments` habit). The flags themselves and
//! their validation live in [`args`]; the rest of the harness never sees clap.
//!
//! This module depends on nothing else in the harness.

mod args;
mod deploy;
mod link;
mod rates;
pub mod tls;

use std::path::PathBuf;
use std::time::Duration;

use caller::Transport;
use payload::Shape;
use serde::{Deserialize, Serialize};

pub use args::{DEFAULT_LOAD_THREADS, RunArgs, TransportArg, command_line};
pub use deploy::{Isolation, Remote, TierLimits};
pub use link::{Link, LinkHop, PROFILES as LINK_PROFILES, rate_text};
pub use rates::parse_rates;
pub use telemetry::Compression;
pub use tls::{TlsFiles, TlsMode};

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

/// Which tier the harness sends its load to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetTier {
    Caller,
    Downstream,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProxyKind {
    Nginx,
    Caddy,
}

/// Which hop the proxy sits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProxyHop {
    /// caller → proxy → downstream.
    Internal,
    /// harness → proxy → caller.
    Front,
}

impl TargetTier {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetTier::Caller => "caller",
            TargetTier::Downstream => "downstream",
        }
    }
}

impl ProxyHop {
    pub fn as_str(self) -> &'static str {
        match self {
            ProxyHop::Internal => "internal",
            ProxyHop::Front => "front",
        }
    }
}

impl ProxyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProxyKind::Nginx => "nginx",
            ProxyKind::Caddy => "caddy",
        }
    }

    /// The Debian package that provides the binary.
    pub fn package(self) -> &'static str {
        self.as_str()
    }
}

/// What a payload sweep varies: the records per response (`--items`) or the
/// upload per request (`--request-bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PayloadAxis {
    Items,
    RequestBytes,
}

impl PayloadAxis {
    /// The flag that gives the sizes.
    pub fn flag(self) -> &'static str {
        match self {
            PayloadAxis::Items => "--items",
            PayloadAxis::RequestBytes => "--request-bytes",
        }
    }

    /// What one size counts, for axes and tables.
    pub fn unit(self) -> &'static str {
        match self {
            PayloadAxis::Items => "items per response",
            PayloadAxis::RequestBytes => "request body bytes",
        }
    }

    /// The size of this axis in `config`.
    pub fn of(self, config: &Config) -> u32 {
        match self {
            PayloadAxis::Items => config.items,
            PayloadAxis::RequestBytes => config.request_bytes,
        }
    }
}

/// A payload sweep: one full measured step per size, at one rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadSweep {
    pub axis: PayloadAxis,
    /// Strictly increasing.
    pub sizes: Vec<u32>,
}

/// A validated run: the shared configuration and the arms (transports) to
/// measure with it, in the order of their first round.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub config: Config,
    pub arms: Vec<Transport>,
    /// The offered rates: one for a single run, several for a sweep (empty in
    /// closed-loop mode).
    pub rates: Vec<f64>,
    /// A payload sweep (`--items 1,10,100` or `--request-bytes` as a list);
    /// never together with several rates.
    pub payload: Option<PayloadSweep>,
}

impl Plan {
    /// True for a sweep over several rates or payload sizes.
    pub fn is_sweep(&self) -> bool {
        self.rates.len() > 1 || self.payload.is_some()
    }

    /// The plan of one step of a sweep, over the given arms.
    pub fn step(&self, qps: f64, arms: &[Transport]) -> Plan {
        Plan { config: Config { qps, ..self.config.clone() }, arms: arms.to_vec(), rates: vec![qps], payload: None }
    }

    /// The plan of one step of a payload sweep: every arm at `size`.
    pub fn payload_step(&self, axis: PayloadAxis, size: u32) -> Plan {
        let mut config = self.config.clone();
        match axis {
            PayloadAxis::Items => config.items = size,
            PayloadAxis::RequestBytes => config.request_bytes = size,
        }
        Plan { config, arms: self.arms.clone(), rates: self.rates.clone(), payload: None }
    }

    /// The configuration of one arm.
    pub fn arm(&self, transport: Transport) -> Config {
        Config { transport, ..self.config.clone() }
    }

    /// The order in which (arm, 0-based round) pairs run. With two arms the
    /// order is counterbalanced (A B, B A, A B, …) so that drift on a shared
    /// machine hits both arms equally, linear drift cancelling out.
    pub fn order(&self) -> Vec<(usize, u32)> {
        let n = self.arms.len();
        (0..self.config.rounds)
            .flat_map(|r| {
                let arms: Vec<usize> = if r % 2 == 1 { (0..n).rev().collect() } else { (0..n).collect() };
                arms.into_iter().map(move |a| (a, r))
            })
            .collect()
    }

    /// How long the load runs in all: every arm's warm-up (one per round with
    /// fresh tiers), every re-warm after an arm switch, and every round.
    pub fn load_duration(&self) -> Duration {
        let c = &self.config;
        let arms = self.arms.len() as u32;
        if c.fresh_tiers {
            return (c.warmup + c.duration) * c.rounds * arms;
        }
        let order = self.order();
        let switches = order.windows(2).filter(|w| w[0].0 != w[1].0).count() as u32;
        // The first switch to each arm but the first is covered by its warm-up.
        let rewarms = switches.saturating_sub(arms.saturating_sub(1));
        (c.warmup + c.duration * c.rounds) * arms + c.rewarm() * rewarms
    }

    /// The arm and step that needs the most open files: every arm at the
    /// highest rate of a sweep (a step that would not fit is refused before
    /// the first one runs, never reported as the knee).
    pub fn busiest(&self) -> Config {
        let rates: Vec<Option<f64>> =
            if self.rates.is_empty() { vec![None] } else { self.rates.iter().copied().map(Some).collect() };
        let configs = self
            .arms
            .iter()
            .flat_map(|t| rates.iter().map(move |q| Config { qps: q.unwrap_or(self.config.qps), ..self.arm(*t) }));
        configs.max_by_key(Config::expected_open_files).unwrap_or_else(|| self.config.clone())
    }

    /// About how many bytes the run folder takes, generously: every sample
    /// appears in `run.json`, `timeseries.csv` and the charts, and each arm
    /// (of each step) has its reports, histograms and charts. Checked against
    /// the free space of `--out` before anything starts.
    pub fn expected_output_bytes(&self) -> u64 {
        const PER_ROW: u64 = 512;
        // Five latency histograms at five significant digits, base64.
        const PER_ROUND: u64 = 128 << 10;
        const PER_ARM: u64 = 512 << 10;
        const PER_FOLDER: u64 = 512 << 10;
        let c = &self.config;
        let sizes = self.payload.as_ref().map_or(1, |p| p.sizes.len());
        let (steps, arms) = ((self.rates.len().max(1) * sizes) as u64, self.arms.len() as u64);
        // Samples are taken over the whole run, every arm's time included.
        let run = (c.warmup + c.duration * c.rounds).as_secs_f64() * arms as f64;
        let intervals = (run / c.sample_interval.as_secs_f64()).ceil() as u64 + 1;
        // Per interval: downstream, caller, proxy, harness, and the load.
        let rows = intervals * 5;
        PER_FOLDER + steps * arms * (PER_ARM + u64::from(c.rounds) * PER_ROUND + rows * PER_ROW)
    }

    /// `grpc`, `rest`, `both`, `aa-grpc` / `aa-rest`, or the arms joined by
    /// `+` for any other list: the transport part of the run folder's name.
    pub fn transport_name(&self) -> String {
        match self.arms.as_slice() {
            [a, b] if a == b => format!("aa-{a}"),
            [Transport::Grpc, Transport::Rest] => "both".into(),
            [_, _, ..] => self.arms.iter().map(|t| t.as_str()).collect::<Vec<_>>().join("+"),
            _ => self.config.transport.as_str().into(),
        }
    }

    /// The folder (and time-series) name of each arm: its transport, or
    /// `grpc-a` / `grpc-b` when both arms share one (an A/A run).
    pub fn arm_dirs(&self) -> Vec<String> {
        arm_dirs(&self.arms)
    }
}

/// The order in which the arms of a run are compared: the baseline first
/// (`baseline`, or without it the first arm of [`Transport::ALL`]'s order that
/// ran), then the others in [`Transport::ALL`]'s order; arms of one transport
/// (an A/A pair) keep their order. Indices into `transports`. A `both` run
/// compares gRPC against REST, as it always did.
pub fn compared_order(transports: &[Transport], baseline: Option<Transport>) -> Vec<usize> {
    let rank = |t: Transport| Transport::ALL.iter().position(|u| *u == t).unwrap_or(usize::MAX);
    let mut order: Vec<usize> = (0..transports.len()).collect();
    order.sort_by_key(|&i| (Some(transports[i]) != baseline, rank(transports[i])));
    order
}

/// The baseline to record in a run's configuration: `None` where
/// [`compared_order`] puts it first without being told.
pub fn recorded_baseline(arms: &[Transport], baseline: Transport) -> Option<Transport> {
    let first = compared_order(arms, None).first().map(|&i| arms[i]);
    (first != Some(baseline)).then_some(baseline)
}

/// The folder name of each arm of a run over `transports`: the transport's
/// name, suffixed `-a`, `-b`, … where arms share a transport.
pub fn arm_dirs(transports: &[Transport]) -> Vec<String> {
    transports
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let same = transports.iter().filter(|u| *u == t).count();
            if same == 1 {
                t.as_str().to_owned()
            } else {
                let k = transports[..i].iter().filter(|u| *u == t).count();
                format!("{}-{}", t.as_str(), (b'a' + k as u8) as char)
            }
        })
        .collect()
}

/// Everything one arm of a run needs, validated. Serialized into `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub transport: Transport,
    /// The arm the others are judged against (`--baseline`), recorded only
    /// where [`compared_order`] would not put it first by itself; absent from
    /// run.json otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Transport>,
    /// Offered rate (0 in closed-loop throughput mode).
    pub qps: f64,
    /// Throughput mode: `connections` workers send back to back; latency is
    /// then not corrected for coordinated omission.
    pub closed_loop: bool,
    /// Where the load goes: `caller` (three tiers) or `downstream` (two).
    pub target: TargetTier,
    /// An already running downstream the load goes to (with target downstream).
    pub downstream_url: Option<String>,
    /// Already running tiers: the caller per arm, and the admin endpoints
    /// they are sampled through. Absent when the harness starts the tiers.
    #[serde(default, skip_serializing_if = "Remote::is_empty")]
    pub remote: Remote,
    /// How the harness starts its tiers: processes (absent) or containers.
    #[serde(default, skip_serializing_if = "Isolation::is_processes")]
    pub isolation: Isolation,
    /// Per-tier container CPU and memory limits (with containers).
    #[serde(default, skip_serializing_if = "TierLimits::is_empty")]
    pub tier_limits: TierLimits,
    /// The p99 a sweep step must stay under to count as sustained.
    #[serde(with = "secs")]
    pub slo_p99: Duration,
    /// A reverse proxy between two tiers, and on which hop.
    #[serde(default)]
    pub proxy: Option<ProxyKind>,
    #[serde(default = "default_hop")]
    pub proxy_hop: ProxyHop,
    /// A link (round-trip time, rate) on one or both hops (`--link`). Absent
    /// from run.json without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<Link>,
    #[serde(with = "secs")]
    pub duration: Duration,
    #[serde(with = "secs")]
    pub warmup: Duration,
    /// The first part of a cold warm-up (fresh tiers), over which the rate
    /// rises linearly from zero to `qps` (`--warmup-ramp`; open loop only).
    /// Older runs lack it: their warm-up started at the full rate.
    #[serde(with = "secs", default)]
    pub warmup_ramp: Duration,
    pub rounds: u32,
    /// Every measured round after an arm's first runs on freshly started tier
    /// processes, warmed up like the first: the process is the unit memory
    /// is judged on (`--reuse-tiers` turns it off). Older runs lack it: they
    /// reused one set of processes per arm.
    #[serde(default)]
    pub fresh_tiers: bool,
    #[serde(with = "secs")]
    pub delay: Duration,
    #[serde(with = "secs")]
    pub jitter: Duration,
    pub items: u32,
    /// Bytes of opaque body uploaded with each downstream call (`--request-bytes`).
    /// Older runs lack it: they uploaded nothing.
    #[serde(default)]
    pub request_bytes: u32,
    /// The kind of record responses carry (`--shape`). Older runs lack it:
    /// they fetched orders.
    #[serde(default)]
    pub shape: Shape,
    pub fanout: u32,
    #[serde(with = "secs")]
    pub timeout: Duration,
    pub max_in_flight: usize,
    /// Front-hop connection bound; 0 = one per request in flight.
    pub connections: usize,
    /// Worker threads of the harness's runtime (`--load-threads`). Older runs
    /// lack it: they ran one per core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_threads: Option<u32>,
    #[serde(with = "secs")]
    pub sample_interval: Duration,
    pub grpc_connections: u32,
    pub rest_http2: bool,
    /// IP address the tiers' service listeners bind.
    pub bind: std::net::IpAddr,
    /// IP address the tiers' admin listeners bind. Older runs lack it: they
    /// bound admin on `bind`, loopback unless it said otherwise.
    #[serde(default = "loopback")]
    pub admin_bind: std::net::IpAddr,
    /// Port of the caller's front listener (0: any free port).
    pub caller_port: u16,
    pub out: PathBuf,
    pub label: Option<String>,
    pub quiet: bool,
    pub json: bool,
    /// The rate comparisons project costs to (`--plan-qps`); `None`: the
    /// measured rate. Absent from run.json when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_qps: Option<f64>,
    /// TLS on the internal hop (`--tls`, `--mtls`). Absent from run.json
    /// when off (and in runs made before it existed).
    #[serde(default, skip_serializing_if = "is_default")]
    pub tls: TlsMode,
    /// Compression on the internal hop (`--compression`). Absent from
    /// run.json when off.
    #[serde(default, skip_serializing_if = "is_default")]
    pub compression: telemetry::Compression,
    /// Where this run's certificates were written (set once the run folder
    /// exists, before any tier starts); not part of what a run is asked to do.
    #[serde(skip)]
    pub tls_files: Option<TlsFiles>,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
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

fn loopback() -> std::net::IpAddr {
    std::net::IpAddr::from([127, 0, 0, 1])
}

fn default_hop() -> ProxyHop {
    ProxyHop::Internal
}

impl Config {
    /// Unrecorded load an arm gets again before a round that follows the
    /// other arm's: by then its connections may have idled out and nothing is
    /// in flight, so without it the round would start cold. One service time
    /// plus a second for connection set-up, never more than `--warmup` (and
    /// none when warm-up is off).
    pub fn rewarm(&self) -> Duration {
        (self.delay + self.jitter + Duration::from_secs(1)).min(self.warmup)
    }

    /// About how many requests are in flight at the target rate: rate times
    /// the slowest service time, plus a margin, capped by `--max-in-flight`.
    pub fn expected_in_flight(&self) -> u64 {
        let per_request = (self.delay + self.jitter).as_secs_f64() + 0.1;
        ((self.qps * per_request).ceil() as u64 + 16).min(self.max_in_flight as u64)
    }

    /// Open files the busiest process (the caller) needs: its front
    /// connections, its outbound ones (one per call in flight over HTTP/1.1,
    /// a fixed few over HTTP/2), and a margin for everything else.
    pub fn expected_open_files(&self) -> u64 {
        let in_flight = self.sizing_in_flight();
        let front = if self.connections == 0 { in_flight } else { in_flight.min(self.connections as u64) };
        let outbound = match self.transport {
            t if t.is_grpc() => u64::from(self.grpc_connections),
            _ if !self.rest_http2 => in_flight * u64::from(self.fanout),
            _ => 1,
        };
        front + outbound + 128
    }

    /// The rate used to size connection pools and limits: the offered rate,
    /// or in closed loop the connections' worth.
    fn sizing_in_flight(&self) -> u64 {
        if self.closed_loop { self.connections as u64 + 16 } else { self.expected_in_flight() }
    }

    /// The listeners bound beyond loopback, as `flag address` pairs: other
    /// machines can reach them, and whatever they send is counted.
    pub fn exposed(&self) -> Vec<(&'static str, std::net::IpAddr)> {
        [("--bind", self.bind), ("--admin-bind", self.admin_bind)]
            .into_iter()
            .filter(|(_, ip)| !ip.is_loopback())
            .collect()
    }

    /// The front door of the already running caller of this arm
    /// (`--caller-url`), `/v1/call` not included.
    pub fn remote_caller(&self) -> Option<&str> {
        self.remote.caller_url.get(self.transport.as_str()).map(String::as_str)
    }

    /// The admin endpoint of this arm's already running caller.
    pub fn remote_caller_admin(&self) -> Option<&str> {
        self.remote.caller_admin.get(self.transport.as_str()).map(String::as_str)
    }

    /// Requests scheduled in one round.
    pub fn requests_per_round(&self) -> u64 {
        (self.duration.as_secs_f64() * self.qps).round() as u64
    }
}
