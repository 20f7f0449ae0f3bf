//! The structure of `run.json`: everything a run measured, with enough raw data
//! (serialized histograms, every sample) that any figure in a report can be
//! recomputed. `results/README.md` documents each field.
//!
//! This is the joint between the stages: `run` and `judge` fill it, `export`
//! only reads it. A figure that could not be measured is `None` here (null in
//! JSON), never zero.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::{Config, ProxyHop, ProxyKind};

pub const SCHEMA: &str = "grpc-vs-rest/run/1";

/// The processes a run measures. Declared in alphabetical order, so maps keyed
/// by it list tiers as they always have in `run.json` and the reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TierName {
    Caller,
    Downstream,
    Harness,
    /// The user-space link emulator on the internal hop (`--link`): not a
    /// measured tier; its CPU and memory are its own, never a tier's.
    Link,
    /// The link emulator on the front hop (`--link-hop front|both`).
    #[serde(rename = "link_front")]
    LinkFront,
    /// A reverse proxy (nginx or caddy) on one hop.
    Proxy,
    /// The balancer in front of the downstream's replicas (`--balance l4|l7`).
    Balancer,
}

impl TierName {
    pub fn as_str(self) -> &'static str {
        match self {
            TierName::Caller => "caller",
            TierName::Downstream => "downstream",
            TierName::Harness => "harness",
            TierName::Link => "link",
            TierName::LinkFront => "link_front",
            TierName::Proxy => "proxy",
            TierName::Balancer => "balancer",
        }
    }
}

impl std::fmt::Display for TierName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every round ran to its end.
    Complete,
    /// Stopped by Ctrl-C; finished rounds are whole, the current one partial.
    Interrupted,
    /// A tier died or failed; finished rounds are whole, the current one partial.
    Aborted,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub schema: String,
    pub tool_version: String,
    pub status: RunStatus,
    /// Why the run did not complete (which tier, when, how).
    pub status_reason: Option<String>,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub config: Config,
    pub environment: Environment,
    /// Each tier's pid and reported settings (pools, stream limits, timeouts).
    pub tiers: BTreeMap<TierName, TierInfo>,
    pub rounds: Vec<RoundResult>,
    /// CPU and RSS of every tier over time.
    pub samples: Vec<ResourceSample>,
    /// The generator's state over time.
    pub load_samples: Vec<LoadSample>,
    /// The latency instrument: its precision and its own measured floor.
    /// Absent in runs made before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instrument: Option<Instrument>,
    /// The link between the tiers (`--link`) and the settings that govern
    /// traffic over it. Absent without a link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkReport>,
    /// Why requests failed, by error class, with counts (every round and the
    /// warm-up; at most a few distinct reasons a class). Absent when none
    /// failed, and in runs made before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_reasons: Vec<ErrorReason>,
    /// The load generators of a run split across several (`--segment`):
    /// this one alone in a segment's folder, every one in a merged run
    /// (`harness merge`). Absent for a run of one generator started at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generators: Vec<Generator>,
    /// A team's own contract (`--proto`): the method, the files and the
    /// SHA-256 of what they compiled to, each side's data and its sizes in
    /// both encodings. Absent for the built-in contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<contract::Report>,
    /// Reasons this run is not a fair measurement; empty when it is. Judged
    /// once when the run ends (`judge::validity`); every renderer reads it here.
    pub validity: Vec<String>,
}

/// One load generator of a run: its share of the schedule, when it began
/// and, in a merged run, what it sent and saw on its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Generator {
    /// This generator sent requests i with i mod `count` = `segment`.
    pub segment: u32,
    pub count: u32,
    /// Whether the tiers' figures are this generator's readings.
    pub sampled_tiers: bool,
    /// The host it ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// When it was to begin (`--start-at`), and how many seconds after that
    /// it began (`null` without `--start-at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_seconds: Option<f64>,
    /// What it measured on its own, over every round (merged runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own: Option<GeneratorFigures>,
}

/// One generator's own figures in a merged run, its rounds put together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GeneratorFigures {
    /// The folder it was merged from.
    pub folder: String,
    pub status: Option<RunStatus>,
    pub scheduled: u64,
    pub sent: u64,
    pub ok: u64,
    /// Corrected latency over its requests alone.
    pub latency: Option<Summary>,
    /// How late its requests left after their due time.
    pub send_lag: Option<Summary>,
    /// Its instrument's measured floor.
    pub client_floor: Option<Summary>,
    /// Its own CPU seconds over the rounds.
    pub cpu_seconds: Option<f64>,
    /// Its own validity notes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validity: Vec<String>,
}

