//! A second `cargo build` compiles nothing: the harness's build script
//! (which records the commit and the dirty state) is run again only when
//! a file it watches is missing or newer than its last run, and cargo then
//! compiles the whole harness again. This reads what the last run of the
//! script told cargo to watch, and applies cargo's own rule to it: every
//! watched path exists, and nothing under it changed after the script ran
//! (a `git status` that refreshes `.git/index` from inside the script, or
//! a `.git/packed-refs` a checkout lacks, would each rebuild every time).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The build folders of the harness package's build script runs, beside
/// the binary under test.
fn build_dirs() -> Vec<PathBuf> {
    let bin = Path::new(env!("CARGO_BIN_EXE_harness"));
    let build = bin.parent().unwrap().join("build");
    std::fs::read_dir(&build)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("harness-") && p.join("output").is_file())
        .collect()
}

/// The newest modification time of `path`, of everything below it for a folder.
fn newest(path: &Path) -> Option<SystemTime> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let own = meta.modified().ok()?;
    if !meta.is_dir() {
        return Some(own);
    }
    let below = std::fs::read_dir(path).ok()?.flatten().filter_map(|e| newest(&e.path()));
    Some(below.fold(own, SystemTime::max))
}

/// Why cargo would run the build script again, if it would.
fn stale(dir: &Path) -> Vec<String> {
    let output = std::fs::read_to_string(dir.join("output")).unwrap();
    // Cargo compares against when it invoked the script (before the
    // script's own writes), so a file the script touches counts as changed.
    let invoked = dir.join("invoked.timestamp");
    let ran = std::fs::metadata(if invoked.exists() { invoked } else { dir.join("output") })
        .and_then(|m| m.modified())
        .unwrap();
    let watched: Vec<&str> = output.lines().filter_map(|l| l.strip_prefix("cargo:rerun-if-changed=")).collect();
    assert!(!watched.is_empty(), "{output}");
    watched
        .into_iter()
        .filter_map(|p| match newest(Path::new(p)) {
            None => Some(format!("{p} is watched but missing")),
            Some(t) if t > ran => Some(format!("{p} changed after the build script ran")),
            Some(_) => None,
        })
        .collect()
}

#[test]
fn the_build_script_watches_only_files_that_exist_and_that_it_leaves_alone() {
    let dirs = build_dirs();
    assert!(!dirs.is_empty(), "no build script output beside {}", env!("CARGO_BIN_EXE_harness"));
    // The run that built the binary under test is the newest.
    let newest_run = dirs.iter().max_by_key(|d| std::fs::metadata(d.join("output")).unwrap().modified().unwrap());
    let dir = newest_run.unwrap();
    let output = std::fs::read_to_string(dir.join("output")).unwrap();
    assert!(output.contains("cargo:rustc-env=HARNESS_GIT_COMMIT="), "{output}");
    let problems = stale(dir);
    assert!(problems.is_empty(), "cargo would compile the harness again: {problems:#?}\n{output}");
}

#[test]
fn a_missing_or_touched_path_is_seen_as_cargo_sees_it() {
    let dir = std::env::temp_dir().join(format!("gvr-rebuild-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src/deep")).unwrap();
    let watched = dir.join("src");
    std::fs::write(watched.join("deep/a.rs"), "").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let output =
        format!("cargo:rerun-if-changed={}\ncargo:rerun-if-changed={}/packed-refs\n", watched.display(), dir.display());
    std::fs::write(dir.join("output"), &output).unwrap();
    assert_eq!(stale(&dir), [format!("{}/packed-refs is watched but missing", dir.display())]);
    std::fs::write(dir.join("output"), format!("cargo:rerun-if-changed={}\n", watched.display())).unwrap();
    assert!(stale(&dir).is_empty());
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(watched.join("deep/a.rs"), "x").unwrap();
    assert_eq!(stale(&dir).len(), 1, "a file below a watched folder changed");
    std::fs::remove_dir_all(&dir).unwrap();
}
