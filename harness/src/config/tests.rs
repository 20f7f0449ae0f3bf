//! The flags of a run, end to end: parsed by clap, validated into a
//! [`Plan`], and given back by [`command_line`] exactly.

use std::time::Duration;

use caller::Transport;
use clap::Parser;
use payload::Shape;

use super::arms::{DEFAULT_COMPARED_ROUNDS, parse_transport};
use super::load::DEFAULT_LOAD_THREADS;
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
    match Cli::try_parse_from(full) {
        Ok(cli) => Plan::from_args(&cli.run),
        // A value clap's own parser refused (a duration): its message names
        // the flag as `'--flag <VALUE>'`.
        Err(e) => {
            let problem = e.to_string();
            let flag = args.iter().find(|a| problem.contains(&format!("'{a} <"))).expect("clap names the flag");
            Err(ConfigError { flag: Box::leak(flag.to_string().into_boxed_str()), problem })
        }
    }
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
    assert!(p.config.load.closed_loop && p.rates.is_empty());
    let p = plan(&["--connections", "8", "--qps", "50"]).unwrap();
    assert!(!p.config.load.closed_loop && p.config.load.qps == 50.0);
    let p = plan(&["--qps", "100..400x2"]).unwrap();
    assert!(p.is_sweep() && p.step(200.0, &p.arms).config.load.qps == 200.0);
    assert_eq!(p.config.load.slo_p99, Duration::from_millis(600));
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
    assert!(p.config.load.fresh_tiers);
    assert_eq!(p.load_duration(), Duration::from_secs(6 * (10 + 60)));
    // Reused tiers: two warm-ups of 10 s, six rounds of 60 s, and a
    // re-warm (0.5 s delay + 1 s) at each of the two switches back to an
    // arm already warm.
    let reused = plan(&["--transport", "both", "--rounds", "3", "--reuse-tiers"]).unwrap();
    assert!(!reused.config.load.fresh_tiers);
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
    assert_eq!(parse(&["--transport", "both"]).unwrap().load.rounds, DEFAULT_COMPARED_ROUNDS);
    assert_eq!(parse(&["--transport", "both", "--rounds", "2"]).unwrap().load.rounds, 2);
    assert_eq!(parse(&["--transport", "grpc"]).unwrap().load.rounds, 1);
    // A sweep's steps keep one round each unless told.
    assert_eq!(parse(&["--transport", "both", "--qps", "10,20"]).unwrap().load.rounds, 1);
    let aa = plan(&["--transport", "grpc,grpc"]).unwrap();
    assert_eq!(aa.arms, [Transport::Grpc, Transport::Grpc]);
    assert_eq!((aa.config.load.rounds, aa.transport_name().as_str()), (3, "aa-grpc"));
    assert_eq!(aa.arm_dirs(), ["grpc-a", "grpc-b"]);
    assert_eq!(plan(&["--transport", "both"]).unwrap().arm_dirs(), ["grpc", "rest"]);
    assert_eq!(plan(&["--transport", "rest,rest", "--qps", "10,20"]).unwrap_err().flag, "--transport");
    assert!(Cli::try_parse_from(["harness", "--transport", "grpc,soap"]).is_err());
    // A streaming arm is compared with streaming arms only.
    for streaming in Transport::STREAMING {
        assert_eq!(parse(&["--transport", &format!("grpc,{streaming}")]).unwrap_err().flag, "--transport");
    }
    for arg in ["grpc", "rest", "both", "grpc,grpc", "rest,rest", "rest-pb", "grpc,rest,rest-pb,grpc-json"] {
        let t = parse_transport(arg).unwrap();
        assert_eq!((t.as_arg(), TransportArg::from_arms(&t.arms())), (arg.to_owned(), Some(t.clone())));
    }
    assert_eq!(parse(&["--plan-qps", "2000"]).unwrap().output.plan_qps, Some(2000.0));
    assert_eq!(parse(&["--plan-qps", "0"]).unwrap_err().flag, "--plan-qps");
}

