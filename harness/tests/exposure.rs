//! `--bind` beyond loopback: said on stderr, in run.json and report.md, and
//! the admin listeners stay on loopback unless `--admin-bind` says otherwise.

use crate::common;

use std::time::Duration;

use common::*;

#[test]
fn a_non_loopback_bind_warns_records_and_keeps_admin_on_loopback() {
    let out = out_dir("exposure");
    let mut h = short_run(&out).flags("--bind 0.0.0.0 --duration 500ms --delay 5ms").start();
    assert_eq!(h.wait(Duration::from_secs(60)), Some(0), "{}", h.stderr());
    assert_none_left(&h.mark, Duration::from_secs(5));
    let err = h.stderr();
    assert!(err.contains("--bind 0.0.0.0 is not a loopback address"), "no warning: {err}");
    assert!(err.contains("the byte counters"), "{err}");
    // Every service listener on the given address, every admin listener on loopback.
    let tiers = err.lines().find(|l| l.starts_with("tiers: ")).unwrap();
    for listener in ["grpc 0.0.0.0:", "rest 0.0.0.0:", "front 0.0.0.0:"] {
        assert!(tiers.contains(listener), "{listener}: {tiers}");
    }
    assert_eq!(tiers.matches("admin 127.0.0.1:").count(), 2, "{tiers}");
    assert!(!tiers.contains("admin 0.0.0.0"), "{tiers}");

    let folder = run_folder(&out);
    let run = load(&folder);
    assert_eq!(run.config.deploy.bind.to_string(), "0.0.0.0");
    assert_eq!(run.config.deploy.admin_bind.to_string(), "127.0.0.1");
    let report = std::fs::read_to_string(folder.join("report.md")).unwrap();
    assert!(report.contains("**Listening beyond loopback**") && report.contains("0.0.0.0"), "{report}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn admin_bind_moves_only_the_admin_listeners() {
    let out = out_dir("admin-bind");
    let mut h = short_run(&out).flags("--admin-bind 127.0.0.2 --duration 300ms --delay 5ms").start();
    assert_eq!(h.wait(Duration::from_secs(60)), Some(0), "{}", h.stderr());
    assert_none_left(&h.mark, Duration::from_secs(5));
    let err = h.stderr();
    let tiers = err.lines().find(|l| l.starts_with("tiers: ")).unwrap();
    assert_eq!(tiers.matches("admin 127.0.0.2:").count(), 2, "{tiers}");
    assert!(tiers.contains("front 127.0.0.1:"), "{tiers}");
    // Still loopback: no warning.
    assert!(!err.contains("not a loopback address"), "{err}");
    let run = load(&run_folder(&out));
    // The counters were read over the moved admin listeners.
    assert!(run.rounds[0].bytes.internal.request_wire_bytes.is_some(), "{:?}", run.rounds[0].bytes);
    let _ = std::fs::remove_dir_all(&out);
}
