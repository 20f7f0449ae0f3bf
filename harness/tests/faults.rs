//! Faults and bad input against the real binaries: nothing measured is lost,
//! nothing is left running.

use crate::common;

use std::time::Duration;

use common::*;
use harness::measure::histogram::decode_histogram;
use harness::result::RunStatus;
use nix::sys::signal::Signal;

const EXIT_LIMIT: Duration = Duration::from_secs(60);

#[test]
fn downstream_killed_in_round_2_of_3_keeps_round_1_and_names_the_tier() {
    let out = out_dir("kill-downstream");
    // The tiers named at the start serve every round (--reuse-tiers).
    let mut h = short_run(&out).flags("--qps 50 --duration 2s --rounds 3 --reuse-tiers --delay 20ms").start();
    // Round 2 runs from about 2.1 s to 4.1 s after the tiers are named.
    h.sleep_until(Duration::from_millis(3100));
    signal(h.downstream, Signal::SIGKILL);
    assert_eq!(h.wait(EXIT_LIMIT), Some(1), "{}", h.stderr());
    assert_none_left(&h.mark, Duration::from_secs(5));

    let run = load(&run_folder(&out));
    assert_eq!(run.status, RunStatus::Aborted);
    let reason = run.status_reason.as_deref().unwrap();
    assert!(reason.contains("downstream") && reason.contains(&h.downstream.to_string()), "{reason}");
    assert!(reason.contains("signal: 9") || reason.contains("SIGKILL"), "exit status missing: {reason}");
    assert!(reason.contains("exited at t="), "{reason}");
    assert_eq!(run.rounds.len(), 2, "round 3 never started");
    let (r1, r2) = (&run.rounds[0], &run.rounds[1]);
    assert!(r1.complete && r1.requests.ok == r1.requests.sent && r1.requests.sent >= 99, "{:?}", r1.requests);
    assert!(!r2.complete);
    // Killed about 1 s into round 2 and detected within a second: the partial window is short.
    assert!(r2.window_seconds < 1.9, "round 2 ran on for {} s after the kill", r2.window_seconds);
    assert!(r2.requests.error_total() > 0, "errors after the kill were not counted: {:?}", r2.requests);
    assert!(run.validity.iter().any(|v| v.contains("aborted")));
    let report = std::fs::read_to_string(run_folder(&out).join("report.md")).unwrap();
    assert!(report.contains("**Run aborted**") && report.contains("round 2 (partial)"), "{report}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn with_quiet_a_dying_tier_is_still_reported_on_stderr() {
    let out = out_dir("quiet-kill");
    let mark = format!("quiet-kill-{}", std::process::id());
    let child = short_run(&out)
        .flags("--qps 50 --duration 20s --delay 20ms")
        .command()
        .env(MARK_VAR, &mark)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let downstream = marked_tier(&mark, "downstream", EXIT_LIMIT);
    // Let the caller start and the load begin.
    marked_tier(&mark, "caller", EXIT_LIMIT);
    std::thread::sleep(Duration::from_millis(500));
    signal(downstream, Signal::SIGKILL);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(o.stdout.is_empty(), "--quiet printed a summary");
    assert!(err.contains("harness: run aborted:") && err.contains(&format!("pid {downstream}")), "{err}");
    assert_none_left(&mark, Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn caller_killed_mid_round_names_the_caller() {
    let out = out_dir("kill-caller");
    let mut h = short_run(&out).flags("--qps 50 --duration 3s --delay 20ms").start();
    h.sleep_until(Duration::from_millis(1500));
    signal(h.caller, Signal::SIGKILL);
    assert_eq!(h.wait(EXIT_LIMIT), Some(1));
    assert_none_left(&h.mark, Duration::from_secs(5));
    let run = load(&run_folder(&out));
    assert_eq!(run.status, RunStatus::Aborted);
    let reason = run.status_reason.as_deref().unwrap();
    assert!(reason.contains("the caller") && reason.contains(&h.caller.to_string()), "{reason}");
    let r = &run.rounds[0];
    assert!(!r.complete && r.requests.ok > 0);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_frozen_downstream_shows_in_latency_and_timeouts_and_the_schedule_keeps_its_rate() {
    let out = out_dir("sigstop");
    let mut h = short_run(&out).flags("--qps 50 --duration 5s --delay 20ms --timeout 1s").start();
    h.sleep_until(Duration::from_millis(1500));
    signal(h.downstream, Signal::SIGSTOP);
    std::thread::sleep(Duration::from_secs(2));
    signal(h.downstream, Signal::SIGCONT);
    assert_eq!(h.wait(EXIT_LIMIT), Some(0), "{}", h.stderr());
    assert_none_left(&h.mark, Duration::from_secs(5));
    let run = load(&run_folder(&out));
    assert_eq!(run.status, RunStatus::Complete);
    let r = &run.rounds[0];
    // Open loop: the stall did not slow the sending.
    assert!(r.requests.sent + r.requests.errors.get("dropped").copied().unwrap_or(0) == 250, "{:?}", r.requests);
    assert!(r.throughput.send_rate > 45.0, "send rate fell to {}", r.throughput.send_rate);
    // Requests waiting past --timeout 1s are timeouts (the harness's own, or the caller's 504).
    let timeouts = r.requests.errors.get("timeout").copied().unwrap_or(0)
        + r.requests.errors.get("http_504").copied().unwrap_or(0);
    assert!(timeouts >= 20, "{:?}", r.requests.errors);
    // Each error class says why, in run.json and in the report: the
    // harness's own timeout, or the caller's 504 naming the downstream.
    for class in r.requests.errors.keys() {
        assert!(run.error_reasons.iter().any(|e| &e.class == class), "{class}: {:?}", run.error_reasons);
    }
    for e in run.error_reasons.iter().filter(|e| e.class == "timeout" || e.class == "http_504") {
        assert!(e.reason.contains("within"), "{e:?}");
    }
    let report = std::fs::read_to_string(run_folder(&out).join("report.md")).unwrap();
    assert!(report.contains("## Errors by reason") && report.contains(" within "), "{report}");
    // Requests that came back after the resume carry the stall in their corrected latency.
    let corrected = decode_histogram(&r.histograms["corrected"]).unwrap();
    assert!(corrected.max() >= 500_000, "max corrected latency {} µs", corrected.max());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_tier_that_cannot_start_is_named_with_its_stderr_and_nothing_is_left() {
    let out = out_dir("nostart");
    // 192.0.2.1 (TEST-NET-1) is not an address of this machine: binding fails.
    let o = harness_cmd(&["--bind", "192.0.2.1", "--out", out.to_str().unwrap()])
        .env(MARK_VAR, "nostart-a")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("the downstream exited before it was ready") && err.contains("192.0.2.1"), "{err}");
    assert_none_left("nostart-a", Duration::from_secs(5));

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let o = harness_cmd(&["--caller-port", &port, "--out", out.to_str().unwrap()])
        .env(MARK_VAR, "nostart-b")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("the caller exited before it was ready") && err.contains("front listener"), "{err}");
    // The downstream that had started is stopped too.
    assert_none_left("nostart-b", Duration::from_secs(5));
    assert!(entries(&out).is_empty(), "a failed start left files: {:?}", entries(&out));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn ctrl_c_drains_writes_an_interrupted_report_and_exits_130() {
    let out = out_dir("sigint");
    let mut h = short_run(&out).flags("--qps 50 --duration 3s --rounds 2 --delay 20ms").start();
    h.sleep_until(Duration::from_millis(1200));
    signal(h.child.id() as i32, Signal::SIGINT);
    assert_eq!(h.wait(EXIT_LIMIT), Some(130), "{}", h.stderr());
    assert_none_left(&h.mark, Duration::from_secs(5));
    let run = load(&run_folder(&out));
    assert_eq!(run.status, RunStatus::Interrupted);
    assert_eq!(run.rounds.len(), 1);
    let r = &run.rounds[0];
    assert!(!r.complete && r.requests.ok > 20, "{:?}", r.requests);
    // Drained: everything sent was answered.
    assert_eq!(r.requests.ok, r.requests.sent, "{:?}", r.requests);
    assert!(!run.samples.is_empty());
    let report = std::fs::read_to_string(run_folder(&out).join("report.md")).unwrap();
    assert!(report.contains("**Run interrupted**"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn sigterm_is_treated_like_ctrl_c() {
    let out = out_dir("sigterm");
    let mut h = short_run(&out).flags("--qps 50 --duration 3s --rounds 2 --delay 20ms").start();
    h.sleep_until(Duration::from_millis(1200));
    signal(h.child.id() as i32, Signal::SIGTERM);
    assert_eq!(h.wait(EXIT_LIMIT), Some(130), "{}", h.stderr());
    assert_none_left(&h.mark, Duration::from_secs(5));
    assert!(!entries(&out).iter().any(|e| e.starts_with(".tmp-")), "{:?}", entries(&out));
    let run = load(&run_folder(&out));
    assert_eq!(run.status, RunStatus::Interrupted);
    assert!(run.status_reason.as_deref().unwrap().contains("SIGTERM"), "{:?}", run.status_reason);
    assert_eq!(run.rounds.len(), 1);
    let r = &run.rounds[0];
    assert!(!r.complete && r.requests.ok > 20, "{:?}", r.requests);
    // Drained like after Ctrl-C: everything sent was answered.
    assert_eq!(r.requests.ok, r.requests.sent, "{:?}", r.requests);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_second_ctrl_c_cuts_the_drain_and_keeps_the_finished_rounds() {
    let out = out_dir("sigint2");
    // The tiers named at the start serve every round (--reuse-tiers).
    let mut h =
        short_run(&out).flags("--qps 50 --duration 1s --rounds 3 --reuse-tiers --delay 20ms --timeout 60s").start();
    // Round 1 runs from about 0.1 s to 1.1 s after the tiers are named. A
    // frozen downstream in round 2 holds every wait that is left: its
    // requests, its /stats, its own drain.
    h.sleep_until(Duration::from_millis(1600));
    signal(h.downstream, Signal::SIGSTOP);
    let pid = h.child.id() as i32;
    h.sleep_until(Duration::from_millis(1900));
    signal(pid, Signal::SIGINT);
    h.sleep_until(Duration::from_millis(2200));
    signal(pid, Signal::SIGINT);
    assert_eq!(h.wait(EXIT_LIMIT), Some(130), "{}", h.stderr());
    assert_none_left(&h.mark, Duration::from_secs(5));
    assert!(!entries(&out).iter().any(|e| e.starts_with(".tmp-")), "left a temporary folder: {:?}", entries(&out));
    let run = load(&run_folder(&out));
    assert_eq!(run.status, RunStatus::Interrupted);
    let reason = run.status_reason.as_deref().unwrap();
    assert!(reason.contains("second signal cut"), "{reason}");
    // The finished round is whole; the one it was in is partial, its
    // frozen requests left out.
    let r1 = &run.rounds[0];
    assert!(r1.complete && r1.requests.ok == r1.requests.sent && r1.requests.sent >= 49, "{:?}", r1.requests);
    assert_eq!(run.rounds.len(), 2);
    assert!(!run.rounds[1].complete);
    // The requests the cut caught (their tiers stopped under them) are left
    // out: not errors, not due, so the round is not called short of its rate.
    let r2 = &run.rounds[1];
    assert!(r2.requests.errors.is_empty(), "{:?}", r2.requests);
    assert_eq!(r2.requests.scheduled, r2.requests.sent, "{:?}", r2.requests);
    assert!(!run.validity.iter().any(|v| v.contains("did not keep up")), "{:?}", run.validity);
    let report = std::fs::read_to_string(run_folder(&out).join("report.md")).unwrap();
    assert!(report.contains("**Run interrupted**") && report.contains("round 2 (partial)"), "{report}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn ctrl_c_during_the_final_drain_cuts_it_short_and_marks_the_run_interrupted() {
    let out = out_dir("sigint-drain");
    // The last requests are due by about 1.1 s after the tiers are named and
    // answered 5 s later: the run drains from about 1.1 s to 6.1 s.
    let mut h = short_run(&out).flags("--qps 20 --duration 1s --delay 5s --timeout 30s").start();
    h.sleep_until(Duration::from_millis(3000));
    signal(h.child.id() as i32, Signal::SIGINT);
    assert_eq!(h.wait(EXIT_LIMIT), Some(130), "{}", h.stderr());
    assert_none_left(&h.mark, Duration::from_secs(5));
    let run = load(&run_folder(&out));
    assert_eq!(run.status, RunStatus::Interrupted);
    // The round's schedule had ended; its requests got the stop grace and were answered.
    let r = &run.rounds[0];
    assert!(r.complete, "{r:?}");
    assert_eq!((r.requests.sent, r.requests.ok), (20, 20), "{:?}", r.requests);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn sigkill_of_the_harness_takes_the_tiers_with_it() {
    let out = out_dir("sigkill");
    let mut h = short_run(&out).flags("--qps 20 --duration 20s --delay 20ms").start();
    h.sleep_until(Duration::from_millis(500));
    assert!(alive(h.downstream) && alive(h.caller));
    signal(h.child.id() as i32, Signal::SIGKILL);
    let _ = h.child.wait();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while (alive(h.downstream) || alive(h.caller)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(h.downstream), "downstream {} outlived the harness", h.downstream);
    assert!(!alive(h.caller), "caller {} outlived the harness", h.caller);
    assert_none_left(&h.mark, Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn over_max_in_flight_requests_are_dropped_and_the_schedule_keeps_time() {
    let out = out_dir("maxinflight");
    let mut h = short_run(&out).flags("--qps 100 --duration 2s --delay 200ms --max-in-flight 5").start();
    assert_eq!(h.wait(EXIT_LIMIT), Some(0));
    assert_none_left(&h.mark, Duration::from_secs(5));
    let run = load(&run_folder(&out));
    let r = &run.rounds[0];
    let dropped = r.requests.errors.get("dropped").copied().unwrap_or(0);
    // About 20 would be in flight; only 5 may be: most requests are dropped, none delayed.
    assert!(dropped > 100, "{:?}", r.requests);
    assert_eq!(r.requests.sent + dropped, 200, "{:?}", r.requests);
    assert!(r.latency.service.as_ref().unwrap().max_ms < 1000.0, "sent requests queued behind the cap");
    assert!(r.window_seconds < 2.5, "the schedule fell behind: {} s", r.window_seconds);
    assert!(run.validity.iter().any(|v| v.contains("dropped")), "{:?}", run.validity);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_connection_count_over_the_open_files_limit_is_refused_before_starting() {
    let out = out_dir("nofile");
    // `ulimit -n` in sh sets both limits, so the harness cannot raise its soft one.
    let script = format!(
        "ulimit -n 256 && exec '{}' --transport rest --qps 2000 --out '{}'",
        env!("CARGO_BIN_EXE_harness"),
        out.display()
    );
    let o = std::process::Command::new("sh").args(["-c", &script]).env(MARK_VAR, "nofile").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("open files") && err.contains("256") && err.contains("ulimit -n"), "{err}");
    assert!(!err.contains("tiers:"));
    assert_none_left("nofile", Duration::from_secs(2));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_second_ctrl_c_during_streams_keeps_the_streams_measured_items() {
    let out = out_dir("sigint2-streams");
    // Streams of 2 s (100 items 20 ms apart), one started every 100 ms: at
    // the second signal none has ended, and a dozen are delivering items.
    let flags = "--transport grpc-stream --stream-items 100 --stream-interval 20ms --qps 10 --duration 4s \
                 --rounds 1 --timeout 30s";
    let mut h = short_run(&out).flags(flags).start();
    h.sleep_until(Duration::from_millis(1300));
    let pid = h.child.id() as i32;
    signal(pid, Signal::SIGINT);
    h.sleep_until(Duration::from_millis(1500));
    signal(pid, Signal::SIGINT);
    assert_eq!(h.wait(EXIT_LIMIT), Some(130), "{}", h.stderr());
    assert_none_left(&h.mark, Duration::from_secs(5));
    let run = load(&run_folder(&out));
    assert_eq!(run.status, RunStatus::Interrupted);
    let r = &run.rounds[0];
    assert!(!r.complete);
    // The streams in flight were sent and delivered items: kept, not errors.
    assert!(r.requests.sent >= 5 && r.requests.scheduled >= r.requests.sent, "{:?}", r.requests);
    assert!(r.requests.errors.is_empty(), "{:?}", r.requests);
    let stream = r.stream.as_ref().expect("the streams' figures");
    assert!(stream.items >= 20 && stream.item_delay.is_some(), "{stream:?}");
    assert!(!run.validity.iter().any(|v| v.contains("did not keep up")), "{:?}", run.validity);
    let _ = std::fs::remove_dir_all(&out);
}