#[test]
fn a_list_of_arms_runs_counterbalanced_against_a_baseline() {
    let p = plan(&["--transport", "grpc,rest,rest-pb,grpc-json", "--rounds", "2"]).unwrap();
    assert_eq!(p.arms, Transport::ALL[..4]);
    assert_eq!(p.order(), [(0, 0), (1, 0), (2, 0), (3, 0), (3, 1), (2, 1), (1, 1), (0, 1)]);
    assert_eq!(p.transport_name(), "grpc+rest+rest-pb+grpc-json");
    assert_eq!(p.arm_dirs(), ["grpc", "rest", "rest-pb", "grpc-json"]);
    assert_eq!(p.config.baseline, None, "the first arm is the default baseline");
    assert_eq!(parse(&["--transport", "grpc-json,rest-pb"]).unwrap().load.rounds, DEFAULT_COMPARED_ROUNDS);
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
        &["--qps", "5000", "--send-precision", "1ms"],
        &["--huge-pages", "machine", "--isolation", "containers"],
        &["--caller-url", "http://a:1", "--caller-admin", "http://a:2", "--segment", "1/3", "--start-at", "+1m"],
        &["--caller-url", "http://a:1", "--segment", "2/3", "--sample-tiers", "--start-at", "2026-12-03T10:00:00Z"],
        &["--transport", "both", "--downstream-replicas", "3", "--balance", "l4", "--grpc-max-connection-age", "5s"],
        &["--downstream-replicas", "2", "--balance", "client", "--replica-capacity", "40", "--tls"],
        &["--balance", "l7", "--grpc-max-connection-age", "1500ms"],
        &["--downstream-replicas", "2", "--balance", "l4", "--scale-at", "10s:+1,40s:-2", "--duration", "60s"],
        // What the layout and the launchers lifted: TLS, scaling and a proxy in
        // containers, replicas behind a proxy or a link.
        &["--isolation", "containers", "--mtls", "--transport", "both"],
        &["--isolation", "containers", "--downstream-replicas", "3", "--balance", "l4", "--scale-at", "10s=5,20s=2"],
        &["--isolation", "containers", "--proxy", "nginx", "--downstream-replicas", "2", "--balance", "l7"],
        &["--downstream-replicas", "2", "--balance", "l7", "--proxy", "nginx"],
        &["--downstream-replicas", "2", "--balance", "l4", "--link", "rtt=5ms", "--link-hop", "both"],
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
fn replicas_reach_the_downstream_as_its_flags_and_one_replica_is_todays_run() {
    let p = parse(&["--downstream-replicas", "3", "--balance", "l4", "--grpc-max-connection-age", "5s"]).unwrap();
    assert_eq!((p.replicas.downstream_replicas, p.replicas.balance), (3, Balance::L4));
    let flags = p.tier_flags(TierRole::Downstream, None).0;
    assert!(flags.windows(2).any(|w| w == ["--grpc-max-connection-age", "5000ms"]), "{flags:?}");
    let capped = parse(&["--replica-capacity", "40"]).unwrap();
    let flags = capped.tier_flags(TierRole::Downstream, None).0;
    assert!(flags.windows(2).any(|w| w == ["--max-in-flight", "40"]), "{flags:?}");
    assert!(!capped.tier_flags(TierRole::Caller, None).0.contains(&"--max-in-flight".to_owned()));
    // One replica reached directly leaves run.json as it was.
    let json = serde_json::to_value(parse(&[]).unwrap()).unwrap();
    for key in ["downstream_replicas", "balance", "grpc_max_connection_age", "replica_capacity"] {
        assert!(json.get(key).is_none(), "{key} in {json}");
    }
    assert_eq!(serde_json::to_value(&p).unwrap()["balance"], "l4");
}

#[test]
fn a_size_list_makes_a_payload_sweep_of_one_axis_at_one_rate() {
    let p = plan(&["--transport", "both", "--items", "1,10,100,1000"]).unwrap();
    assert_eq!(p.payload, Some(PayloadSweep { axis: PayloadAxis::Items, sizes: vec![1, 10, 100, 1000] }));
    assert!(p.is_sweep() && p.config.work.items == 1 && p.config.load.rounds == 1);
    let step = p.payload_step(PayloadAxis::Items, 100);
    assert_eq!((step.config.work.items, step.payload.clone(), step.rates.clone()), (100, None, vec![100.0]));
    assert!(!step.is_sweep());
    let one = plan(&["--transport", "both", "--rounds", "1"]).unwrap();
    assert!(p.expected_output_bytes() > one.expected_output_bytes() * 3);
    let p = plan(&["--request-bytes", "0,1024,65536", "--shape", "timeseries"]).unwrap();
    assert_eq!(p.payload.as_ref().map(|s| s.axis), Some(PayloadAxis::RequestBytes));
    assert_eq!((p.config.work.request_bytes, p.config.work.shape), (0, Shape::Timeseries));
    assert_eq!(p.payload_step(PayloadAxis::RequestBytes, 65536).config.work.request_bytes, 65536);
    let single = parse(&["--request-bytes", "512"]).unwrap();
    assert_eq!((single.work.request_bytes, single.work.shape), (512, Shape::Order));
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
    assert_eq!(parse(&["--compression", "zstd"]).unwrap().hop.compression, Compression::Zstd);
    assert_eq!(parse(&["--mtls"]).unwrap().hop.tls, TlsMode::Mtls);
    assert_eq!(parse(&[]).unwrap().hop.tls, TlsMode::None);
}

#[test]
fn defaults_are_the_documented_ones() {
    let c = parse(&[]).unwrap();
    assert_eq!(c.load.qps, 100.0);
    assert_eq!(c.load.duration, Duration::from_secs(60));
    assert_eq!(c.load.warmup, Duration::from_secs(10));
    assert_eq!(c.load.warmup_ramp, Duration::from_secs(5), "half the warm-up");
    assert_eq!(c.work.delay, Duration::from_millis(500));
    assert_eq!(c.load.timeout, Duration::from_secs(30));
    assert_eq!(c.load.sample_interval, Duration::from_millis(250));
    assert_eq!(c.load.rounds, 1);
    assert_eq!(c.load.requests_per_round(), 6000);
    assert_eq!(c.load.load_threads, Some(DEFAULT_LOAD_THREADS));
    assert_eq!(c.load.send_precision, Duration::from_millis(1), "oha's and wrk2's precision");
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
        (&["--send-precision", "6ms"], "--send-precision"),
        (&["--send-precision", "soon"], "--send-precision"),
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
        (&["--isolation", "containers", "--link", "lan"], "--link"),
        (&["--isolation", "containers", "--target", "downstream"], "--target"),
        (&["--isolation", "containers", "--bind", "0.0.0.0"], "--bind"),
        (&["--tier-cpus", "caller=1"], "--tier-cpus"),
        (&["--tier-memory", "caller=64m"], "--tier-memory"),
        (&["--segment", "1/3"], "--segment"),
        (&["--segment", "3/3", "--caller-url", "http://x:1"], "--segment"),
        (&["--segment", "0/2", "--connections", "4", "--caller-url", "http://x:1"], "--segment"),
        (&["--segment", "0/2", "--qps", "10,20", "--caller-url", "http://x:1"], "--segment"),
        (&["--sample-tiers"], "--sample-tiers"),
        (&["--start-at", "noon"], "--start-at"),
        (&["--downstream-replicas", "0"], "--downstream-replicas"),
        (&["--downstream-replicas", "17", "--balance", "l4"], "--downstream-replicas"),
        (&["--downstream-replicas", "3"], "--balance"),
        (&["--downstream-replicas", "3", "--balance", "none"], "--balance"),
        (&["--downstream-replicas", "2", "--balance", "l7", "--tls"], "--balance"),
        (&["--downstream-replicas", "2", "--balance", "client", "--proxy", "nginx"], "--balance"),
        (&["--downstream-replicas", "2", "--balance", "l4", "--target", "downstream"], "--target"),
        (&["--downstream-replicas", "2", "--balance", "client", "--link", "lan"], "--balance"),
        (&["--replica-capacity", "0"], "--replica-capacity"),
        (&["--grpc-max-connection-age", "0s"], "--grpc-max-connection-age"),
        (&["--grpc-max-connection-age", "1ns"], "--grpc-max-connection-age"),
        (&["--grpc-max-connection-age", "soon"], "--grpc-max-connection-age"),
        (&["--balance", "l4", "--scale-at", "70s:+1"], "--scale-at"),
        (&["--balance", "client", "--scale-at", "10s:+1", "--duration", "60s"], "--scale-at"),
        (&["--balance", "l4", "--scale-at", "10s:1", "--duration", "60s"], "--scale-at"),
        (&["--balance", "l4", "--scale-at", "10s:+0", "--duration", "60s"], "--scale-at"),
        (&["--balance", "l4", "--scale-at", "20s:+1,10s:+1", "--duration", "60s"], "--scale-at"),
        (&["--balance", "l4", "--scale-at", "10s:-1", "--duration", "60s"], "--scale-at"),
        (&["--balance", "l4", "--scale-at", "10s:+1", "--duration", "60s", "--reuse-tiers"], "--scale-at"),
        (&["--balance", "l4", "--scale-at", "soon:+1", "--duration", "60s"], "--scale-at"),
        (&["--downstream-replicas", "2", "--balance", "l4", "--scale-at", "10s=2", "--duration", "60s"], "--scale-at"),
        (&["--balance", "l4", "--scale-at", "10s=17", "--duration", "60s"], "--scale-at"),
    ] {
        let err = parse(args).unwrap_err();
        assert_eq!(err.flag, flag, "{args:?}: {err}");
    }
}