/// One reason requests failed, as the failing side said it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReason {
    /// The error class, as in `Requests::errors` (`http_502`, `connect`, …).
    pub class: String,
    pub reason: String,
    pub count: u64,
}

impl RunResult {
    /// True when nothing made this run an unfair measurement.
    pub fn is_valid(&self) -> bool {
        self.validity.is_empty()
    }
}

/// How precise the latency figures are, and what the instrument itself adds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instrument {
    /// Significant digits every latency histogram keeps.
    pub significant_digits: u8,
    /// The load client's service time against an endpoint inside the harness
    /// that answers at once (measured before the warm-up): what the client,
    /// loopback and a minimal server add together. `None` when the load does
    /// not go through the front client, or it could not be measured.
    pub client_floor: Option<Summary>,
    pub client_floor_requests: u32,
    /// Where the tiers' and the harness's CPU seconds per round come from
    /// (`clock_process_cputime`: each process's own nanosecond clock). Older
    /// runs lack it: theirs came from /proc in 10 ms ticks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_clock: Option<String>,
}

/// A run's link: what it was, how it was made, and what governs traffic
/// over it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkReport {
    /// `RTT 10 ms, rate 1 Gbit/s per direction`, with the profile's name.
    pub description: String,
    /// `internal`, `front` or `both`.
    pub hop: String,
    pub rtt_ms: f64,
    /// `null`: not limited.
    pub rate_bits_per_second: Option<u64>,
    /// How the link was made (always the user-space emulator).
    pub emulator: String,
    /// Bytes one connection may have queued per direction in the emulator.
    pub queue_limit_bytes: u64,
    /// The most the emulator reads at once.
    pub chunk_bytes: u64,
    /// Bandwidth-delay product; `null` without a rate.
    pub bdp_bytes: Option<u64>,
    /// Whether the kernel could have made the link with netem.
    pub netem: NetemCheck,
    /// HTTP/2 flow-control windows, as the clients and servers set them.
    pub http2: Http2Windows,
    /// The kernel's TCP settings, read from /proc/sys.
    pub tcp: TcpSettings,
}

/// Whether `tc … netem` works on this kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetemCheck {
    /// `null`: not checked.
    pub available: Option<bool>,
    /// How it was checked, and what the kernel said.
    pub how: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Http2Windows {
    /// `initial_stream_window_bytes`, `initial_connection_window_bytes`, `adaptive_window`.
    pub client: serde_json::Value,
    pub server: serde_json::Value,
    /// Which hops and arms they govern.
    pub applies_to: String,
}

/// `net.ipv4.tcp_rmem`, `tcp_wmem` (min default max, bytes) and
/// `tcp_congestion_control`; `null` where unreadable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcpSettings {
    pub rmem: Option<String>,
    pub wmem: Option<String>,
    pub congestion_control: Option<String>,
}

/// One tier as the run found it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TierInfo {
    /// Its process id on its own host (a container's first process is 1);
    /// `null` for a tier elsewhere whose admin endpoint could not be read.
    pub pid: Option<u32>,
    /// Its own reported settings (`/stats`); for a container, with the
    /// container's name, image and limits under `container`.
    pub settings: serde_json::Value,
    /// The host name the tier reported (`/stats`): where it ran. Absent in
    /// runs made before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// For a tier the harness did not start as a child process (an already
    /// running one, or a container): the admin endpoint it was sampled
    /// through, `null` when none was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_via: Option<SampledVia>,
}

/// How a tier that is not a child process of the harness was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampledVia {
    /// The admin endpoint read for CPU, memory and bytes; `None`: none given.
    pub admin_url: Option<String>,
    /// Whether it answered when the run began.
    pub reachable: bool,
}

