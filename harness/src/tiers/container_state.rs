//! What one container is doing, as Docker and the host's kernel tell:
//! its ready line, its host pid, its cgroup's `cpu.stat`, and once it has
//! stopped, how it ended (watched with `docker wait`, so a tier killed by
//! the OOM killer or `docker kill` is noticed as a dead child process is).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use service::ReadyLine;
use tokio::process::Command;
use tokio::task::JoinHandle;

use crate::result::TierName;
use crate::tiers::docker::docker;
use crate::tiers::launch::Death;

/// How long a container may take to print its ready line.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// One started container, watched until it stops.
#[derive(Debug)]
pub(crate) struct Watched {
    pub tier: TierName,
    pub name: String,
    pub watcher: JoinHandle<()>,
    /// Its memory limit, which an OOM kill names.
    memory: Option<u64>,
    /// Its first process's pid on the host, if Docker told it.
    host_pid: Option<u32>,
    /// Set by the watcher once the container has stopped.
    pub died: Arc<OnceLock<Death>>,
}

impl Watched {
    /// Starts watching the container `name`, the node of `tier`.
    pub fn start(tier: TierName, name: &str, memory: Option<u64>, host_pid: Option<u32>) -> Watched {
        let died = Arc::new(OnceLock::new());
        let watcher = tokio::spawn(watch(name.to_owned(), memory, died.clone()));
        Watched { tier, name: name.to_owned(), watcher, memory, host_pid, died }
    }
}

/// [`confirm`] for every container of `watched`, at once.
pub(crate) fn confirm_all(watched: &[Watched]) -> crate::tiers::launch::Stopping {
    let each: Vec<_> = watched.iter().map(|w| (w.name.clone(), w.memory, w.host_pid, w.died.clone())).collect();
    Box::pin(async move {
        futures::future::join_all(each.iter().map(|(name, memory, pid, died)| confirm(name, *memory, *pid, died)))
            .await;
    })
}