#[test]
fn a_generator_that_does_not_sample_the_tiers_is_given_no_admin_url() {
    let remote = ["--caller-url", "http://a:1", "--caller-admin", "http://a:2", "--downstream-admin", "http://d:3"];
    let with = |extra: &[&str]| parse(&[&remote[..], extra].concat()).unwrap();
    let first = with(&["--segment", "0/3"]);
    assert_eq!(first.generators.segment.map(|s| s.sample_tiers), Some(true));
    assert!(first.deploy.remote.downstream_admin.is_some());
    let second = with(&["--segment", "1/3"]);
    assert_eq!(second.generators.segment.map(|s| s.sample_tiers), Some(false));
    assert!(second.deploy.remote.caller_admin.is_empty() && second.deploy.remote.downstream_admin.is_none());
    // Any one of them may be the one that samples.
    let chosen = with(&["--segment", "2/3", "--sample-tiers"]);
    assert!(chosen.deploy.remote.downstream_admin.is_some());
    // One generator of one: its own tiers are allowed.
    assert_eq!(parse(&["--segment", "0/1"]).unwrap().generators.share_of(100.0), 100.0);
    assert_eq!(second.generators.share_of(300.0), 100.0);
}

#[test]
fn the_warm_up_ramp_is_half_the_warm_up_unless_set_and_none_in_a_closed_loop() {
    let at = |args: &[&str]| parse(args).unwrap().load.warmup_ramp;
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
    let mut rest = Config { transport: Transport::Rest, ..grpc.clone() };
    rest.work.fanout = 2;
    assert_eq!(rest.expected_open_files(), 616 + 2 * 616 + 128);
    let mut capped = rest;
    capped.load.max_in_flight = 100;
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
}

