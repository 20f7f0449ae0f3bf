//! The flags of a measured run and their validation into a [`Config`]:
//! every check names the flag and the fix.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use caller::Transport;
use clap::Args;
use payload::{Limits, Shape};

use super::deploy::{self, Isolation, Remote, TierLimits};
use super::link::{Link, LinkHop, parse_link};
use super::{
    Config, ConfigError, PayloadAxis, PayloadSweep, Plan, ProxyHop, ProxyKind, TargetTier, TlsMode, bad, parse_rates,
};

/// The longest any one duration flag may be. Longer values overflow the
/// clocks they are added to (`Instant + d`) and no measurement needs them.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);
/// The longest a run's measured load may last: warm-up plus every round.
pub const MAX_RUN: Duration = Duration::from_secs(30 * 24 * 3600);
/// The most measured rounds of one run.
pub const MAX_ROUNDS: u32 = 10_000;
/// The harness runtime's worker threads unless `--load-threads` says otherwise.
pub const DEFAULT_LOAD_THREADS: u32 = 1;
/// Most worker threads `--load-threads` gives the harness's runtime.
pub const MAX_LOAD_THREADS: u32 = 256;

/// Which transports a run measures, in the order of their first round:
/// one arm, `both` (gRPC and REST), an A/A pair of one transport, or a list of
/// distinct arms (`grpc,rest,rest-pb,grpc-json`), each on fresh tier
/// processes, rounds counterbalanced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportArg(Vec<Transport>);

impl TransportArg {
    /// The arms, in the order of their first round.
    pub fn arms(&self) -> Vec<Transport> {
        self.0.clone()
    }

    /// The value of `--transport` that gives these arms.
    pub fn from_arms(arms: &[Transport]) -> Option<TransportArg> {
        let distinct = arms.iter().enumerate().all(|(i, a)| !arms[..i].contains(a));
        let a_a = matches!(arms, [a, b] if a == b);
        (!arms.is_empty() && (distinct || a_a)).then(|| TransportArg(arms.to_vec()))
    }

    pub fn as_arg(&self) -> String {
        match self.0.as_slice() {
            [Transport::Grpc, Transport::Rest] => "both".into(),
            arms => arms.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(","),
        }
    }
}

