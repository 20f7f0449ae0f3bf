//! `--link` end to end: the user-space link emulator on the internal hop
//! adds its round-trip time to the caller's downstream call, is recorded in
//! run.json and the report, and bad values or topologies it cannot join are
//! refused naming the flag. (The emulator's own accuracy over sockets is
//! `crates/linkemu/tests/accuracy.rs`.)

use crate::common;

use common::*;
use harness::result::{RunResult, TierName};

fn run(name: &str, extra: &[&str]) -> RunResult {
    let out = out_dir(name);
    let run = short_run(&out).without("--quiet");
    let run = run.flags("--transport grpc --qps 50 --duration 2s --warmup 500ms --delay 10ms --rounds 1");
    let output = run.args(extra).output();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let folder = run_folder(&out);
    let run = load(&folder);
    if !extra.is_empty() {
        let report = std::fs::read_to_string(folder.join("report.md")).unwrap();
        assert!(report.contains("## Link") && report.contains("user-space emulator"), "{report}");
        assert!(report.contains("tcp_rmem") && report.contains("stream window"), "{report}");
    }
    let _ = std::fs::remove_dir_all(&out);
    run
}

fn hop_p50_ms(run: &RunResult) -> f64 {
    run.rounds[0].latency.downstream_hop.as_ref().map(|s| s.p50_ms).expect("a downstream hop p50")
}

#[test]
fn a_link_adds_its_round_trip_to_the_internal_hop() {
    let plain = run("link-none", &[]);
    let linked = run("link-20ms", &["--link", "rtt=20ms"]);
    let (before, after) = (hop_p50_ms(&plain), hop_p50_ms(&linked));
    let rise = after - before;
    eprintln!("downstream hop p50: {before:.2} ms without a link, {after:.2} ms with rtt=20ms (+{rise:.2} ms)");
    // One request and its response cross the link once each: one RTT. The
    // link can never be faster than its setting; the upper bound leaves room
    // for a busy machine.
    assert!((19.0..=30.0).contains(&rise), "the hop rose by {rise:.2} ms, not about 20 ms");
    assert_eq!(linked.rounds[0].requests.error_total(), 0, "{:?}", linked.rounds[0].requests.errors);

    let link = linked.link.as_ref().expect("a link section in run.json");
    assert_eq!(link.rtt_ms, 20.0);
    assert_eq!(link.hop, "internal");
    assert!(link.emulator.contains("user-space"), "{}", link.emulator);
    assert!(!link.netem.how.is_empty());
    assert_eq!(link.http2.client["adaptive_window"], false);
    assert!(link.tcp.congestion_control.is_some(), "tcp_congestion_control is readable on Linux");
    assert!(plain.link.is_none());
    // The emulator is a process of its own, sampled under its own name and
    // never in a tier's figures.
    assert!(linked.tiers.get(&TierName::Link).and_then(|t| t.pid).is_some(), "{:?}", linked.tiers.keys());
    assert!(linked.rounds[0].resources.contains_key(&TierName::Link));
    assert!(!plain.rounds[0].resources.contains_key(&TierName::Link));
}

#[test]
fn bad_links_and_topologies_it_cannot_join_exit_2_naming_the_flag() {
    let out = out_dir("link-bad");
    let out_text = out.to_str().unwrap();
    for (args, flag) in [
        (&["--link", "rtt=-1ms"][..], "--link"),
        (&["--link", "rate=abc"], "--link"),
        (&["--link", "moon"], "--link"),
        (&["--link-hop", "front"], "--link-hop"),
        (&["--link", "lan", "--caller-url", "http://127.0.0.1:9"], "--caller-url"),
        (&["--link", "lan", "--isolation", "containers"], "--isolation"),
        (&["--link", "wan", "--proxy", "nginx"], "--proxy"),
    ] {
        let mut all = vec!["--qps", "10", "--duration", "1s", "--out", out_text];
        all.extend_from_slice(args);
        let output = harness_cmd(&all).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?} should name {flag}: {stderr}");
    }
}
