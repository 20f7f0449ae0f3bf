//! `--isolation containers`: the downstream and the caller of one arm, each
//! in its own Docker container on a private network of their own, with
//! `--tier-cpus` / `--tier-memory` limits. The engine is Docker's, not ours:
//! this module only runs the `docker` command line (image, network, run,
//! logs, rm).
//!
//! The image is built from `scratch` with this very executable (the tiers run
//! in its hidden `__tier` role) and the shared libraries `ldd` lists, so it
//! builds on a machine with no registry; it is reused while the executable
//! is unchanged. Every container and network carries the [`LABEL`] label and
//! the harness's pid, is removed when the arm stops, on a failed start, when
//! dropped (a panic) and on a third Ctrl-C ([`remove_now`]). A harness
//! killed outright (SIGKILL, the OOM killer) runs none of that: its reaper
//! ([`reap`]), a process of its own session started before the first
//! container, sees the harness's end of a pipe close and removes them within
//! seconds; anything still left is removed by the next containers run.
//!
//! Every container is watched while it runs (`docker wait`, then its state):
//! a tier that dies, by the OOM killer or `docker kill`, is noticed as a
//! dead child process is ([`Started::death`]).
//!
//! Measures nothing: the tiers are sampled through their admin endpoints.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use service::ReadyLine;
use tokio::process::Command;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::result::TierName;
use crate::tiers::TierError;
use crate::tiers::command::{self, Placement};

/// The label every container, network and image the harness makes carries.
pub const LABEL: &str = "grpc-vs-rest";
/// The label naming the harness process that made a container or network.
const PID_LABEL: &str = "grpc-vs-rest.harness-pid";
/// The prefix of every container and network name (`.ci/run` looks for it).
pub const NAME_PREFIX: &str = "grpc-vs-rest-";
/// The repository of the harness's own image; the tag names the executable.
const IMAGE_REPO: &str = "grpc-vs-rest-tiers";
/// The build recipe, shared with `deploy/build-image.sh`.
const DOCKERFILE: &str = include_str!("../../../deploy/Dockerfile");
/// Fixed ports inside a container: its network is its own.
pub const GRPC_PORT: u16 = 50051;
pub const REST_PORT: u16 = 8080;
pub const FRONT_PORT: u16 = 8000;
pub const ADMIN_PORT: u16 = 9090;
/// The argument that puts the harness executable in the reaper's role.
pub const REAPER_ROLE_ARG: &str = "__reaper";
/// How long a container may take to print its ready line.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Names of every container and network this process made and has not
/// removed yet, for [`remove_now`].
static LIVE: Mutex<Vec<(Kind, String)>> = Mutex::new(Vec::new());
/// The write end of the reaper's pipe: held, never written to, until this
/// process ends, however it ends.
static REAPER: Mutex<Option<std::process::ChildStdin>> = Mutex::new(None);
/// Numbers the networks of one harness process.
static NEXT: AtomicU32 = AtomicU32::new(0);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Container,
    Network,
}

/// One tier started in a container.
#[derive(Debug, Clone)]
pub struct Started {
    pub tier: TierName,
    /// The downstream's replica it is (`downstream#0`, …); 0 for the caller.
    pub replica: u32,
    pub name: String,
    pub ip: IpAddr,
    pub ready: ReadyLine,
    /// What `run.json` records under the tier's `settings.container`.
    pub description: serde_json::Value,
    /// Its cgroup's `cpu.stat` and its limit in cores, with `--tier-cpus`
    /// (where the cgroup was found).
    pub cpu_stat: Option<(PathBuf, f64)>,
    /// Its tier's pid as the host sees it: which process a round measured.
    pub host_pid: Option<u32>,
    /// Set by the container's watcher once it has stopped.
    died: Arc<OnceLock<Death>>,
}

/// How a watched container ended.
#[derive(Debug, Clone)]
pub struct Death {
    /// When its watcher saw it stopped.
    pub at: Instant,
    /// Docker's account: exit code, OOM killer, the engine's own error.
    pub why: String,
    /// The last lines it wrote to stderr.
    pub stderr: String,
}

impl Started {
    pub fn url(&self, port: u16) -> String {
        format!("http://{}", std::net::SocketAddr::new(self.ip, port))
    }

