//! Synthetic results for tests of the renderers and analysis (fixed numbers,
//! no measurement). Not used by the product itself.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use caller::Transport;

use crate::config::Config;
use crate::judge::stats::summarize;
use crate::measure::histogram::{encode_histogram, new_histogram};
use crate::result::Environment;
use crate::result::{
    HopBytes, Hops, Latency, Requests, Resources, RoundResult, RunResult, RunStatus, SCHEMA, Summary, Throughput,
    TierInfo, TierName,
};

pub fn config(transport: Transport) -> Config {
    use crate::config::{Deploy, Hop, Load, Output, Work};
    let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
    Config {
        transport,
        baseline: None,
        load: Load {
            qps: 100.0,
            closed_loop: false,
            slo_p99: Duration::from_millis(600),
            duration: Duration::from_secs(60),
            warmup: Duration::from_secs(10),
            warmup_ramp: Duration::from_secs(5),
            rounds: 1,
            fresh_tiers: true,
            timeout: Duration::from_secs(30),
            max_in_flight: 10_000,
            connections: 0,
            load_threads: None,
            send_precision: Duration::ZERO,
            sample_interval: Duration::from_millis(250),
        },
        work: Work {
            delay: Duration::from_millis(500),
            jitter: Duration::ZERO,
            items: 10,
            request_bytes: 0,
            shape: payload::Shape::Order,
            fanout: 1,
        },
        deploy: Deploy {
            target: crate::config::TargetTier::Caller,
            downstream_url: None,
            remote: Default::default(),
            isolation: Default::default(),
            tier_limits: Default::default(),
            proxy: None,
            proxy_hop: crate::config::ProxyHop::Internal,
            bind: loopback,
            admin_bind: loopback,
            caller_port: 0,
            foreign: Default::default(),
            huge_pages: Default::default(),
        },
        link: None,
        hop: Hop {
            grpc_connections: 1,
            rest_http2: false,
            tls: crate::config::TlsMode::None,
            compression: crate::config::Compression::None,
            json_codec: payload::JsonCodec::SerdeJson,
        },
        output: Output { out: PathBuf::from("results"), label: None, quiet: true, json: false, plan_qps: None },
        generators: crate::config::Generators::default(),
        replicas: crate::config::Replicas::default(),
        contract: None,
        streams: None,
    }
}

pub fn environment() -> Environment {
    Environment {
        tool_version: "0.1.0".into(),
        build_profile: "release".into(),
        opt_level: None,
        allocator: None,
        transparent_huge_pages: None,
        rustc: Some("rustc 1.95.0".into()),
        git_commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
        git_dirty: Some(false),
        os: Some("Linux (Debian GNU/Linux 12)".into()),
        kernel: Some("6.1.0".into()),
        hostname: Some("bench-1".into()),
        cpu_model: Some("Example CPU".into()),
        logical_cores: Some(2),
        physical_cores: Some(2),
        memory_bytes: Some(24 * 1024 * 1024 * 1024),
        nofile_soft_before: Some(1024),
        nofile_soft: Some(1_048_576),
        nofile_hard: Some(1_048_576),
        stamp_reader_priority: Some("SCHED_FIFO 1".to_owned()),
    }
}

/// A round whose latencies are `base_ms` + 0..100 µs steps and whose other
/// figures scale with `scale`.
pub fn round(index: u32, base_ms: f64, scale: f64) -> RoundResult {
    let mut h = new_histogram();
    for i in 0..6000u64 {
        h.record((base_ms * 1000.0) as u64 + i % 100 * 10).unwrap_or(());
    }
    let mut errors = BTreeMap::new();
    if scale > 2.0 {
        errors.insert("timeout".to_owned(), 3);
    }
    let resources = |rss: f64, cpu: f64| Resources {
        cpu_seconds: Some(cpu * scale),
        cpu_percent_mean: Some(cpu * scale / 60.0 * 100.0),
        cpu_percent_peak: Some(cpu * scale / 60.0 * 150.0),
        cpu_us_per_request: Some(cpu * scale * 1e6 / 6000.0),
        rss_mib_mean: Some(rss * scale),
        rss_mib_peak: Some(rss * scale * 1.1),
        samples: 240,
    };
    let mut res = BTreeMap::new();
    res.insert(TierName::Caller, resources(20.0, 1.2));
    res.insert(TierName::Downstream, resources(15.0, 0.9));
    res.insert(TierName::Harness, resources(18.0, 0.6));
    let summary: Option<Summary> = summarize(&h);
    RoundResult {
        index,
        complete: true,
        started_seconds: 10.0 + 60.0 * f64::from(index - 1),
        window_seconds: 60.0,
        requests: Requests { scheduled: 6000, sent: 6000, ok: 6000 - errors.values().sum::<u64>(), errors },
        throughput: Throughput {
            target_qps: Some(100.0),
            send_rate: 100.0,
            ok_per_second: 100.0 / scale.max(1.0),
            achieved_ratio: Some(1.0 / scale.max(1.0)),
        },
        latency: Latency {
            corrected: summary.clone(),
            service: summary.clone(),
            send_lag: None,
            downstream_hop: summary,
            caller_overhead: None,
            kernel_stamped: None,
        },
        histograms: [("corrected".to_owned(), encode_histogram(&h))].into_iter().collect(),
        resources: res,
        bytes: Hops {
            front: HopBytes { listener: "front".into(), requests: 6000, ..HopBytes::default() },
            internal: HopBytes {
                listener: "grpc".into(),
                requests: 6000,
                requests_started: Some(6000),
                request_wire_bytes: Some((66.0 * scale * 6000.0) as u64),
                response_wire_bytes: Some((1095.0 * scale * 6000.0) as u64),
                request_message_bytes: Some(7 * 6000),
                response_message_bytes: Some(1058 * 6000),
                request_wire_bytes_per_request: Some(66.0 * scale),
                response_wire_bytes_per_request: Some(1095.0 * scale),
                request_message_bytes_per_request: Some(7.0),
                response_message_bytes_per_request: Some(1058.0),
                connections_opened: Some(0),
                connections_open_at_end: Some(1),
                tls: None,
            },
            relay: None,
        },
        other_cores: None,
        steal_percent: None,
        // Fresh tiers: every round on processes of its own.
        pids: [(TierName::Caller, 1000 + index), (TierName::Downstream, 2000 + index)].into_iter().collect(),
        cpu_throttling: BTreeMap::new(),
        replicas: None,
        stream: None,
        per_request_basis: None,
    }
}

