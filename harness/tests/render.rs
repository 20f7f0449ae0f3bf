//! The Markdown renderers against their exact output on fixed synthetic
//! results (a single run, and a comparison with noise marking and validity
//! flags). Set UPDATE_SNAPSHOTS=1 to rewrite the snapshot files after an
//! intended change, then review the diff.

use std::path::PathBuf;

use caller::Transport;
use harness::export::comparison::{Arm, Difference, difference, render};
use harness::export::markdown;
use harness::result::RunResult;
use harness::testing;

fn check(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(actual == expected, "{name} differs from its snapshot:\n{actual}");
}

/// gRPC: two clean rounds whose latency differs by 20 ms (noisy).
fn grpc() -> RunResult {
    let mut run = testing::run(Transport::Grpc, 1.0);
    run.config.rounds = 2;
    run.rounds = vec![testing::round(1, 500.0, 1.0), testing::round(2, 520.0, 1.0)];
    run.validity = harness::judge::validity(&run);
    run
}

/// REST: two steady rounds, each with timeouts and 40% of the target achieved.
fn rest() -> RunResult {
    let mut run = testing::run(Transport::Rest, 1.0);
    run.config.rounds = 2;
    run.rounds = vec![testing::round(1, 520.0, 2.5), testing::round(2, 521.0, 2.5)];
    run.validity = harness::judge::validity(&run);
    run
}

#[test]
fn single_run_report() {
    check("report.md", &markdown::render(&testing::run(Transport::Grpc, 1.0), true));
}

#[test]
fn multi_round_report_has_mean_min_max() {
    let text = markdown::render(&grpc(), false);
    assert!(text.contains("| metric | round 1 | round 2 | mean | min | max |"), "{text}");
    assert!(text.contains("| latency min (ms) | 500.00 | 520.00 | 510.00 | 500.00 | 520.00 |"), "{text}");
    assert!(!text.contains("## Charts"));
}

#[test]
fn comparison_with_noise_and_validity() {
    let (g, r) = (grpc(), rest());
    let arms = [Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &r }];
    check("comparison.md", &render(&arms, true));
}

#[test]
fn difference_names_the_worse_side_and_judges_noise() {
    let (g, r) = (grpc(), rest());
    let (a, b) = (Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &r });
    let metric = |label: &str| harness::judge::metrics::metrics().iter().find(|m| m.label == label).unwrap();
    // Memory: REST 2.5x gRPC, far beyond either side's spread.
    assert_eq!(
        difference(metric("caller memory mean (MiB)"), a, b),
        Difference { text: "REST +150.0%".into(), worse: Some("REST".into()) }
    );
    // Throughput: higher is better, so the worse side is signed negative.
    assert_eq!(difference(metric("throughput (ok/s)"), a, b).text, "REST -60.0%");
    // Latency p50: REST is slower on average, but by less than gRPC's 20 ms round-to-round spread.
    let d = difference(metric("latency p50 (ms)"), a, b);
    assert!(d.text.starts_with("REST +") && d.text.ends_with("(within noise)"), "{d:?}");
    assert_eq!(d.worse, None);
    assert_eq!(difference(metric("target rate (req/s)"), a, b).text, "=");
}