    /// How the container ended, once its watcher has seen it stop.
    pub fn death(&self) -> Option<&Death> {
        self.died.get()
    }
}

/// The downstream's arguments inside its container: every listener on the
/// fixed port of its own network namespace. No TLS files: `--tls` is
/// refused with containers.
pub(crate) fn downstream_args(cfg: &Config) -> Vec<String> {
    let any = |port: u16| format!("0.0.0.0:{port}");
    let placement = Placement::Downstream { grpc: any(GRPC_PORT), rest: any(REST_PORT), admin: any(ADMIN_PORT) };
    command::tier_args(cfg, None, &placement)
}

/// The caller's arguments inside its container, pointed at the
/// downstream's gRPC and REST URLs (a replica's, the replicas' comma-joined,
/// or the balancer's).
pub(crate) fn caller_args(cfg: &Config, downstream_grpc: String, downstream_rest: String) -> Vec<String> {
    let any = |port: u16| format!("0.0.0.0:{port}");
    let placement =
        Placement::Caller { front: any(FRONT_PORT), admin: any(ADMIN_PORT), downstream_grpc, downstream_rest };
    command::tier_args(cfg, None, &placement)
}

/// One arm's network and containers; removed by [`Containers::remove`], or
/// when dropped.
#[derive(Debug)]
pub struct Containers {
    network: String,
    pub tiers: Vec<Started>,
    /// One watcher per started container (each a `docker wait`, killed
    /// when the task is aborted).
    watchers: Vec<JoinHandle<()>>,
    /// How many of the downstream's replicas it was to start.
    replicas: u32,
    /// The tiers' image (this executable's).
    image: String,
    removed: bool,
}