/// `--transport`: one arm (`grpc`, `rest`, `rest-pb`, `grpc-json`), `both`
/// (= `grpc,rest`), a list of distinct arms, or an A/A pair `grpc,grpc`.
fn parse_transport(text: &str) -> Result<TransportArg, String> {
    let text = text.trim();
    let names = if text == "both" { "grpc,rest" } else { text };
    let arms = names
        .split(',')
        .map(|name| {
            Transport::from_name(name.trim()).ok_or_else(|| {
                format!(
                    "{:?} in {text:?} is not an arm: use grpc, rest, rest-pb (protobuf over HTTP/1.1), grpc-json \
                     (JSON over gRPC), both (= grpc,rest), a list such as grpc,rest,rest-pb,grpc-json, or \
                     grpc,grpc / rest,rest for an A/A check of the statistics",
                    name.trim()
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    TransportArg::from_arms(&arms).ok_or_else(|| {
        format!("{text:?} names an arm twice: list distinct arms, or exactly two of one (grpc,grpc) for an A/A check")
    })
}

/// `--baseline`: an arm's name.
fn parse_baseline(text: &str) -> Result<Transport, String> {
    Transport::from_name(text.trim()).ok_or_else(|| format!("{text:?}: use grpc, rest, rest-pb or grpc-json"))
}

/// `--shape`: `order` or `timeseries`.
fn parse_shape(text: &str) -> Result<Shape, String> {
    text.parse()
}

/// A payload size list (`--items`, `--request-bytes`): one whole number, or
/// several, strictly increasing.
fn parse_sizes(flag: &'static str, text: &str) -> Result<Vec<u32>, ConfigError> {
    let sizes = text
        .split(',')
        .map(|part| {
            part.trim().parse::<u32>().map_err(|_| {
                bad(flag, format!("{:?} in {text:?} is not a whole number; e.g. {flag} 10 or {flag} 1,10,100", part))
            })
        })
        .collect::<Result<Vec<u32>, _>>()?;
    if sizes.windows(2).any(|w| w[0] >= w[1]) {
        return Err(bad(
            flag,
            format!("{text:?}: list the sizes of a sweep in increasing order, e.g. {flag} 1,10,100"),
        ));
    }
    Ok(sizes)
}

/// The payload flags: the first size of each, and the sweep if one of them
/// is a list (never both, never with a rate sweep).
fn payload(a: &RunArgs, rates: usize) -> Result<(u32, u32, Option<PayloadSweep>), ConfigError> {
    let items = parse_sizes("--items", &a.items)?;
    let request_bytes = parse_sizes("--request-bytes", &a.request_bytes)?;
    let sweep = match (items.len() > 1, request_bytes.len() > 1) {
        (true, true) => {
            return Err(bad(
                "--request-bytes",
                "a payload sweep varies one size: give a list to --items or to --request-bytes, not both",
            ));
        }
        (true, false) => Some(PayloadSweep { axis: PayloadAxis::Items, sizes: items.clone() }),
        (false, true) => Some(PayloadSweep { axis: PayloadAxis::RequestBytes, sizes: request_bytes.clone() }),
        (false, false) => None,
    };
    if let Some(s) = &sweep
        && rates > 1
    {
        return Err(bad(
            s.axis.flag(),
            "a payload sweep goes with one rate, and --qps gives several: sweep the rate or the payload, one per command",
        ));
    }
    for &n in &items {
        if n > Limits::DEFAULT_MAX_ITEMS {
            return Err(bad(
                "--items",
                format!("{n} is over the services' limit of {} records per response", Limits::DEFAULT_MAX_ITEMS),
            ));
        }
        let records = u64::from(n) * u64::from(a.fanout);
        if records > caller::front::DEFAULT_MAX_RECORDS {
            return Err(bad(
                "--fanout",
                format!(
                    "--items {n} × --fanout {} asks the caller for {records} records per request, over its limit of {}; \
                     lower one of them",
                    a.fanout,
                    caller::front::DEFAULT_MAX_RECORDS
                ),
            ));
        }
    }
    if let Some(&n) = request_bytes.iter().find(|&&n| n as usize > Limits::DEFAULT_MAX_BODY_BYTES) {
        return Err(bad(
            "--request-bytes",
            format!("{n} is over the services' limit of {} bytes of body per request", Limits::DEFAULT_MAX_BODY_BYTES),
        ));
    }
    Ok((items[0], request_bytes[0], sweep))
}

/// Rounds of a run that compares arms when `--rounds` is not given: enough
/// for a confidence interval (`judge::inference::MIN_ROUNDS`).
pub const DEFAULT_COMPARED_ROUNDS: u32 = 3;

/// Flags of a measured run.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Transport of the internal hop (caller → downstream): grpc, rest,
    /// rest-pb (protobuf bodies over REST's HTTP/1.1), grpc-json (REST's JSON
    /// over gRPC), or a list of arms (grpc,rest,rest-pb,grpc-json) measured
    /// with the same configuration in counterbalanced rounds and compared;
    /// `both` is grpc,rest; `grpc,grpc` or `rest,rest` runs one transport as
    /// two arms (an A/A check: how often the comparison calls a difference
    /// that is not there).
    #[arg(long, value_parser = parse_transport, default_value = "grpc")]
    pub transport: TransportArg,
    /// The arm every other arm is judged against (default: the first of
    /// --transport). It must be one of the arms.
    #[arg(long, value_parser = parse_baseline)]
    pub baseline: Option<Transport>,
    /// Target rate in requests per second (open loop: request i is due at
    /// t0 + i/qps): one rate (default 100), or a sweep as a list (500,1000,2000)
    /// or a geometric range (500..16000x2). Leave it out and give --connections
    /// for closed-loop throughput mode.
    #[arg(long, allow_hyphen_values = true)]
    pub qps: Option<String>,
    /// Which tier the load goes to: the caller (three tiers), or the
    /// downstream directly over --transport (two tiers, raw-transport figures).
    #[arg(long, value_enum, default_value_t = TargetTier::Caller)]
    pub target: TargetTier,
    /// With --target downstream: send to an already running downstream at this
    /// URL (its gRPC or REST listener, per --transport) instead of starting one.
    #[arg(long)]
    pub downstream_url: Option<String>,
    /// Drive an already running caller instead of starting the tiers: its
    /// front door as http://host:port, for every arm; a caller serves one
    /// transport, so --transport both takes one per arm:
    /// grpc=http://host:port,rest=http://host:port.
    #[arg(long)]
    pub caller_url: Option<String>,
    /// The admin endpoint (http://host:port) of the caller given by
    /// --caller-url (per arm like it), sampled for CPU, memory and bytes.
    /// Without it the caller's figures are not measured.
    #[arg(long)]
    pub caller_admin: Option<String>,
    /// The admin endpoint (http://host:port) of an already running downstream
    /// (behind --caller-url, or the --downstream-url one), sampled for CPU,
    /// memory and bytes. Without it the downstream's figures are not measured.
    #[arg(long)]
    pub downstream_admin: Option<String>,
    /// How the harness starts the tiers: `processes` on this machine, or
    /// `containers` (Docker, one per tier on a private network, limited by
    /// --tier-cpus and --tier-memory).
    #[arg(long, value_enum, default_value_t = Isolation::Processes)]
    pub isolation: Isolation,
    /// With --isolation containers: CPUs per tier, e.g. caller=1,downstream=0.5
    /// (docker run --cpus). A tier left out is not limited.
    #[arg(long)]
    pub tier_cpus: Option<String>,
    /// With --isolation containers: memory per tier, e.g.
    /// caller=256m,downstream=128m (docker run --memory). A tier left out is
    /// not limited.
    #[arg(long)]
    pub tier_memory: Option<String>,
    /// Put a real reverse proxy between two tiers (the binary must be
    /// installed: `apt-get install nginx` / `caddy`).
    #[arg(long, value_enum)]
    pub proxy: Option<ProxyKind>,
    /// Where the proxy sits: `internal` (caller → proxy → downstream) or
    /// `front` (harness → proxy → caller).
    #[arg(long, value_enum, default_value_t = ProxyHop::Internal)]
    pub proxy_hop: ProxyHop,
    /// Put a link with a round-trip time and a rate on a hop:
    /// `rtt=10ms,rate=1gbit` (rate in bit, kbit, mbit or gbit; either part
    /// may be left out) or a profile: `lan` (1ms, 1gbit), `dc` (2ms, 10gbit),
    /// `wan` (40ms, 100mbit). Made by a user-space emulator (a loopback TCP
    /// relay process), because the kernel here has no netem.
    #[arg(long)]
    pub link: Option<String>,
    /// Which hop the link is on: `internal` (caller → downstream), `front`
    /// (harness → caller) or `both` (a link of its own on each).
    #[arg(long, value_enum, default_value_t = LinkHop::Internal)]
    pub link_hop: LinkHop,
    /// In a sweep, a step is sustained only if its p99 is under this (default:
    /// the delay plus 100ms).
    #[arg(long)]
    pub slo_p99: Option<String>,
    /// Length of each measured round (e.g. 60s, 2m).
    #[arg(long, default_value = "60s")]
    pub duration: String,
    /// Unrecorded load before the first round.
    #[arg(long, default_value = "10s")]
    pub warmup: String,
    /// The first part of the warm-up on fresh tiers, over which the rate rises
    /// linearly from zero to --qps (as traffic rises in production), so the
    /// tiers open their connections over it instead of thousands at once;
    /// 0s starts at the full rate. Open loop only [default: half of --warmup].
    #[arg(long)]
    pub warmup_ramp: Option<String>,
    /// Measured rounds, each with fresh histograms and (unless --reuse-tiers)
    /// freshly started and warmed-up tier processes [default: 1; 3 per arm
    /// when arms are compared at one rate, the fewest a confidence interval is
    /// judged from].
    #[arg(long, allow_hyphen_values = true)]
    pub rounds: Option<String>,
    /// Keep one set of tier processes per arm for all rounds (faster: one
    /// warm-up per arm). Memory is then one process per arm, so a comparison
    /// does not judge its memory rows. Remote tiers (--caller-url,
    /// --downstream-url) and containers always keep one set.
    #[arg(long)]
    pub reuse_tiers: bool,
    /// Simulated service time of the downstream.
    #[arg(long, default_value = "500ms")]
    pub delay: String,
    /// Extra downstream service time in [0, jitter], derived from the request id.
    #[arg(long, default_value = "0ms")]
    pub jitter: String,
    /// Records per downstream response (10 ≈ 1 KB of protobuf); a list
    /// (1,10,100,1000) makes a payload sweep: each size a full measured step.
    #[arg(long, default_value = "10", allow_hyphen_values = true)]
    pub items: String,
    /// Bytes of opaque body the caller uploads with each downstream call (the
    /// contract's `body` field, to study uploads); a list (0,1024,65536) makes
    /// a payload sweep.
    #[arg(long, default_value = "0", allow_hyphen_values = true)]
    pub request_bytes: String,
    /// The kind of record responses carry: `order` (ids, names, e-mail,
    /// prices, tags, a timestamp) or `timeseries` (numeric points: a series
    /// id, a timestamp and five numbers).
    #[arg(long, value_parser = parse_shape, default_value = "order")]
    pub shape: Shape,
    /// Concurrent downstream calls per front request.
    #[arg(long, default_value_t = 1)]
    pub fanout: u32,
    /// A request not answered within this time counts as a timeout.
    #[arg(long, default_value = "30s")]
    pub timeout: String,
    /// Most requests in flight; a request due beyond it is counted as dropped, never delayed.
    #[arg(long, default_value_t = 10_000)]
    pub max_in_flight: usize,
    /// How often CPU and RSS of every tier are sampled (at least 200ms, sysinfo's minimum).
    #[arg(long, default_value = "250ms")]
    pub sample_interval: String,
    /// Bound the front hop to N keep-alive connections, wrk2-style: a due request
    /// waits for a free connection, and that wait counts in the corrected
    /// latency, not in the service time. 0 (default): one connection per
    /// request in flight.
    #[arg(long, default_value_t = 0)]
    pub connections: usize,
    /// Worker threads of the harness's own async runtime, which dispatch and
    /// send the requests and read the answers. One (default) leaves the cores to the measured tiers and costs
    /// the fewest wake-ups; give more only when the generator itself is the
    /// bottleneck (see bench/README.md).
    #[arg(long, default_value_t = DEFAULT_LOAD_THREADS)]
    pub load_threads: u32,
    /// HTTP/2 connections the caller spreads gRPC calls over.
    #[arg(long, default_value_t = 1)]
    pub grpc_connections: u32,
    /// IP address the tiers' service listeners (the downstream's gRPC, with
    /// reflection, and REST; the caller's front door) listen on. Anything but
    /// loopback exposes them to other machines, and their traffic is counted.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// IP address the tiers' admin listeners (/stats, /metrics) listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub admin_bind: String,
    /// Port of the caller's front listener (0: any free port).
    #[arg(long, default_value_t = 0)]
    pub caller_port: u16,
    /// REST over HTTP/2 cleartext instead of HTTP/1.1 on the internal hop (a control arm).
    #[arg(long)]
    pub rest_http2: bool,
    /// Folder under which the run folder is written.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// A word added to the run folder's name and the report.
    #[arg(long)]
    pub label: Option<String>,
    /// Print nothing but errors.
    #[arg(long)]
    pub quiet: bool,
    /// Print the machine-readable summary on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The rate (req/s) the comparison projects costs to: CPU cores, memory
    /// and internal-hop egress per day [default: the measured rate].
    #[arg(long)]
    pub plan_qps: Option<String>,
    /// CI gate: exit 99 when this holds, e.g. 'p99>505ms' or
    /// 'rest.cpu_us_per_request.caller > 1.2 * grpc' (README: "Gates").
    /// Repeat for several; one line on stderr per breach.
    #[arg(long = "fail-if", value_name = "GATE")]
    pub fail_if: Vec<String>,
    /// CI gate: exit 99 when any arm is not a valid measurement.
    #[arg(long)]
    pub fail_on_invalid: bool,
    /// TLS on the internal hop (caller → downstream) for every arm: rustls,
    /// certificates from a throwaway CA made for this run and written into
    /// the run folder; ALPN h2 for gRPC (and --rest-http2), http/1.1 for REST.
    #[arg(long)]
    pub tls: bool,
    /// Mutual TLS on the internal hop: --tls, and the caller presents a client
    /// certificate the downstream requires.
    #[arg(long)]
    pub mtls: bool,
    /// Compression on the internal hop, requests and responses: gRPC message
    /// compression (grpc-encoding) or HTTP Content-Encoding.
    #[arg(long, value_enum, default_value_t = super::Compression::None)]
    pub compression: super::Compression,
}

impl Plan {
    pub fn from_args(a: &RunArgs) -> Result<Plan, ConfigError> {
        let arms = a.transport.arms();
        let rates = match (&a.qps, a.connections) {
            (Some(text), _) => parse_rates(text)?,
            // Throughput mode: N connections back to back, no target rate.
            (None, n) if n > 0 => Vec::new(),
            (None, _) => vec![100.0],
        };
        let (_, _, payload_sweep) = payload(a, rates.len())?;
        if arms.len() > 1 && arms[0] == arms[1] && (rates.len() > 1 || payload_sweep.is_some()) {
            return Err(bad("--transport", "an A/A pair (grpc,grpc or rest,rest) goes with one rate, not a sweep"));
        }
        let baseline = match a.baseline {
            Some(b) if !arms.contains(&b) => {
                return Err(bad(
                    "--baseline",
                    format!("{b} is not one of the arms of --transport {}", a.transport.as_arg()),
                ));
            }
            Some(b) => b,
            None => arms[0],
        };
        let mut config = Config::from_args(a, arms[0], rates.first().copied())?;
        if arms.len() > 1 {
            config.baseline = super::recorded_baseline(&arms, baseline);
        }
        if a.rounds.is_none() && arms.len() > 1 && rates.len() <= 1 && payload_sweep.is_none() {
            config.rounds = DEFAULT_COMPARED_ROUNDS;
        }
        let plan = Plan { config, arms, rates, payload: payload_sweep };
        check_space(&a.out, plan.expected_output_bytes(), free_bytes(&a.out))?;
        Ok(plan)
    }
}

impl Config {
    /// Validates the flags. Checks that touch nothing come first; the output
    /// folder is checked last, by writing and removing a probe file in it.
    /// `qps` is the (first) offered rate, `None` for closed-loop throughput mode.
    pub fn from_args(a: &RunArgs, transport: Transport, qps: Option<f64>) -> Result<Config, ConfigError> {
        let timing = Timing::from_args(a, qps)?;
        let sizes = Sizes::from_args(a)?;
        let (items, request_bytes, _) = payload(a, 1)?;
        let run_length = timing.warmup + timing.duration * sizes.rounds;
        if run_length > MAX_RUN {
            return Err(bad(
                "--rounds",
                format!(
                    "{} rounds of {} plus the warm-up run for {}, over the {} a run may last; use fewer or shorter rounds",
                    sizes.rounds,
                    a.duration.trim(),
                    humantime::format_duration(run_length),
                    humantime::format_duration(MAX_RUN)
                ),
            ));
        }
        let label = label(a.label.as_deref())?;
        let (bind, admin_bind) = placement(a)?;
        let remote = deploy::remote(
            a.caller_url.as_deref(),
            a.caller_admin.as_deref(),
            a.downstream_admin.as_deref(),
            a.downstream_url.is_some(),
            &a.transport.arms(),
        )?;
        let tier_limits = containers(a)?;
        check_writable(&a.out)?;
        Ok(Config {
            transport,
            baseline: None,
            qps: qps.unwrap_or(0.0),
            closed_loop: qps.is_none(),
            target: a.target,
            downstream_url: a.downstream_url.clone(),
            remote,
            isolation: a.isolation,
            tier_limits,
            slo_p99: timing.slo_p99,
            proxy: a.proxy,
            proxy_hop: a.proxy_hop,
            link: link(a)?,
            duration: timing.duration,
            warmup: timing.warmup,
            // A closed loop has no rate to ramp.
            warmup_ramp: if qps.is_some() { timing.warmup_ramp } else { Duration::ZERO },
            rounds: sizes.rounds,
            // Only tiers the harness starts as local processes are restarted
            // per round; remote tiers and containers keep one set per arm.
            fresh_tiers: !a.reuse_tiers
                && a.isolation == Isolation::Processes
                && a.caller_url.is_none()
                && a.downstream_url.is_none(),
            delay: timing.delay,
            jitter: timing.jitter,
            items,
            request_bytes,
            shape: a.shape,
            fanout: a.fanout,
            timeout: timing.timeout,
            max_in_flight: a.max_in_flight,
            connections: a.connections,
            load_threads: Some(a.load_threads),
            sample_interval: timing.sample_interval,
            grpc_connections: a.grpc_connections,
            rest_http2: a.rest_http2,
            bind,
            admin_bind,
            caller_port: a.caller_port,
            out: a.out.clone(),
            label,
            quiet: a.quiet,
            json: a.json,
            plan_qps: plan_qps(a.plan_qps.as_deref())?,
            tls: tls_mode(a)?,
            compression: a.compression,
            tls_files: None,
        })
    }
}

/// A duration as a flag value that parses back to the same figure in
/// run.json (whole microseconds; `300ms`, `1500us`).
fn duration_arg(d: Duration) -> String {
    let us = (d.as_secs_f64() * 1e6).round() as u64;
    if us.is_multiple_of(1000) { format!("{}ms", us / 1000) } else { format!("{us}us") }
}

/// The flags that reproduce `config` measured over `transport`: every flag
/// that shapes a run, each given explicitly, so a later build with other
/// defaults still measures the same thing. `Plan::from_args` of them gives
/// `config` back (tested).
pub fn command_line(config: &Config, transport: TransportArg) -> Vec<String> {
    let c = config;
    let mut a: Vec<String> = vec!["--transport".into(), transport.as_arg()];
    if let Some(b) = config.baseline {
        a.extend(["--baseline".into(), b.as_str().into()]);
    }
    let mut flag = |name: &str, value: String| {
        a.push(name.into());
        a.push(value);
    };
    if !c.closed_loop {
        flag("--qps", c.qps.to_string());
    }
    flag("--connections", c.connections.to_string());
    flag("--target", c.target.as_str().into());
    if let Some(url) = &c.downstream_url {
        flag("--downstream-url", url.clone());
    }
    if !c.remote.caller_url.is_empty() {
        flag("--caller-url", Remote::per_arm_arg(&c.remote.caller_url));
    }
    if !c.remote.caller_admin.is_empty() {
        flag("--caller-admin", Remote::per_arm_arg(&c.remote.caller_admin));
    }
    if let Some(url) = &c.remote.downstream_admin {
        flag("--downstream-admin", url.clone());
    }
    flag("--isolation", c.isolation.as_str().into());
    if let Some(cpus) = c.tier_limits.cpus_arg() {
        flag("--tier-cpus", cpus);
    }
    if let Some(memory) = c.tier_limits.memory_arg() {
        flag("--tier-memory", memory);
    }
    if let Some(p) = c.proxy {
        flag("--proxy", p.as_str().into());
    }
    flag("--proxy-hop", c.proxy_hop.as_str().into());
    if let Some(link) = &c.link {
        flag("--link", link.arg());
        flag("--link-hop", link.hop.as_str().into());
    }
    for (name, d) in [
        ("--slo-p99", c.slo_p99),
        ("--duration", c.duration),
        ("--warmup", c.warmup),
        ("--warmup-ramp", c.warmup_ramp),
        ("--delay", c.delay),
        ("--jitter", c.jitter),
        ("--timeout", c.timeout),
        ("--sample-interval", c.sample_interval),
    ] {
        flag(name, duration_arg(d));
    }
    flag("--rounds", c.rounds.to_string());
    flag("--items", c.items.to_string());
    flag("--request-bytes", c.request_bytes.to_string());
    flag("--shape", c.shape.as_str().into());
    flag("--fanout", c.fanout.to_string());
    flag("--max-in-flight", c.max_in_flight.to_string());
    if let Some(n) = c.load_threads {
        flag("--load-threads", n.to_string());
    }
    flag("--grpc-connections", c.grpc_connections.to_string());
    flag("--bind", c.bind.to_string());
    flag("--admin-bind", c.admin_bind.to_string());
    flag("--caller-port", c.caller_port.to_string());
    flag("--out", c.out.display().to_string());
    if let Some(l) = &c.label {
        flag("--label", l.clone());
    }
    if let Some(q) = c.plan_qps {
        flag("--plan-qps", q.to_string());
    }
    if c.compression != super::Compression::None {
        flag("--compression", c.compression.as_str().into());
    }
    for (on, name) in [
        (c.rest_http2, "--rest-http2"),
        (!c.fresh_tiers, "--reuse-tiers"),
        (c.quiet, "--quiet"),
        (c.json, "--json"),
        (c.tls == TlsMode::Tls, "--tls"),
        (c.tls == TlsMode::Mtls, "--mtls"),
    ] {
        if on {
            a.push(name.into());
        }
    }
    a
}

/// Every duration flag, parsed and checked.
struct Timing {
    duration: Duration,
    warmup: Duration,
    warmup_ramp: Duration,
    delay: Duration,
    jitter: Duration,
    timeout: Duration,
    sample_interval: Duration,
    slo_p99: Duration,
}

impl Timing {
    fn from_args(a: &RunArgs, qps: Option<f64>) -> Result<Timing, ConfigError> {
        let duration_v = duration("--duration", &a.duration, "60s")?;
        if duration_v.is_zero() {
            return Err(bad("--duration", "must be longer than 0s; e.g. --duration 60s"));
        }
        if let Some(q) = qps.filter(|q| duration_v.as_secs_f64() * q < 1.0) {
            return Err(bad("--duration", format!("{} at --qps {q} schedules no request; run longer", a.duration)));
        }
        let delay = duration("--delay", &a.delay, "500ms")?;
        let jitter = duration("--jitter", &a.jitter, "20ms")?;
        let timeout = duration("--timeout", &a.timeout, "30s")?;
        if timeout.is_zero() {
            return Err(bad("--timeout", "must be longer than 0s"));
        }
        let sample_interval = duration("--sample-interval", &a.sample_interval, "250ms")?;
        let minimum = sysinfo::MINIMUM_CPU_UPDATE_INTERVAL;
        if sample_interval < minimum {
            return Err(bad(
                "--sample-interval",
                format!(
                    "{} is below the {} ms CPU usage can be measured over; use at least --sample-interval {}ms",
                    a.sample_interval,
                    minimum.as_millis(),
                    minimum.as_millis()
                ),
            ));
        }
        let slo_p99 = match &a.slo_p99 {
            Some(t) => duration("--slo-p99", t, "600ms")?,
            None => delay + jitter + Duration::from_millis(100),
        };
        let warmup = duration("--warmup", &a.warmup, "10s")?;
        let warmup_ramp = match &a.warmup_ramp {
            Some(r) => duration("--warmup-ramp", r, "5s")?,
            None => warmup / 2,
        };
        if warmup_ramp > warmup {
            return Err(bad(
                "--warmup-ramp",
                format!(
                    "{} is longer than the warm-up ({}); the ramp is the warm-up's first part",
                    a.warmup_ramp.as_deref().unwrap_or_default().trim(),
                    a.warmup.trim()
                ),
            ));
        }
        Ok(Timing { duration: duration_v, warmup, warmup_ramp, delay, jitter, timeout, sample_interval, slo_p99 })
    }
}

/// The counts: rounds, and the bounds on items, fan-out and connections.
struct Sizes {
    rounds: u32,
}

impl Sizes {
    fn from_args(a: &RunArgs) -> Result<Sizes, ConfigError> {
        let text = a.rounds.as_deref().unwrap_or("1");
        let rounds: u32 = text
            .trim()
            .parse()
            .map_err(|_| bad("--rounds", format!("{text:?} is not a whole number; e.g. --rounds 3")))?;
        if !(1..=MAX_ROUNDS).contains(&rounds) {
            return Err(bad("--rounds", format!("must be between 1 and {MAX_ROUNDS}")));
        }
        if !(1..=1000).contains(&a.fanout) {
            return Err(bad("--fanout", "must be between 1 and 1000"));
        }
        if a.max_in_flight == 0 {
            return Err(bad("--max-in-flight", "must be at least 1"));
        }
        if !(1..=1024).contains(&a.grpc_connections) {
            return Err(bad("--grpc-connections", "must be between 1 and 1024"));
        }
        if !(1..=MAX_LOAD_THREADS).contains(&a.load_threads) {
            return Err(bad("--load-threads", format!("must be between 1 and {MAX_LOAD_THREADS}")));
        }
        Ok(Sizes { rounds })
    }
}

/// `--tls` / `--mtls`, and the topologies TLS goes with.
fn tls_mode(a: &RunArgs) -> Result<TlsMode, ConfigError> {
    let (mode, flag) = match (a.tls, a.mtls) {
        (false, false) => return Ok(TlsMode::None),
        (_, true) => (TlsMode::Mtls, "--mtls"),
        (true, false) => (TlsMode::Tls, "--tls"),
    };
    if a.proxy.is_some() {
        return Err(bad(
            flag,
            "cannot be used with --proxy: the proxy would have to terminate and re-originate the hop's TLS, which \
             is not supported; leave out --proxy or measure without TLS",
        ));
    }
    if a.downstream_url.is_some() || a.caller_url.is_some() {
        return Err(bad(
            flag,
            "cannot be used with --downstream-url or --caller-url: the run's certificates are made for the tiers \
             the harness starts; give tiers elsewhere their own certificates (the tiers' --tls-* flags) and leave \
             out --tls/--mtls",
        ));
    }
    if a.isolation == Isolation::Containers {
        return Err(bad(
            flag,
            "cannot be used with --isolation containers yet: the run's certificate files are not mounted into the \
             containers; measure TLS with --isolation processes",
        ));
    }
    Ok(mode)
}

/// `--link` and `--link-hop`, and the topologies a link goes with: the
/// emulator is a relay process the harness starts on loopback in front of a
/// tier it started itself.
fn link(a: &RunArgs) -> Result<Option<Link>, ConfigError> {
    let Some(text) = a.link.as_deref() else {
        if a.link_hop != LinkHop::Internal {
            return Err(bad("--link-hop", "goes with --link (there is no link to place)"));
        }
        return Ok(None);
    };
    let conflicts = [
        ("--caller-url", a.caller_url.is_some()),
        ("--downstream-url", a.downstream_url.is_some()),
        ("--isolation", a.isolation == Isolation::Containers),
        ("--target", a.target != TargetTier::Caller),
        ("--proxy", a.proxy.is_some()),
        ("--bind", a.bind.trim() != "127.0.0.1"),
    ];
    if let Some((flag, _)) = conflicts.iter().find(|(_, given)| *given) {
        return Err(bad(
            flag,
            "does not go with --link: the link is a user-space relay the harness starts on loopback between the \
             caller and the downstream (or the harness and the caller) it starts itself as local processes, with no \
             proxy; leave out --link or this flag",
        ));
    }
    parse_link(text, a.link_hop).map(Some)
}

/// `--plan-qps`: a positive, finite rate.
fn plan_qps(text: Option<&str>) -> Result<Option<f64>, ConfigError> {
    let Some(text) = text else { return Ok(None) };
    match text.trim().parse::<f64>() {
        Ok(q) if q > 0.0 && q.is_finite() => Ok(Some(q)),
        _ => Err(bad("--plan-qps", format!("{text:?} is not a rate above 0; e.g. --plan-qps 2000"))),
    }
}

/// `--label`: a word safe in a folder name.
fn label(label: Option<&str>) -> Result<Option<String>, ConfigError> {
    match label {
        None => Ok(None),
        Some(l)
            if !l.is_empty() && l.len() <= 64 && l.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) =>
        {
            Ok(Some(l.to_owned()))
        }
        Some(l) => Err(bad("--label", format!("{l:?}: use 1 to 64 letters, digits, '.', '_' or '-'"))),
    }
}

/// Where the tiers run and which flags go with which topology; returns the
/// addresses the tiers' service and admin listeners bind.
fn placement(a: &RunArgs) -> Result<(IpAddr, IpAddr), ConfigError> {
    if a.proxy.is_some() && a.target != TargetTier::Caller {
        return Err(bad("--proxy", "goes with the three-tier topology (--target caller)"));
    }
    if a.caller_port != 0 && a.transport.arms().len() > 1 {
        return Err(bad(
            "--caller-port",
            "cannot be used with --transport both: each arm starts its own caller, and both would bind that port; \
             leave --caller-port out (any free port) or measure one transport",
        ));
    }
    if a.caller_url.is_some() {
        let conflicts = [
            ("--target", a.target != TargetTier::Caller),
            ("--proxy", a.proxy.is_some()),
            ("--caller-port", a.caller_port != 0),
        ];
        if let Some((flag, _)) = conflicts.iter().find(|(_, given)| *given) {
            return Err(bad(flag, "does not go with --caller-url (the harness starts no tier: it drives that caller)"));
        }
    }
    if a.downstream_url.is_some() && a.target != TargetTier::Downstream {
        return Err(bad("--downstream-url", "goes with --target downstream"));
    }
    if let Some(url) = &a.downstream_url
        && !(url.starts_with("http://") && caller::rest::fetch_url(url).is_ok())
    {
        return Err(bad("--downstream-url", format!("{url:?}: give it as http://host:port")));
    }
    let ip = |flag: &'static str, text: &str| {
        text.trim()
            .parse::<IpAddr>()
            .map_err(|_| bad(flag, format!("{text:?} is not an IP address; e.g. {flag} 127.0.0.1 or {flag} ::1")))
    };
    Ok((ip("--bind", &a.bind)?, ip("--admin-bind", &a.admin_bind)?))
}

/// `--isolation containers` and its limits; what it cannot go with.
fn containers(a: &RunArgs) -> Result<TierLimits, ConfigError> {
    if a.isolation == Isolation::Processes {
        for (flag, given) in [("--tier-cpus", a.tier_cpus.is_some()), ("--tier-memory", a.tier_memory.is_some())] {
            if given {
                return Err(bad(flag, "goes with --isolation containers (a process on this machine has no limit)"));
            }
        }
        return Ok(TierLimits::default());
    }
    let conflicts = [
        ("--caller-url", a.caller_url.is_some()),
        ("--downstream-url", a.downstream_url.is_some()),
        ("--proxy", a.proxy.is_some()),
        ("--target", a.target != TargetTier::Caller),
        ("--caller-port", a.caller_port != 0),
        ("--bind", a.bind.trim() != "127.0.0.1"),
        ("--admin-bind", a.admin_bind.trim() != "127.0.0.1"),
    ];
    if let Some((flag, _)) = conflicts.iter().find(|(_, given)| *given) {
        return Err(bad(
            flag,
            "does not go with --isolation containers (the harness starts the caller and the downstream in \
             containers on a private network of their own)",
        ));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok(TierLimits {
        cpus: a.tier_cpus.as_deref().map(|t| deploy::tier_cpus(t, cores)).transpose()?.unwrap_or_default(),
        memory_bytes: a.tier_memory.as_deref().map(deploy::tier_memory).transpose()?.unwrap_or_default(),
    })
}

/// A duration flag, at most [`MAX_DURATION`].
fn duration(flag: &'static str, text: &str, example: &str) -> Result<Duration, ConfigError> {
    let d = humantime::parse_duration(text.trim())
        .map_err(|e| bad(flag, format!("{text:?} is not a duration ({e}); write it like {flag} {example}")))?;
    if d > MAX_DURATION {
        return Err(bad(
            flag,
            format!(
                "{} is longer than the {} any duration may be; write it like {flag} {example}",
                text.trim(),
                humantime::format_duration(MAX_DURATION)
            ),
        ));
    }
    Ok(d)
}

/// Bytes an unprivileged user may still write under `out`; `None` if unknown.
// statvfs's field types differ between platforms (u32 on some): the
// conversions are only useless on this one.
#[allow(clippy::useless_conversion)]
fn free_bytes(out: &Path) -> Option<u64> {
    let s = nix::sys::statvfs::statvfs(out).ok()?;
    Some(u64::from(s.blocks_available()).saturating_mul(u64::from(s.fragment_size())))
}

/// A run folder of about `needed` bytes must fit in the `free` bytes of
/// `out` (unknown free space is not held against it).
fn check_space(out: &Path, needed: u64, free: Option<u64>) -> Result<(), ConfigError> {
    match free {
        Some(free) if free < needed => Err(bad(
            "--out",
            format!(
                "{} has {} free, but this run writes about {}; free some space, choose another --out, or run \
                 shorter (--duration, --rounds) or sample less often (--sample-interval)",
                out.display(),
                mib(free),
                mib(needed)
            ),
        )),
        _ => Ok(()),
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// The output folder must exist (or be creatable) and accept a file.
fn check_writable(out: &Path) -> Result<(), ConfigError> {
    let fail = |e: std::io::Error| {
        bad("--out", format!("{} is not writable ({e}); choose a folder you can write to", out.display()))
    };
    std::fs::create_dir_all(out).map_err(fail)?;
    let probe = out.join(format!(".write-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(fail)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn plan(args: &[&str]) -> Result<Plan, ConfigError> {
        let dir = std::env::temp_dir().join("gvr-config-test");
        let out = dir.to_string_lossy().into_owned();
        let mut full = vec!["harness", "--out", &out];
        full.extend_from_slice(args);
        Plan::from_args(&Cli::try_parse_from(full).expect("clap accepts").run)
    }

    fn parse(args: &[&str]) -> Result<Config, ConfigError> {
        plan(args).map(|p| p.config)
    }

    #[test]
    fn rates_parse_as_single_list_or_geometric_range() {
        assert_eq!(parse_rates("100").unwrap(), [100.0]);
        assert_eq!(parse_rates("500, 1000,2000").unwrap(), [500.0, 1000.0, 2000.0]);
        assert_eq!(parse_rates("500..16000x2").unwrap(), [500.0, 1000.0, 2000.0, 4000.0, 8000.0, 16000.0]);
        assert_eq!(parse_rates("100..1000x3").unwrap(), [100.0, 300.0, 900.0]);
        for bad in ["0", "-5", "abc", "500..100x2", "500..1000", "500..1000x1", "1000,500", "1,,2", "1..1e9x2"] {
            assert_eq!(parse_rates(bad).unwrap_err().flag, "--qps", "{bad}");
        }
    }

    #[test]
    fn throughput_mode_is_connections_without_qps() {
        let p = plan(&["--connections", "8"]).unwrap();
        assert!(p.config.closed_loop && p.rates.is_empty());
        let p = plan(&["--connections", "8", "--qps", "50"]).unwrap();
        assert!(!p.config.closed_loop && p.config.qps == 50.0);
        let p = plan(&["--qps", "100..400x2"]).unwrap();
        assert!(p.is_sweep() && p.step(200.0, &p.arms).config.qps == 200.0);
        assert_eq!(p.config.slo_p99, Duration::from_millis(600));
        assert_eq!(plan(&["--downstream-url", "http://x:1"]).unwrap_err().flag, "--downstream-url");
        let direct = |url| plan(&["--target", "downstream", "--transport", "rest", "--downstream-url", url]);
        assert!(direct("http://127.0.0.1:8080").is_ok());
        for bad in ["http://", "127.0.0.1:8080", "http://bad host:1", "http://x:99999"] {
            assert_eq!(direct(bad).unwrap_err().flag, "--downstream-url", "{bad}");
        }
    }

    #[test]
    fn both_alternates_counterbalanced() {
        let p = plan(&["--transport", "both", "--rounds", "3"]).unwrap();
        assert_eq!(p.arms, [Transport::Grpc, Transport::Rest]);
        assert_eq!(p.order(), [(0, 0), (1, 0), (1, 1), (0, 1), (0, 2), (1, 2)]);
        assert_eq!(p.transport_name(), "both");
        assert_eq!(p.arm(Transport::Rest).transport, Transport::Rest);
        // Fresh tiers (the default): every round of 60 s on new processes
        // after a warm-up of 10 s of their own.
        assert!(p.config.fresh_tiers);
        assert_eq!(p.load_duration(), Duration::from_secs(6 * (10 + 60)));
        // Reused tiers: two warm-ups of 10 s, six rounds of 60 s, and a
        // re-warm (0.5 s delay + 1 s) at each of the two switches back to an
        // arm already warm.
        let reused = plan(&["--transport", "both", "--rounds", "3", "--reuse-tiers"]).unwrap();
        assert!(!reused.config.fresh_tiers);
        assert_eq!(reused.config.rewarm(), Duration::from_millis(1500));
        assert_eq!(reused.load_duration(), Duration::from_millis(2 * 10_000 + 6 * 60_000 + 2 * 1500));
        let single = plan(&["--transport", "rest", "--rounds", "2", "--reuse-tiers"]).unwrap();
        assert_eq!(single.order(), [(0, 0), (0, 1)]);
        assert_eq!(single.transport_name(), "rest");
        assert_eq!(single.load_duration(), Duration::from_secs(10 + 2 * 60));
        let cold = plan(&["--transport", "both", "--warmup", "0s"]).unwrap();
        assert_eq!(cold.config.rewarm(), Duration::ZERO);
    }

    #[test]
    fn compared_arms_default_to_three_rounds_and_an_a_a_pair_is_two_arms() {
        assert_eq!(parse(&["--transport", "both"]).unwrap().rounds, DEFAULT_COMPARED_ROUNDS);
        assert_eq!(parse(&["--transport", "both", "--rounds", "2"]).unwrap().rounds, 2);
        assert_eq!(parse(&["--transport", "grpc"]).unwrap().rounds, 1);
        // A sweep's steps keep one round each unless told.
        assert_eq!(parse(&["--transport", "both", "--qps", "10,20"]).unwrap().rounds, 1);
        let aa = plan(&["--transport", "grpc,grpc"]).unwrap();
        assert_eq!(aa.arms, [Transport::Grpc, Transport::Grpc]);
        assert_eq!((aa.config.rounds, aa.transport_name().as_str()), (3, "aa-grpc"));
        assert_eq!(aa.arm_dirs(), ["grpc-a", "grpc-b"]);
        assert_eq!(plan(&["--transport", "both"]).unwrap().arm_dirs(), ["grpc", "rest"]);
        assert_eq!(plan(&["--transport", "rest,rest", "--qps", "10,20"]).unwrap_err().flag, "--transport");
        assert!(Cli::try_parse_from(["harness", "--transport", "grpc,soap"]).is_err());
        for arg in ["grpc", "rest", "both", "grpc,grpc", "rest,rest", "rest-pb", "grpc,rest,rest-pb,grpc-json"] {
            let t = parse_transport(arg).unwrap();
            assert_eq!((t.as_arg(), TransportArg::from_arms(&t.arms())), (arg.to_owned(), Some(t.clone())));
        }
        assert_eq!(parse(&["--plan-qps", "2000"]).unwrap().plan_qps, Some(2000.0));
        assert_eq!(parse(&["--plan-qps", "0"]).unwrap_err().flag, "--plan-qps");
    }

    #[test]
    fn a_list_of_arms_runs_counterbalanced_against_a_baseline() {
        let p = plan(&["--transport", "grpc,rest,rest-pb,grpc-json", "--rounds", "2"]).unwrap();
        assert_eq!(p.arms, Transport::ALL);
        assert_eq!(p.order(), [(0, 0), (1, 0), (2, 0), (3, 0), (3, 1), (2, 1), (1, 1), (0, 1)]);
        assert_eq!(p.transport_name(), "grpc+rest+rest-pb+grpc-json");
        assert_eq!(p.arm_dirs(), ["grpc", "rest", "rest-pb", "grpc-json"]);
        assert_eq!(p.config.baseline, None, "the first arm is the default baseline");
        assert_eq!(parse(&["--transport", "grpc-json,rest-pb"]).unwrap().rounds, DEFAULT_COMPARED_ROUNDS);
        // A baseline that is not where the comparison would put it is recorded.
        let b = plan(&["--transport", "grpc,rest", "--baseline", "rest"]).unwrap();
        assert_eq!(b.config.baseline, Some(Transport::Rest));
        assert_eq!(plan(&["--transport", "rest-pb,grpc"]).unwrap().config.baseline, Some(Transport::RestPb));
        assert_eq!(plan(&["--transport", "both", "--baseline", "grpc"]).unwrap().config.baseline, None);
        assert_eq!(plan(&["--transport", "both", "--baseline", "rest-pb"]).unwrap_err().flag, "--baseline");
        assert!(Cli::try_parse_from(["harness", "--baseline", "soap"]).is_err());
        assert!(Cli::try_parse_from(["harness", "--transport", "grpc,rest,grpc"]).is_err());
        assert!(Cli::try_parse_from(["harness", "--transport", "grpc,"]).is_err());
        let single = plan(&["--transport", "grpc-json"]).unwrap();
        assert_eq!((single.arms.as_slice(), single.transport_name()), (&[Transport::GrpcJson][..], "grpc-json".into()));
    }

    #[test]
    fn the_command_line_of_a_config_gives_it_back() {
        for args in [
            &["--transport", "both", "--qps", "2.5", "--delay", "300ms", "--jitter", "1500us", "--label", "x"][..],
            &["--transport", "rest", "--connections", "8", "--rest-http2", "--plan-qps", "900", "--quiet"],
            &["--transport", "grpc,grpc", "--rounds", "4", "--target", "downstream", "--json"],
            &[
                "--transport",
                "both",
                "--caller-url",
                "grpc=http://a:1,rest=http://b:2",
                "--caller-admin",
                "grpc=http://a:3,rest=http://b:4",
                "--downstream-admin",
                "http://d:5",
            ],
            &["--isolation", "containers", "--tier-cpus", "caller=1,downstream=0.5", "--tier-memory", "caller=64m"],
            &["--shape", "timeseries", "--request-bytes", "4096", "--items", "100"],
            &["--transport", "both", "--tls", "--compression", "gzip"],
            &["--transport", "rest", "--mtls", "--compression", "zstd", "--rest-http2"],
            &["--transport", "grpc,rest,rest-pb,grpc-json", "--rounds", "2"],
            &["--transport", "rest-pb,grpc-json", "--baseline", "grpc-json", "--compression", "gzip"],
            &["--connections", "8", "--load-threads", "3"],
        ] {
            let p = plan(args).unwrap();
            let t = TransportArg::from_arms(&p.arms).unwrap();
            let line = command_line(&p.config, t.clone());
            let exact = |line: &[String]| {
                let full = std::iter::once("harness").chain(line.iter().map(String::as_str));
                Plan::from_args(&Cli::try_parse_from(full).expect("clap accepts").run).unwrap()
            };
            let again = exact(&line);
            assert_eq!(again.config, p.config, "{line:?}");
            assert_eq!(again.arms, p.arms);
            // Through run.json and back, byte for byte.
            let saved: Config = serde_json::from_str(&serde_json::to_string(&p.config).unwrap()).unwrap();
            let from_saved = exact(&command_line(&saved, t));
            assert_eq!(serde_json::to_string(&from_saved.config).unwrap(), serde_json::to_string(&p.config).unwrap());
        }
    }

    #[test]
    fn a_size_list_makes_a_payload_sweep_of_one_axis_at_one_rate() {
        let p = plan(&["--transport", "both", "--items", "1,10,100,1000"]).unwrap();
        assert_eq!(p.payload, Some(PayloadSweep { axis: PayloadAxis::Items, sizes: vec![1, 10, 100, 1000] }));
        assert!(p.is_sweep() && p.config.items == 1 && p.config.rounds == 1);
        let step = p.payload_step(PayloadAxis::Items, 100);
        assert_eq!((step.config.items, step.payload.clone(), step.rates.clone()), (100, None, vec![100.0]));
        assert!(!step.is_sweep());
        let one = plan(&["--transport", "both", "--rounds", "1"]).unwrap();
        assert!(p.expected_output_bytes() > one.expected_output_bytes() * 3);
        let p = plan(&["--request-bytes", "0,1024,65536", "--shape", "timeseries"]).unwrap();
        assert_eq!(p.payload.as_ref().map(|s| s.axis), Some(PayloadAxis::RequestBytes));
        assert_eq!((p.config.request_bytes, p.config.shape), (0, Shape::Timeseries));
        assert_eq!(p.payload_step(PayloadAxis::RequestBytes, 65536).config.request_bytes, 65536);
        let single = parse(&["--request-bytes", "512"]).unwrap();
        assert_eq!((single.request_bytes, single.shape), (512, Shape::Order));
        assert_eq!(plan(&["--items", "5"]).unwrap().payload, None);
        for (args, flag) in [
            (&["--items", "1,10", "--qps", "10,20"][..], "--items"),
            (&["--request-bytes", "1,10", "--qps", "10..40x2"], "--request-bytes"),
            (&["--items", "1,10", "--request-bytes", "1,10"], "--request-bytes"),
            (&["--items", "10,1"], "--items"),
            (&["--items", "1,,2"], "--items"),
            (&["--items", "1,20000"], "--items"),
            (&["--request-bytes", "2000000"], "--request-bytes"),
            (&["--request-bytes", "-1"], "--request-bytes"),
            (&["--transport", "grpc,grpc", "--items", "1,10"], "--transport"),
        ] {
            assert_eq!(parse(args).unwrap_err().flag, flag, "{args:?}");
        }
        let err = Cli::try_parse_from(["harness", "--shape", "blob"]).err().unwrap();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("--shape") && err.to_string().contains("order or timeseries"), "{err}");
    }

    #[test]
    fn an_unknown_compression_is_refused_naming_the_flag() {
        let err = Cli::try_parse_from(["harness", "--compression", "brotli"]).err().unwrap();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("--compression"), "{err}");
        assert_eq!(parse(&["--compression", "zstd"]).unwrap().compression, super::super::Compression::Zstd);
        assert_eq!(parse(&["--mtls"]).unwrap().tls, TlsMode::Mtls);
        assert_eq!(parse(&[]).unwrap().tls, TlsMode::None);
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.qps, 100.0);
        assert_eq!(c.duration, Duration::from_secs(60));
        assert_eq!(c.warmup, Duration::from_secs(10));
        assert_eq!(c.warmup_ramp, Duration::from_secs(5), "half the warm-up");
        assert_eq!(c.delay, Duration::from_millis(500));
        assert_eq!(c.timeout, Duration::from_secs(30));
        assert_eq!(c.sample_interval, Duration::from_millis(250));
        assert_eq!(c.rounds, 1);
        assert_eq!(c.requests_per_round(), 6000);
        assert_eq!(c.load_threads, Some(DEFAULT_LOAD_THREADS));
    }

    #[test]
    fn bad_values_name_the_flag() {
        for (args, flag) in [
            (&["--qps", "0"][..], "--qps"),
            (&["--qps", "-5"], "--qps"),
            (&["--qps", "abc"], "--qps"),
            (&["--duration", "0s"], "--duration"),
            (&["--duration", "soon"], "--duration"),
            (&["--rounds", "0"], "--rounds"),
            (&["--items", "10001"], "--items"),
            (&["--sample-interval", "10ms"], "--sample-interval"),
            (&["--fanout", "0"], "--fanout"),
            (&["--items", "10000", "--fanout", "11"], "--fanout"),
            (&["--label", "a b"], "--label"),
            (&["--max-in-flight", "0"], "--max-in-flight"),
            (&["--load-threads", "0"], "--load-threads"),
            (&["--load-threads", "257"], "--load-threads"),
            (&["--bind", "localhost:80"], "--bind"),
            (&["--admin-bind", "any"], "--admin-bind"),
            (&["--duration", "500000000000y", "--rounds", "2"], "--duration"),
            (&["--timeout", "500000000000y"], "--timeout"),
            (&["--delay", "500000000000y"], "--delay"),
            (&["--warmup", "8d"], "--warmup"),
            (&["--warmup", "2s", "--warmup-ramp", "3s"], "--warmup-ramp"),
            (&["--warmup-ramp", "soon"], "--warmup-ramp"),
            (&["--duration", "6d", "--rounds", "10"], "--rounds"),
            (&["--rounds", "10001"], "--rounds"),
            (&["--transport", "both", "--caller-port", "8080"], "--caller-port"),
            (&["--tls", "--proxy", "nginx"], "--tls"),
            (&["--mtls", "--proxy", "caddy", "--proxy-hop", "front"], "--mtls"),
            (&["--tls", "--target", "downstream", "--downstream-url", "http://x:1"], "--tls"),
            (&["--tls", "--caller-url", "http://x:1"], "--tls"),
            (&["--mtls", "--isolation", "containers"], "--mtls"),
        ] {
            let err = parse(args).unwrap_err();
            assert_eq!(err.flag, flag, "{args:?}: {err}");
        }
    }

    #[test]
    fn the_warm_up_ramp_is_half_the_warm_up_unless_set_and_none_in_a_closed_loop() {
        let at = |args: &[&str]| parse(args).unwrap().warmup_ramp;
        assert_eq!(at(&["--warmup", "3s"]), Duration::from_millis(1500));
        assert_eq!(at(&["--warmup", "3s", "--warmup-ramp", "3s"]), Duration::from_secs(3));
        assert_eq!(at(&["--warmup-ramp", "0s"]), Duration::ZERO);
        assert_eq!(at(&["--warmup", "0s"]), Duration::ZERO);
        assert_eq!(at(&["--connections", "2"]), Duration::ZERO, "no rate to ramp");
        let err = parse(&["--warmup", "2s", "--warmup-ramp", "3s"]).unwrap_err();
        assert_eq!(err.flag, "--warmup-ramp");
        assert!(err.to_string().contains("longer than the warm-up (2s)"), "{err}");
    }

    #[test]
    fn open_files_follow_the_transport() {
        let grpc = parse(&["--qps", "1000"]).unwrap();
        assert_eq!(grpc.expected_in_flight(), 616);
        assert_eq!(grpc.expected_open_files(), 616 + 1 + 128);
        let rest = Config { transport: Transport::Rest, fanout: 2, ..grpc.clone() };
        assert_eq!(rest.expected_open_files(), 616 + 2 * 616 + 128);
        let capped = Config { max_in_flight: 100, ..rest };
        assert_eq!(capped.expected_in_flight(), 100);
    }

    #[test]
    fn the_run_folder_must_fit_in_the_free_space() {
        let p = plan(&["--duration", "10m"]).unwrap();
        let needed = p.expected_output_bytes();
        // Ten minutes sampled every 250 ms: a few MiB, more than a small run.
        assert!(needed > 2 << 20 && needed < 64 << 20, "{needed}");
        assert!(plan(&["--duration", "1s", "--warmup", "0s"]).unwrap().expected_output_bytes() < needed);
        assert!(plan(&["--transport", "both", "--duration", "10m"]).unwrap().expected_output_bytes() > needed);
        let out = Path::new("/somewhere");
        let err = check_space(out, needed, Some(needed - 1)).unwrap_err();
        assert_eq!(err.flag, "--out");
        assert!(err.problem.contains("/somewhere has") && err.problem.contains("free"), "{err}");
        assert!(check_space(out, needed, Some(needed)).is_ok());
        assert!(check_space(out, needed, None).is_ok());
    }

    #[test]
    fn unwritable_out_is_refused() {
        let file = std::env::temp_dir().join(format!("gvr-not-a-dir-{}", std::process::id()));
        std::fs::write(&file, b"x").unwrap();
        let a = RunArgs { out: file.join("sub"), ..Cli::try_parse_from(["harness"]).unwrap().run };
        assert_eq!(Config::from_args(&a, Transport::Grpc, Some(1.0)).unwrap_err().flag, "--out");
        std::fs::remove_file(file).unwrap();
    }
}
