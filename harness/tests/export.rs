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