impl TierInfo {
    /// A tier the harness started as a child process on this machine.
    pub fn local(pid: u32, settings: serde_json::Value) -> TierInfo {
        TierInfo { pid: Some(pid), settings, hostname: None, sampled_via: None }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundResult {
    /// 1-based.
    pub index: u32,
    /// False when the run stopped inside this round.
    pub complete: bool,
    /// When the round began, in seconds since the run's origin (the time base
    /// of `samples`).
    pub started_seconds: f64,
    /// Seconds from the read of the tiers' counters at the round's first due
    /// time to their read at its end (or at the stop).
    pub window_seconds: f64,
    pub requests: Requests,
    pub throughput: Throughput,
    pub latency: Latency,
    /// HdrHistogram V2 serialization, base64, of each latency histogram (µs).
    pub histograms: BTreeMap<String, String>,
    /// By tier: `caller`, `downstream`, `harness` (and `proxy`).
    pub resources: BTreeMap<TierName, Resources>,
    pub bytes: Hops,
    /// Mean cores the rest of the machine kept busy during the round (see
    /// `LoadSample::other_cores`); absent where not measured and in older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cores: Option<f64>,
    /// The hypervisor's steal over the round: the part of the machine's CPU
    /// ticks (`/proc/stat`, every core) given to other guests while this one
    /// had work. Absent where not measured and in older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_percent: Option<f64>,
    /// The tier processes this round measured (fresh per round unless
    /// `config.fresh_tiers` is false). Older runs lack it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pids: BTreeMap<TierName, u32>,
    /// By tier with a CPU limit (`--tier-cpus`, containers): how its quota
    /// acted in the round, from its cgroup's `cpu.stat`, over the span of
    /// `per_request_basis` (as `replicas`). Absent without a limit, where it
    /// could not be read, and in older runs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cpu_throttling: BTreeMap<TierName, CpuThrottling>,
    /// The downstream's replicas (`--downstream-replicas`, `--balance`),
    /// `downstream#0` first, each from its own `/stats`. Absent for one
    /// replica reached directly and in older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<ReplicaSet>,
    /// What the streams delivered (streaming arms only): per-item figures.
    /// `latency` is then from each stream's intended start to its last item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<StreamRound>,
    /// What the tiers' per-request figures (CPU per request, bytes per
    /// request of each hop) are over. Absent in older runs (`window`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_request_basis: Option<PerRequestBasis>,
}

/// What a round's per-request figures are over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PerRequestBasis {
    /// The round's own calls, each whole and nothing else: the round started
    /// with nothing in flight (its warm-up drained first) and its tiers were
    /// read again once its last call had ended, before anything else ran on
    /// them.
    OwnCalls,
    /// The round's counter window (its first to its last due time): it
    /// holds the tail of what ran before it and misses its own last calls'
    /// answers (a round that began where another ended on the same tiers,
    /// a streaming arm, one of several generators).
    Window,
}

/// One round of a streaming arm, item by item. A figure that could not be
/// measured is `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamRound {
    /// Items each stream asked for.
    pub items_per_stream: u32,
    /// Streams that delivered every item, whole and in order.
    pub streams_ok: u64,
    /// Items the harness received whole and in order (cut streams' too).
    pub items: u64,
    /// Items received per second, over the round's schedule.
    pub items_per_second: f64,
    /// From each stream's intended start to its first item.
    pub first_item: Option<Summary>,
    /// From each stream's intended start to its last item (the round's
    /// corrected latency).
    pub last_item: Option<Summary>,
    /// Each item's arrival at the harness (the kernel's stamp of the packet
    /// that completed it) minus its due time on the downstream's schedule,
    /// both read on the system clock: one meaning on every arm, the sum of
    /// the two below.
    pub item_delay: Option<Summary>,
    /// Production lateness: each item's production time minus its due
    /// time, both the downstream's own stamps (a streamed item made late by
    /// a held-back or busy producer, a page asked for after its items were due).
    #[serde(default)]
    pub item_lateness: Option<Summary>,
    /// Transit: each item's arrival minus its production time (for a page,
    /// the wait for its last item too).
    #[serde(default)]
    pub item_transit: Option<Summary>,
    /// Whether `item_delay` compares clocks of one host (`same_host`: the
    /// harness started the tiers, as processes or containers) or maybe not
    /// (`may_differ`: a tier it did not start may run elsewhere, and the
    /// clocks' offset is then in every figure).
    pub item_delay_clocks: String,
    /// The most items each stream had in transit at once: produced by the
    /// downstream, not yet taken by the harness.
    pub buffered_items: Option<Spread>,
    /// Streams cut short, by the items each had delivered (`"37": 2`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cut_after_items: BTreeMap<String, u64>,
    /// Bytes per item on the internal hop (the downstream's listener,
    /// divided by the items it produced) and on the front hop (the caller's
    /// front listener, divided by the items the harness received).
    pub internal: ItemBytes,
    pub front: ItemBytes,
    /// CPU µs per item received, by tier.
    pub cpu_us_per_item: BTreeMap<TierName, f64>,
    /// Streams open on average over the round (the load samples' in-flight).
    pub open_streams_mean: Option<f64>,
    /// Each tier's mean RSS per 1,000 streams open on average: the whole
    /// process's memory, its idle footprint included, over the open streams.
    pub rss_mib_per_1000_open_streams: BTreeMap<TierName, f64>,
    /// The downstream's own count of its streams over the round: started,
    /// finished, cut, open (at the end), the most open at once, items made,
    /// items made after their due time and how late in all (the producer
    /// held back by flow control or a full socket).
    pub downstream: Option<telemetry::StreamSnapshot>,
}

