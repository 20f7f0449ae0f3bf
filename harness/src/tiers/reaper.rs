//! Clean-up of what a harness leaves behind however it ends: the
//! containers and networks it made, and the work folders of its proxies
//! and balancers.
//!
//! * Foreign tiers' process groups are named to the reaper as they start
//!   and stop, and killed by it if the harness dies first.
//! * In-process: every container and network is remembered until removed,
//!   so a harness about to exit on the spot (a third Ctrl-C) removes them
//!   at once ([`remove_now`]).
//! * Outside it: the reaper ([`reap`]), this executable in a role of its
//!   own and a session of its own, started before the first container or
//!   proxy, sees the harness's end of a pipe close (however the harness
//!   died, SIGKILL and the OOM killer included) and removes its labelled
//!   containers and networks and its proxies' folders within seconds.
//! * Anything still left by a harness that is gone is removed by the next
//!   run ([`remove_stale`], [`clear_stale_work_dirs`]).

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use crate::config::ProxyKind;
use crate::tiers::docker::{PID_LABEL, docker};

/// The argument that puts the harness executable in the reaper's role.
pub const REAPER_ROLE_ARG: &str = "__reaper";

/// Names of every container and network this process made and has not
/// removed yet, for [`remove_now`].
static LIVE: Mutex<Vec<(Kind, String)>> = Mutex::new(Vec::new());
/// The write end of the reaper's pipe: held until this process ends,
/// however it ends; written to only to name foreign tiers' process groups.
static REAPER: Mutex<Option<std::process::ChildStdin>> = Mutex::new(None);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Container,
    Network,
}

pub(crate) fn remember(kind: Kind, name: &str) {
    LIVE.lock().unwrap_or_else(|e| e.into_inner()).push((kind, name.to_owned()));
}

pub(crate) fn forget(names: &[String]) {
    LIVE.lock().unwrap_or_else(|e| e.into_inner()).retain(|(_, n)| !names.contains(n));
}

/// Removes every container and network this process made, at once and
/// without the async runtime: for a harness about to exit on the spot.
pub fn remove_now() {
    let live = std::mem::take(&mut *LIVE.lock().unwrap_or_else(|e| e.into_inner()));
    let containers: Vec<String> = live.iter().filter(|(k, _)| *k == Kind::Container).map(|(_, n)| n.clone()).collect();
    for (_, network) in live.iter().filter(|(k, _)| *k == Kind::Network) {
        remove_blocking(&containers, network);
    }
}

pub(crate) fn remove_blocking(containers: &[String], network: &str) {
    let quiet = |cmd: &mut std::process::Command| {
        let _ = cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).status();
    };
    if !containers.is_empty() {
        quiet(std::process::Command::new("docker").args(["rm", "-f"]).args(containers));
    }
    quiet(std::process::Command::new("docker").args(["network", "rm", network]));
}

/// Tells the reaper to kill process group `pgid` if the harness dies
/// before it is stopped (a foreign tier's children outlive a killed leader).
pub(crate) fn watch_group(pgid: u32) {
    tell_reaper(&format!("+{pgid}\n"));
}

/// The group `pgid` was stopped: the reaper forgets it.
pub(crate) fn unwatch_group(pgid: u32) {
    tell_reaper(&format!("-{pgid}\n"));
}

fn tell_reaper(line: &str) {
    use std::io::Write;
    if let Some(pipe) = REAPER.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        let _ = pipe.write_all(line.as_bytes());
    }
}

/// Starts this process's reaper, once: the harness executable in its
/// [`REAPER_ROLE_ARG`] role, in a session of its own (no Ctrl-C or hang-up
/// of the terminal reaches it, nor a signal to the harness's process
/// group), its stdin the read end of a pipe whose write end only this
/// process holds (the standard library opens it close-on-exec, so no tier
/// or `docker` child inherits it).
pub(crate) fn start_reaper() -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let mut held = REAPER.lock().unwrap_or_else(|e| e.into_inner());
    if held.is_some() {
        return Ok(());
    }
    let exe = std::env::current_exe().map_err(|e| format!("finding the harness executable: {e}"))?;
    // As for the tiers: this very build, even if the file was rebuilt.
    let proc_exe = Path::new("/proc/self/exe");
    let mut cmd = std::process::Command::new(if proc_exe.exists() { proc_exe } else { exe.as_path() });
    cmd.arg0(&exe)
        .arg(REAPER_ROLE_ARG)
        .arg(std::process::id().to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the closure runs in the forked child before exec and only
    // calls setsid(2), which is async-signal-safe.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(|| nix::unistd::setsid().map(drop).map_err(std::io::Error::from));
    }
    let mut child = cmd.spawn().map_err(|e| format!("starting the containers' reaper: {e}"))?;
    *held = child.stdin.take();
    // Not waited for: it outlives this process by design.
    drop(child);
    Ok(())
}