/// Watches one container until it stops: `docker wait` returns when it
/// does, then its state says how (a `docker wait` that failed, or a container
/// found running after all, is waited for again after a pause).
pub(crate) async fn watch(name: String, memory_bytes: Option<u64>, died: Arc<OnceLock<Death>>) {
    loop {
        let _ = Command::new("docker")
            .args(["wait", &name])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .status()
            .await;
        if check(&name, memory_bytes, &died).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Asks Docker once whether the container has stopped and, if it has,
/// records how in `died` (unless that is already known); whether it has.
/// The watcher calls it after each `docker wait`; a run calls it for every
/// container before it is judged, so a tier that died in the load's last
/// moments is named even when the watcher has not yet heard.
pub(crate) async fn check(name: &str, memory_bytes: Option<u64>, died: &OnceLock<Death>) -> bool {
    const STATE: &str =
        "{{.State.Running}} {{.State.OOMKilled}} {{.State.ExitCode}} {{.State.FinishedAt}} {{.State.Error}}";
    if died.get().is_some() {
        return true;
    }
    let asked = Instant::now();
    let inspect: [String; 4] = ["inspect".into(), "-f".into(), STATE.into(), name.to_owned()];
    let (why, at) = match docker(&inspect).await {
        Ok(state) => match ended(&state, memory_bytes) {
            Some(why) => (why, finished_at(&state, asked)),
            None => return false,
        },
        Err(e) => (format!("its container is gone ({e})"), asked),
    };
    // Its last lines only once it has stopped: a running one's are not needed.
    let logs = Command::new("docker").args(["logs", "--tail", "20", name]).output().await;
    let stderr = logs.map(|o| String::from_utf8_lossy(&o.stderr).trim_end().to_owned()).unwrap_or_default();
    let _ = died.set(Death { at, why, stderr: if stderr.is_empty() { "(nothing)".into() } else { stderr } });
    true
}

/// When the container stopped, on this process's clock, from Docker's
/// `FinishedAt` (the fourth field of `state`); `asked`, the moment Docker was
/// asked, when that is missing or unreadable, and never later than it.
fn finished_at(state: &str, asked: Instant) -> Instant {
    let finished = state.split(' ').nth(3).and_then(|t| humantime::parse_rfc3339(t.trim()).ok());
    let ago = finished.and_then(|f| std::time::SystemTime::now().duration_since(f).ok());
    ago.and_then(|ago| Instant::now().checked_sub(ago)).map_or(asked, |at| at.min(asked))
}

/// How long [`confirm`] waits for Docker to catch up with a process the
/// host has already seen end.
const CONFIRM_LIMIT: Duration = Duration::from_secs(10);

/// Learns whether the container has stopped, as [`check`] does; when Docker
/// still calls it running but its first process (`host_pid`) is gone from
/// the host, asks again until Docker has caught up (at most
/// [`CONFIRM_LIMIT`]): the kernel's kill is seen on the host before Docker
/// has recorded it.
pub(crate) async fn confirm(name: &str, memory_bytes: Option<u64>, host_pid: Option<u32>, died: &OnceLock<Death>) {
    let deadline = Instant::now() + CONFIRM_LIMIT;
    while !check(name, memory_bytes, died).await {
        if host_pid.is_none_or(process_alive) || Instant::now() > deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether `pid` is a process on this host that has not ended (a zombie has).
fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next().map(|st| st != "Z")))
        .unwrap_or(false)
}

/// How a container ended, from `Running OOMKilled ExitCode FinishedAt
/// Error`; `None` while it runs. `memory_bytes`: its limit.
fn ended(state: &str, memory_bytes: Option<u64>) -> Option<String> {
    let mut parts = state.trim().splitn(5, ' ');
    let (running, oom, code, _finished) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if running == "true" {
        return None;
    }
    let error = parts.next().map(str::trim).filter(|e| !e.is_empty());
    let mut why = if oom == "true" {
        let limit = memory_bytes.map_or_else(|| "no limit set".to_owned(), |b| format!("{} MiB", b as f64 / 1048576.0));
        format!("was killed by the kernel's OOM killer at its memory limit ({limit}; exit code {code})")
    } else {
        match code
            .parse::<i32>()
            .ok()
            .filter(|c| *c > 128)
            .and_then(|c| nix::sys::signal::Signal::try_from(c - 128).ok())
        {
            Some(signal) => format!("was killed by {signal} (exit code {code}; not the OOM killer)"),
            None => format!("exited with code {code}"),
        }
    };
    if let Some(e) = error {
        why.push_str(&format!(" ({e})"));
    }
    Some(why)
}

/// The host's pid of a container's first process (its tier).
pub(crate) async fn host_pid(name: &str) -> Option<u32> {
    let pid = docker(&["inspect".into(), "-f".into(), "{{.State.Pid}}".into(), name.to_owned()]).await.ok()?;
    pid.trim().parse().ok().filter(|p| *p > 0)
}

/// The `cpu.stat` of the container's cgroup, as this host mounts it: its
/// first process's CPU controller (cgroup v1: `/sys/fs/cgroup/cpu…/<path>`)
/// or, without one, its unified group (v2: `/sys/fs/cgroup/<path>`); `None`
/// if no such file counts quota periods.
pub(crate) async fn cpu_stat_path(host_pid: u32) -> Option<PathBuf> {
    let groups = std::fs::read_to_string(format!("/proc/{host_pid}/cgroup")).ok()?;
    cgroup_candidates(&groups)
        .into_iter()
        .find(|p| std::fs::read_to_string(p).is_ok_and(|t| t.lines().any(|l| l.starts_with("nr_periods "))))
}

/// Where `cpu.stat` may be for a process whose `/proc/<pid>/cgroup` is `groups`.
fn cgroup_candidates(groups: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for line in groups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let rel = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "cpu") {
            for mount in ["cpu", "cpu,cpuacct", "cpuacct,cpu"] {
                found.insert(0, Path::new("/sys/fs/cgroup").join(mount).join(rel).join("cpu.stat"));
            }
        } else if controllers.is_empty() {
            found.push(Path::new("/sys/fs/cgroup").join(rel).join("cpu.stat"));
        }
    }
    found
}

/// Reads the container's output until its ready line; a container that
/// exits first, or takes too long, is an error carrying its last lines.
pub(crate) async fn wait_ready(name: &str) -> Result<ReadyLine, String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let out = Command::new("docker").args(["logs", name]).output().await.map_err(|e| e.to_string())?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if let Some(ready) = stdout.lines().find_map(|l| serde_json::from_str::<ReadyLine>(l).ok()) {
            return Ok(ready);
        }
        let running = docker(&["inspect".into(), "-f".into(), "{{.State.Running}}".into(), name.to_owned()]).await;
        let tail = || {
            let err = String::from_utf8_lossy(&out.stderr);
            let lines: Vec<&str> = err.lines().collect();
            lines[lines.len().saturating_sub(20)..].join("\n")
        };
        if running.as_deref().map(str::trim) != Ok("true") {
            return Err(format!("container {name} exited before it was ready; its last stderr lines:\n{}", tail()));
        }
        if Instant::now() > deadline {
            return Err(format!("container {name} printed no ready line within {READY_TIMEOUT:?}:\n{}", tail()));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The last 20 lines a container wrote, stdout and stderr.
async fn logs_tail(name: &str) -> String {
    let out = Command::new("docker").args(["logs", "--tail", "20", name]).output().await;
    out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr))
        .unwrap_or_default()
}

