//! A real reverse proxy (nginx or caddy) between two tiers, started as a child
//! on loopback with its own temporary and log paths (no root paths, no system
//! service), its configuration kept for the report.
//!
//! * internal hop: caller → proxy → downstream; for gRPC the proxy speaks
//!   HTTP/2 cleartext on both sides (nginx `grpc_pass`, caddy `h2c://`), for
//!   REST it keeps an upstream keep-alive pool;
//! * front hop: harness → proxy → caller, the classic edge.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use service::ReadyLine;
use tokio::process::Command;

use crate::config::{ProxyHop, ProxyKind};
use crate::result::{ProxyInfo, TierName};
use crate::tiers::process::{Tier, TierError, exited, launch};
use crate::tiers::proxy_config::{Protocol, config};
use crate::tiers::reaper;

/// How long a proxy may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(15);

/// A free loopback port, found by binding port 0 and letting it go.
fn free_port(ip: std::net::IpAddr) -> std::io::Result<SocketAddr> {
    std::net::TcpListener::bind(SocketAddr::new(ip, 0))?.local_addr()
}

/// Where a proxy binary is looked for: PATH, then the sbin folders a
/// non-root PATH often lacks.
fn search_dirs() -> Vec<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from)).collect()
}

/// The proxy's binary, or an error naming the package that provides it.
fn locate(kind: ProxyKind, dirs: &[PathBuf]) -> Result<PathBuf, TierError> {
    dirs.iter().map(|d| d.join(kind.as_str())).find(|p| p.is_file()).ok_or_else(|| TierError::Spawn {
        tier: TierName::Proxy,
        reason: format!(
            "{} is not installed (no `{}` on PATH); install it with `apt-get install {}`",
            kind.as_str(),
            kind.as_str(),
            kind.package()
        ),
    })
}

/// The proxy's version line, e.g. `nginx/1.22.1` or `2.6.2`.
fn version(kind: ProxyKind, bin: &Path) -> Option<String> {
    let args: &[&str] = match kind {
        ProxyKind::Nginx => &["-v"],
        ProxyKind::Caddy => &["version"],
    };
    let out = std::process::Command::new(bin).args(args).output().ok()?;
    let text = String::from_utf8_lossy(if out.stdout.is_empty() { &out.stderr } else { &out.stdout }).trim().to_owned();
    Some(text.trim_start_matches("nginx version: ").to_owned()).filter(|t| !t.is_empty())
}

/// How many worker processes the proxy runs: nginx's children of its master
/// (waited for briefly, they start right after the master listens); caddy
/// serves from its one process.
async fn worker_processes(kind: ProxyKind, pid: u32) -> Option<usize> {
    if kind == ProxyKind::Caddy {
        return Some(1);
    }
    let mut system = sysinfo::System::new().ok()?;
    let master = sysinfo::Pid::from_u32(pid);
    let mut last = 0;
    for _ in 0..20 {
        system.refresh_processes_specifics(
            sysinfo::ProcessesToUpdate::All,
            true,
            sysinfo::ProcessRefreshKind::nothing(),
        );
        let n = system.processes().values().filter(|p| p.thread_kind().is_none() && p.parent() == Some(master)).count();
        if n > 0 && n == last {
            return Some(n);
        }
        last = n;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (last > 0).then_some(last)
}

/// A proxy's binary, its own temporary folder and the address it will
/// listen on: what a configuration is written for.
pub(crate) struct Prepared {
    pub bin: PathBuf,
    pub work: PathBuf,
    pub listen: SocketAddr,
}

/// Finds `kind`'s binary and makes its folder (named for the harness's pid and
/// `tag`) and a free port on `ip`, for the `tier` it will be.
pub(crate) fn prepare(kind: ProxyKind, tier: TierName, ip: std::net::IpAddr, tag: u16) -> Result<Prepared, TierError> {
    let fail = |reason: String| TierError::Spawn { tier, reason };
    let bin = locate(kind, &search_dirs()).map_err(|e| match e {
        TierError::Spawn { reason, .. } => fail(reason),
        other => other,
    })?;
    reaper::clear_stale_work_dirs(&std::env::temp_dir());
    // If the harness is killed outright, its reaper removes this folder.
    reaper::start_reaper().map_err(fail)?;
    let work = std::env::temp_dir().join(format!("{}{tag}", reaper::work_dir_prefix(kind, std::process::id())));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| fail(format!("creating {}: {e}", work.display())))?;
    let listen = free_port(ip).map_err(|e| fail(format!("finding a free port: {e}")))?;
    Ok(Prepared { bin, work, listen })
}

