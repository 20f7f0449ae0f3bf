//! `--transport both` end to end, and `harness compare` over its saved arms.

use crate::common;

use harness::result::TierName;
use std::path::Path;

use common::*;
use harness::result::RunResult;

fn harness(args: &[&str]) -> std::process::Output {
    harness_cmd(args).output().unwrap()
}

/// The legend texts of an SVG, after checking it parses as XML.
fn legend(svg_path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(svg_path).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{} is not XML: {e}", svg_path.display()));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).map(|t| t.trim().to_owned()).collect()
}

#[test]
fn both_writes_two_arms_a_comparison_and_compare_reproduces_it() {
    let out = out_dir("both-run");
    let o = short_run(&out).flags("--transport both --qps 40 --warmup 300ms --rounds 2").output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    assert!(folder.file_name().unwrap().to_string_lossy().ends_with("-both-40qps"));
    arms_ran_interleaved_on_fresh_tiers(&folder);
    timeseries_and_charts_hold_every_arm_and_tier(&folder);
    let comparison = comparison_and_decision_are_written(&folder);
    compare_reproduces_the_comparison(&folder, &comparison);
    let _ = std::fs::remove_dir_all(&out);
}

/// Two rounds per arm, every request answered, each round on processes of
/// its own, in counterbalanced order.
fn arms_ran_interleaved_on_fresh_tiers(folder: &Path) {
    let mut arms = Vec::new();
    for arm in ["grpc", "rest"] {
        let dir = folder.join(arm);
        let run: RunResult = serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
        assert_eq!(run.config.transport.as_str(), arm);
        assert_eq!(run.rounds.len(), 2);
        assert!(run.rounds.iter().all(|r| r.complete && r.requests.ok == r.requests.sent && r.requests.sent >= 39));
        for f in ["report.md", "latency.hgrm", "latency-round-1.hgrm", "latency-round-2.hgrm"] {
            assert!(dir.join(f).is_file(), "{arm}/{f}");
        }
        arms.push(run);
    }
    // Each arm ran on its own processes, and (fresh tiers, the default) each
    // round on processes of its own, sampled while it ran.
    assert_ne!(arms[0].tiers[&TierName::Caller].pid, arms[1].tiers[&TierName::Caller].pid);
    assert_ne!(arms[0].tiers[&TierName::Downstream].pid, arms[1].tiers[&TierName::Downstream].pid);
    for run in &arms {
        assert!(run.config.load.fresh_tiers);
        for tier in [TierName::Caller, TierName::Downstream] {
            let pids: Vec<u32> = run.rounds.iter().map(|r| r.pids[&tier]).collect();
            assert_eq!(Some(pids[0]), run.tiers[&tier].pid, "{tier}: {pids:?}");
            assert_ne!(pids[0], pids[1], "{tier}: a round reused the processes of the one before");
            for r in &run.rounds {
                let res = &r.resources[&tier];
                assert!(res.rss_mib_mean.is_some() && res.samples > 0, "{tier} round {}: {res:?}", r.index);
            }
        }
    }
    // Counterbalanced order: gRPC 1, REST 1, REST 2, gRPC 2.
    let start = |a: usize, r: usize| arms[a].rounds[r].started_seconds;
    assert!(start(0, 0) < start(1, 0) && start(1, 0) < start(1, 1) && start(1, 1) < start(0, 1));
}

fn timeseries_and_charts_hold_every_arm_and_tier(folder: &Path) {
    let csv = std::fs::read_to_string(folder.join("timeseries.csv")).unwrap();
    assert!(csv.starts_with("t_seconds,arm,tier,cpu_percent,rss_bytes,in_flight,achieved_rate\n"));
    for row in ["grpc,caller", "grpc,downstream", "rest,caller", "rest,downstream", "-,harness"] {
        assert!(csv.contains(row), "timeseries.csv lacks {row}");
    }

    // Charts: XML, one series per arm (latency) and per arm and tier (RSS, CPU).
    let l = legend(&folder.join("latency.svg"));
    assert!(l.contains(&"gRPC".to_owned()) && l.contains(&"REST".to_owned()), "{l:?}");
    for chart in ["rss.svg", "cpu.svg"] {
        let l = legend(&folder.join(chart));
        for series in ["gRPC caller", "gRPC downstream", "REST caller", "REST downstream", "harness"] {
            assert!(l.iter().any(|t| t == series), "{chart} lacks the series {series}: {l:?}");
        }
    }
    let l = legend(&folder.join("rate.svg"));
    for series in ["gRPC achieved rate", "REST achieved rate", "gRPC in flight", "REST in flight"] {
        assert!(l.iter().any(|t| t == series), "rate.svg lacks {series}: {l:?}");
    }
    let single = legend(&folder.join("grpc").join("rss.svg"));
    assert!(single.iter().any(|t| t == "caller") && single.iter().any(|t| t == "downstream"), "{single:?}");
}

