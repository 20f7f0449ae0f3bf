//! `harness rerun`: a saved run's configuration measured again into a new
//! folder, its `config` in run.json byte for byte the same.

mod common;

use common::*;

fn config_json(folder: &std::path::Path, arm: &str) -> String {
    let text = std::fs::read_to_string(folder.join(arm).join("run.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    serde_json::to_string(&v["config"]).unwrap()
}

#[test]
fn rerun_repeats_the_saved_configuration_into_a_new_folder() {
    let out = out_dir("rerun");
    let args = [
        "--transport",
        "both",
        "--qps",
        "25",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--rounds",
        "1",
        "--delay",
        "15ms",
        "--jitter",
        "1500us",
        "--items",
        "3",
        "--plan-qps",
        "400",
        "--label",
        "again",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    let o = harness_cmd(&args).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let first = run_folder(&out);

    let o = harness_cmd(&["rerun", first.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    // Same machine and build: nothing differs, and it says so.
    assert!(stderr.contains("harness rerun: same environment as the saved run"), "{stderr}");
    let folders = run_folders(&out);
    assert_eq!(folders.len(), 2, "{folders:?}");
    let second = folders.into_iter().find(|f| *f != first).unwrap();
    for arm in ["grpc", "rest"] {
        assert_eq!(config_json(&second, arm), config_json(&first, arm), "{arm}");
    }
    assert!(second.join("decision.md").is_file());

    // A folder that is not a run is refused before anything starts.
    let o = harness_cmd(&["rerun", out.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    std::fs::remove_dir_all(&out).unwrap();
}

/// A sweep folder is repeated with its whole list of rates: a new sweep
/// folder whose steps have the same configurations.
#[test]
fn rerun_repeats_a_sweep_with_its_rates() {
    let out = out_dir("rerun-sweep");
    let args = [
        "--transport",
        "rest",
        "--qps",
        "20,40",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--delay",
        "15ms",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    let o = harness_cmd(&args).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let first = run_folder(&out);
    let o = harness_cmd(&["rerun", first.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let second = run_folders(&out).into_iter().find(|p| *p != first).unwrap();
    let rates = |folder: &std::path::Path| {
        let text = std::fs::read_to_string(folder.join("capacity.json")).unwrap();
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["offered_qps"].clone()
    };
    assert_eq!(rates(&second), serde_json::json!([20.0, 40.0]));
    assert_eq!(rates(&second), rates(&first));
    for step in ["step-20qps", "step-40qps"] {
        let cfg = |f: &std::path::Path| {
            let text = std::fs::read_to_string(f.join(step).join("run.json")).unwrap();
            serde_json::from_str::<serde_json::Value>(&text).unwrap()["config"].clone()
        };
        assert_eq!(cfg(&second), cfg(&first), "{step}");
    }
    std::fs::remove_dir_all(&out).unwrap();
}
