//! `--out` on a filesystem without room: refused at validation when the run
//! would not fit, and never a `.tmp-…` folder left behind when a write fails.
//! Each test mounts a small tmpfs, so it needs root (CI runs as root);
//! elsewhere it says so and passes.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A tmpfs of `size` mounted on a fresh folder, unmounted on drop; `None`
/// (with a message) when this user cannot mount.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(name: &str, size: &str) -> Option<Tmpfs> {
        let dir = out_dir(name);
        std::fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: could not mount a tmpfs on {} (it needs root; CI runs as root)", dir.display());
            let _ = std::fs::remove_dir_all(&dir);
            return None;
        }
        Some(Tmpfs(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits for `child` at most `limit`, killing it past that.
fn wait(child: &mut std::process::Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the harness still ran after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_out_without_room_for_the_run_is_refused_before_starting() {
    let Some(fs) = Tmpfs::mount("disk-small", "1m") else { return };
    let mark = format!("disk-small-{}", std::process::id());
    // Ten minutes of samples do not fit in 1 MiB.
    let mut child = harness_cmd(&["--duration", "10m", "--delay", "20ms", "--out", fs.path().to_str().unwrap()])
        .env(MARK_VAR, &mark)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let code = wait(&mut child, Duration::from_secs(60));
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("harness: --out:") && err.contains("free"), "{err}");
    assert!(!err.contains("tiers:"), "{err}");
    assert_none_left(&mark, Duration::from_secs(5));
    assert!(entries(fs.path()).is_empty(), "{:?}", entries(fs.path()));
}

#[test]
fn a_disk_that_fills_during_the_run_leaves_no_temporary_folder() {
    let Some(fs) = Tmpfs::mount("disk-fills", "8m") else { return };
    let mut h = short_run(fs.path()).flags("--duration 2s --delay 5ms").start();
    // Someone else fills the disk while the run measures.
    let filler = fs.path().join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let block = vec![0u8; 64 * 1024];
    while std::io::Write::write_all(&mut f, &block).is_ok() {}
    drop(f);
    let code = h.wait(Duration::from_secs(60));
    assert_none_left(&h.mark, Duration::from_secs(5));
    assert_eq!(code, Some(1), "{}", h.stderr());
    assert!(h.stderr().contains("writing the run folder"), "{}", h.stderr());
    let left: Vec<String> = entries(fs.path()).into_iter().filter(|e| e != "filler").collect();
    assert!(left.is_empty(), "a failed write left {left:?}");
}