/// A count's median, 99th percentile and maximum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// Bytes per item of one hop; `None` where the counters or the items were
/// not read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ItemBytes {
    /// The items divided by.
    pub items: Option<u64>,
    pub request_wire_bytes_per_item: Option<f64>,
    pub response_wire_bytes_per_item: Option<f64>,
    pub request_message_bytes_per_item: Option<f64>,
    pub response_message_bytes_per_item: Option<f64>,
}

/// How the internal hop's calls fell on the downstream's replicas in one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaSet {
    /// The largest replica's share of the calls ÷ the fair share (1 / replicas):
    /// 1 is even, `replicas` is every call on one. `None` when no replica's
    /// counters could be read or none served a call.
    pub imbalance: Option<f64>,
    pub each: Vec<ReplicaRound>,
    /// Replicas added or removed during the round (`--scale-at`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scaling: Vec<ScaleEvent>,
}

/// One change to the replicas during a round, and how the calls followed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScaleEvent {
    /// When the balancer was reloaded with the new set, seconds after the
    /// round's first due time.
    pub at_seconds: f64,
    /// Replicas added (positive) or removed (negative).
    pub change: i32,
    /// The indexes of the replicas added, or taken out.
    pub added: Vec<u32>,
    pub removed: Vec<u32>,
    /// Replicas running after the change.
    pub replicas: u32,
    /// Seconds from the reload until a replica added answered its first
    /// call (read every 250 ms); `None` if none had by the round's end.
    pub first_call_seconds: Option<f64>,
    /// Seconds from the reload until the replicas added together answered
    /// at least half their fair share of the calls over a window of at
    /// least a second; `None` if they had not by the round's end.
    pub time_to_share_seconds: Option<f64>,
    /// How long after the reload they were watched (to the round's end).
    pub watched_seconds: f64,
}

/// One replica's round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaRound {
    /// 0-based: `downstream#0`, …
    pub index: u32,
    pub pid: Option<u32>,
    /// Calls its listener for the transport answered, by outcome.
    pub requests: BTreeMap<String, u64>,
    /// Its part of all the replicas' answered calls (0 to 1).
    pub share: Option<f64>,
    pub cpu_seconds: Option<f64>,
    /// CPU µs per call it answered OK.
    pub cpu_us_per_request: Option<f64>,
    /// RSS at the round's end.
    pub rss_bytes: Option<u64>,
    /// Connections it accepted in the round, and those open at its end.
    pub connections: Option<u64>,
    pub connections_open: Option<u64>,
    /// Connections it ended at their age (`--grpc-max-connection-age`).
    pub connections_aged: Option<u64>,
    /// The most calls it held at once since it started (its warm-up included).
    pub in_flight_peak: Option<u64>,
    /// Its own CPU limit at work, for a replica in a container with
    /// `--tier-cpus downstream=…` (each replica gets that limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttling: Option<CpuThrottling>,
}

/// A CPU limit at work over one round: the kernel enforces the quota per
/// period (100 ms by Docker's default) and throttles the tier for the rest of
/// a period once it has used the quota.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuThrottling {
    /// The limit, in cores.
    pub cpus: f64,
    /// Enforcement periods in which the tier ran.
    pub periods: u64,
    /// Of those, the periods in which it used its quota and waited.
    pub throttled_periods: u64,
    /// The time its threads waited for quota, summed.
    pub throttled_seconds: f64,
}

