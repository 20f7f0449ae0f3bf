//! Tiers started as a command (`--downstream-cmd`, `--caller-cmd`) and
//! measured from outside: our own binaries given as foreign commands (the
//! simplest commands that speak the contract), and small `sh -c` tiers that
//! misbehave: one never ready, one that dies mid-round, one that ignores
//! SIGTERM. Everything on 127.0.0.1, every run bounded in time, and no
//! process left behind.

use std::time::Duration;

use harness::result::TierName;

use crate::common::{MARK_VAR, assert_none_left, load, out_dir, run_folder, run_folders, short_run};

/// The harness executable as a foreign command in a tier's role.
fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_harness")
}

/// Our downstream as a foreign command (no admin listener: measured from outside).
fn downstream_cmd() -> String {
    format!("{} __tier downstream --grpc-addr {{grpc_addr}} --rest-addr {{rest_addr}} --delay {{delay_ms}}ms", exe())
}

/// Runs `run` with a mark every process it starts inherits, and proves
/// none is left once it has ended.
fn run_marked(run: &crate::common::ShortRun, name: &str) -> std::process::Output {
    let mark = format!("foreign-{name}-{}", std::process::id());
    let out = run.command().env(MARK_VAR, &mark).output().unwrap();
    assert_none_left(&mark, Duration::from_secs(5));
    out
}

