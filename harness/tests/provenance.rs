//! Provenance: a run records the commit the harness binary was built from,
//! wherever it is started.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let o = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_owned())
}

#[test]
fn git_commit_is_the_builds_not_the_current_directorys() {
    // Another repository, with a commit of its own, as the current directory.
    let elsewhere = out_dir("provenance-repo");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("file"), b"x").unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "file"],
        &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "other"],
    ] {
        git(&elsewhere, args).expect("git works in a temporary folder");
    }
    let other = git(&elsewhere, &["rev-parse", "HEAD"]).unwrap();
    let built = git(Path::new(env!("CARGO_MANIFEST_DIR")), &["rev-parse", "HEAD"]);

    let out = out_dir("provenance");
    let o = short_run(&out).flags("--duration 300ms --delay 5ms").command().current_dir(&elsewhere).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let run = load(&run_folder(&out));
    assert_ne!(
        run.environment.git_commit.as_deref(),
        Some(other.as_str()),
        "recorded the current directory's repository"
    );
    // The test binary and the harness were built from the same checkout (None outside one).
    assert_eq!(run.environment.git_commit, built);
    assert_eq!(run.environment.git_dirty.is_some(), built.is_some());
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&elsewhere);
}
