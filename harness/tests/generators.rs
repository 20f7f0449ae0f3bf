//! Many generators, one measurement: one set of tiers started by the test,
//! driven once by a single generator and once by three `--segment I/3`
//! generators started together with `--start-at`, whose folders `harness
//! merge` puts together. The merged run holds the one schedule (the same
//! requests per round as the single generator's), its latency agrees with
//! the single generator's within what the comparison can tell apart, and a
//! missing, doubled or foreign segment is refused by folder.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{TierProcess, harness_cmd, load, out_dir, run_folder, run_folders, start_tier};
use harness::judge::difference::{compare, findings};
use harness::load::Share;

const QPS: &str = "150";
const DELAY: &str = "50ms";

fn tiers() -> (TierProcess, TierProcess) {
    let at = || "127.0.0.1:0".to_owned();
    let downstream = start_tier(
        None,
        "downstream",
        &[
            "--grpc-addr".into(),
            at(),
            "--rest-addr".into(),
            at(),
            "--admin-addr".into(),
            at(),
            "--delay".into(),
            DELAY.into(),
        ],
    );
    let caller = start_tier(
        None,
        "caller",
        &[
            "--transport".into(),
            "grpc".into(),
            "--downstream-grpc".into(),
            downstream.url("grpc"),
            "--listen".into(),
            at(),
            "--admin-addr".into(),
            at(),
        ],
    );
    (downstream, caller)
}

/// The flags every generator of the test shares: the tiers, the rate, the rounds.
fn shared(downstream: &TierProcess, caller: &TierProcess, out: &Path) -> Vec<String> {
    [
        "--transport",
        "grpc",
        "--caller-url",
        &caller.url("front"),
        "--caller-admin",
        &caller.url("admin"),
        "--downstream-admin",
        &downstream.url("admin"),
        "--qps",
        QPS,
        "--delay",
        DELAY,
        "--duration",
        "2s",
        "--warmup",
        "1s",
        "--rounds",
        "3",
        "--sample-interval",
        "200ms",
        "--quiet",
        "--out",
        &out.to_string_lossy(),
    ]
    .map(str::to_owned)
    .to_vec()
}

fn run(args: &[String]) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    harness_cmd(&args).output().unwrap()
}

fn merge(folders: &[&Path], out: &Path) -> Output {
    let mut args = vec!["merge".to_owned()];
    args.extend(folders.iter().map(|f| f.to_string_lossy().into_owned()));
    args.extend(["--out".to_owned(), out.to_string_lossy().into_owned()]);
    run(&args)
}

