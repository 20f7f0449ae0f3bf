//! report.html, the one self-contained page of a run folder, in a real
//! browser (headless Chromium, network off; see `common/browser.rs`): an
//! old folder rendered again by `harness report --html`, a real `both`
//! run, and a label that looks like markup. The sweep, streaming, replicas
//! and merged runs' pages are checked in their own tests.

use crate::common;

use std::path::{Path, PathBuf};

use common::browser::{self, DECISION, check, chromium, load, same_figures};
use common::*;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pre-layout-both")
}

/// A copy of the old fixture folder (its run.json files edited by `edit`).
fn fixture_copy(name: &str, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let dir = out_dir(name);
    for arm in ["grpc", "rest"] {
        std::fs::create_dir_all(dir.join(arm)).unwrap();
        let mut run: serde_json::Value =
            serde_json::from_slice(&std::fs::read(fixture().join(arm).join("run.json")).unwrap()).unwrap();
        edit(&mut run);
        std::fs::write(dir.join(arm).join("run.json"), serde_json::to_vec(&run).unwrap()).unwrap();
    }
    dir
}

fn report_html(folder: &Path) {
    let o = harness_cmd(&["report", folder.to_str().unwrap(), "--html"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("report.html"));
}

/// Where screenshots go: `GVR_SCREENSHOTS` (to refresh docs/screenshots/),
/// else the test's folder.
fn screenshot(dir: &Path, name: &str) -> PathBuf {
    std::env::var_os("GVR_SCREENSHOTS").map_or_else(|| dir.join(name), |d| PathBuf::from(d).join(name))
}

#[test]
fn an_old_folder_gets_a_report_html_that_shows_every_figure_in_a_browser() {
    let dir = fixture_copy("html-old", |_| {});
    report_html(&dir);
    let page = dir.join("report.html");
    same_figures(&fixture().join("comparison.md"), &page);
    if let Some(chrome) = chromium() {
        let loaded = load(&chrome, &page, Some(&screenshot(&dir, "comparison.png")));
        check(&loaded, DECISION, 4);
        assert!(loaded.dom.contains("Transport of the internal hop: gRPC or REST"), "no decision record");
    }
    // Without --html the Markdown is printed again, the same as the saved one.
    let o = harness_cmd(&["report", dir.to_str().unwrap()]).output().unwrap();
    let saved = std::fs::read_to_string(fixture().join("comparison.md")).unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), saved.split("\n## Charts\n").next().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_label_that_looks_like_markup_is_shown_as_text() {
    let label = "<img src=x onerror=alert(1)>";
    // The command line refuses it (a label names a folder) ...
    let out = out_dir("html-label-flag");
    let o = short_run(&out).args(&["--label", label]).output();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    // ... and a run.json that holds it anyway renders it as text.
    // (This folder predates the configuration's sections: its label is `config.label`.)
    let dir = fixture_copy("html-label", |run| run["config"]["label"] = label.into());
    report_html(&dir);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(!html.contains("<img"), "the label became an element");
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"), "the label is not shown");
    if let Some(chrome) = chromium() {
        let loaded = load(&chrome, &dir.join("report.html"), None);
        check(&loaded, DECISION, 4);
        assert!(loaded.dom.contains("&lt;img src=x onerror=alert(1)&gt;"), "the label is not text in the DOM");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_both_run_writes_report_html_with_every_figure_of_comparison_md() {
    let out = out_dir("html-both");
    let o = short_run(&out).flags("--transport both --rounds 3").output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    same_figures(&folder.join("comparison.md"), &folder.join("report.html"));
    for arm in ["grpc", "rest"] {
        same_figures(&folder.join(arm).join("report.md"), &folder.join(arm).join("report.html"));
        browser::check_folder(&folder.join(arm), browser::ONE_ARM, 4);
    }
    browser::check_folder(&folder, DECISION, 4);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn the_browser_check_sees_a_page_that_fetches() {
    let Some(chrome) = chromium() else { return };
    let dir = out_dir("html-control");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("fetches.html");
    std::fs::write(&page, "<!DOCTYPE html><p>x</p><img src=\"http://127.0.0.1:9/x.png\">").unwrap();
    let loaded = load(&chrome, &page, None);
    assert_eq!(loaded.requests, ["http://127.0.0.1:9/x.png"], "the net log missed the page's request");
    let _ = std::fs::remove_dir_all(&dir);
}
