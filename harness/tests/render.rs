//! The Markdown renderers against their exact output on fixed synthetic
//! results (a single run, a two-round comparison that is not judged, with
//! validity flags, and a five-round comparison with findings). Set UPDATE_SNAPSHOTS=1 to rewrite the snapshot files after an
//! intended change, then review the diff.

use std::path::PathBuf;

use caller::Transport;
use harness::export::comparison::{Arm, render};
use harness::export::markdown;
use harness::judge::difference::{Verdict, compare};
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
    run.config.load.rounds = 2;
    run.rounds = vec![testing::round(1, 500.0, 1.0), testing::round(2, 520.0, 1.0)];
    run.validity = harness::judge::validity(&run);
    run
}

/// REST: two steady rounds, each with timeouts and 40% of the target achieved.
fn rest() -> RunResult {
    let mut run = testing::run(Transport::Rest, 1.0);
    run.config.load.rounds = 2;
    run.rounds = vec![testing::round(1, 520.0, 2.5), testing::round(2, 521.0, 2.5)];
    run.validity = harness::judge::validity(&run);
    run
}

#[test]
fn single_run_report() {
    check("report.md", &markdown::render(&testing::run(Transport::Grpc, 1.0), true));
}

/// The method line states the service time's precision from what the
/// downstream reports of its timer, never a figure of its own.
#[test]
fn the_method_line_states_the_service_time_precision_the_downstream_reports() {
    let mut run = testing::run(Transport::Grpc, 1.0);
    assert!(!markdown::render(&run, false).contains("Service time ≥"), "an older downstream reports no tick");
    let settings = &mut run.tiers.get_mut(&harness::result::TierName::Downstream).unwrap().settings;
    settings["service_time_resolution_ms"] = serde_json::json!(1.0);
    let text = markdown::render(&run, false);
    assert!(text.contains("Service time ≥ delay, to 1 ms: the downstream waits on its runtime's own timer"), "{text}");
    let settings = &mut run.tiers.get_mut(&harness::result::TierName::Downstream).unwrap().settings;
    settings["service_time_resolution_ms"] = serde_json::json!(0.25);
    settings["jitter_ms"] = serde_json::json!(5.0);
    assert!(markdown::render(&run, false).contains("Service time ≥ delay (plus its jitter), to 0.25 ms"));
    let settings = &mut run.tiers.get_mut(&harness::result::TierName::Downstream).unwrap().settings;
    settings["delay_ms"] = serde_json::json!(0.0);
    settings["jitter_ms"] = serde_json::json!(0.0);
    assert!(markdown::render(&run, false).contains("without a service time"));
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
fn two_rounds_are_not_judged() {
    let (g, r) = (grpc(), rest());
    let rows = compare(&g, &r);
    assert!(rows.iter().all(|row| row.verdict == Verdict::NotJudged { rounds: 2 } || row.a.is_none()));
    let text = render(&[Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &r }], false);
    assert!(text.contains("not judged (2 rounds)") && text.contains("- Not judged: 2 round(s) per arm"), "{text}");
}

/// Findings from a fixed five-round both run where REST's every figure is
/// about 2.2 times gRPC's: sentences biggest first, numbers and intervals,
/// then what showed no detectable difference; the cost table.
#[test]
fn comparison_findings_from_a_fixed_run() {
    let (g, r) = testing::both(5, 0.45, 1.0);
    let arms = [Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &r }];
    check("comparison-findings.md", &render(&arms, false));
}

/// The method line states how close to its due time a request left: the
/// precision asked for, the window its wake-ups are set within, and the
/// worst round's send lag p99, within the precision or over it, or that it
/// was not measured; a closed loop has no due times to state.
#[test]
fn the_method_line_states_the_send_precision_and_the_worst_send_lag() {
    let mut run = grpc();
    let text = markdown::render(&run, false);
    assert!(
        text.contains("Requests leave at their due times, the generator woken at each one. Send lag: not measured.")
    );
    run.config.load.send_precision = std::time::Duration::from_millis(1);
    for (round, p99_ms) in run.rounds.iter_mut().zip([0.25, 1.1]) {
        let lag = round.latency.corrected.clone().map(|s| harness::result::Summary { p99_ms, ..s });
        round.latency.send_lag = lag;
    }
    let text = markdown::render(&run, false);
    assert!(
        text.contains(
            "Requests leave within 1ms of their due times (`--send-precision`): the generator's wake-ups are set at \
             most 750us after a due time, the rest left for the wake-up's own delay, and send what is due by then. \
             Send lag p99: 1.100 ms in the worst round, over the precision."
        ),
        "{text}"
    );
    for round in run.rounds.iter_mut() {
        round.latency.send_lag.as_mut().unwrap().p99_ms = 0.8;
    }
    let text = markdown::render(&run, false);
    assert!(text.contains("Send lag p99: 0.800 ms in the worst round, within the precision."), "{text}");
    run.config.load.closed_loop = true;
    assert!(!markdown::render(&run, false).contains("Requests leave"));
}