impl Containers {
    /// Makes the arm's network and starts the downstream's replicas on it
    /// (`--downstream-replicas`, one by default); the caller comes next
    /// ([`Containers::start_caller`]), once it is known where its calls go.
    /// A failure removes whatever was made.
    pub async fn start_downstream(cfg: &Config) -> Result<Containers, TierError> {
        remove_stale().await;
        start_reaper().map_err(|reason| TierError::Spawn { tier: TierName::Downstream, reason })?;
        let image = ensure_image().await.map_err(|reason| TierError::Spawn { tier: TierName::Downstream, reason })?;
        let network = format!("{NAME_PREFIX}{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let labels = labels();
        let mut args = vec!["network".to_owned(), "create".into()];
        args.extend(labels.iter().cloned());
        args.push(network.clone());
        docker(&args).await.map_err(|reason| TierError::Spawn { tier: TierName::Downstream, reason })?;
        remember(Kind::Network, &network);
        let replicas = cfg.replicas.downstream_replicas.max(1);
        let mut set = Containers { network, tiers: Vec::new(), watchers: Vec::new(), replicas, removed: false, image };
        for replica in 0..replicas {
            if let Err(e) = set.run_tier(cfg, TierName::Downstream, replica, downstream_args(cfg)).await {
                set.remove().await;
                return Err(e);
            }
        }
        Ok(set)
    }

    /// Starts the caller on the arm's network, pointed at `grpc` and `rest`.
    pub async fn start_caller(&mut self, cfg: &Config, grpc: String, rest: String) -> Result<(), TierError> {
        self.run_tier(cfg, TierName::Caller, 0, caller_args(cfg, grpc, rest)).await
    }

    /// The downstream's replicas, `downstream#0` first.
    pub fn replicas(&self) -> impl Iterator<Item = &Started> {
        self.tiers.iter().filter(|t| t.tier == TierName::Downstream)
    }

    /// The host's address on the arm's network (its bridge's gateway): where
    /// a process on the host (the balancer) listens for the containers.
    pub async fn gateway(&self) -> Result<IpAddr, TierError> {
        let fail = |reason: String| TierError::Spawn { tier: TierName::Balancer, reason };
        let format = "{{range .IPAM.Config}}{{.Gateway}} {{end}}".to_owned();
        let text = docker(&["network".into(), "inspect".into(), "-f".into(), format, self.network.clone()])
            .await
            .map_err(fail)?;
        text.split_whitespace()
            .find_map(|a| a.parse::<IpAddr>().ok().filter(IpAddr::is_ipv4))
            .ok_or_else(|| fail(format!("network {} names no IPv4 gateway ({text:?})", self.network)))
    }

    /// Starts one tier's container and waits for its ready line; it joins
    /// [`Containers::tiers`].
    async fn run_tier(
        &mut self,
        cfg: &Config,
        tier: TierName,
        replica: u32,
        tier_args: Vec<String>,
    ) -> Result<(), TierError> {
        let fail = |reason: String| TierError::Spawn { tier, reason };
        let host = host_name(tier, replica);
        let name = format!("{}-{host}", self.network);
        let image = self.image.clone();
        let mut args: Vec<String> = ["run", "-d", "--name", &name, "--hostname", &host, "--network", &self.network]
            .into_iter()
            .map(String::from)
            .collect();
        args.extend(labels());
        let cpus = cfg.deploy.tier_limits.cpus.get(tier.as_str()).copied();
        let memory = cfg.deploy.tier_limits.memory_bytes.get(tier.as_str()).copied();
        if let Some(c) = cpus {
            args.extend(["--cpus".into(), c.to_string()]);
        }
        if let Some(m) = memory {
            // The same figure for memory and memory plus swap: no swapping
            // past the limit, the OOM killer instead, as in a pod.
            args.extend(["--memory".into(), m.to_string(), "--memory-swap".into(), m.to_string()]);
        }
        // A team's own contract: its files, read-only at the paths the
        // tier's flags name.
        for path in cfg.contract.iter().flat_map(|c| c.mounts()) {
            let path = path.display();
            args.extend(["--mount".into(), format!("type=bind,src={path},dst={path},readonly")]);
        }
        args.extend([image.clone(), super::TIER_ROLE_ARG.to_owned(), tier.as_str().to_owned()]);
        args.extend(tier_args);
        docker(&args).await.map_err(fail)?;
        remember(Kind::Container, &name);
        let ready = wait_ready(&name).await.map_err(fail)?;
        let ip_text = docker(&[
            "inspect".into(),
            "-f".into(),
            format!("{{{{(index .NetworkSettings.Networks \"{}\").IPAddress}}}}", self.network),
            name.clone(),
        ])
        .await
        .map_err(fail)?;
        let ip: IpAddr =
            ip_text.trim().parse().map_err(|_| fail(format!("container {name} has no address ({ip_text:?})")))?;
        let description = serde_json::json!({
            "name": name,
            "image": image,
            "network": self.network,
            "address": ip.to_string(),
            "cpus": cpus,
            "memory_bytes": memory,
        });
        let died = Arc::new(OnceLock::new());
        self.watchers.push(tokio::spawn(watch(name.clone(), memory, died.clone())));
        let host_pid = host_pid(&name).await;
        let cpu_stat = match (cpus, host_pid) {
            (Some(c), Some(pid)) => cpu_stat_path(pid).await.map(|p| (p, c)),
            _ => None,
        };
        self.tiers.push(Started { tier, replica, name, ip, ready, description, cpu_stat, host_pid, died });
        Ok(())
    }

    /// Removes the containers (at once: `docker rm -f` stops them with
    /// SIGKILL after no grace) and the network.
    pub async fn remove(mut self) {
        self.unwatch();
        self.removed = true;
        let names: Vec<String> = self.names();
        let _ = docker(&[vec!["rm".into(), "-f".into()], names.clone()].concat()).await;
        let _ = docker(&["network".into(), "rm".into(), self.network.clone()]).await;
        forget(&names);
        forget(std::slice::from_ref(&self.network));
    }

    /// Stops the caller, then the downstream, each with SIGTERM and `grace`
    /// for its drain, then removes everything.
    pub async fn stop(mut self, grace: Duration) {
        // Stopped on purpose: not a death.
        self.unwatch();
        for t in self.tiers.iter().rev() {
            let secs = grace.as_secs().max(1).to_string();
            let _ = docker(&["stop".into(), "-t".into(), secs, t.name.clone()]).await;
        }
        self.remove().await;
    }

    /// The first tier found stopped, with how it ended.
    pub fn dead(&self) -> Option<(&Started, &Death)> {
        self.tiers.iter().find_map(|t| t.death().map(|d| (t, d)))
    }

    fn unwatch(&mut self) {
        for w in self.watchers.drain(..) {
            w.abort();
        }
    }

    fn names(&self) -> Vec<String> {
        // Every container of the network, started or not.
        (0..self.replicas)
            .map(|i| host_name(TierName::Downstream, i))
            .chain([host_name(TierName::Caller, 0)])
            .map(|host| format!("{}-{host}", self.network))
            .collect()
    }
}

/// A tier's host name in its container, and the end of the container's name:
/// `downstream`, `downstream-1`, …, `caller`.
fn host_name(tier: TierName, replica: u32) -> String {
    if replica == 0 { tier.as_str().to_owned() } else { format!("{}-{replica}", tier.as_str()) }
}

impl Drop for Containers {
    fn drop(&mut self) {
        self.unwatch();
        if !self.removed {
            let names = self.names();
            remove_blocking(&names, &self.network);
            forget(&names);
            forget(std::slice::from_ref(&self.network));
        }
    }
}

fn labels() -> Vec<String> {
    vec!["--label".into(), format!("{LABEL}=1"), "--label".into(), format!("{PID_LABEL}={}", std::process::id())]
}

fn remember(kind: Kind, name: &str) {
    LIVE.lock().unwrap_or_else(|e| e.into_inner()).push((kind, name.to_owned()));
}

fn forget(names: &[String]) {
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

fn remove_blocking(containers: &[String], network: &str) {
    let quiet = |cmd: &mut std::process::Command| {
        let _ = cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).status();
    };
    if !containers.is_empty() {
        quiet(std::process::Command::new("docker").args(["rm", "-f"]).args(containers));
    }
    quiet(std::process::Command::new("docker").args(["network", "rm", network]));
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
    let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
    remove_labelled(pid);
    std::thread::sleep(Duration::from_secs(1));
    remove_labelled(pid);
    crate::tiers::proxy::remove_work_dirs_of(pid, &std::env::temp_dir());
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
async fn remove_stale() {
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

/// Watches one container until it stops: `docker wait` returns when it
/// does, then its state says how (a `docker wait` that failed, or a container
/// found running after all, is waited for again after a pause).
async fn watch(name: String, memory_bytes: Option<u64>, died: Arc<OnceLock<Death>>) {
    const STATE: &str = "{{.State.Running}} {{.State.OOMKilled}} {{.State.ExitCode}} {{.State.Error}}";
    loop {
        let _ = Command::new("docker")
            .args(["wait", &name])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .status()
            .await;
        let at = Instant::now();
        // Both at once: each `docker` call takes a while on a busy machine.
        let inspect: [String; 4] = ["inspect".into(), "-f".into(), STATE.into(), name.clone()];
        let mut logs = Command::new("docker");
        logs.args(["logs", "--tail", "20", &name]);
        let (state, logs) = tokio::join!(docker(&inspect), logs.output());
        let why = match state {
            Ok(state) => match ended(&state, memory_bytes) {
                Some(why) => why,
                None => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            },
            Err(e) => format!("its container is gone ({e})"),
        };
        let stderr = logs.map(|o| String::from_utf8_lossy(&o.stderr).trim_end().to_owned()).unwrap_or_default();
        let _ = died.set(Death { at, why, stderr: if stderr.is_empty() { "(nothing)".into() } else { stderr } });
        return;
    }
}

/// How a container ended, from `Running OOMKilled ExitCode Error`; `None`
/// while it runs. `memory_bytes`: its limit.
fn ended(state: &str, memory_bytes: Option<u64>) -> Option<String> {
    let mut parts = state.trim().splitn(4, ' ');
    let (running, oom, code) = (parts.next()?, parts.next()?, parts.next()?);
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
async fn host_pid(name: &str) -> Option<u32> {
    let pid = docker(&["inspect".into(), "-f".into(), "{{.State.Pid}}".into(), name.to_owned()]).await.ok()?;
    pid.trim().parse().ok().filter(|p| *p > 0)
}

/// The `cpu.stat` of the container's cgroup, as this host mounts it: its
/// first process's CPU controller (cgroup v1: `/sys/fs/cgroup/cpu…/<path>`)
/// or, without one, its unified group (v2: `/sys/fs/cgroup/<path>`); `None`
/// if no such file counts quota periods.
async fn cpu_stat_path(host_pid: u32) -> Option<PathBuf> {
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
async fn wait_ready(name: &str) -> Result<ReadyLine, String> {
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

/// The image of this executable: reused when one with its tag exists, else
/// built from `scratch` (see `deploy/Dockerfile`).
pub async fn ensure_image() -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding the harness executable: {e}"))?;
    let tag = format!("{IMAGE_REPO}:{}", executable_id(&exe)?);
    if docker(&["image".into(), "inspect".into(), tag.clone()]).await.is_ok() {
        return Ok(tag);
    }
    let context = std::env::temp_dir().join(format!("{NAME_PREFIX}image-{}", std::process::id()));
    let built = async {
        build_context(&exe, &context).await?;
        let args = ["build", "-q", "--label", &format!("{LABEL}=1"), "-t", &tag, &context.to_string_lossy()];
        // The classic builder: it needs no BuildKit plug-in, and a scratch
        // image pulls nothing.
        let out = Command::new("docker")
            .args(args)
            .env("DOCKER_BUILDKIT", "0")
            .output()
            .await
            .map_err(|e| format!("running docker build: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("docker build failed: {}", String::from_utf8_lossy(&out.stderr).trim()))
        }
    }
    .await;
    let _ = std::fs::remove_dir_all(&context);
    built.map(|()| tag)
}

/// Names this executable's content cheaply: its size and modification time.
fn executable_id(exe: &Path) -> Result<String, String> {
    use std::hash::{Hash, Hasher};
    let meta = std::fs::metadata(exe).map_err(|e| format!("reading {}: {e}", exe.display()))?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    exe.hash(&mut h);
    meta.len().hash(&mut h);
    meta.modified().ok().hash(&mut h);
    Ok(format!("{:016x}", h.finish()))
}

/// A build context: the executable as `/harness`, every shared library `ldd`
/// lists at its own path, and the Dockerfile.
pub async fn build_context(exe: &Path, context: &Path) -> Result<(), String> {
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    let _ = std::fs::remove_dir_all(context);
    std::fs::create_dir_all(context).map_err(|e| io("making the image context", e))?;
    std::fs::copy(exe, context.join("harness")).map_err(|e| io("copying the harness", e))?;
    for lib in shared_libraries(exe).await? {
        let to = context.join(lib.strip_prefix("/").unwrap_or(&lib));
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io("making a library folder", e))?;
        }
        std::fs::copy(&lib, &to).map_err(|e| io(&format!("copying {}", lib.display()), e))?;
    }
    std::fs::write(context.join("Dockerfile"), DOCKERFILE).map_err(|e| io("writing the Dockerfile", e))
}

/// The absolute paths `ldd` names (libraries and the loader); none for a
/// static executable.
async fn shared_libraries(exe: &Path) -> Result<Vec<PathBuf>, String> {
    let out = Command::new("ldd").arg(exe).output().await.map_err(|e| format!("running ldd: {e}"))?;
    Ok(parse_ldd(&String::from_utf8_lossy(&out.stdout)))
}

fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let path = l.split("=>").last()?.split_whitespace().next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// Runs `docker args`; its stdout, or its stderr as the error.
async fn docker(args: &[String]) -> Result<String, String> {
    let out = Command::new("docker")
        .args(args)
        .output()
        .await
        .map_err(|e| format!("running docker (is it installed?): {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "docker {}: {}",
            args.first().map_or("", String::as_str),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_libraries_and_the_loader() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            parse_ldd(text),
            [PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"), PathBuf::from("/lib64/ld-linux-x86-64.so.2")]
        );
        assert!(parse_ldd("\tnot a dynamic executable\n").is_empty());
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
        assert_eq!(ended("true false 0 ", None), None);
        assert_eq!(
            ended("false true 137 ", Some(20 << 20)).as_deref(),
            Some("was killed by the kernel's OOM killer at its memory limit (20 MiB; exit code 137)")
        );
        let killed = ended("false false 137 ", None);
        assert_eq!(killed.as_deref(), Some("was killed by SIGKILL (exit code 137; not the OOM killer)"));
        assert_eq!(ended("false false 1 oops", None).as_deref(), Some("exited with code 1 (oops)"));
    }
}