/// Starts `kind` as `tier` with the configuration `text` written into its
/// folder, and waits until it accepts connections at `prepared.listen`.
/// Returns the tier and how many worker processes it runs.
pub(crate) async fn launch_configured(
    kind: ProxyKind,
    tier: TierName,
    prepared: &Prepared,
    text: &str,
) -> Result<(Tier, Option<usize>), TierError> {
    let fail = |reason: String| TierError::Spawn { tier, reason };
    let (work, listen) = (&prepared.work, prepared.listen);
    let conf = work.join(kind.config_file());
    std::fs::write(&conf, text).map_err(|e| fail(format!("writing {}: {e}", conf.display())))?;
    let mut cmd = Command::new(&prepared.bin);
    match kind {
        ProxyKind::Nginx => {
            cmd.arg("-p").arg(work).arg("-e").arg(work.join("error.log")).arg("-c").arg(&conf);
        }
        ProxyKind::Caddy => {
            cmd.args(["run", "--adapter", "caddyfile", "--config"]).arg(&conf);
            // Caddy keeps state under $HOME and the XDG folders: keep it in the work folder.
            cmd.env("HOME", work).env("XDG_DATA_HOME", work).env("XDG_CONFIG_HOME", work);
        }
    }
    // nginx's master stops its workers when it gets SIGTERM; SIGKILL would
    // leave them running and listening. Caddy is one process.
    let on_harness_death = match kind {
        ProxyKind::Nginx => Signal::SIGTERM,
        ProxyKind::Caddy => Signal::SIGKILL,
    };
    let (mut child, tail) = launch(tier, cmd, on_harness_death)?;
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if child.try_wait().ok().flatten().is_some() {
            return Err(exited(tier, &mut child, &tail).await);
        }
        if tokio::net::TcpStream::connect(listen).await.is_ok() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.start_kill();
            return Err(TierError::NotReady { tier, timeout: READY_TIMEOUT, stderr: String::new() });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = child.id().unwrap_or_default();
    let workers = worker_processes(kind, pid).await;
    let ready =
        ReadyLine { service: kind.as_str().to_owned(), pid, listeners: [(tier.as_str().to_owned(), listen)].into() };
    Ok((Tier::from_process(tier, ready, child, tail), workers))
}

/// Starts `kind` in front of `upstream` and waits until it accepts connections.
pub async fn start(
    kind: ProxyKind,
    hop: ProxyHop,
    ip: std::net::IpAddr,
    upstream: SocketAddr,
    protocol: Protocol,
) -> Result<(Tier, ProxyInfo), TierError> {
    let prepared = prepare(kind, TierName::Proxy, ip, upstream.port())?;
    let text = config(kind, prepared.listen, upstream, protocol, &prepared.work);
    let (tier, workers) = launch_configured(kind, TierName::Proxy, &prepared, &text).await?;
    let protocol =
        if protocol.h2c { "HTTP/2 cleartext on both sides" } else { "HTTP/1.1 with an upstream keep-alive pool" };
    let info = prepared.info(kind, hop, upstream, protocol.to_owned(), workers, text);
    Ok((tier, info))
}

impl Prepared {
    /// What the report records of the `kind` started from this folder with
    /// configuration `text`.
    pub(crate) fn info(
        self,
        kind: ProxyKind,
        hop: ProxyHop,
        upstream: SocketAddr,
        protocol: String,
        worker_processes: Option<usize>,
        text: String,
    ) -> ProxyInfo {
        ProxyInfo {
            kind,
            version: version(kind, &self.bin),
            binary: self.bin,
            hop,
            listen: self.listen,
            upstream,
            protocol,
            worker_processes,
            sampled: SAMPLED_AS_TREE.to_owned(),
            config_file: kind.config_file().to_owned(),
            work_dir: self.work,
            config: text,
        }
    }
}

/// How a proxy's CPU and RSS are sampled.
const SAMPLED_AS_TREE: &str = "CPU and RSS summed over the proxy's process and its child processes";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_binary_names_the_package() {
        let err = locate(ProxyKind::Caddy, &[PathBuf::from("/nonexistent")]).unwrap_err().to_string();
        assert!(err.contains("could not start the proxy") && err.contains("apt-get install caddy"), "{err}");
    }
}
