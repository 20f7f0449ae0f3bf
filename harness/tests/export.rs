//! Run folders: never overwritten, whole or absent, and readable back.

use caller::Transport;
use harness::export::{folder_name, write_run};
use harness::result::RunResult;

#[test]
fn the_same_name_twice_gets_a_suffix_and_both_folders_are_whole() {
    let out = std::env::temp_dir().join(format!("gvr-export-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = harness::testing::run(Transport::Grpc, 1.0);
    assert_eq!(folder_name(&run.started_at, "grpc", "100qps", None), "20261129T120000Z-grpc-100qps");
    let first = write_run(&run, &out).unwrap();
    let second = write_run(&run, &out).unwrap();
    assert_ne!(first, second);
    assert!(second.ends_with("20261129T120000Z-grpc-100qps-2"));
    for folder in [&first, &second] {
        let back: RunResult = serde_json::from_slice(&std::fs::read(folder.join("run.json")).unwrap()).unwrap();
        assert_eq!(back, run);
        assert!(folder.join("report.md").is_file() && folder.join("latency.hgrm").is_file());
    }
    let hidden: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(hidden.is_empty(), "temporary folders left behind");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_crafted_histogram_in_a_saved_run_is_refused_naming_it() {
    use base64::Engine;
    let out = std::env::temp_dir().join(format!("gvr-export-crafted-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = harness::testing::run(Transport::Grpc, 1.0);
    let good = write_run(&run, &out).unwrap();
    let crafted = write_run(&run, &out).unwrap();
    // The corrected histogram declaring a range of 2^62 µs at 5 digits: made
    // as declared it would be gigabytes from a few bytes of run.json.
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(crafted.join("run.json")).unwrap()).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut bytes = b64.decode(json["rounds"][0]["histograms"]["corrected"].as_str().unwrap()).unwrap();
    bytes[12..16].copy_from_slice(&5u32.to_be_bytes());
    bytes[24..32].copy_from_slice(&(1u64 << 62).to_be_bytes());
    json["rounds"][0]["histograms"]["corrected"] = b64.encode(&bytes).into();
    std::fs::write(crafted.join("run.json"), serde_json::to_vec(&json).unwrap()).unwrap();
    for args in [vec!["compare".into(), good.clone(), crafted.clone()], vec!["adr".into(), crafted.clone()]] {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_harness")).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("round 1 histogram corrected is refused: it declares 5 significant digits"),
            "{stderr}"
        );
        assert!(stderr.contains(&*crafted.to_string_lossy()), "{stderr}");
    }
    std::fs::remove_dir_all(&out).unwrap();
}