#[test]
fn streaming_arms_take_their_flags_and_refuse_what_contradicts_them() {
    let all = "grpc-stream,rest-pages,rest-ndjson,rest-sse,grpc-pages,connect-stream";
    let p = plan(&["--transport", all, "--stream-items", "50", "--stream-interval", "10ms", "--qps", "20"]).unwrap();
    assert_eq!(p.arms, Transport::STREAMING);
    let s = p.config.streams.clone().unwrap();
    assert_eq!(
        (s.items, s.interval, s.page_size, s.consumer_delay),
        (50, Duration::from_millis(10), 10, Duration::ZERO)
    );
    assert_eq!(p.config.load.rounds, DEFAULT_COMPARED_ROUNDS);
    // The downstream gets the interval, the caller the page size; unary arms neither.
    let c = p.arm(Transport::GrpcPages);
    assert!(c.tier_flags(TierRole::Downstream, None).0.windows(2).any(|w| w == ["--stream-interval", "10ms"]));
    assert!(c.tier_flags(TierRole::Caller, None).0.windows(2).any(|w| w == ["--page-size", "10"]));
    let unary = parse(&["--transport", "grpc"]).unwrap();
    assert!(unary.streams.is_none());
    assert!(!unary.tier_flags(TierRole::Downstream, None).0.iter().any(|f| f == "--stream-interval"));
    // A list of items is a sweep; a stream longer than the timeout is refused.
    let sweep = plan(&["--transport", "grpc-stream", "--stream-items", "10,100"]).unwrap();
    assert_eq!(sweep.payload, Some(PayloadSweep { axis: PayloadAxis::StreamItems, sizes: vec![10, 100] }));
    assert_eq!(sweep.payload_step(PayloadAxis::StreamItems, 100).config.streams.unwrap().items, 100);
    // The heaviest page the downstream's work budget takes at 1 MiB an item.
    assert!(plan(&["--transport", "grpc-pages", "--page-size", "55", "--stream-item-bytes", "1048576"]).is_ok());
    for (args, flag) in [
        (&["--transport", "grpc", "--stream-items", "5"][..], "--stream-items"),
        (&["--transport", "rest", "--consumer-delay", "1ms"], "--consumer-delay"),
        (&["--transport", "grpc-stream", "--page-size", "5"], "--page-size"),
        (&["--transport", "rest-pages", "--page-size", "0"], "--page-size"),
        (&["--transport", "grpc-pages", "--page-size", "56", "--stream-item-bytes", "1048576"], "--page-size"),
        (&["--transport", "grpc-stream", "--stream-items", "0"], "--stream-items"),
        (&["--transport", "grpc-stream", "--fanout", "2"], "--fanout"),
        (&["--transport", "grpc-stream", "--request-bytes", "10"], "--request-bytes"),
        (&["--transport", "grpc-stream", "--target", "downstream"], "--target"),
        (&["--transport", "grpc-stream", "--connections", "4", "--duration", "5s"], "--qps"),
        (&["--transport", "grpc-stream", "--stream-items", "10,100", "--qps", "10,20"], "--stream-items"),
        (&["--transport", "grpc-stream", "--stream-items", "1000", "--stream-interval", "50ms"], "--timeout"),
    ] {
        assert_eq!(plan(args).unwrap_err().flag, flag, "{args:?}");
    }
    // What rerun replays gives the same configuration back.
    let line = command_line(&p.config, TransportArg::from_arms(&p.arms).unwrap());
    let full = std::iter::once("harness").chain(line.iter().map(String::as_str));
    let again = Plan::from_args(&Cli::try_parse_from(full).unwrap().run).unwrap();
    assert_eq!(again.config, p.config);
}