/// A complete single-round run with fixed figures, its validity judged as a
/// finished run's is (a test that changes it judges it again).
pub fn run(transport: Transport, scale: f64) -> RunResult {
    let mut tiers = BTreeMap::new();
    tiers.insert(TierName::Caller, TierInfo::local(11, serde_json::json!({"transport": transport.as_str()})));
    tiers.insert(TierName::Downstream, TierInfo::local(10, serde_json::json!({"delay_ms": 500.0})));
    let mut run = RunResult {
        schema: SCHEMA.into(),
        tool_version: "0.1.0".into(),
        status: RunStatus::Complete,
        status_reason: None,
        started_at: "2026-11-29T12:00:00Z".into(),
        config: config(transport),
        environment: environment(),
        tiers,
        rounds: vec![round(1, 500.0, scale)],
        samples: Vec::new(),
        load_samples: Vec::new(),
        instrument: None,
        link: None,
        error_reasons: Vec::new(),
        generators: Vec::new(),
        contract: None,
        validity: Vec::new(),
    };
    run.validity = crate::judge::validity(&run);
    run
}

/// The two arms of a counterbalanced `--transport both` run of `rounds`
/// rounds: every figure of gRPC scaled by `grpc_scale`, of REST by
/// `rest_scale`, each round wobbling by a fixed ±1% (and latency by a fixed
/// ±2 ms), so a comparison has noise to judge. Below 1 a scale leaves the
/// throughput at the target.
pub fn both(rounds: u32, grpc_scale: f64, rest_scale: f64) -> (RunResult, RunResult) {
    const WOBBLE: [f64; 6] = [0.0, 1.0, -1.0, 0.5, -0.5, 0.8];
    let arm = |transport: Transport, scale: f64, phase: usize| {
        let mut run = run(transport, scale);
        run.config.load.rounds = rounds;
        run.rounds = (1..=rounds)
            .map(|k| {
                let w = WOBBLE[(k as usize + phase) % WOBBLE.len()];
                let mut r = round(k, 500.0 + 2.0 * w, scale * (1.0 + 0.01 * w));
                r.bytes.internal.listener = transport.as_str().into();
                r
            })
            .collect();
        run.validity = crate::judge::validity(&run);
        run
    };
    (arm(Transport::Grpc, grpc_scale, 0), arm(Transport::Rest, rest_scale, 3))
}

/// The text a reader of `html` sees: tags dropped (with the contents of
/// scripts, styles and charts), entities read back.
pub fn visible_text(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        let end = rest[at..].find('>').map_or(rest.len(), |e| at + e + 1);
        let tag = &rest[at..end];
        rest = &rest[end..];
        for (open, close) in [("<script", "</script>"), ("<style", "</style>"), ("<svg", "</svg>")] {
            if tag.starts_with(open) {
                rest = rest.find(close).map_or("", |e| &rest[e + close.len()..]);
            }
        }
    }
    out.push_str(rest);
    out.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&")
}

/// Every cell of every table of a Markdown text, without its inline markup.
pub fn table_cells(md: &str) -> Vec<String> {
    md.lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
        .flat_map(|l| l.trim().trim_matches('|').split(" | ").map(str::to_owned).collect::<Vec<_>>())
        .map(|c| c.replace("**", "").replace('`', "").replace("\\|", "|").trim().to_owned())
        .map(|c| c.strip_prefix('*').and_then(|c| c.strip_suffix('*')).map_or(c.clone(), str::to_owned))
        // A link reads as its text.
        .map(|c| match (c.strip_prefix('['), c.find("](")) {
            (Some(_), Some(at)) if c.ends_with(')') => c[1..at].to_owned(),
            _ => c,
        })
        .filter(|c| !c.is_empty())
        .collect()
}

/// A crossover probe at `value` whose B − A is 10 × `sign` (±2), for tests
/// of the experiment's renderers.
pub fn probe(value: f64, cell: &str, sign: i8) -> crate::judge::experiment::ProbeShown {
    let d = f64::from(sign) * 10.0;
    let diff = Some(crate::judge::inference::Interval { estimate: d, lo: d - 2.0, hi: d + 2.0 });
    crate::judge::experiment::ProbeShown {
        value,
        cell: cell.into(),
        a: Some(100.0),
        b: Some(100.0 + d),
        diff,
        rounds: 3,
        sign,
    }
}

/// A search of REST against gRPC's downstream CPU over items 1–1000 that
/// bracketed a crossing between 32 and 40, with `probes`.
pub fn bracket_32_40(probes: Vec<crate::judge::experiment::ProbeShown>) -> crate::judge::experiment::Crossover {
    crate::judge::experiment::Crossover {
        flag: "items".into(),
        row: "cpu_us_per_request.downstream".into(),
        a: "gRPC".into(),
        b: "REST".into(),
        low: 1.0,
        high: 1000.0,
        resolution: 0.5,
        outcome: crate::judge::experiment::Outcome::Bracket { below: 32.0, above: 40.0 },
        probes,
    }
}
