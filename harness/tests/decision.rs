//! The decision record: MADR 4.0 structure (front matter, headings in
//! order, options), and `harness adr` on a saved folder with and without
//! `--prefer`.

use crate::common;

use std::path::PathBuf;

use common::harness_cmd;
use harness::export::adr::{HEADINGS, Record, render};
use harness::export::comparison::Arm;
use harness::testing;

/// Checks a record's MADR structure: front matter, one title, the headings
/// in MADR's order, and an option section per arm.
fn assert_madr(text: &str, options: &[&str]) {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("---"), "{text}");
    let front: Vec<&str> = lines.by_ref().take_while(|l| *l != "---").collect();
    assert_eq!(front[0], "status: proposed");
    let date = front[1].strip_prefix("date: ").expect("a date");
    assert!(date.len() == 10 && date.chars().filter(|c| *c == '-').count() == 2, "{date}");
    let headings: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(headings.iter().filter(|h| h.starts_with("# ")).count(), 1, "{headings:?}");
    let mut at = 0;
    for h in HEADINGS {
        let found = headings[at..].iter().position(|x| x == h).unwrap_or_else(|| panic!("{h} missing or out of order"));
        at += found + 1;
    }
    let pros = text.split("## Pros and Cons of the Options").nth(1).unwrap();
    for o in options {
        assert!(pros.contains(&format!("\n### {o}\n")), "option {o}");
        assert!(text.contains(&format!("* {o}\n")), "considered option {o}");
    }
    // Valid Markdown as far as it can break: fences are closed, list items are bullets.
    assert_eq!(text.matches("```").count() % 2, 0);
}

#[test]
fn the_record_follows_madr_and_leaves_the_outcome_to_people() {
    let (g, r) = testing::both(5, 0.45, 1.0);
    let arms = [Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &r }];
    let text = render(&arms, &Record { date: "2026-11-29", prefer: None, folder: "" });
    assert_madr(&text, &["gRPC", "REST"]);
    assert!(text.contains("Not decided. A measurement does not decide"), "{text}");
    let grpc = text.split("\n### gRPC\n").nth(1).unwrap().split("\n### REST\n").next().unwrap();
    assert!(grpc.contains("* Good, because REST's caller CPU per request is 2.22× gRPC's"), "{grpc}");
    assert!(
        grpc.contains(
            "* Neutral, because latency p99 showed no detectable difference where the rounds could have seen ±0.8% \
             (REST 501.11 ms, gRPC 501.31 ms)"
        ),
        "{grpc}"
    );
    let rest = text.split("\n### REST\n").nth(1).unwrap();
    assert!(rest.contains("* Bad, because REST's caller CPU per request is 2.22× gRPC's"), "{rest}");
    assert!(text.contains("git checkout 0123456789abcdef0123456789abcdef01234567\ncargo run --release -p harness -- --transport both --qps 100"));
    assert!(text.contains("* Caveats: one machine") && text.contains("no TLS"), "{text}");
}

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pre-layout-both")
}

#[test]
fn adr_on_a_saved_folder_prints_or_writes_the_record() {
    let o = harness_cmd(&["adr", fixture().to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert_madr(&text, &["gRPC", "REST"]);
    assert!(text.contains("Not decided."));

    let out = std::env::temp_dir().join(format!("gvr-adr-{}.md", std::process::id()));
    let o = harness_cmd(&["adr", fixture().to_str().unwrap(), "--prefer", "grpc", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    assert_madr(&text, &["gRPC", "REST"]);
    assert!(text.contains("Chosen option: \"gRPC\", because"), "{text}");
    std::fs::remove_file(&out).unwrap();

    // One arm is not a comparison.
    let o = harness_cmd(&["adr", fixture().join("grpc").to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}
