//! One tier as a child process: started in its own process group with a
//! parent-death signal, its ready line read, the tail of its stderr kept for
//! error messages, and stopped with SIGTERM then SIGKILL.

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use service::ReadyLine;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use crate::result::TierName;

/// The argument that puts the harness executable in a tier's role.
pub const TIER_ROLE_ARG: &str = "__tier";
/// How long a tier may take to print its ready line.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Lines of a tier's stderr kept for error messages.
const STDERR_TAIL_LINES: usize = 20;

/// Why a tier could not be started.
#[derive(Debug, thiserror::Error)]
pub enum TierError {
    #[error("could not start the {tier}: {reason}")]
    Spawn { tier: TierName, reason: String },
    #[error("the {tier} exited before it was ready ({status}); its last stderr lines:\n{stderr}")]
    Exited { tier: TierName, status: String, stderr: String },
    #[error("the {tier} printed no ready line within {timeout:?}; its last stderr lines:\n{stderr}")]
    NotReady { tier: TierName, timeout: Duration, stderr: String },
    #[error(
        "the {tier} command `{command}` {what}; its last output lines:\n{stderr}\n(docs/stacks.md: the placeholders it must listen on)"
    )]
    Foreign { tier: TierName, command: String, what: String, stderr: String },
}

/// The last lines a tier wrote to stderr, filled by a reader task.
pub(crate) type StderrTail = Arc<Mutex<VecDeque<String>>>;

/// One running tier.
#[derive(Debug)]
pub struct Tier {
    pub name: TierName,
    pub ready: ReadyLine,
    child: Child,
    stderr_tail: StderrTail,
    /// A tier started as a command of the user's (`--downstream-cmd`): the
    /// command as run and its arm, for messages; stopped as a whole process tree.
    pub foreign: Option<Foreign>,
}

/// What a foreign tier was started as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Foreign {
    /// The command as run, placeholders filled.
    pub command: String,
    /// Its arm's transport (`grpc`, `rest`, …).
    pub arm: &'static str,
}

impl Tier {
    pub fn pid(&self) -> u32 {
        self.ready.pid
    }

    pub fn admin_url(&self) -> String {
        format!("http://{}", self.ready.listeners.get("admin").map(ToString::to_string).unwrap_or_default())
    }

    /// Its listeners as `name address` pairs, for the start-up line.
    pub fn listeners_text(&self) -> String {
        self.ready.listeners.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
    }

    /// The last lines the tier wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        tail_text(&self.stderr_tail)
    }

    /// `Some(status)` once the tier has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Its name in messages: the tier, and a foreign tier's command.
    pub fn label(&self) -> String {
        match &self.foreign {
            Some(f) => format!("{} of the {} arm (`{}`)", self.name, f.arm, f.command),
            None => self.name.to_string(),
        }
    }

    /// SIGTERM, then up to `grace` for the drain (cut short by `cut`), then
    /// SIGKILL; then whatever is left of its process group (a proxy's
    /// workers) is killed too. A foreign tier's whole tree is signalled by
    /// `tiers::foreign::stop` instead (the launcher picks).
    pub async fn stop(mut self, grace: Duration, cut: &CancellationToken) -> Option<ExitStatus> {
        let status = match self.exited() {
            Some(status) => Some(status),
            None => {
                let _ = kill(Pid::from_raw(self.ready.pid as i32), Signal::SIGTERM);
                let drained = tokio::select! {
                    waited = tokio::time::timeout(grace, self.child.wait()) => waited.ok().and_then(Result::ok),
                    _ = cut.cancelled() => None,
                };
                match drained {
                    Some(status) => Some(status),
                    None => {
                        let _ = self.child.start_kill();
                        self.child.wait().await.ok()
                    }
                }
            }
        };
        // Every tier leads its own process group (see `launch`).
        let _ = nix::sys::signal::killpg(Pid::from_raw(self.ready.pid as i32), Signal::SIGKILL);
        status
    }
}

pub(crate) fn tail_text(tail: &Mutex<VecDeque<String>>) -> String {
    let lines = tail.lock().unwrap_or_else(|e| e.into_inner());
    if lines.is_empty() { "(nothing)".to_owned() } else { lines.iter().cloned().collect::<Vec<_>>().join("\n") }
}