/// What to say of a container that stopped before it was ready.
pub(crate) async fn exited(name: &str) -> String {
    format!("exited before it was ready; its last output lines:\n{}", logs_tail(name).await)
}

/// Waits until every one of `addrs` accepts a TCP connection (a foreign
/// image prints no ready line of ours), at most `timeout`; a container that
/// stops first, or is not ready in time, is an error with its last lines.
pub(crate) async fn wait_listening(name: &str, addrs: &[SocketAddr], timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        if crate::tiers::foreign::ready(addrs).await {
            return Ok(());
        }
        let running = docker(&["inspect".into(), "-f".into(), "{{.State.Running}}".into(), name.to_owned()]).await;
        if running.as_deref().map(str::trim) != Ok("true") {
            return Err(exited(name).await);
        }
        if Instant::now() > deadline {
            let listed: Vec<String> = addrs.iter().map(ToString::to_string).collect();
            return Err(format!(
                "was not ready within {timeout:?}: nothing accepted a connection on {}; its last output lines:\n{}",
                listed.join(", "),
                logs_tail(name).await
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_alive_until_it_ends_and_a_zombie_has_ended() {
        assert!(process_alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not waited for: a zombie once it has exited.
        let deadline = Instant::now() + Duration::from_secs(10);
        while process_alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(std::fs::metadata(format!("/proc/{pid}")).is_ok(), "still there, as a zombie");
        assert!(!process_alive(pid));
        child.wait().unwrap();
        assert!(!process_alive(pid));
    }

    #[test]
    fn a_cgroup_v1_cpu_controller_comes_before_the_unified_group() {
        let v1 = "4:memory:/docker/abc\n1:cpu:/docker/abc\n0::/docker/abc\n";
        let found = cgroup_candidates(v1);
        assert_eq!(found[0], PathBuf::from("/sys/fs/cgroup/cpuacct,cpu/docker/abc/cpu.stat"));
        assert!(found.contains(&PathBuf::from("/sys/fs/cgroup/cpu/docker/abc/cpu.stat")));
        assert_eq!(found.last(), Some(&PathBuf::from("/sys/fs/cgroup/docker/abc/cpu.stat")));
        let v2 = "0::/system.slice/docker-abc.scope\n";
        assert_eq!(cgroup_candidates(v2), [PathBuf::from("/sys/fs/cgroup/system.slice/docker-abc.scope/cpu.stat")]);
    }

    #[test]
    fn a_stopped_container_says_how_it_ended() {
        assert_eq!(ended("true false 0 0001-01-01T00:00:00Z ", None), None);
        assert_eq!(
            ended("false true 137 2026-12-07T21:05:17.5Z ", Some(20 << 20)).as_deref(),
            Some("was killed by the kernel's OOM killer at its memory limit (20 MiB; exit code 137)")
        );
        let killed = ended("false false 137 2026-12-07T21:05:17.5Z ", None);
        assert_eq!(killed.as_deref(), Some("was killed by SIGKILL (exit code 137; not the OOM killer)"));
        assert_eq!(
            ended("false false 1 2026-12-07T21:05:17.5Z oops", None).as_deref(),
            Some("exited with code 1 (oops)")
        );
    }

    #[test]
    fn a_death_is_dated_by_dockers_finish_time_not_by_when_it_was_asked() {
        let start = Instant::now();
        let two_s_ago = humantime::format_rfc3339_nanos(std::time::SystemTime::now() - Duration::from_secs(2));
        let asked = Instant::now();
        let at = finished_at(&format!("false false 137 {two_s_ago} "), asked);
        // About 2 s before the asking (the fallback would be 0), and no more
        // than 2 s plus the time this test has taken.
        let before = asked.duration_since(at);
        assert!(before >= Duration::from_secs(1) && before <= Duration::from_secs(2) + start.elapsed(), "{before:?}");
        // Unreadable, or (a skewed clock) later than the asking: the asking.
        assert_eq!(finished_at("false false 1 never oops", asked), asked);
        let ahead = humantime::format_rfc3339(std::time::SystemTime::now() + Duration::from_secs(60));
        assert_eq!(finished_at(&format!("false false 1 {ahead} "), asked), asked);
    }
}