#[test]
fn three_generators_merged_are_one_measurement_of_the_schedule() {
    let (downstream, caller) = tiers();
    let out = out_dir("generators");
    let single_out = out.join("single");
    let o = run(&shared(&downstream, &caller, &single_out));
    assert!(o.status.success(), "single generator: {}", String::from_utf8_lossy(&o.stderr));
    let single = load(&run_folder(&single_out));

    let segments_out = out.join("segments");
    let children: Vec<_> = (0..3)
        .map(|i| {
            let mut args = shared(&downstream, &caller, &segments_out);
            args.extend(["--segment".into(), format!("{i}/3"), "--start-at".into(), "+2s".into()]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            harness_cmd(&args).stdout(std::process::Stdio::null()).spawn().unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a segment failed");
    }
    let segments: Vec<PathBuf> = run_folders(&segments_out);
    assert_eq!(segments.len(), 3, "{segments:?}");

    let merged_out = out.join("merged");
    let o = merge(&[&segments_out], &merged_out);
    assert!(o.status.success(), "merge: {}", String::from_utf8_lossy(&o.stderr));
    let merged_folder = run_folder(&merged_out);
    common::browser::check_folder(&merged_folder, common::browser::ONE_ARM, 4);
    let merged = load(&merged_folder);

    // The merged rounds are the single generator's schedule, request for
    // request, and each segment sent its share of it.
    assert_eq!(merged.rounds.len(), 3);
    for (m, s) in merged.rounds.iter().zip(&single.rounds) {
        assert_eq!(m.requests.scheduled, s.requests.scheduled, "round {}", m.index);
        assert_eq!(m.requests.sent + m.requests.errors.get("dropped").copied().unwrap_or(0), m.requests.scheduled);
        assert_eq!(m.throughput.target_qps, Some(150.0));
    }
    for (i, folder) in segments.iter().enumerate() {
        let seg = load(folder);
        let share = seg.config.generators.segment.expect("a segment");
        let part = Share { index: u64::from(share.index), count: 3 };
        for (r, s) in seg.rounds.iter().zip(&single.rounds) {
            assert_eq!(r.requests.scheduled, part.of(s.requests.scheduled), "segment {i} round {}", r.index);
        }
        // Only the sampling generator read the tiers.
        assert_eq!(seg.rounds[0].bytes.internal.requests > 0, share.sample_tiers, "segment {i}");
    }
    let report = std::fs::read_to_string(merged_folder.join("report.md")).unwrap();
    assert!(report.contains("open loop from 3 generators"), "{report}");
    assert!(report.contains("## Generators") && report.contains("| 2/3 |"), "{report}");

    // Latency: no difference of 5% or more is detectable between one
    // generator and three at the same total rate: the median always; the
    // 99th percentile, the tail a shared VM's hiccups own, where neither run
    // says the machine interfered (the hypervisor's steal over 2% of its
    // ticks, or a generator behind its schedule), as the tool itself judges.
    let disturbed = |r: &harness::result::RunResult| {
        r.validity.iter().any(|v| v.contains("(steal, over") || v.ends_with(harness::judge::validity::FELL_BEHIND))
    };
    let judged: &[&str] = if disturbed(&single) || disturbed(&merged) {
        eprintln!("p99 not compared: {:?} / {:?}", single.validity, merged.validity);
        &["p50"]
    } else {
        &["p50", "p99"]
    };
    let rows = compare(&single, &merged);
    let latency: Vec<_> =
        findings(&rows).into_iter().filter(|r| judged.contains(&r.metric.key)).map(|r| r.metric.label).collect();
    assert!(latency.is_empty(), "one generator and three differ in {latency:?}");

    refusals(&segments, &single_out, &out.join("refused"));
    a_late_generator_says_by_how_much(&downstream, &caller, &out.join("late"));
    drop((caller, downstream));
    let _ = std::fs::remove_dir_all(&out);
}

/// A missing segment, the same one twice, and a run that is no segment are
/// refused (exit 2), naming the folder; nothing is written.
fn refusals(segments: &[PathBuf], single: &Path, out: &Path) {
    let single = run_folder(single);
    let cases: [(Vec<&Path>, &str); 3] = [
        (vec![&segments[0], &segments[1]], "is missing"),
        (vec![&segments[0], &segments[1], &segments[1], &segments[2]], "is given twice"),
        (vec![&segments[0], &segments[1], &segments[2], &single], "is not a segment"),
    ];
    for (folders, says) in cases {
        let o = merge(&folders, out);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{says}: {stderr}");
        assert!(stderr.contains(says), "{says}: {stderr}");
        assert!(!out.exists(), "a refused merge wrote {}", out.display());
    }
}

/// A generator whose --start-at has passed begins at once, and its run says
/// how late (here at least the 3 s it was given in the past).
fn a_late_generator_says_by_how_much(downstream: &TierProcess, caller: &TierProcess, out: &Path) {
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3);
    let mut args = shared(downstream, caller, out);
    for (flag, value) in [("--rounds", "1"), ("--duration", "1s"), ("--warmup", "0s")] {
        let at = args.iter().position(|a| a == flag).unwrap();
        args[at + 1] = value.into();
    }
    args.extend(["--start-at".into(), humantime::format_rfc3339_millis(past).to_string()]);
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let late = load(&run_folder(out));
    let g = &late.generators[0];
    assert!(g.late_seconds.is_some_and(|l| l >= 3.0), "{g:?}");
    assert!(late.validity.iter().any(|v| v.contains("began") && v.contains("after --start-at")), "{:?}", late.validity);
}