fn comparison_and_decision_are_written(folder: &Path) -> String {
    let comparison = std::fs::read_to_string(folder.join("comparison.md")).unwrap();
    assert!(comparison.starts_with("# grpc-vs-rest comparison: gRPC vs REST"));
    assert!(comparison.contains("| metric | gRPC | REST | difference (95% CI) | verdict |"));
    assert!(comparison.contains("## Validity") && comparison.contains("![Latency by percentile](latency.svg)"));
    assert!(comparison.contains("## Findings") && comparison.contains("## Cost at 40 req/s"));
    let decision = std::fs::read_to_string(folder.join("decision.md")).unwrap();
    assert!(
        decision.starts_with("---\nstatus: proposed\ndate: ") && decision.contains("## Pros and Cons of the Options")
    );
    comparison
}

fn compare_reproduces_the_comparison(folder: &Path, comparison: &str) {
    // compare on the two saved arm folders reproduces the comparison byte for byte.
    let again = out_dir("both-compare");
    let o = harness(&[
        "compare",
        folder.join("grpc").to_str().unwrap(),
        folder.join("rest").to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(again.join("comparison.md")).unwrap(), comparison);
    // The both folder itself counts as its two arms.
    let o = harness(&["compare", folder.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("| metric | gRPC | REST | difference (95% CI) | verdict |"));
    let _ = std::fs::remove_dir_all(&again);
}

#[test]
fn compare_refuses_what_is_not_a_run_folder_and_warns_on_different_setups() {
    let dir = out_dir("both-refuse");
    std::fs::create_dir_all(&dir).unwrap();
    let o = harness(&["compare", dir.to_str().unwrap(), dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is not a run folder"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let out = dir.join("runs");
    let a = harness::testing::run(caller::Transport::Grpc, 1.0);
    let mut b = harness::testing::run(caller::Transport::Rest, 1.0);
    b.config.load.qps = 200.0;
    b.environment.build_profile = "debug".into();
    let fa = harness::export::write_run(&a, &out).unwrap();
    let fb = harness::export::write_run(&b, &out).unwrap();
    let o = harness(&["compare", fa.to_str().unwrap(), fb.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("warning: load differs: gRPC has 100 req/s open loop, REST has 200 req/s open loop")
            && err.contains("warning: build profile differs"),
        "{err}"
    );
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.contains("> **The configurations differ:**"), "{md}");
    let o = harness(&["compare", fa.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "one run is not a comparison");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every round measures a steady state: an arm is warmed again after the
/// other arm ran, and request-direction bytes divide by the requests that
/// sent them. The front hop is the same for both arms by design, so its bytes
/// per request must agree across arms and rounds, even with rounds only ten
/// service times long (where counting requests ended instead of started was
/// 10% high on a cold round).
#[test]
fn front_hop_bytes_per_request_agree_across_arms_and_rounds() {
    let out = out_dir("both-front-bytes");
    let o = short_run(&out)
        .flags("--transport both --qps 50 --warmup 400ms --rounds 3 --delay 100ms --reuse-tiers")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    let (mut per_request, mut exact) = (Vec::new(), Vec::new());
    for arm in ["grpc", "rest"] {
        let run: RunResult =
            serde_json::from_slice(&std::fs::read(folder.join(arm).join("run.json")).unwrap()).unwrap();
        // --reuse-tiers: every round on the arm's one set of processes.
        assert!(!run.config.load.fresh_tiers);
        assert!(run.rounds.iter().all(|r| r.pids == run.rounds[0].pids), "{arm}");
        for r in &run.rounds {
            let front = &r.bytes.front;
            assert!(front.requests_started.unwrap() >= 40, "{arm} round {}: {front:?}", r.index);
            per_request.push((arm, r.index, front.request_wire_bytes_per_request.unwrap()));
            exact.push(front.requests_started == Some(r.requests.sent));
        }
    }
    // The counters are read between two due times, and a round that follows
    // one of its own arm starts at that round's end read, so a round counts
    // exactly its own requests. Read at the first due time, every round here
    // missed its first request; a stall can still push one read past its
    // moment, so half the rounds are asked for.
    assert!(2 * exact.iter().filter(|e| **e).count() >= exact.len(), "rounds with every request counted: {exact:?}");
    let (lo, hi) = per_request.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| (lo.min(p.2), hi.max(p.2)));
    assert!(hi / lo - 1.0 < 0.005, "front-hop request bytes per request differ by more than 0.5%: {per_request:?}");
    // One process per arm: memory is not judged from its rounds.
    let comparison = std::fs::read_to_string(folder.join("comparison.md")).unwrap();
    let row = comparison.lines().find(|l| l.starts_with("| caller memory mean (MiB) |")).unwrap();
    assert!(row.ends_with("| not judged (one process per arm) |"), "{row}");
    let _ = std::fs::remove_dir_all(&out);
}

/// `--transport grpc,grpc`: the same transport as two counterbalanced arms,
/// in `grpc-a/` and `grpc-b/`, and a comparison that reports the share of
/// rows it called different (every one a false call); no decision record.
#[test]
fn an_a_a_run_reports_its_false_call_share() {
    let out = out_dir("both-aa");
    let o = short_run(&out).flags("--transport grpc,grpc --qps 20 --warmup 200ms --delay 15ms").output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    assert!(folder.file_name().unwrap().to_string_lossy().ends_with("-aa-grpc-20qps"), "{folder:?}");
    for arm in ["grpc-a", "grpc-b"] {
        let run: RunResult =
            serde_json::from_slice(&std::fs::read(folder.join(arm).join("run.json")).unwrap()).unwrap();
        // Three rounds by default when arms are compared.
        assert_eq!(run.rounds.len(), 3, "{arm}");
    }
    let comparison = std::fs::read_to_string(folder.join("comparison.md")).unwrap();
    assert!(comparison.starts_with("# grpc-vs-rest comparison: gRPC #1 vs gRPC #2"), "{comparison}");
    assert!(comparison.contains("**A/A check**: both arms ran the same transport"), "{comparison}");
    // Beside every "no detectable difference", in the table and the findings,
    // the smallest difference the three rounds could have seen.
    let table: Vec<&str> =
        comparison.lines().filter(|l| l.starts_with('|') && l.contains("no detectable difference")).collect();
    assert!(!table.is_empty(), "{comparison}");
    for line in &table {
        assert!(line.contains("no detectable difference (could have seen ±"), "{line}");
    }
    let findings = comparison.split("## Findings").nth(1).unwrap().split("\n## ").next().unwrap();
    let listed: Vec<&str> = findings.lines().filter(|l| l.contains("o detectable difference")).collect();
    assert!(!listed.is_empty(), "{findings}");
    for line in &table {
        let (name, _) = harness::export::findings::name_and_unit(line.split('|').nth(1).unwrap().trim());
        for item in listed.iter().filter(|l| l.contains(&format!(" {name} ("))) {
            assert!(item.contains(&format!(" {name} (could have seen ±")), "{name}: {item}");
        }
    }
    assert!(!folder.join("decision.md").exists());
    let csv = std::fs::read_to_string(folder.join("timeseries.csv")).unwrap();
    assert!(csv.contains("grpc-a,caller") && csv.contains("grpc-b,caller"));
    let o = harness(&["compare", folder.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&out);
}

/// The rate figures in `text` (the number before each "req/s").
fn stated_rates(text: &str) -> Vec<String> {
    text.match_indices("req/s")
        .map(|(i, _)| text[..i].trim_end().rsplit([' ', '(', '|']).next().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn a_closed_loop_comparison_states_its_connections_everywhere_never_a_zero_rate() {
    let out = out_dir("both-closed");
    let closed = short_run(&out).without("--qps").without("--quiet");
    let o = closed.flags("--transport both --connections 4 --rounds 1 --delay 10ms").output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    let terminal = String::from_utf8_lossy(&o.stdout).into_owned();
    let comparison = std::fs::read_to_string(folder.join("comparison.md")).unwrap();
    let report = std::fs::read_to_string(folder.join("grpc").join("report.md")).unwrap();
    for (name, text) in [("terminal", &terminal), ("comparison.md", &comparison), ("report.md", &report)] {
        assert!(text.contains("closed loop over 4 connections"), "{name}:\n{text}");
        let zero = stated_rates(text).into_iter().filter(|r| r.parse::<f64>().is_ok_and(|r| r == 0.0)).count();
        assert_eq!(zero, 0, "{name} states a rate of 0 req/s:\n{text}");
    }
    assert!(comparison.contains("| load | closed loop over 4 connections |"), "{comparison}");
    assert!(report.contains("| load | closed loop over 4 connections |"), "{report}");
    let _ = std::fs::remove_dir_all(&out);
}