impl CpuThrottling {
    /// True if the limit held the tier back at least once.
    pub fn bound(&self) -> bool {
        self.throttled_periods > 0
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Requests {
    /// Due in this round's window.
    pub scheduled: u64,
    /// Actually sent (scheduled minus dropped, minus any not sent before a stop).
    pub sent: u64,
    pub ok: u64,
    /// By class: `connect`, `timeout`, `http_<status>`, `bad_response`, `dropped`.
    pub errors: BTreeMap<String, u64>,
}

impl Requests {
    pub fn error_total(&self) -> u64 {
        self.errors.values().sum()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// `None` in closed-loop throughput mode, which has no target.
    pub target_qps: Option<f64>,
    /// Requests sent per second: of the round's schedule (the requests due
    /// in it at the target rate) in an open loop, of the window in throughput
    /// mode (`judge::round::throughput`).
    pub send_rate: f64,
    /// OK responses per second, over the same span.
    pub ok_per_second: f64,
    /// `ok_per_second / target_qps`; `None` without a target.
    pub achieved_ratio: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// From the intended send time (coordinated-omission corrected).
    pub corrected: Option<Summary>,
    /// From the actual send time.
    pub service: Option<Summary>,
    /// Actual send time minus intended send time.
    pub send_lag: Option<Summary>,
    /// The caller's own measure of its downstream call(s) (`Server-Timing`).
    pub downstream_hop: Option<Summary>,
    /// Service time minus the downstream hop: the caller and the front hop.
    pub caller_overhead: Option<Summary>,
    /// Successful answers whose arrival ("done") is the kernel's receive
    /// stamp of their last byte rather than the clock after the read; only
    /// for the front client, which asks for the stamps. Older runs lack it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_stamped: Option<u64>,
}

/// Percentiles in milliseconds. `None` where a histogram is empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub stdev_ms: f64,
}

/// One tier's resources over one round. A figure that could not be measured
/// is `None`, never zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    /// CPU seconds used in the window (from accumulated CPU time).
    pub cpu_seconds: Option<f64>,
    /// Mean and peak CPU over the samples, % of one core.
    pub cpu_percent_mean: Option<f64>,
    pub cpu_percent_peak: Option<f64>,
    /// CPU µs per request (per OK response for the tiers, per sent request for the harness).
    pub cpu_us_per_request: Option<f64>,
    /// Resident set over the samples.
    pub rss_mib_mean: Option<f64>,
    pub rss_mib_peak: Option<f64>,
    pub samples: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hops {
    /// harness → caller, counted by the caller's front listener.
    pub front: HopBytes,
    /// caller → downstream, counted by the downstream's listener of the transport.
    pub internal: HopBytes,
    /// caller → downstream between two foreign tiers (`--downstream-cmd` and
    /// `--caller-cmd`), counted by the pass-through relay on that hop, from
    /// outside: per request over the round's OK calls. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<HopBytes>,
}

/// Bytes of one hop over one window. "Request" is the direction towards the
/// server, "response" back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HopBytes {
    /// Which listener counted them (`front`, `grpc`, `rest`).
    pub listener: String,
    /// Requests the listener finished in the window: the divisor of the
    /// response-direction and message figures (message bytes are counted as a
    /// request ends).
    pub requests: u64,
    /// Requests whose head arrived in the window: the divisor of the
    /// request-direction wire figure, so both sides of that division count
    /// the same requests even when a round starts with nothing in flight.
    /// `None` in runs made before it was counted.
    #[serde(default)]
    pub requests_started: Option<u64>,
    pub request_wire_bytes: Option<u64>,
    pub response_wire_bytes: Option<u64>,
    pub request_message_bytes: Option<u64>,
    pub response_message_bytes: Option<u64>,
    pub request_wire_bytes_per_request: Option<f64>,
    pub response_wire_bytes_per_request: Option<f64>,
    pub request_message_bytes_per_request: Option<f64>,
    pub response_message_bytes_per_request: Option<f64>,
    pub connections_opened: Option<u64>,
    /// Connections open at the end of the window (HTTP/1.1 holds one per request in flight).
    pub connections_open_at_end: Option<u64>,
    /// TLS handshakes the listener finished in the window and what they
    /// negotiated (a handshake per new connection); absent without TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<telemetry::TlsSnapshot>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceSample {
    /// Seconds since the run's origin, shortly before the first request was due.
    pub t_seconds: f64,
    pub tier: TierName,
    /// % of one core over the `cpu_window_seconds` before this sample.
    pub cpu_percent: Option<f64>,
    /// The window `cpu_percent` is measured over, on the tier's own clock:
    /// since the previous sample, or since the one before it when the
    /// previous is less than half a sampling interval back (the closing
    /// sample). `None` in runs recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_window_seconds: Option<f64>,
    pub rss_bytes: Option<u64>,
    /// CPU time the process (a proxy: all its processes) has used so far.
    #[serde(default)]
    pub cpu_seconds: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadSample {
    pub t_seconds: f64,
    pub in_flight: u64,
    pub sent: u64,
    pub ok: u64,
    pub errors: u64,
    pub dropped: u64,
    /// Cores the rest of the machine kept busy since the previous sample
    /// (every core's busy share less the run's own processes). Absent where
    /// it could not be read, and in older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cores: Option<f64>,
}

impl LoadSample {
    /// OK responses per second between `earlier` and this sample.
    pub fn ok_rate_since(&self, earlier: &LoadSample) -> f64 {
        self.ok.saturating_sub(earlier.ok) as f64 / (self.t_seconds - earlier.t_seconds).max(1e-3)
    }
}

/// The machine and build a run was measured on, so a result can be
/// reproduced or challenged (read by `measure::environment`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub tool_version: String,
    /// `release` or `debug`; a debug build's figures are not representative.
    pub build_profile: String,
    /// The optimisation level the harness (and so every tier, which runs
    /// the same executable) was compiled at; dependencies are at least as
    /// optimised. Absent in runs made before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opt_level: Option<String>,
    /// The global allocator of the harness and its tiers (`mimalloc` or
    /// `system`). Absent in runs made before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<String>,
    /// The machine's transparent-huge-page mode (`always`, `madvise`,
    /// `never`), which every process of the run turned off for itself (each
    /// tier's settings say whether it could). Absent in runs made before it
    /// was recorded, null where the kernel has no such setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transparent_huge_pages: Option<String>,
    pub rustc: Option<String>,
    pub git_commit: Option<String>,
    pub git_dirty: Option<bool>,
    pub os: Option<String>,
    pub kernel: Option<String>,
    pub hostname: Option<String>,
    pub cpu_model: Option<String>,
    pub logical_cores: Option<usize>,
    pub physical_cores: Option<usize>,
    pub memory_bytes: Option<u64>,
    /// Open-files limit as found, and after raising the soft limit to the hard one.
    pub nofile_soft_before: Option<u64>,
    pub nofile_soft: Option<u64>,
    pub nofile_hard: Option<u64>,
    /// The scheduling of the harness's `stamp-reader` thread, which reads
    /// the streaming arms' front answers as their packets come
    /// (`SCHED_FIFO 1` where it may take it, else a nice value): at the
    /// default priority a busy machine moves per-item figures by
    /// milliseconds. Absent in runs made before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamp_reader_priority: Option<String>,
}

/// True for an optimisation level whose figures are representative.
pub fn optimising(opt_level: &str) -> bool {
    matches!(opt_level, "2" | "3" | "s" | "z")
}

impl Environment {
    /// True when the figures come from optimised code: built at opt-level 2
    /// or more (runs made before that was recorded: the release profile).
    pub fn is_optimised(&self) -> bool {
        match &self.opt_level {
            Some(level) => optimising(level),
            None => self.build_profile == "release",
        }
    }

