//! The real harness binary end to end: short runs of the whole topology with
//! short delays, checked through the files it writes.

use crate::common;

use std::time::Duration;

use common::*;
use harness::measure::histogram::decode_histogram;
use harness::result::{RunStatus, TierName};

fn harness(args: &[&str]) -> std::process::Command {
    harness_cmd(args)
}

#[test]
fn a_short_run_sends_qps_times_duration_and_writes_every_file() {
    for transport in ["grpc", "rest"] {
        let out = out_dir(&format!("basic-{transport}"));
        let output = short_run(&out)
            .without("--quiet")
            .args(&["--transport", transport])
            .flags("--qps 200 --duration 2s --warmup 500ms --delay 30ms")
            .command()
            .env_remove(service::WORKERS_ENV)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{stderr}");
        // The dev profile (what `cargo run -p harness` builds) is optimised:
        // its figures are valid and nothing warns.
        assert!(!stderr.contains("without optimisation"), "{stderr}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains("round 1:") && stdout.contains("written to"), "{stdout}");

        short_run_holds(&run_folder(&out), transport);
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// What a 2 s run at 200 req/s with a 30 ms delay wrote: every file, every
/// request answered once, tiers on tokio's default runtime, the internal
/// hop counted, kernel-stamped answers, and a report that says so.
fn short_run_holds(folder: &std::path::Path, transport: &str) {
    let name = folder.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.ends_with(&format!("-{transport}-200qps")), "{name}");
    for file in ["run.json", "report.md", "latency.hgrm"] {
        assert!(folder.join(file).is_file(), "{file} missing in {name}");
    }
    let run = load(folder);
    assert_eq!(run.status, RunStatus::Complete);
    // The warm-up's first half ramps up to the rate, and the report says so.
    assert_eq!(run.config.load.warmup_ramp, Duration::from_millis(250));
    let report = std::fs::read_to_string(folder.join("report.md")).unwrap();
    assert!(report.contains("| warm-up | 500ms, the rate rising from zero over the first 250ms |"), "{report}");
    assert_eq!(run.environment.build_profile, "debug");
    assert_eq!(run.environment.opt_level.as_deref(), Some("2"));
    // Nothing wrong with the run itself; the machine may be busy with the
    // other tests of this file, so a generator that fell behind its
    // schedule (send lag over 10 ms) is the one note allowed.
    assert!(validity_apart_from_the_machine(&run).is_empty(), "{:?}", run.validity);
    let r = &run.rounds[0];
    // qps × duration = 400, within 1%.
    assert!((396..=404).contains(&r.requests.sent), "sent {}", r.requests.sent);
    assert_eq!(r.requests.error_total(), 0, "{:?}", r.requests.errors);
    assert!(run.error_reasons.is_empty(), "{:?}", run.error_reasons);
    assert_eq!(r.requests.ok, r.requests.sent);
    let corrected = r.latency.corrected.as_ref().unwrap();
    assert!(corrected.min_ms >= 30.0, "min latency {} below the 30 ms delay", corrected.min_ms);
    assert!(r.latency.downstream_hop.as_ref().unwrap().min_ms >= 30.0);
    tiers_served_on_the_default_runtime(&run);
    // The machine's steal over the round is measured (a share, never a default).
    let steal = r.steal_percent.expect("steal measured from /proc/stat");
    assert!((0.0..=100.0).contains(&steal), "{steal}");
    assert!(report.contains("Steal: the hypervisor's steal was"), "{report}");
    let hop = &r.bytes.internal;
    assert_eq!(hop.listener, transport);
    // The downstream counts calls it finished inside the window; the round
    // counts the requests due in it. The two differ by the in-flight tails.
    assert!(
        hop.requests.abs_diff(r.requests.ok) <= r.requests.ok / 20 + 5,
        "the downstream finished {} calls in a round that answered {}",
        hop.requests,
        r.requests.ok
    );
    assert!(hop.response_wire_bytes_per_request.unwrap() > hop.response_message_bytes_per_request.unwrap());
    let hgrm = std::fs::read_to_string(folder.join("latency.hgrm")).unwrap();
    assert!(hgrm.contains("#[Max     ="), "{hgrm}");
    let report = std::fs::read_to_string(folder.join("report.md")).unwrap();
    assert!(!report.contains("WARNING"), "{report}");
    assert!(report.contains("| build profile | debug (opt-level 2) |"), "{report}");
    assert!(report.contains("Instrument: every latency is recorded to 4 significant digits"), "{report}");
    // Requests leave within the default precision of their due times, and
    // the report states it, the window, and the send lag measured.
    assert_eq!(run.config.load.send_precision, Duration::from_millis(1));
    assert!(report.contains("| send precision (--send-precision) | 1ms |"), "{report}");
    assert!(report.contains("Requests leave within 1ms of their due times (`--send-precision`)"), "{report}");
    let lag = r.latency.send_lag.as_ref().expect("send lag measured");
    assert!(report.contains(&format!("Send lag p99: {:.3} ms in the worst round", lag.p99_ms)), "{report}");
    // Every answer's arrival is the kernel's receive stamp, and the report says so.
    assert_eq!(r.latency.kernel_stamped, Some(r.requests.ok));
    let stamped = format!(
        "(SO_TIMESTAMPNS) of an answer's last packet, not at the clock after the read (which adds this process's wake-up), for {} of {} successful answers",
        r.requests.ok, r.requests.ok
    );
    assert!(report.contains(&stamped), "{report}");
    assert!(report.contains("| latency p99 (ms) |"));
    assert!(report.contains("| harness memory mean (MiB) |"), "{report}");
    // The generator's series covers the drain: its last reading has
    // nothing in flight and every answer counted.
    let last = run.load_samples.last().unwrap();
    assert_eq!((last.in_flight, last.ok), (0, last.sent), "{last:?}");
    assert!(last.t_seconds >= r.started_seconds + r.window_seconds);
}

fn tiers_served_on_the_default_runtime(run: &harness::result::RunResult) {
    let r = &run.rounds[0];
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    for tier in [TierName::Caller, TierName::Downstream] {
        // Each tier states the runtime it served on: tokio's default.
        let s = &run.tiers[&tier].settings;
        assert_eq!(s["runtime"], "tokio multi-thread", "{tier}: {s}");
        assert_eq!(s["runtime_workers"], cores, "{tier}: {s}");
        assert_eq!(s["runtime_workers_source"], "tokio's default: one per core", "{tier}: {s}");
        // Huge pages off, as the tier's kernel says (service::huge_pages).
        assert_eq!(s["transparent_huge_pages"], "off (PR_SET_THP_DISABLE)", "{tier}: {s}");
        let res = &r.resources[&tier];
        assert!(res.rss_mib_peak.unwrap() > 0.0, "{tier} RSS");
        assert!(res.cpu_seconds.unwrap() > 0.0, "{tier} CPU");
    }
}

#[test]
fn a_worker_count_set_in_the_environment_is_recorded_in_each_tier_settings() {
    // tokio reads TOKIO_WORKER_THREADS, which the tiers inherit: it changes
    // what is measured, so run.json and the report must say so.
    let out = out_dir("worker-env");
    let output = short_run(&out)
        .without("--quiet")
        .flags("--transport grpc --qps 50 --delay 10ms")
        .command()
        .env(service::WORKERS_ENV, "1")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let folder = run_folder(&out);
    let run = load(&folder);
    for tier in [TierName::Caller, TierName::Downstream] {
        let s = &run.tiers[&tier].settings;
        assert_eq!(s["runtime_workers"], 1, "{tier}: {s}");
        assert!(
            s["runtime_workers_source"].as_str().unwrap().starts_with("TOKIO_WORKER_THREADS=1 in the environment"),
            "{tier}: {s}"
        );
    }
    let report = std::fs::read_to_string(folder.join("report.md")).unwrap();
    assert!(report.contains("TOKIO_WORKER_THREADS=1 in the environment"), "{report}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn huge_pages_machine_runs_the_tiers_as_the_machine_is_set_and_says_so() {
    // The harness turns huge pages off for itself and so for the tiers it
    // starts; `--huge-pages machine` has each tier undo that, as its kernel
    // then reports, and the run and the report record the setting.
    let out = out_dir("huge-pages");
    let output = short_run(&out).flags("--transport grpc --qps 50 --delay 10ms --huge-pages machine").output();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let folder = run_folder(&out);
    let run = load(&folder);
    assert_eq!(run.config.deploy.huge_pages, harness::config::HugePages::Machine);
    for tier in [TierName::Caller, TierName::Downstream] {
        let s = &run.tiers[&tier].settings;
        assert_eq!(s["transparent_huge_pages"], "the machine's mode", "{tier}: {s}");
    }
    let report = std::fs::read_to_string(folder.join("report.md")).unwrap();
    assert!(report.contains("| transparent huge pages in the tiers (--huge-pages) | the machine's mode"), "{report}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_stalled_tier_shows_in_corrected_latency_but_not_in_service_time() {
    // With 4 front connections (wrk2-style), requests due while the downstream
    // is frozen wait for a connection: that wait is latency the user sees, and
    // it must appear in the corrected histogram but not in service time.
    let out = out_dir("stall");
    let mut h = short_run(&out).flags("--transport grpc --qps 50 --duration 5s --delay 20ms --connections 4").start();
    h.sleep_until(Duration::from_millis(1500));
    signal(h.downstream, nix::sys::signal::Signal::SIGSTOP);
    std::thread::sleep(Duration::from_millis(1000));
    signal(h.downstream, nix::sys::signal::Signal::SIGCONT);
    assert_eq!(h.wait(Duration::from_secs(60)), Some(0), "{}", h.stderr());
    assert_none_left(&h.mark, Duration::from_secs(5));

    let run = load(&run_folder(&out));
    let r = &run.rounds[0];
    assert_eq!(r.requests.error_total(), 0, "{:?}", r.requests.errors);
    let corrected = decode_histogram(&r.histograms["corrected"]).unwrap();
    let service = decode_histogram(&r.histograms["service"]).unwrap();
    let over = |h: &hdrhistogram::Histogram<u64>| h.count_between(400_000, u64::MAX);
    // ~50 requests fall due during the 1 s stall; only the 4 on the wire when it
    // began see it in their service time.
    assert!(over(&corrected) >= 15, "corrected histogram lacks the stall: {} over 400 ms", over(&corrected));
    assert!(over(&service) <= 8, "service time carries the queueing wait: {} over 400 ms", over(&service));
    assert!(r.latency.corrected.as_ref().unwrap().max_ms >= 800.0);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_flags_exit_2_naming_the_flag_and_write_nothing() {
    let out = out_dir("badflags");
    for (args, flag) in [
        (&["--qps", "0"][..], "--qps"),
        (&["--qps", "-5"], "--qps"),
        (&["--qps", "abc"], "--qps"),
        (&["--duration", "0s"], "--duration"),
        (&["--rounds", "0"], "--rounds"),
        (&["--items", "20000"], "--items"),
        (&["--sample-interval", "10ms"], "--sample-interval"),
        (&["--transport", "soap"], "--transport"),
        (&["--out", "/proc/version/results"], "--out"),
        (&["--bind", "not-an-ip"], "--bind"),
    ] {
        let mut full = if args.contains(&"--out") { vec![] } else { vec!["--out", out.to_str().unwrap()] };
        full.extend_from_slice(args);
        let output = harness(&full).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: the message should name {flag}: {stderr}");
        assert!(!stderr.contains("tiers:"), "{args:?}: a tier was started");
    }
    let leftovers = std::fs::read_dir(&out).map(|d| d.count()).unwrap_or(0);
    assert_eq!(leftovers, 0, "bad flags wrote into --out");
    let _ = std::fs::remove_dir_all(&out);
}

/// Fresh tiers with a fixed front port: each round's caller is a new process
/// on the same port (the old one stops before the new one binds).
#[test]
fn fresh_rounds_restart_the_tiers_even_on_a_fixed_caller_port() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let out = out_dir("fresh-fixed-port");
    let o = short_run(&out)
        .flags("--qps 30 --warmup 200ms --rounds 2 --delay 15ms")
        .args(&["--caller-port", &port])
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let run = load(&run_folder(&out));
    let callers: Vec<u32> = run.rounds.iter().map(|r| r.pids[&TierName::Caller]).collect();
    assert_ne!(callers[0], callers[1], "{callers:?}");
    assert!(run.rounds.iter().all(|r| r.requests.ok == r.requests.sent && r.requests.sent >= 29), "{:?}", run.rounds);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn fresh_tiers_run_this_build_even_when_its_file_is_removed_mid_run() {
    // cargo relinks the executable in place; a run that started before must
    // keep starting its fresh tiers from the image it is running.
    let out = out_dir("exe-removed");
    std::fs::create_dir_all(&out).unwrap();
    let copy = out.join("harness-copy");
    std::fs::copy(env!("CARGO_BIN_EXE_harness"), &copy).unwrap();
    let results = out.join("results");
    let child = std::process::Command::new(&copy)
        .args(short_run(&results).flags("--transport grpc --qps 20 --delay 10ms --warmup 1s --rounds 3").to_args())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Gone before the second round's tiers are started.
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::remove_file(&copy).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let run = load(&run_folder(&results));
    assert_eq!(run.rounds.len(), 3);
    let callers: std::collections::BTreeSet<_> = run.rounds.iter().map(|r| r.pids[&TierName::Caller]).collect();
    assert_eq!(callers.len(), 3, "each round on its own caller: {callers:?}");
    let _ = std::fs::remove_dir_all(&out);
}
