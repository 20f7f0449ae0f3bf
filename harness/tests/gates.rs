//! CI gates end to end: each gate with its exit code (99 breached, 0 held),
//! one stderr line per breach, and bad gate text refused with exit 2 naming
//! the token before anything starts.

use crate::common;

use common::*;

/// A short run, warmed up for 200 ms, with `extra` flags: its exit code and stderr.
fn run(name: &str, extra: &[&str]) -> (Option<i32>, String) {
    let out = out_dir(name);
    let o = short_run(&out).flags("--warmup 200ms").args(extra).output();
    let _ = std::fs::remove_dir_all(&out);
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn breach_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("harness: gate breached: ")).collect()
}

#[test]
fn a_latency_gate_fails_with_99_when_breached_and_passes_when_held() {
    // Every request waits at least the 20 ms delay: a p99 over 1 ms always holds.
    let (code, stderr) = run("gate-p99-breached", &["--fail-if", "p99>1ms"]);
    assert_eq!(code, Some(99), "{stderr}");
    let lines = breach_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("harness: gate breached: p99>1ms: gRPC p99 = "), "{stderr}");
    let (code, stderr) = run("gate-p99-held", &["--fail-if", "p99>60s", "--fail-if", "errors > 1000"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(breach_lines(&stderr).is_empty());
}

#[test]
fn a_gate_relative_to_the_other_arm_fails_with_99() {
    let (code, stderr) = run(
        "gate-relative",
        &[
            "--transport",
            "both",
            "--rounds",
            "1",
            "--fail-if",
            "rest.internal.response_wire_bytes > 1.2 * grpc",
            "--fail-if",
            "grpc.internal.response_wire_bytes > 1.2 * rest",
        ],
    );
    // REST's JSON is about twice gRPC's protobuf: only the first gate is breached.
    assert_eq!(code, Some(99), "{stderr}");
    let lines = breach_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("rest.internal.response_wire_bytes > 1.2 * grpc: REST "), "{stderr}");
}

#[test]
fn fail_on_invalid_fails_an_invalid_run_with_99() {
    // One request in flight at most, one due every 50 ms, each served in 20 to
    // 220 ms: requests are dropped, so the run is not valid.
    let (code, stderr) = run("gate-invalid", &["--max-in-flight", "1", "--jitter", "200ms", "--fail-on-invalid"]);
    assert_eq!(code, Some(99), "{stderr}");
    let lines = breach_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("--fail-on-invalid: gRPC is not a valid measurement: "), "{stderr}");
    // Without the flag the same run exits 0: validity alone is not a gate.
    let (code, _) = run("gate-invalid-off", &["--max-in-flight", "1", "--jitter", "200ms"]);
    assert_eq!(code, Some(0));
}

#[test]
fn bad_gate_text_is_exit_2_naming_the_token() {
    for (gate, token) in [
        ("p99 => 5ms", "\"=\""),
        ("p98>5ms", "\"p98\""),
        ("p99>5parsecs", "\"5parsecs\""),
        ("rest.p99 > 1.2 * grpc", "\"rest\""),
    ] {
        let out = out_dir("gate-bad");
        let o = harness_cmd(&["--fail-if", gate, "--out", out.to_str().unwrap()]).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{gate}: {stderr}");
        assert!(stderr.contains(&format!("bad token {token}")), "{gate}: {stderr}");
        // Refused before anything ran: no run folder.
        assert!(entries(&out).iter().all(|e| e.starts_with('.')), "{:?}", entries(&out));
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// Gates on saved runs: `harness compare` evaluates them like a run does
/// (99 breached, 0 held, 2 for bad text), here on a committed `both` folder.
#[test]
fn compare_evaluates_gates_on_saved_runs() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pre-layout-both");
    let compare = |gates: &[&str]| {
        let mut args = vec!["compare", fixture.to_str().unwrap()];
        args.extend_from_slice(gates);
        let o = harness_cmd(&args).output().unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, stderr) = compare(&["--fail-if", "rest.internal.response_wire_bytes > 1.2 * grpc"]);
    assert_eq!(code, Some(99), "{stderr}");
    let lines = breach_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("rest.internal.response_wire_bytes > 1.2 * grpc: REST "), "{stderr}");
    let (code, stderr) = compare(&["--fail-if", "grpc.internal.response_wire_bytes > 1.2 * rest"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(breach_lines(&stderr).is_empty());
    let (code, stderr) = compare(&["--fail-if", "p98>1ms"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("\"p98\""), "{stderr}");
}
