//! Flags that cannot work are refused before anything starts: exit 2, one
//! line naming the flag, no tier started, nothing written.

use crate::common;

use std::time::Duration;

use common::*;

/// Runs the harness under `sh -c` with `prefix` (e.g. a `ulimit`) and the
/// given flags, every process marked; returns (exit code, stderr).
fn run_sh(name: &str, prefix: &str, args: &[&str]) -> (Option<i32>, String) {
    let out = out_dir(name);
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script =
        format!("{prefix} exec '{}' {} --out '{}'", env!("CARGO_BIN_EXE_harness"), quoted.join(" "), out.display());
    let mark = format!("flags-{name}-{}", std::process::id());
    let o = std::process::Command::new("sh").args(["-c", &script]).env(MARK_VAR, &mark).output().unwrap();
    assert_none_left(&mark, Duration::from_secs(5));
    let written = entries(&out);
    let _ = std::fs::remove_dir_all(&out);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(written.is_empty() || o.status.code() != Some(2), "refused but wrote {written:?}: {err}");
    (o.status.code(), err)
}

/// Asserts a refusal: exit 2, `flag` named, no tier started.
fn refused(code: Option<i32>, err: &str, flag: &str) {
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with(&format!("harness: {flag}:")), "the error does not name {flag}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(!err.contains("tiers:"), "{err}");
}

const SHORT: [&str; 6] = ["--duration", "1s", "--warmup", "0s", "--delay", "20ms"];

#[test]
fn durations_near_the_maximum_are_refused_naming_the_flag() {
    for (flag, value) in [
        ("--duration", "500000000000y"),
        ("--warmup", "500000000000y"),
        ("--timeout", "500000000000y"),
        ("--delay", "500000000000y"),
        ("--jitter", "500000000000y"),
        ("--sample-interval", "500000000000y"),
        ("--slo-p99", "500000000000y"),
    ] {
        // The short settings, the one under test replaced.
        let mut args: Vec<&str> = SHORT.chunks(2).filter(|kv| kv[0] != flag).flatten().copied().collect();
        args.extend(["--rounds", "2", flag, value]);
        let (code, err) = run_sh("maxdur", "", &args);
        refused(code, &err, flag);
    }
    // Each duration fits, but the rounds together run for years.
    let (code, err) = run_sh("maxrounds", "", &["--duration", "6d", "--rounds", "10000"]);
    refused(code, &err, "--rounds");
}

#[test]
fn a_misspelt_arm_and_a_missing_proto_are_named_before_anything_starts() {
    let mut args = SHORT.to_vec();
    args.extend(["--transport", "grcp"]);
    let (code, err) = run_sh("grcp", "", &args);
    refused(code, &err, "--transport");
    assert!(err.contains("is not an arm (did you mean grpc?)"), "{err}");
    let missing = std::env::temp_dir().join(format!("gvr-nowhere-{}", std::process::id())).join("orders.proto");
    let mut args = SHORT.to_vec();
    args.extend(["--proto", missing.to_str().unwrap(), "--call", "shop.v1.Orders/Get"]);
    let (code, err) = run_sh("noproto", "", &args);
    refused(code, &err, "--proto");
    assert!(err.contains(&format!("{}: no such file", missing.display())), "{err}");
}

#[test]
fn transport_both_with_a_fixed_caller_port_is_refused() {
    let mut args = SHORT.to_vec();
    args.extend(["--transport", "both", "--caller-port", "47311"]);
    let (code, err) = run_sh("bothport", "", &args);
    refused(code, &err, "--caller-port");
}

#[test]
fn closed_loop_connections_over_the_open_files_limit_name_connections() {
    let mut args = SHORT.to_vec();
    args.extend(["--connections", "30000"]);
    // `ulimit -n` in sh sets both limits, so the harness cannot raise its soft one.
    let (code, err) = run_sh("nofile-conn", "ulimit -n 256 &&", &args);
    refused(code, &err, "--connections");
    assert!(err.contains("30000 connections") && err.contains("ulimit -n"), "{err}");
    assert!(!err.contains("req/s"), "closed loop has no rate: {err}");
}

#[test]
fn a_sweep_is_checked_against_the_open_files_of_its_highest_step() {
    let mut args = SHORT.to_vec();
    // 20 req/s fits in 256 open files; 2000 req/s over REST does not.
    args.extend(["--transport", "rest", "--qps", "20,2000", "--quiet"]);
    let (code, err) = run_sh("nofile-sweep", "ulimit -n 256 &&", &args);
    refused(code, &err, "--qps");
    assert!(err.contains("2000 req/s") && err.contains("highest step"), "{err}");
}

#[test]
fn a_page_heavier_than_the_downstreams_work_budget_is_refused_before_any_load() {
    let mut args = SHORT.to_vec();
    let page = ["--stream-items", "10000", "--stream-item-bytes", "1048576", "--page-size", "10000"];
    args.extend(["--transport", "rest-pages", "--timeout", "60s"]);
    args.extend(page);
    let (code, err) = run_sh("heavy-page", "", &args);
    refused(code, &err, "--page-size");
    assert!(err.contains("bytes of work") && err.contains("--page-size 55 or less"), "{err}");
}