fn text(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_foreign_downstream_is_measured_from_outside_on_both_arms() {
    let dir = out_dir("foreign-downstream");
    let run = short_run(&dir)
        .args(&["--transport", "both", "--rounds", "2", "--qps", "40", "--duration", "2s", "--warmup", "1s"])
        .args(&["--downstream-cmd", &downstream_cmd()]);
    let out = run_marked(&run, "downstream");
    assert!(out.status.success(), "{}", text(&out));
    let folder = run_folder(&dir);
    for arm in ["grpc", "rest"] {
        let run = load(&folder.join(arm));
        let settings = &run.tiers[&TierName::Downstream].settings["foreign"];
        assert!(settings["command"].as_str().is_some_and(|c| c.contains("__tier downstream")), "{settings}");
        assert!(settings["not_measured"].as_array().is_some_and(|a| !a.is_empty()), "{settings}");
        for round in &run.rounds {
            assert_eq!((round.requests.ok, round.requests.error_total()), (round.requests.sent, 0), "{arm}");
            let d = &round.resources[&TierName::Downstream];
            assert!(d.cpu_seconds.is_some_and(|c| c > 0.0), "{arm}: {d:?}");
            assert!(d.rss_mib_peak.is_some_and(|r| r > 1.0), "{arm}: {d:?}");
            let internal = &round.bytes.internal;
            assert_eq!(internal.requests, round.requests.ok, "{arm}: the caller's client counted every call");
            // Our caller's gRPC client counts its socket; reqwest cannot.
            assert_eq!(internal.request_wire_bytes.is_some(), arm == "grpc", "{arm}: {internal:?}");
            assert!(round.bytes.relay.is_none());
        }
    }
}

#[test]
fn between_two_foreign_tiers_a_relay_counts_the_hop_as_the_tiers_do() {
    // Both tiers are ours, given as commands that also serve /stats: the
    // relay's count (from outside) and theirs must agree.
    let dir = out_dir("foreign-relay");
    let downstream = format!("{} --admin-addr {{admin_addr}}", downstream_cmd());
    let caller = format!(
        "{} __tier caller --listen {{listen}} --admin-addr {{admin_addr}} --transport {{transport}} \
         --downstream-grpc {{downstream_grpc}} --downstream-rest {{downstream_rest}}",
        exe()
    );
    // A 1 ms service time: nothing is in flight at a round's boundaries.
    let run = short_run(&dir)
        .args(&["--transport", "both", "--rounds", "2", "--qps", "50", "--duration", "2s", "--delay", "1ms"])
        .args(&["--downstream-cmd", &downstream, "--caller-cmd", &caller]);
    let out = run_marked(&run, "relay");
    assert!(out.status.success(), "{}", text(&out));
    let folder = run_folder(&dir);
    for arm in ["grpc", "rest"] {
        let run = load(&folder.join(arm));
        assert!(run.tiers.contains_key(&TierName::Link), "the relay runs as a process of its own");
        for round in &run.rounds {
            assert_eq!(round.requests.ok, round.requests.sent, "{arm}");
            let (tier, relay) = (&round.bytes.internal, round.bytes.relay.as_ref().expect("the relay's count"));
            for (theirs, outside) in [
                (tier.request_wire_bytes, relay.request_wire_bytes),
                (tier.response_wire_bytes, relay.response_wire_bytes),
            ] {
                let (theirs, outside) = (theirs.unwrap() as f64, outside.unwrap() as f64);
                assert!(theirs > 0.0 && (outside - theirs).abs() <= theirs * 0.001, "{arm}: {tier:?} vs {relay:?}");
            }
        }
    }
}

#[test]
fn a_command_that_never_gets_ready_is_named_with_its_output() {
    let dir = out_dir("foreign-never");
    let never = "sh -c 'echo warming the cache for $0 $1 >&2; exec sleep 30' {grpc_addr} {rest_addr}";
    let run = short_run(&dir).args(&["--downstream-cmd", never, "--foreign-ready-timeout", "1s"]);
    let out = run_marked(&run, "never");
    let err = text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the downstream command `sh -c"), "{err}");
    assert!(err.contains("was not ready within 1s") && err.contains("warming the cache for 127.0.0.1:"), "{err}");
}

#[test]
fn a_command_that_dies_mid_round_ends_the_run_with_the_finished_rounds_kept() {
    let dir = out_dir("foreign-dies");
    let flag = dir.with_extension("started");
    let _ = std::fs::remove_file(&flag);
    // The first process serves; the next one (the second round's) dies a
    // second after it starts.
    let dies = format!(
        "sh -c 'if [ -e {f} ]; then (sleep 1; echo out of memory, giving up >&2; kill -9 $$) & fi; touch {f}; \
         exec \"$0\" __tier downstream --grpc-addr $1 --rest-addr $2 --delay 5ms' {exe} {{grpc_addr}} {{rest_addr}}",
        f = flag.display(),
        exe = exe()
    );
    let run = short_run(&dir).args(&["--rounds", "2", "--duration", "3s", "--downstream-cmd", &dies]);
    let out = run_marked(&run, "dies");
    let _ = std::fs::remove_file(&flag);
    let err = text(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    let run = load(&run_folders(&dir)[0]);
    let reason = run.status_reason.clone().unwrap_or_default();
    assert!(reason.contains("downstream (`") && reason.contains("out of memory, giving up"), "{reason}");
    assert!(run.rounds.iter().any(|r| r.complete && r.index == 1), "the first round is kept: {reason}");
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_and_named() {
    let dir = out_dir("foreign-stubborn");
    // The shell ignores SIGTERM (its downstream does not) and keeps going.
    let stubborn = format!(
        "sh -c 'trap \"\" TERM; \"$0\" __tier downstream --grpc-addr $1 --rest-addr $2 --delay 5ms & \
         while :; do sleep 0.2; done' {} {{grpc_addr}} {{rest_addr}}",
        exe()
    );
    let run = short_run(&dir).args(&["--downstream-cmd", &stubborn]);
    let out = run_marked(&run, "stubborn");
    let err = text(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("ignored SIGTERM") && err.contains("and was killed"), "{err}");
    let run = load(&run_folder(&dir));
    let stops = &run.tiers[&TierName::Downstream].settings["foreign"]["stops"];
    assert!(stops.as_array().is_some_and(|s| s.len() == 1), "{stops}");
}