    /// How it was built, for people: `release`, or `debug (opt-level 2)`.
    pub fn build_text(&self) -> String {
        match &self.opt_level {
            Some(level) => format!("{} (opt-level {level})", self.build_profile),
            None => self.build_profile.clone(),
        }
    }
}

/// What the report records about a proxy: its `settings` in `run.json`
/// (`tiers.proxy.settings`), read back by this type wherever it is needed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProxyInfo {
    pub kind: ProxyKind,
    /// The binary's version line (`nginx/1.22.1`, `v2.6.2 …`), if it told.
    pub version: Option<String>,
    pub binary: PathBuf,
    pub hop: ProxyHop,
    pub listen: SocketAddr,
    pub upstream: SocketAddr,
    pub protocol: String,
    pub worker_processes: Option<usize>,
    /// How its CPU and RSS were sampled.
    pub sampled: String,
    /// The configuration file's name, written into the run folder.
    pub config_file: String,
    /// Its temporary and log folder, removed when it stops.
    pub work_dir: PathBuf,
    /// The configuration text.
    pub config: String,
}

impl ProxyInfo {
    /// The proxy's record in a run's tier settings.
    pub fn from_settings(settings: &serde_json::Value) -> Option<ProxyInfo> {
        serde_json::from_value(settings.clone()).ok()
    }

    pub fn to_settings(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}
