//! The downstream as replicas behind a real balancer (nginx's stream and
//! http modules, from Debian's packages; `.ci/run` installs them) or
//! balanced by the caller: where each arm's calls land, what a connection
//! age and a capacity change, and that nothing is left behind.

use crate::common;

use std::time::Duration;

use harness::result::{RunResult, TierName};

use common::*;

/// Runs the harness to its end with `flags`, a rate and a delay among them
/// (rounds of 2 s after a warm-up of 1 s unless they say otherwise, quiet),
/// and returns each arm's run, by its folder's name (`grpc`, `rest`; the
/// folder itself for one arm), after checking nothing it started is left.
pub(crate) fn run(case: &str, flags: &str) -> Vec<(String, RunResult)> {
    let out = out_dir(&format!("replicas-{case}"));
    let mark = format!("replicas-{case}-{}", std::process::id());
    let run = short_run(&out).flags("--duration 2s --warmup 1s").flags(flags);
    let o = run.command().env(MARK_VAR, &mark).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("is not installed") && !err.contains("no stream module"), "{case}: {err}");
    assert_none_left(&mark, Duration::from_secs(5));
    assert!(out.exists(), "{case}: no run folder: {err}");
    let folder = run_folder(&out);
    let one = folder.join("run.json").exists();
    let sections = if one { browser::ONE_ARM } else { browser::DECISION };
    browser::check_folder(&folder, sections, 4);
    let arms: Vec<(String, RunResult)> = if one {
        vec![("one".to_owned(), load(&folder))]
    } else {
        ["grpc", "rest"].iter().map(|a| ((*a).to_owned(), load(&folder.join(a)))).collect()
    };
    assert!(o.status.code().is_some(), "{case}: {err}");
    let _ = std::fs::remove_dir_all(&out);
    arms
}

/// Each replica's share of the calls in round `round` (0-based).
pub(crate) fn shares(run: &RunResult, round: usize) -> Vec<f64> {
    let set = run.rounds[round].replicas.as_ref().expect("rounds[].replicas");
    set.each.iter().map(|r| r.share.expect("every replica's counters read")).collect()
}

#[test]
fn l4_pins_grpc_to_one_replica_while_rest_spreads_them() {
    // About 30 calls in flight, so REST's pool holds about 30 connections
    // for the L4 balancer to spread; gRPC has one.
    let l4 = run("l4", &format!("{SPREAD_LOAD} --transport both --balance l4"));
    let (grpc, rest) = (&l4[0].1, &l4[1].1);
    let pinned = shares(grpc, 0);
    assert_eq!(pinned.iter().filter(|s| **s == 1.0).count(), 1, "gRPC over one connection: {pinned:?}");
    assert_eq!(pinned.iter().filter(|s| **s == 0.0).count(), 2, "{pinned:?}");
    assert_eq!(grpc.rounds[0].replicas.as_ref().unwrap().imbalance, Some(3.0));
    let spread = shares(rest, 0);
    assert!(spread.iter().all(|s| (0.20..=0.47).contains(s)), "REST's pool spreads: {spread:?}");
    for (arm, r) in &l4 {
        assert!(r.tiers.contains_key(&TierName::Balancer), "{arm}: {:?}", r.tiers.keys());
        let config = r.tiers[&TierName::Balancer].settings["config"].as_str().unwrap_or_default().to_owned();
        assert!(config.contains("stream {") && config.matches("        server 127.0.0.1:").count() == 3, "{config}");
        let sampled = &r.rounds[0].resources[&TierName::Balancer];
        assert!(sampled.samples > 0 && sampled.rss_mib_mean.is_some_and(|m| m > 0.0), "{arm}: {sampled:?}");
        // Every call answered and verified by the harness; the replicas'
        // calls add up to the downstream's.
        let round = &r.rounds[0];
        assert_eq!(round.requests.ok, round.requests.sent, "{arm}: {:?}", round.requests);
        let answered: u64 =
            round.replicas.as_ref().unwrap().each.iter().map(|e| e.requests.values().sum::<u64>()).sum();
        assert_eq!(answered, round.bytes.internal.requests, "{arm}");
    }
}

/// 300 req/s at 100 ms over three replicas: about 30 calls in flight.
const SPREAD_LOAD: &str = "--qps 300 --delay 100ms --rounds 1 --downstream-replicas 3";

#[test]
fn l7_spreads_grpc_calls_over_the_replicas() {
    let one = run("l7", &format!("{SPREAD_LOAD} --transport grpc --balance l7"));
    let each = shares(&one[0].1, 0);
    assert!(each.iter().all(|s| (0.20..=0.47).contains(s)), "gRPC l7: {each:?}");
    assert!(one[0].1.tiers.contains_key(&TierName::Balancer));
}

#[test]
fn client_side_balancing_spreads_grpc_calls_over_the_replicas() {
    let one = run("client", &format!("{SPREAD_LOAD} --transport grpc --balance client"));
    let each = shares(&one[0].1, 0);
    assert!(each.iter().all(|s| (0.20..=0.47).contains(s)), "gRPC client: {each:?}");
    assert!(!one[0].1.tiers.contains_key(&TierName::Balancer), "no balancer process");
}

