//! `harness rerun`: a saved run's configuration measured again into a new
//! folder, its `config` in run.json byte for byte the same.

use crate::common;

use common::*;

fn config_json(folder: &std::path::Path, arm: &str) -> String {
    let text = std::fs::read_to_string(folder.join(arm).join("run.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    serde_json::to_string(&v["config"]).unwrap()
}

#[test]
fn rerun_repeats_the_saved_configuration_into_a_new_folder() {
    let out = out_dir("rerun");
    let o = short_run(&out)
        .flags("--transport both --qps 25 --warmup 200ms --rounds 1 --delay 15ms --jitter 1500us --items 3")
        .flags("--plan-qps 400 --label again")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let first = run_folder(&out);

    let o = harness_cmd(&["rerun", first.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    // Same machine and build: nothing differs, and it says so; where the
    // load goes and the run is written are said before it starts.
    assert!(stderr.contains("harness rerun: same environment as the saved run"), "{stderr}");
    let said =
        format!("harness rerun: sending load to tiers it starts on this machine; writing under {}", out.display());
    assert!(stderr.contains(&said), "{stderr}");
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
    let o = short_run(&out).flags("--transport rest --qps 20,40 --warmup 200ms --delay 15ms").output();
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

/// A saved run naming a load target off this machine (a run.json from
/// elsewhere, or tampered with) is refused before anything starts unless the
/// target is given again.
#[test]
fn a_saved_target_off_this_machine_must_be_given_again() {
    let out = out_dir("rerun-remote");
    let mut run = harness::testing::run(caller::Transport::Grpc, 1.0);
    // TEST-NET-3: reserved for documentation, never a real host.
    run.config.deploy.remote.caller_url.insert("grpc".into(), "http://203.0.113.5:8000".into());
    run.config.output.out = out.join("reruns");
    // Remote tiers keep one set of processes, as such a run would have.
    run.config.load.fresh_tiers = false;
    let folder = harness::export::write_run(&run, &out).unwrap();
    let o = harness_cmd(&["rerun", folder.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("sends load to http://203.0.113.5:8000, which is not this machine"), "{stderr}");
    assert!(!stderr.contains("sending load to"), "{stderr}");
    assert!(!out.join("reruns").exists(), "a refused rerun wrote under its --out");
    std::fs::remove_dir_all(&out).unwrap();
}
