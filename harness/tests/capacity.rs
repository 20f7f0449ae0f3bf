//! Rate sweeps, throughput mode and the direct target, as short real runs.

use crate::common;

use common::browser;
use common::*;
use harness::judge::capacity::Capacity;
use harness::result::TierName;

#[test]
fn a_sweep_writes_every_step_and_the_capacity_report() {
    let out = out_dir("sweep");
    // The default SLO (delay + 100 ms, unit-tested in config::tests) is
    // one 100-ms stall away on two shared cores: a 1-s step's p99 is its
    // slowest request or two. A second above the delay keeps the knee
    // about the sweep's logic, not about the machine's worst moment.
    let o = short_run(&out).flags("--transport both --qps 40..160x2 --warmup 200ms --slo-p99 1s").output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    assert!(folder.file_name().unwrap().to_string_lossy().ends_with("-both-sweep-40-160qps"));
    for step in ["step-40qps", "step-80qps", "step-160qps"] {
        for arm in ["grpc", "rest"] {
            assert!(folder.join(step).join(arm).join("run.json").is_file(), "{step}/{arm}");
        }
        assert!(folder.join(step).join("comparison.md").is_file());
    }
    let c: Capacity = serde_json::from_slice(&std::fs::read(folder.join("capacity.json")).unwrap()).unwrap();
    assert_eq!(c.slo_p99_ms, 1000.0);
    assert_eq!(c.arms.len(), 2);
    for arm in &c.arms {
        let offered: Vec<f64> = arm.steps.iter().map(|s| s.offered_qps).collect();
        assert_eq!(offered, [40.0, 80.0, 160.0]);
        // A light load on loopback is sustained, so the knee is the top step.
        assert_eq!(arm.knee_qps, Some(160.0), "{:?}", arm.steps);
    }
    let md = std::fs::read_to_string(folder.join("capacity.md")).unwrap();
    assert!(md.contains("**Knee: 160 req/s.**") && md.contains("capacity-rate.svg"), "{md}");
    for chart in ["capacity-rate.svg", "capacity-p99.svg"] {
        roxmltree::Document::parse(&std::fs::read_to_string(folder.join(chart)).unwrap()).unwrap();
    }
    // The sweep's page and a step's, as a browser shows them.
    browser::check_folder(&folder, browser::SWEEP, 2);
    browser::check_folder(&folder.join("step-40qps"), browser::DECISION, 4);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn throughput_mode_against_the_downstream_writes_a_valid_run_folder() {
    let out = out_dir("closed");
    let closed = short_run(&out).without("--qps");
    let o = closed.flags("--target downstream --transport rest --connections 2 --warmup 200ms --delay 1ms").output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    assert!(folder.file_name().unwrap().to_string_lossy().ends_with("-rest-2conn"));
    let run = load(&folder);
    assert!(run.config.load.closed_loop);
    assert!(!run.tiers.contains_key(&TierName::Caller), "no caller in the two-tier topology");
    let r = &run.rounds[0];
    assert!(r.requests.ok > 20 && r.requests.error_total() == 0, "{:?}", r.requests);
    assert_eq!(r.throughput.target_qps, None);
    assert!(r.throughput.ok_per_second > 10.0);
    // Two workers back to back: never more than two in flight.
    assert!(r.bytes.internal.requests >= r.requests.ok / 2);
    assert_eq!(r.resources[&TierName::Caller].samples, 0);
    let report = std::fs::read_to_string(folder.join("report.md")).unwrap();
    assert!(report.contains("not* corrected for coordinated omission"), "{report}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn the_direct_target_drives_the_downstream_over_either_transport() {
    for transport in ["grpc", "rest"] {
        let out = out_dir(&format!("direct-{transport}"));
        let o = short_run(&out)
            .flags("--target downstream --qps 100 --delay 10ms")
            .args(&["--transport", transport])
            .output();
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        let run = load(&run_folder(&out));
        let r = &run.rounds[0];
        assert_eq!((r.requests.sent, r.requests.ok), (100, 100), "{:?}", r.requests);
        assert!(r.latency.corrected.as_ref().unwrap().min_ms >= 10.0);
        assert_eq!(r.bytes.internal.listener, transport);
        assert!(r.bytes.internal.requests >= 95);
        let _ = std::fs::remove_dir_all(&out);
    }
}

#[test]
fn ctrl_c_between_sweep_steps_marks_the_sweep_interrupted() {
    let out = out_dir("sweep-sigint");
    // Step 1's requests are answered 4 s after they are sent: the step drains
    // from about 1.1 s to 5.1 s after its tiers are named.
    let mut h = short_run(&out).flags("--qps 10,20,40 --duration 1s --delay 4s --timeout 30s").start();
    h.sleep_until(std::time::Duration::from_millis(2500));
    signal(h.child.id() as i32, nix::sys::signal::Signal::SIGINT);
    assert_eq!(h.wait(std::time::Duration::from_secs(60)), Some(130), "{}", h.stderr());
    assert_none_left(&h.mark, std::time::Duration::from_secs(5));
    let folder = run_folder(&out);
    let c: serde_json::Value = serde_json::from_slice(&std::fs::read(folder.join("capacity.json")).unwrap()).unwrap();
    assert_eq!(c["interrupted"]["not_run_qps"], serde_json::json!([20.0, 40.0]), "{c:#}");
    assert_eq!(c["arms"][0]["steps"].as_array().unwrap().len(), 1);
    let md = std::fs::read_to_string(folder.join("capacity.md")).unwrap();
    assert!(md.contains("**Sweep interrupted**") && md.contains("the steps at 20, 40 req/s never ran"), "{md}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_payload_sweep_writes_every_size_and_the_payload_report() {
    let out = out_dir("payload-sweep");
    let o = short_run(&out).flags("--transport both --items 1,50 --request-bytes 300 --qps 20 --warmup 200ms").output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    assert!(folder.file_name().unwrap().to_string_lossy().ends_with("-both-items-1-50-20qps"), "{folder:?}");
    for step in ["step-1items", "step-50items"] {
        for arm in ["grpc", "rest"] {
            assert!(folder.join(step).join(arm).join("run.json").is_file(), "{step}/{arm}");
        }
        assert!(folder.join(step).join("comparison.md").is_file());
    }
    let p: harness::judge::payload::PayloadReport =
        serde_json::from_slice(&std::fs::read(folder.join("payload.json")).unwrap()).unwrap();
    assert_eq!((p.sizes.clone(), p.arms.len()), (vec![1, 50], 2));
    for arm in &p.arms {
        let sizes: Vec<u32> = arm.steps.iter().map(|s| s.size).collect();
        assert_eq!(sizes, [1, 50]);
        let response = |i: usize| arm.steps[i].response_wire_bytes.unwrap();
        assert!(response(1) > 10.0 * response(0), "{:?}: {} → {}", arm.transport, response(0), response(1));
        // The 300-byte upload reached the downstream on every step.
        assert!(arm.steps.iter().all(|s| s.request_message_bytes.unwrap() >= 300.0), "{:?}", arm.steps);
    }
    let md = std::fs::read_to_string(folder.join("payload.md")).unwrap();
    assert!(md.contains("## Arms side by side") && md.contains("300 B uploaded per call"), "{md}");
    for chart in ["payload-bytes.svg", "payload-cpu.svg", "payload-latency.svg", "payload-rss.svg"] {
        assert!(md.contains(chart));
        roxmltree::Document::parse(&std::fs::read_to_string(folder.join(chart)).unwrap()).unwrap();
    }
    browser::check_folder(&folder, browser::SWEEP, 4);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_codec_list_sweeps_every_size_with_each_codec_on_tiers_that_report_it() {
    let out = out_dir("codec-sweep");
    let o = short_run(&out).flags("--transport rest --json-codec serde_json,sonic-rs --items 1,100").output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    let p: harness::judge::payload::PayloadReport =
        serde_json::from_slice(&std::fs::read(folder.join("payload.json")).unwrap()).unwrap();
    let titles: Vec<String> = p.arms.iter().map(|a| a.title()).collect();
    assert_eq!(titles, ["REST (serde_json)", "REST (sonic-rs)"]);
    for size in ["1", "100"] {
        for codec in ["serde_json", "sonic-rs"] {
            let run: serde_json::Value = serde_json::from_slice(
                &std::fs::read(folder.join(format!("step-{size}items")).join(codec).join("run.json")).unwrap(),
            )
            .unwrap();
            // Recorded as asked (absent for the default), reported by both tiers.
            let recorded = run["config"]["json_codec"].as_str().unwrap_or("serde_json");
            assert_eq!(recorded, codec, "{size} items");
            assert_eq!(run["tiers"]["caller"]["settings"]["client"]["json_codec"]["name"], codec, "{size}");
            assert_eq!(run["tiers"]["downstream"]["settings"]["json_codec"]["name"], codec, "{size}");
            let report =
                std::fs::read_to_string(folder.join(format!("step-{size}items")).join(codec).join("report.md"))
                    .unwrap();
            assert!(report.contains(&format!("| internal hop JSON codec | {codec} at both ends")), "{report}");
            assert!(report.contains("every codec writes serde_json's bytes"), "{report}");
        }
    }
    // The codecs write these messages byte for byte alike: every size moved
    // the same message bytes per request whichever codec the tiers used.
    for i in 0..2 {
        let bytes = |a: usize| (p.arms[a].steps[i].request_message_bytes, p.arms[a].steps[i].response_message_bytes);
        assert!(bytes(0).0.is_some() && bytes(0).1.is_some(), "{:?}", p.arms[0].steps[i]);
        assert_eq!(bytes(0), bytes(1), "size {}", p.sizes[i]);
    }
    let md = std::fs::read_to_string(folder.join("payload.md")).unwrap();
    assert!(
        md.contains("with the JSON codecs serde_json, sonic-rs in turn") && md.contains("## REST (sonic-rs)"),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_repeated_or_unknown_codec_or_a_codec_list_with_a_rate_list_is_refused() {
    for (args, says) in [
        (&["--json-codec", "serde_json,serde_json"][..], "listed twice"),
        (&["--json-codec", "yyjson"], "unknown JSON codec"),
        (&["--json-codec", "serde_json,simd-json", "--qps", "10,20"], "not a rate sweep"),
    ] {
        let out = out_dir("codec-refused");
        let mut full = args.to_vec();
        full.extend(["--out", out.to_str().unwrap()]);
        let o = harness_cmd(&full).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("--json-codec") && stderr.contains(says), "{args:?}: {stderr}");
        assert!(!out.exists(), "nothing written");
    }
}

#[test]
fn a_rate_and_a_payload_sweep_together_or_an_unknown_shape_are_refused() {
    for (args, flag) in [
        (&["--qps", "10,20", "--items", "1,10"][..], "--items"),
        (&["--qps", "10,20", "--request-bytes", "0,100"], "--request-bytes"),
        (&["--shape", "blob"], "--shape"),
    ] {
        let out = out_dir("payload-refused");
        let mut full = args.to_vec();
        full.extend(["--out", out.to_str().unwrap()]);
        let o = harness_cmd(&full).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none(), "nothing written");
        let _ = std::fs::remove_dir_all(&out);
    }
}
