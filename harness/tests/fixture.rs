//! A run folder written by an earlier build (a `--transport both` run with
//! three short rounds, before the harness was reorganised) must still be
//! read, and rendered byte for byte as it was then: `harness compare` on it
//! gives the same comparison.md, and each arm's report.md and .hgrm files come
//! out of its run.json unchanged. When a report's format is changed on
//! purpose, regenerate the expected files (UPDATE_SNAPSHOTS=1, as for the
//! render snapshots), review the diff, and say so in the commit.

use crate::common;

use std::path::{Path, PathBuf};

use common::harness_cmd;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pre-layout-both")
}

fn same_bytes(expected: &Path, actual: &Path) {
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::copy(actual, expected).unwrap();
    }
    let (e, a) = (std::fs::read(expected).unwrap(), std::fs::read(actual).unwrap());
    assert!(e == a, "{} differs from {}:\n{}", actual.display(), expected.display(), String::from_utf8_lossy(&a));
}

#[test]
fn compare_on_an_old_folder_renders_the_same_comparison() {
    let out = std::env::temp_dir().join(format!("gvr-fixture-compare-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = harness_cmd(&["compare", fixture().to_str().unwrap(), "--out", out.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    same_bytes(&fixture().join("comparison.md"), &out.join("comparison.md"));
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn each_arm_of_an_old_folder_renders_the_same_report() {
    let runs = harness::export::read_runs(&fixture()).unwrap();
    assert_eq!(runs.len(), 2);
    let out = std::env::temp_dir().join(format!("gvr-fixture-arms-{}", std::process::id()));
    for run in &runs {
        let arm = run.config.transport.as_str();
        let dir = out.join(arm);
        harness::export::files::write_arm(&dir, run).unwrap();
        for file in ["report.md", "latency.hgrm", "latency-round-1.hgrm", "latency-round-3.hgrm"] {
            same_bytes(&fixture().join(arm).join(file), &dir.join(file));
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
}
