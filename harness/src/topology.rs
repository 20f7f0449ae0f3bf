//! Starts the downstream and the caller as separate child processes (the
//! harness's own executable in a hidden `__tier` role, so `cargo run -p harness`
//! needs nothing else built), reads their ready lines, and stops them.
//!
//! Each tier is its own OS process so its CPU and memory are measured as a team
//! would see them in production.

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use telemetry::ReadyLine;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::config::{Config, TargetTier};
use crate::proxy::ProxyHop;

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
    Spawn { tier: &'static str, reason: String },
    #[error("the {tier} exited before it was ready ({status}); its last stderr lines:\n{stderr}")]
    Exited { tier: &'static str, status: String, stderr: String },
    #[error("the {tier} printed no ready line within {timeout:?}; its last stderr lines:\n{stderr}")]
    NotReady { tier: &'static str, timeout: Duration, stderr: String },
}

/// The last lines a tier wrote to stderr, filled by a reader task.
pub(crate) type StderrTail = Arc<Mutex<VecDeque<String>>>;

/// One running tier.
#[derive(Debug)]
pub struct Tier {
    pub name: &'static str,
    pub ready: ReadyLine,
    child: Child,
    stderr_tail: StderrTail,
}

impl Tier {
    pub fn pid(&self) -> u32 {
        self.ready.pid
    }

    pub fn admin_url(&self) -> String {
        format!("http://{}", self.ready.listeners.get("admin").map(ToString::to_string).unwrap_or_default())
    }

    /// The last lines the tier wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        tail_text(&self.stderr_tail)
    }

    /// `Some(status)` once the tier has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM, then up to `grace` for the drain, then SIGKILL; then whatever
    /// is left of its process group (a proxy's workers) is killed too.
    pub async fn stop(mut self, grace: Duration) -> Option<ExitStatus> {
        let status = match self.exited() {
            Some(status) => Some(status),
            None => {
                let _ = kill(Pid::from_raw(self.ready.pid as i32), Signal::SIGTERM);
                match tokio::time::timeout(grace, self.child.wait()).await {
                    Ok(status) => status.ok(),
                    Err(_) => {
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

fn tail_text(tail: &Mutex<VecDeque<String>>) -> String {
    let lines = tail.lock().unwrap_or_else(|e| e.into_inner());
    if lines.is_empty() { "(nothing)".to_owned() } else { lines.iter().cloned().collect::<Vec<_>>().join("\n") }
}

/// The tiers of one arm: the downstream, and the caller when the load goes
/// through it. With `--downstream-url`, none are started and the load goes to
/// the given downstream.
#[derive(Debug)]
pub struct Topology {
    pub downstream: Option<Tier>,
    pub caller: Option<Tier>,
    /// A reverse proxy on one hop, and its settings (version, configuration).
    pub proxy: Option<Tier>,
    pub proxy_settings: Option<serde_json::Value>,
    /// Where the load goes: the caller's front door or the downstream's
    /// listener for the transport.
    pub target_url: String,
}

impl Topology {
    /// Starts the downstream, then (for the three-tier topology) the caller
    /// pointed at it.
    pub async fn start(cfg: &Config) -> Result<Topology, TierError> {
        if let Some(url) = &cfg.downstream_url {
            return Ok(Topology {
                downstream: None,
                caller: None,
                proxy: None,
                proxy_settings: None,
                target_url: url.clone(),
            });
        }
        let ms = |d: Duration| format!("{}us", d.as_micros());
        let any_port = std::net::SocketAddr::new(cfg.bind, 0).to_string();
        let downstream = spawn(
            "downstream",
            vec![
                "--grpc-addr".into(),
                any_port.clone(),
                "--rest-addr".into(),
                any_port.clone(),
                "--admin-addr".into(),
                any_port.clone(),
                "--delay".into(),
                ms(cfg.delay),
                "--jitter".into(),
                ms(cfg.jitter),
                "--max-items".into(),
                payload::Limits::DEFAULT_MAX_ITEMS.to_string(),
            ],
        )
        .await?;
        let addr = |name: &str| downstream.ready.listeners.get(name).map(|a| format!("http://{a}")).unwrap_or_default();
        if cfg.target == TargetTier::Downstream {
            let target_url = addr(cfg.transport.as_str());
            return Ok(Topology {
                downstream: Some(downstream),
                caller: None,
                proxy: None,
                proxy_settings: None,
                target_url,
            });
        }
        // An internal-hop proxy goes between the caller and the downstream's
        // listener for the transport.
        let mut proxy = None;
        let (mut grpc_url, mut rest_url) = (addr("grpc"), addr("rest"));
        if let (Some(kind), ProxyHop::Internal) = (cfg.proxy, cfg.proxy_hop) {
            let upstream = downstream.ready.listeners.get(cfg.transport.as_str()).copied();
            let h2c = cfg.transport == caller::Transport::Grpc || cfg.rest_http2;
            let started = match upstream {
                Some(u) => crate::proxy::start(kind, ProxyHop::Internal, cfg.bind, u, h2c).await,
                None => Err(TierError::Spawn { tier: "proxy", reason: "the downstream named no listener".into() }),
            };
            match started {
                Ok(p) => {
                    grpc_url = format!("http://{}", p.listen);
                    rest_url = grpc_url.clone();
                    proxy = Some(p);
                }
                Err(e) => {
                    downstream.stop(Duration::from_secs(2)).await;
                    return Err(e);
                }
            }
        }
        let mut caller_args = vec![
            "--listen".into(),
            std::net::SocketAddr::new(cfg.bind, cfg.caller_port).to_string(),
            "--admin-addr".into(),
            any_port,
            "--transport".into(),
            cfg.transport.as_str().into(),
            "--downstream-grpc".into(),
            grpc_url,
            "--downstream-rest".into(),
            rest_url,
            "--grpc-connections".into(),
            cfg.grpc_connections.to_string(),
            "--fanout".into(),
            cfg.fanout.to_string(),
            "--downstream-timeout".into(),
            ms(cfg.timeout),
        ];
        if cfg.rest_http2 {
            caller_args.push("--rest-http2".into());
        }
        let caller = match spawn("caller", caller_args).await {
            Ok(c) => c,
            Err(e) => {
                if let Some(p) = proxy {
                    p.tier.stop(Duration::from_secs(2)).await;
                }
                downstream.stop(Duration::from_secs(2)).await;
                return Err(e);
            }
        };
        let front = caller.ready.listeners.get("front").copied();
        let mut target_url = format!("http://{}/v1/call", front.map(|f| f.to_string()).unwrap_or_default());
        // A front-hop proxy goes between the harness and the caller.
        if let (Some(kind), ProxyHop::Front, Some(front)) = (cfg.proxy, cfg.proxy_hop, front) {
            match crate::proxy::start(kind, ProxyHop::Front, cfg.bind, front, false).await {
                Ok(p) => {
                    target_url = format!("http://{}/v1/call", p.listen);
                    proxy = Some(p);
                }
                Err(e) => {
                    caller.stop(Duration::from_secs(2)).await;
                    downstream.stop(Duration::from_secs(2)).await;
                    return Err(e);
                }
            }
        }
        let proxy_settings = proxy.as_ref().map(|p| p.settings.clone());
        Ok(Topology {
            downstream: Some(downstream),
            caller: Some(caller),
            proxy: proxy.map(|p| p.tier),
            proxy_settings,
            target_url,
        })
    }

    /// The tiers this arm started.
    pub fn tiers(&self) -> impl Iterator<Item = &Tier> {
        self.downstream.iter().chain(self.caller.iter()).chain(self.proxy.iter())
    }

    pub fn tiers_mut(&mut self) -> impl Iterator<Item = &mut Tier> {
        self.downstream.iter_mut().chain(self.caller.iter_mut()).chain(self.proxy.iter_mut())
    }

    /// Stops the caller first (so the downstream sees no new calls), then the downstream.
    pub async fn stop(self) {
        let grace = Duration::from_secs(6);
        if let Some(c) = self.caller {
            c.stop(grace).await;
        }
        if let Some(p) = self.proxy {
            p.stop(grace).await;
            // Its temporary and log files: the configuration is in the report.
            if let Some(work) = self.proxy_settings.as_ref().and_then(|s| s["work_dir"].as_str()) {
                let _ = std::fs::remove_dir_all(work);
            }
        }
        if let Some(d) = self.downstream {
            d.stop(grace).await;
        }
    }
}

async fn spawn(tier: &'static str, args: Vec<String>) -> Result<Tier, TierError> {
    let spawn_err = |reason: String| TierError::Spawn { tier, reason };
    let exe = std::env::current_exe().map_err(|e| spawn_err(format!("finding the harness executable: {e}")))?;
    let mut cmd = Command::new(exe);
    cmd.arg(TIER_ROLE_ARG).arg(tier).args(&args);
    let (mut child, stderr_tail) = launch(tier, cmd)?;
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
    Ok(Tier { name: tier, ready, child, stderr_tail })
}

/// The error for a process that exited before it was ready, with its stderr tail.
pub(crate) async fn exited(tier: &'static str, child: &mut Child, tail: &Mutex<VecDeque<String>>) -> TierError {
    let status = child.wait().await.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
    // Give the stderr reader a moment to take the last lines.
    tokio::time::sleep(Duration::from_millis(50)).await;
    TierError::Exited { tier, status, stderr: tail_text(tail) }
}

/// Starts `cmd` as a tier process: its own process group, killed with the
/// harness, stdout piped, the tail of its stderr kept for error messages.
pub(crate) fn launch(tier: &'static str, mut cmd: Command) -> Result<(Child, StderrTail), TierError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own process group: a Ctrl-C at the terminal reaches only the
        // harness, which then stops the load and the tiers in order.
        .process_group(0);
    die_with_parent(&mut cmd);
    let mut child = cmd.spawn().map_err(|e| TierError::Spawn { tier, reason: e.to_string() })?;
    let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
    if let Some(stderr) = child.stderr.take() {
        let tail = stderr_tail.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                if t.len() == STDERR_TAIL_LINES {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });
    }
    Ok((child, stderr_tail))
}

impl Tier {
    /// A tier from a process started with [`launch`] that is ready.
    pub(crate) fn from_process(name: &'static str, ready: ReadyLine, child: Child, stderr_tail: StderrTail) -> Tier {
        Tier { name, ready, child, stderr_tail }
    }
}

/// Asks the kernel to SIGKILL the child when the harness dies, even by SIGKILL,
/// so no tier outlives a run.
#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec and only calls
    // prctl(2), which is async-signal-safe.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}
