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

/// How long a proxy may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(15);

impl ProxyKind {
    pub(crate) fn config_file(self) -> &'static str {
        match self {
            ProxyKind::Nginx => "nginx.conf",
            ProxyKind::Caddy => "Caddyfile",
        }
    }
}

/// The top of every nginx configuration the harness writes: `comment`
/// first, then `modules` (its `load_module` lines), one master with its
/// workers in the foreground, every file of its own in `work`.
pub(crate) fn nginx_main(comment: &str, modules: &str, work: &Path) -> String {
    let w = work.display();
    format!(
        r#"# Written by grpc-vs-rest: {comment}
{modules}daemon off;
master_process on;
worker_processes auto;
worker_rlimit_nofile 65536;
pid {w}/nginx.pid;
error_log {w}/error.log warn;

events {{
    worker_connections 16384;
}}
"#
    )
}

/// nginx's `http` block: listen on `listen` and send every request to the
/// upstream `backend` (its `server` lines, `servers`, and `extra` lines
/// before them), over HTTP/2 cleartext on both sides when `h2c` (gRPC:
/// `grpc_pass`), else HTTP/1.1 with an upstream keep-alive pool.
pub(crate) fn nginx_http(listen: SocketAddr, extra: &str, servers: &str, protocol: Protocol, work: &Path) -> String {
    let w = work.display();
    let (listen_opts, mut location) = if protocol.h2c {
        (" http2", "grpc_pass grpc://backend;".to_owned())
    } else {
        (
            "",
            "proxy_pass http://backend;\n            proxy_http_version 1.1;\n            proxy_set_header Connection \"\";"
                .to_owned(),
        )
    };
    if protocol.streams && !protocol.h2c {
        // Each item passed on as it comes, not gathered into buffers first
        // (grpc_pass streams without this).
        location.push_str("\n            proxy_buffering off;");
    }
    format!(
        r#"
http {{
    access_log off;
    client_body_temp_path {w}/client_body;
    proxy_temp_path {w}/proxy;
    fastcgi_temp_path {w}/fastcgi;
    uwsgi_temp_path {w}/uwsgi;
    scgi_temp_path {w}/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    http2_max_concurrent_streams 16384;

    upstream backend {{
{extra}{servers}        keepalive 1024;
        keepalive_requests 1000000;
    }}

    server {{
        listen {listen}{listen_opts};
        location / {{
            {location}
        }}
    }}
}}
"#
    )
}

/// How a proxy speaks to both sides: HTTP/2 cleartext (gRPC, or REST over
/// h2c) or HTTP/1.1, and whether answers are streams to pass on item by
/// item (the streaming arms) rather than whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Protocol {
    pub h2c: bool,
    pub streams: bool,
}

/// The proxy's configuration: listen on `listen`, forward everything to
/// `upstream`, over HTTP/2 cleartext on both sides when `protocol.h2c`,
/// never buffering a streamed answer.
pub fn config(kind: ProxyKind, listen: SocketAddr, upstream: SocketAddr, protocol: Protocol, work: &Path) -> String {
    match kind {
        ProxyKind::Nginx => {
            nginx_main("nginx between two tiers, on loopback.", "", work)
                + &nginx_http(listen, "", &format!("        server {upstream};\n"), protocol, work)
        }
        ProxyKind::Caddy => {
            let scheme = if protocol.h2c { "h2c" } else { "http" };
            // Flush each write at once: a streamed answer's items as they come.
            let flush = if protocol.streams { "\n\t\tflush_interval -1" } else { "" };
            format!(
                r#"# Written by grpc-vs-rest: caddy between two tiers, on loopback.
{{
	admin off
	auto_https off
	servers {{
		protocols h1 h2c
	}}
}}

http://{listen} {{
	reverse_proxy {scheme}://{upstream} {{{flush}
		transport http {{
			keepalive 90s
			keepalive_idle_conns 1024
		}}
	}}
}}
"#
            )
        }
    }
}

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

/// The name of a proxy's temporary folder: kind, the harness's pid, the upstream port.
fn work_dir_prefix(kind: ProxyKind, harness_pid: u32) -> String {
    format!("grpc-vs-rest-{}-{harness_pid}-", kind.as_str())
}

/// Removes the temporary folders of proxies whose harness is gone (killed
/// with SIGKILL, it could not remove them; the proxy itself died with it).
/// A folder whose harness pid is running (or taken again) is left alone.
fn clear_stale_work_dirs(temp: &Path) {
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
    clear_stale_work_dirs(&std::env::temp_dir());
    // If the harness is killed outright, its reaper removes this folder.
    crate::tiers::containers::start_reaper().map_err(fail)?;
    let work = std::env::temp_dir().join(format!("{}{tag}", work_dir_prefix(kind, std::process::id())));
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

    #[test]
    fn a_missing_binary_names_the_package() {
        let err = locate(ProxyKind::Caddy, &[PathBuf::from("/nonexistent")]).unwrap_err().to_string();
        assert!(err.contains("could not start the proxy") && err.contains("apt-get install caddy"), "{err}");
    }

    #[test]
    fn configs_forward_to_the_upstream_with_the_right_protocol() {
        const H2C: Protocol = Protocol { h2c: true, streams: false };
        const H1: Protocol = Protocol { h2c: false, streams: false };
        let (l, u): (SocketAddr, SocketAddr) = ("127.0.0.1:8000".parse().unwrap(), "127.0.0.1:9000".parse().unwrap());
        let w = Path::new("/tmp/w");
        let n = config(ProxyKind::Nginx, l, u, H2C, w);
        assert!(n.contains("listen 127.0.0.1:8000 http2;") && n.contains("grpc_pass grpc://backend;"), "{n}");
        assert!(n.contains("server 127.0.0.1:9000;") && n.contains("pid /tmp/w/nginx.pid;"));
        let n = config(ProxyKind::Nginx, l, u, H1, w);
        assert!(n.contains("listen 127.0.0.1:8000;") && n.contains("proxy_pass http://backend;"));
        assert!(n.contains("keepalive 1024;") && n.contains(r#"proxy_set_header Connection "";"#));
        let c = config(ProxyKind::Caddy, l, u, H2C, w);
        assert!(c.contains("http://127.0.0.1:8000 {") && c.contains("reverse_proxy h2c://127.0.0.1:9000"), "{c}");
        assert!(config(ProxyKind::Caddy, l, u, H1, w).contains("reverse_proxy http://127.0.0.1:9000"));
        // Unary answers pass as the proxies' defaults have them; streams item by item.
        for (kind, setting) in [(ProxyKind::Nginx, "proxy_buffering off;"), (ProxyKind::Caddy, "flush_interval -1")] {
            assert!(!config(kind, l, u, H1, w).contains(setting), "{kind:?}");
            assert!(config(kind, l, u, Protocol { h2c: false, streams: true }, w).contains(setting), "{kind:?}");
        }
    }
}