/// The reaper of harness `pid`: waits until the harness's end of its stdin
/// closes (the harness exited or was killed), then removes every container
/// and network labelled with that pid; again a moment later, for one a
/// `docker run` still under way made after the first pass; then the
/// temporary folders of the pid's proxies and balancers (which died with it).
pub fn reap(pid: u32) {
    use std::io::BufRead;
    // Until then, the harness names the process groups of its foreign tiers
    // (`+pgid`) and the ones it stopped itself (`-pgid`).
    let mut groups = std::collections::BTreeSet::new();
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        match (line.strip_prefix('+'), line.strip_prefix('-')) {
            (Some(p), _) => groups.extend(p.trim().parse::<i32>().ok()),
            (_, Some(p)) => {
                groups.remove(&p.trim().parse::<i32>().unwrap_or(0));
            }
            _ => {}
        }
    }
    for g in groups {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(g), nix::sys::signal::Signal::SIGKILL);
    }
    remove_labelled(pid);
    std::thread::sleep(Duration::from_secs(1));
    remove_labelled(pid);
    remove_work_dirs_of(pid, &std::env::temp_dir());
}

/// Removes every container, then every network, labelled with `pid`.
fn remove_labelled(pid: u32) {
    let filter = format!("label={PID_LABEL}={pid}");
    let ids = |list: &[&str]| -> Vec<String> {
        let out = std::process::Command::new("docker").args(list).args(["--filter", &filter, "-q"]).output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default()
    };
    for (list, remove) in [(&["ps", "-a"][..], &["rm", "-f"][..]), (&["network", "ls"][..], &["network", "rm"][..])] {
        let found = ids(list);
        if !found.is_empty() {
            let _ = std::process::Command::new("docker")
                .args(remove)
                .args(&found)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

/// Removes containers and networks left by a harness that was killed
/// (its pid label names a process that is gone): each such pid's, as its
/// reaper would have.
pub(crate) async fn remove_stale() {
    let filter = format!("label={PID_LABEL}");
    let format = format!("{{{{.Label \"{PID_LABEL}\"}}}}");
    let mut gone = std::collections::BTreeSet::new();
    for list in [&["ps", "-a"][..], &["network", "ls"][..]] {
        let args: Vec<String> = list
            .iter()
            .map(|a| (*a).to_owned())
            .chain(["--filter".into(), filter.clone(), "--format".into(), format.clone()])
            .collect();
        if let Ok(text) = docker(&args).await {
            gone.extend(
                text.lines()
                    .filter_map(|pid| pid.trim().parse::<u32>().ok())
                    .filter(|pid| !Path::new(&format!("/proc/{pid}")).exists()),
            );
        }
    }
    for pid in gone {
        let _ = tokio::task::spawn_blocking(move || remove_labelled(pid)).await;
    }
}

/// The name of a proxy's temporary folder: kind, the harness's pid, the upstream port.
pub(crate) fn work_dir_prefix(kind: ProxyKind, harness_pid: u32) -> String {
    format!("grpc-vs-rest-{}-{harness_pid}-", kind.as_str())
}

/// Removes the temporary folders of proxies whose harness is gone (killed
/// with SIGKILL, it could not remove them; the proxy itself died with it).
/// A folder whose harness pid is running (or taken again) is left alone.
pub(crate) fn clear_stale_work_dirs(temp: &Path) {
    let Ok(entries) = std::fs::read_dir(temp) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = stale_owner(&name) else { continue };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Removes the temporary folders of harness `pid`'s proxies and balancers
/// (its reaper's last step, once the harness and they are gone).
pub(crate) fn remove_work_dirs_of(pid: u32, temp: &Path) {
    let Ok(entries) = std::fs::read_dir(temp) else { return };
    for entry in entries.flatten() {
        if stale_owner(&entry.file_name().to_string_lossy()) == Some(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The harness pid in a proxy folder's name, `None` for any other name.
fn stale_owner(name: &str) -> Option<u32> {
    let rest = ["nginx", "caddy"].iter().find_map(|k| name.strip_prefix(&format!("grpc-vs-rest-{k}-")))?;
    let (pid, port) = rest.split_once('-')?;
    port.parse::<u16>().ok()?;
    pid.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_proxy_folders_of_a_dead_harness_are_cleared() {
        assert_eq!(stale_owner("grpc-vs-rest-nginx-4242-8080"), Some(4242));
        assert_eq!(stale_owner("grpc-vs-rest-caddy-7-1"), Some(7));
        for other in ["grpc-vs-rest-nginx-4242", "grpc-vs-rest-haproxy-1-2", "gvr-nginx-1-2", "grpc-vs-rest-nginx-x-1"]
        {
            assert_eq!(stale_owner(other), None, "{other}");
        }
        let temp = std::env::temp_dir().join(format!("gvr-stale-{}", std::process::id()));
        // No process has pid 4194304 (above Linux's pid_max); this one is running.
        let (dead, live) = (
            temp.join("grpc-vs-rest-nginx-4194304-80"),
            temp.join(format!("{}81", work_dir_prefix(ProxyKind::Nginx, std::process::id()))),
        );
        let unrelated = temp.join("grpc-vs-rest-notes");
        for d in [&dead, &live, &unrelated] {
            std::fs::create_dir_all(d).unwrap();
        }
        clear_stale_work_dirs(&temp);
        assert!(!dead.exists() && live.exists() && unrelated.exists());
        // The reaper of this pid removes its folders, and only those.
        remove_work_dirs_of(std::process::id(), &temp);
        assert!(!live.exists() && unrelated.exists());
        std::fs::remove_dir_all(&temp).unwrap();
    }
}