pub(crate) async fn spawn(tier: TierName, args: Vec<String>) -> Result<Tier, TierError> {
    let spawn_err = |reason: String| TierError::Spawn { tier, reason };
    let exe = std::env::current_exe().map_err(|e| spawn_err(format!("finding the harness executable: {e}")))?;
    // The tiers run the very build the harness records, even when the file
    // has been rebuilt or removed during the run (cargo relinks in place):
    // /proc/self/exe, resolved in the forked child, is still this image.
    // The name people see in `ps` stays the executable's path.
    let proc_exe = std::path::Path::new("/proc/self/exe");
    let mut cmd = if proc_exe.exists() { Command::new(proc_exe) } else { Command::new(&exe) };
    cmd.arg0(&exe);
    cmd.arg(TIER_ROLE_ARG).arg(tier.as_str()).args(&args);
    let (mut child, stderr_tail) = launch(tier, cmd, Signal::SIGKILL)?;
    let stdout = child.stdout.take().ok_or_else(|| spawn_err("no stdout pipe".into()))?;
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(READY_TIMEOUT, lines.next_line()).await;
    let line = match first {
        Ok(Ok(Some(line))) => line,
        Ok(_) => return Err(exited(tier, &mut child, &stderr_tail).await),
        Err(_) => {
            let _ = child.start_kill();
            return Err(TierError::NotReady { tier, timeout: READY_TIMEOUT, stderr: tail_text(&stderr_tail) });
        }
    };
    let ready: ReadyLine = serde_json::from_str(&line)
        .map_err(|e| spawn_err(format!("its ready line {line:?} is not the expected JSON: {e}")))?;
    Ok(Tier { name: tier, ready, child, stderr_tail, foreign: None })
}

/// The error for a process that exited before it was ready, with its stderr tail.
pub(crate) async fn exited(tier: TierName, child: &mut Child, tail: &Mutex<VecDeque<String>>) -> TierError {
    let status = child.wait().await.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
    // Give the stderr reader a moment to take the last lines.
    tokio::time::sleep(Duration::from_millis(50)).await;
    TierError::Exited { tier, status, stderr: tail_text(tail) }
}

/// Starts `cmd` as a tier process: its own process group, sent `on_harness_death`
/// when the harness dies (however it dies), stdout piped, the tail of its
/// stderr kept for error messages.
pub(crate) fn launch(
    tier: TierName,
    mut cmd: Command,
    on_harness_death: Signal,
) -> Result<(Child, StderrTail), TierError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own process group: a Ctrl-C at the terminal reaches only the
        // harness, which then stops the load and the tiers in order.
        .process_group(0);
    die_with_parent(&mut cmd, on_harness_death);
    let mut child = cmd.spawn().map_err(|e| TierError::Spawn { tier, reason: e.to_string() })?;
    let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
    if let Some(stderr) = child.stderr.take() {
        keep_tail(stderr, stderr_tail.clone(), "");
    }
    Ok((child, stderr_tail))
}

/// Reads `from` line by line until it closes, keeping the last
/// [`STDERR_TAIL_LINES`] in `tail` (each after `prefix`).
pub(crate) fn keep_tail(
    from: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    tail: StderrTail,
    prefix: &'static str,
) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(from).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
            if t.len() == STDERR_TAIL_LINES {
                t.pop_front();
            }
            t.push_back(format!("{prefix}{line}"));
        }
    });
}

impl Tier {
    /// A tier from a process started with [`launch`] that is ready.
    pub(crate) fn from_process(name: TierName, ready: ReadyLine, child: Child, stderr_tail: StderrTail) -> Tier {
        Tier { name, ready, child, stderr_tail, foreign: None }
    }

    /// The child process and its stderr tail, for a foreign tier's stop.
    pub(crate) fn parts(&mut self) -> (&mut Child, &StderrTail) {
        (&mut self.child, &self.stderr_tail)
    }
}

/// Asks the kernel to send `signal` to the child when the harness dies, even
/// by SIGKILL, so no tier outlives a run. SIGKILL for a tier that is one
/// process; a catchable signal for one that must take its own children down
/// (nginx's master stops its workers on SIGTERM; they would outlive a killed
/// master). If the harness died before the signal was armed, the child exits.
#[cfg(target_os = "linux")]
pub(crate) fn die_with_parent(cmd: &mut Command, signal: Signal) {
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and only calls
    // prctl(2) and getppid(2), which are async-signal-safe.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(signal).map_err(std::io::Error::from)?;
            if nix::unistd::getppid().as_raw() as u32 != parent {
                return Err(std::io::Error::other("the harness died while starting this tier"));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn die_with_parent(_cmd: &mut Command, _signal: Signal) {}

/// Starts a command that is not ours with transparent huge pages as `mode`
/// says (`--huge-pages`), not as the harness, which turns them off for
/// itself, would hand them on.
#[cfg(target_os = "linux")]
pub(crate) fn with_huge_pages(cmd: &mut Command, mode: crate::config::HugePages) {
    // SAFETY: the closure runs in the forked child before exec and only
    // calls prctl(2) (`service::huge_pages::set`), which is async-signal-safe.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || service::huge_pages::set(mode));
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn with_huge_pages(_cmd: &mut Command, _mode: crate::config::HugePages) {}