#[test]
fn a_connection_age_moves_grpc_across_the_replicas_behind_l4() {
    // Aged every 300 ms (±10%), the one connection is made again about
    // twenty times over the warm-up and the round: each new one goes to the
    // next replica.
    let runs = run(
        "aged",
        "--transport grpc --qps 200 --delay 50ms --downstream-replicas 3 --balance l4 --grpc-max-connection-age 300ms",
    );
    let r = &runs[0].1;
    let each = shares(r, 0);
    assert!(each.iter().all(|s| *s > 0.1), "the age moved the calls: {each:?}");
    let set = r.rounds[0].replicas.as_ref().unwrap();
    let aged: u64 = set.each.iter().filter_map(|e| e.connections_aged).sum();
    assert!(aged >= 3, "{:?}", set.each);
    // tonic's client fails the calls it dispatched to a connection as that
    // connection's GOAWAY arrived ("operation was canceled", or the stream
    // refused: "h2 protocol error"; grpc-go would retry them on the new
    // connection): a few, never any other kind.
    let requests = &r.rounds[0].requests;
    assert!(requests.error_total() * 10 < requests.sent, "{requests:?}");
    let goaway_race = |reason: &str| reason.contains("gRPC Cancelled") || reason.contains("h2 protocol error");
    let other: Vec<_> = r.error_reasons.iter().filter(|e| !goaway_race(&e.reason)).collect();
    assert!(other.is_empty(), "{other:?}");
}

#[test]
fn the_pinned_replica_sheds_over_its_capacity_and_the_report_counts_it() {
    // About 20 calls in flight, all on one replica that takes 5 at once.
    let runs = run(
        "capacity",
        "--transport grpc --qps 200 --delay 100ms --downstream-replicas 2 --balance l4 --replica-capacity 5",
    );
    let r = &runs[0].1;
    let set = r.rounds[0].replicas.as_ref().unwrap();
    let shed: Vec<u64> = set.each.iter().map(|e| e.requests.get("shed").copied().unwrap_or(0)).collect();
    assert_eq!(shed.iter().filter(|n| **n > 0).count(), 1, "only the pinned replica sheds: {shed:?}");
    // The harness saw the shed calls as errors, and the run is not a valid
    // measurement of the transports.
    assert!(r.rounds[0].requests.error_total() > 0, "{:?} vs shed {shed:?}", r.rounds[0].requests);
    assert!(!r.is_valid(), "errors make the run invalid: {:?}", r.validity);
}

#[test]
fn replicas_and_the_balancer_are_gone_after_ctrl_c_and_after_a_kill() {
    for (sig, case) in [(nix::sys::signal::Signal::SIGINT, "int"), (nix::sys::signal::Signal::SIGKILL, "kill")] {
        let out = out_dir(&format!("replicas-signal-{case}"));
        let mut h = short_run(&out)
            .flags("--transport grpc --qps 50 --delay 20ms --warmup 500ms --duration 20s")
            .flags("--downstream-replicas 3 --balance l4")
            .start();
        let pid = h.child.id();
        let listed = h.stderr();
        assert_eq!(listed.matches("downstream pid").count(), 3, "{listed}");
        assert!(listed.contains("balancer pid"), "{listed}");
        h.sleep_until(Duration::from_secs(1));
        signal(pid as i32, sig);
        h.wait(Duration::from_secs(30));
        assert_none_left(&h.mark, Duration::from_secs(10));
        // The balancer's folder, whoever removed it (the harness, or its
        // reaper once the harness was killed).
        let prefix = format!("grpc-vs-rest-nginx-{pid}-");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let left: Vec<String> =
                entries(&std::env::temp_dir()).into_iter().filter(|e| e.starts_with(&prefix)).collect();
            if left.is_empty() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{case}: left {left:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = std::fs::remove_dir_all(&out);
    }
}

#[test]
fn a_replica_added_mid_round_gets_grpc_calls_behind_l4_only_with_a_connection_age() {
    let base =
        "--transport grpc --qps 200 --delay 50ms --duration 3s --downstream-replicas 2 --balance l4 --scale-at 1s:+1";
    let step = |runs: &[(String, RunResult)]| {
        let set = runs[0].1.rounds[0].replicas.clone().unwrap();
        assert_eq!(set.scaling.len(), 1, "{:?}", set.scaling);
        assert_eq!((set.scaling[0].added.clone(), set.scaling[0].replicas), (vec![2], 3));
        (set.scaling[0].clone(), set.each)
    };
    // Without an age the one connection stays where it is: the new replica
    // gets nothing, however long the round runs on.
    let pinned = run("scale-pinned", base);
    let (event, each) = step(&pinned);
    assert_eq!((event.first_call_seconds, event.time_to_share_seconds), (None, None), "{event:?}");
    assert!(each.iter().any(|r| r.index == 2 && r.requests.is_empty()), "{each:?}");
    assert!(event.watched_seconds > 1.5, "{event:?}");
    // With connections aged at 300 ms, the balancer sends a new one to it
    // within a turn of its round robin (three ages), and it takes its share.
    let aged = run("scale-aged", &format!("{base} --grpc-max-connection-age 300ms"));
    let (event, each) = step(&aged);
    let first = event.first_call_seconds.expect("the new replica answered calls");
    assert!(first <= 3.0 * 0.33 + 0.5, "first call after {first} s: {event:?}");
    assert!(event.time_to_share_seconds.is_some(), "{event:?}");
    assert!(each.iter().any(|r| r.index == 2 && r.share.is_some_and(|s| s > 0.05)), "{each:?}");
}
