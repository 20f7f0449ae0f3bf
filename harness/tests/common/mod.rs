//! Helpers for tests that run the real harness binary: temporary output
//! folders, spawning with a marker so every process a test started can be
//! found (and proved gone) afterwards, and reading the run folder back.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::result::RunResult;

/// The environment variable that marks a test's processes (tiers inherit it).
pub const MARK_VAR: &str = "GVR_TEST_MARK";

pub fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gvr-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

pub fn harness_cmd(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
    cmd.args(args);
    cmd
}

/// A harness started in the background, its tiers known.
pub struct Started {
    pub child: Child,
    pub mark: String,
    pub downstream: i32,
    pub caller: i32,
    /// When the harness named its tiers (shortly before the load starts).
    pub tiers_at: Instant,
    stderr: Arc<Mutex<String>>,
}

impl Started {
    /// Everything the harness wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits for the harness to exit (at most `limit`) and returns its exit code.
    pub fn wait(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the stderr reader take the last lines.
                std::thread::sleep(Duration::from_millis(100));
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the harness did not exit within {limit:?}; stderr:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn sleep_until(&self, since_tiers: Duration) {
        let at = self.tiers_at + since_tiers;
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
    }
}

/// Starts the harness with `args` and waits until it names its tiers.
pub fn start(args: &[&str]) -> Started {
    let mark = format!("{}-{}", std::process::id(), MARKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let mut child =
        harness_cmd(args).env(MARK_VAR, &mark).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let text = Arc::new(Mutex::new(String::new()));
    let mut line = String::new();
    let (downstream, caller) = loop {
        line.clear();
        if stderr.read_line(&mut line).unwrap() == 0 {
            let _ = child.wait();
            panic!("the harness ended before naming its tiers:\n{}", text.lock().unwrap());
        }
        text.lock().unwrap().push_str(&line);
        if let Some(rest) = line.strip_prefix("tiers: downstream pid ") {
            let ds = rest.split_whitespace().next().unwrap().parse().unwrap();
            let caller = rest.split("caller pid ").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
            break (ds, caller);
        }
    };
    let tiers_at = Instant::now();
    let sink = text.clone();
    std::thread::spawn(move || {
        for line in stderr.lines() {
            let Ok(line) = line else { break };
            let mut t = sink.lock().unwrap();
            t.push_str(&line);
            t.push('\n');
        }
    });
    Started { child, mark, downstream, caller, tiers_at, stderr: text }
}

static MARKS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// True if `pid` is running (a zombie has already died).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

/// Live processes carrying `mark` in their environment.
pub fn marked(mark: &str) -> Vec<i32> {
    let needle = format!("{MARK_VAR}={mark}");
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
                .unwrap_or(false)
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// The pid of the marked tier process `role` (`downstream`, `caller`), found
/// by its command line: for runs that do not print their tiers (`--quiet`).
/// Waits for it at most `limit`.
pub fn marked_tier(mark: &str, role: &str, limit: Duration) -> i32 {
    let needle = format!("__tier\0{role}\0");
    let deadline = Instant::now() + limit;
    loop {
        let found = marked(mark).into_iter().find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.windows(needle.len()).any(|w| w == needle.as_bytes()))
        });
        if let Some(pid) = found {
            return pid;
        }
        assert!(Instant::now() < deadline, "no {role} tier with mark {mark} appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts that every process carrying `mark` is gone within `limit`.
pub fn assert_none_left(mark: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let left = marked(mark);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "processes still running: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).unwrap();
}

/// The run folders under `out` (hidden ones left out), in name order.
pub fn run_folders(out: &Path) -> Vec<PathBuf> {
    let mut folders: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    folders.sort();
    folders
}

/// The one run folder under `out`.
pub fn run_folder(out: &Path) -> PathBuf {
    let folders = run_folders(out);
    assert_eq!(folders.len(), 1, "expected one run folder in {}: {folders:?}", out.display());
    folders.into_iter().next().unwrap()
}

pub fn load(folder: &Path) -> RunResult {
    let text = std::fs::read_to_string(folder.join("run.json")).unwrap();
    serde_json::from_str(&text).expect("run.json parses into the documented structure")
}

/// Entries of `out`, hidden ones included.
pub fn entries(out: &Path) -> Vec<String> {
    std::fs::read_dir(out)
        .map(|d| d.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned())).collect())
        .unwrap_or_default()
}

/// A run's validity notes but those a busy or shared machine alone can cause
/// (the generator fell behind its schedule; the hypervisor's steal): what a
/// test of something else asserts to be empty.
pub fn validity_apart_from_the_machine(run: &RunResult) -> Vec<&String> {
    run.validity
        .iter()
        .filter(|n| !n.ends_with(harness::judge::validity::FELL_BEHIND) && !n.contains("(steal, over"))
        .collect()
}

/// A tier started by the test itself (as remote tiers are), killed when dropped.
pub struct TierProcess {
    pub child: Child,
    pub ready: service::ReadyLine,
}

impl Drop for TierProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TierProcess {
    pub fn url(&self, listener: &str) -> String {
        format!("http://{}", self.ready.listeners[listener])
    }
}

/// Starts a tier (`harness __tier ROLE`), in network namespace `netns` if
/// given, and waits for its ready line.
pub fn start_tier(netns: Option<&str>, role: &str, args: &[String]) -> TierProcess {
    let exe = env!("CARGO_BIN_EXE_harness");
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, exe]);
            c
        }
        None => Command::new(exe),
    };
    let mut child =
        cmd.arg("__tier").arg(role).args(args).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let ready = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{role} ready line {line:?}: {e}"));
    TierProcess { child, ready }
}

/// Every `.rs` file under `dir`, at any depth (nothing if it does not exist).
pub fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
