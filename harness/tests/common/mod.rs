//! Helpers for tests that run the real harness binary: temporary output
//! folders, the command line of a short run ([`short_run`]), spawning with a
//! marker so every process a test started can be found (and proved gone)
//! afterwards, and reading the run folder back.

#![allow(dead_code)]

pub mod browser;

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::result::RunResult;

/// The environment variable that marks a test's processes (tiers inherit it).
pub const MARK_VAR: &str = "GVR_TEST_MARK";

/// A test's own output folder `name` under the temporary folder, emptied
/// (this test process's id in its name keeps concurrent runs apart).
pub fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gvr-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The harness binary with `args`, not yet started.
pub fn harness_cmd<S: AsRef<OsStr>>(args: &[S]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
    cmd.args(args);
    cmd
}

/// The load of a short run, flag by flag, in the order its command line
/// gives them: 20 req/s for one second after no warm-up, every call held
/// 20 ms by the downstream.
pub const SHORT_RUN: [(&str, &str); 4] =
    [("--qps", "20"), ("--duration", "1s"), ("--warmup", "0s"), ("--delay", "20ms")];

/// The command line of a short run of the real harness, as most tests here
/// make one: the load of [`SHORT_RUN`], `--quiet`, and `--out` the test's
/// folder, with the test's own flags between them. A flag of the base that
/// the test names takes the test's value instead (never given twice);
/// [`ShortRun::without`] leaves one out. A run takes no positional
/// argument, so the order the flags are named in changes nothing.
#[derive(Clone, Debug)]
pub struct ShortRun {
    /// The base load flags and their values; `None` where left out.
    load: Vec<(&'static str, Option<String>)>,
    quiet: bool,
    out: PathBuf,
    /// The test's own flags and values, in its order.
    flags: Vec<String>,
}

/// A short run writing its folder under `out` (see [`ShortRun`]).
pub fn short_run(out: &Path) -> ShortRun {
    let load = SHORT_RUN.iter().map(|(flag, value)| (*flag, Some((*value).to_owned()))).collect();
    ShortRun { load, quiet: true, out: out.to_owned(), flags: Vec::new() }
}

impl ShortRun {
    /// Adds flags written as on a shell's command line, split at white space
    /// (`"--transport both --rounds 2"`); a value with a space in it, or one
    /// the test computes, goes through [`ShortRun::args`].
    pub fn flags(self, line: &str) -> ShortRun {
        self.args(&line.split_whitespace().collect::<Vec<_>>())
    }

    /// Adds flags one argument at a time. A load flag of [`SHORT_RUN`] among
    /// them replaces the base one with the argument after it; `--quiet`
    /// puts back what [`ShortRun::without`] left out.
    pub fn args<S: AsRef<str>>(mut self, args: &[S]) -> ShortRun {
        let mut args = args.iter().map(|a| a.as_ref().to_owned());
        while let Some(arg) = args.next() {
            if arg == "--quiet" {
                self.quiet = true;
            } else if let Some((flag, value)) = self.load.iter_mut().find(|(flag, _)| *flag == arg) {
                *value = Some(args.next().unwrap_or_else(|| panic!("{flag} without a value")));
            } else {
                self.flags.push(arg);
            }
        }
        self
    }

    /// Leaves out a flag of the base: `--qps` for a closed loop,
    /// `--quiet` for a run that prints its summary and tiers.
    pub fn without(mut self, flag: &str) -> ShortRun {
        if flag == "--quiet" {
            self.quiet = false;
        } else {
            let (_, value) = self
                .load
                .iter_mut()
                .find(|(f, _)| *f == flag)
                .unwrap_or_else(|| panic!("{flag} is not a flag of a short run's base"));
            *value = None;
        }
        self
    }

    /// The whole command line after the executable's name.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        for (flag, value) in &self.load {
            if let Some(value) = value {
                args.extend([(*flag).to_owned(), value.clone()]);
            }
        }
        args.extend(self.flags.iter().cloned());
        if self.quiet {
            args.push("--quiet".to_owned());
        }
        args.extend(["--out".to_owned(), self.out.to_str().expect("a UTF-8 output folder").to_owned()]);
        args
    }

    /// The harness with this command line, for a test to give it an
    /// environment, a working folder or pipes.
    pub fn command(&self) -> Command {
        harness_cmd(&self.to_args())
    }

    /// Runs it to its end: its exit status and what it printed.
    pub fn output(&self) -> Output {
        self.command().output().unwrap()
    }

    /// Starts it in the background with [`start`], always without
    /// `--quiet`: a quiet run never names the tiers `start` waits for.
    pub fn start(&self) -> Started {
        start(&self.clone().without("--quiet").to_args())
    }
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

    /// Sleeps until `since_tiers` after the harness named its tiers.
    pub fn sleep_until(&self, since_tiers: Duration) {
        let at = self.tiers_at + since_tiers;
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
    }
}

/// Starts the harness with `args` and waits until it names its tiers.
pub fn start<S: AsRef<OsStr>>(args: &[S]) -> Started {
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

/// Sends `sig` to `pid`.
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

/// The run.json of `folder`, parsed.
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
/// (the generator fell behind its schedule; the hypervisor's steal; other
/// load over its share of the cores): what a test of something else
/// asserts to be empty.
pub fn validity_apart_from_the_machine(run: &RunResult) -> Vec<&String> {
    run.validity
        .iter()
        .filter(|n| {
            !n.ends_with(harness::judge::validity::FELL_BEHIND)
                && !n.contains("(steal, over")
                && !n.ends_with(harness::judge::validity::COMPETED)
        })
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
