//! A tier started as a command of the user's (`--downstream-cmd`,
//! `--caller-cmd`): a stack in any language. The harness picks its
//! addresses, fills the command's placeholders, splits it with shell-words
//! rules and runs it without a shell, in a process group of its own; it is
//! ready once every address it was given accepts a TCP connection (before a
//! deadline, or its output's last lines say why not). It is stopped as a
//! whole process tree: SIGTERM to every process, SIGKILL to whatever is left
//! after the grace; one that had to be killed is noted by name. In a
//! container (`--downstream-image`), `containers.rs` starts it with the
//! placeholders' values here (`container_placement`) and the same readiness.
//!
//! Starts and stops; measures nothing (`measure/tree.rs` does, from outside).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitStatus;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use service::ReadyLine;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, command_words};
use crate::result::TierName;
use crate::tiers::command::Upstreams;
use crate::tiers::layout::Node;
use crate::tiers::process::{Foreign, Tier, TierError, keep_tail, launch, tail_text};
use crate::tiers::reaper;

/// How often readiness is tried.
const READY_POLL: Duration = Duration::from_millis(50);
/// How long one readiness connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// What happened when foreign tiers were stopped that a report must say
/// (one ignored SIGTERM), taken once the run's tiers are stopped.
static NOTES: Mutex<Vec<Note>> = Mutex::new(Vec::new());

/// What a report must say of a foreign tier's stop.
#[derive(Debug, Clone)]
pub struct Note {
    /// Its arm's transport.
    pub arm: &'static str,
    pub tier: TierName,
    pub text: String,
}

/// The notes gathered since the last call.
pub fn take_notes() -> Vec<Note> {
    std::mem::take(&mut *NOTES.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The command `cfg` gives `node`'s role in this arm, if it is foreign.
pub fn command_of<'a>(cfg: &'a Config, node: &Node) -> Option<&'a str> {
    let f = &cfg.deploy.foreign;
    let map = match node.kind {
        crate::tiers::layout::Kind::Downstream => &f.downstream_cmd,
        crate::tiers::layout::Kind::Caller => &f.caller_cmd,
        _ => return None,
    };
    map.get(cfg.transport.as_str()).map(String::as_str)
}

/// The image and the command (its arguments) `cfg` gives `node`'s role in
/// this arm, if it is a foreign tier in a container.
pub fn image_of<'a>(cfg: &'a Config, node: &Node) -> Option<(&'a str, &'a str)> {
    let f = &cfg.deploy.foreign;
    let images = match node.kind {
        crate::tiers::layout::Kind::Downstream => &f.downstream_image,
        crate::tiers::layout::Kind::Caller => &f.caller_image,
        _ => return None,
    };
    Some((images.get(cfg.transport.as_str())?.as_str(), command_of(cfg, node)?))
}

/// The placeholders' values inside a container of the arm's network: each
/// listener on its fixed port of the container's own namespace (`ports`,
/// by listener name), and the ports of those `cmd` names.
pub fn container_placement(
    cfg: &Config,
    cmd: &str,
    upstreams: &Upstreams,
    ports: &[(&str, u16)],
) -> (Values, BTreeMap<String, u16>) {
    let mut values = BTreeMap::new();
    let mut listeners = BTreeMap::new();
    for (placeholder, listener) in LISTENERS {
        let port = ports.iter().find(|(l, _)| *l == listener).map(|(_, p)| *p);
        if let Some(port) = port.filter(|_| cmd.contains(&format!("{{{placeholder}}}"))) {
            values.insert(placeholder, format!("0.0.0.0:{port}"));
            listeners.insert(listener.to_owned(), port);
        }
    }
    upstream_values(cfg, upstreams, &mut values);
    (values, listeners)
}

/// Each listener's placeholder and the layout's name for it.
const LISTENERS: [(&str, &str); 4] =
    [("grpc_addr", "grpc"), ("rest_addr", "rest"), ("listen", "front"), ("admin_addr", "admin")];

/// The values every command may name beside its listeners: its upstreams,
/// the arm, the service time.
fn upstream_values(cfg: &Config, upstreams: &Upstreams, values: &mut Values) {
    if let Upstreams::Urls { grpc, rest, .. } = upstreams {
        let own = if cfg.transport.listener() == "grpc" { grpc } else { rest };
        values.insert("downstream_grpc", grpc.clone());
        values.insert("downstream_rest", rest.clone());
        values.insert("downstream", own.clone());
    }
    values.insert("transport", cfg.transport.as_str().to_owned());
    values.insert("delay_ms", format!("{}", cfg.work.delay.as_secs_f64() * 1e3));
}

/// A free port on `ip`, found by binding port 0 and letting it go.
pub fn free_addr(ip: IpAddr) -> Result<SocketAddr, String> {
    let l = std::net::TcpListener::bind(SocketAddr::new(ip, 0)).map_err(|e| format!("finding a free port: {e}"))?;
    l.local_addr().map_err(|e| e.to_string())
}

/// A command's placeholders and their values.
pub type Values = BTreeMap<&'static str, String>;
/// The listeners a command is to open, by the layout's names.
pub type Listeners = BTreeMap<String, SocketAddr>;

/// The placeholders' values for `node` and the listeners it is to open,
/// by the names the layout gives them (`grpc`, `rest`, `front`, `admin`).
fn placement(cfg: &Config, cmd: &str, upstreams: &Upstreams) -> Result<(Values, Listeners), String> {
    let mut values = BTreeMap::new();
    let mut listeners = BTreeMap::new();
    for (placeholder, listener) in LISTENERS {
        let ip = if listener == "admin" { cfg.deploy.admin_bind } else { cfg.deploy.bind };
        if cmd.contains(&format!("{{{placeholder}}}")) {
            let addr = if listener == "front" && cfg.deploy.caller_port != 0 {
                SocketAddr::new(ip, cfg.deploy.caller_port)
            } else {
                free_addr(ip)?
            };
            values.insert(placeholder, addr.to_string());
            listeners.insert(listener.to_owned(), addr);
        }
    }
    upstream_values(cfg, upstreams, &mut values);
    Ok((values, listeners))
}

/// `cmd`'s words with every placeholder filled: split first, so that a
/// value never changes how the command splits.
pub fn fill(cmd: &str, values: &BTreeMap<&'static str, String>) -> Vec<String> {
    let words = command_words(cmd).unwrap_or_default();
    words.into_iter().map(|w| values.iter().fold(w, |w, (k, v)| w.replace(&format!("{{{k}}}"), v))).collect()
}

/// Starts `node` as its foreign command and waits until it is ready.
pub async fn start(cfg: &Config, node: &Node, cmd: &str, upstreams: &Upstreams) -> Result<Tier, TierError> {
    let failed =
        |what: String| TierError::Foreign { tier: node.name, command: cmd.to_owned(), what, stderr: "".into() };
    let (values, listeners) = placement(cfg, cmd, upstreams).map_err(failed)?;
    let ready_timeout = cfg.deploy.foreign.ready_timeout;
    start_filled(
        Command { tier: node.name, template: cmd, arm: cfg.transport.as_str(), huge_pages: cfg.deploy.huge_pages },
        &values,
        &listeners,
        ready_timeout,
    )
    .await
}

/// A foreign command to start: the role it plays, its template as given,
/// and the arm it serves (what `harness conform` checks, there).
pub struct Command<'a> {
    pub tier: TierName,
    pub template: &'a str,
    pub arm: &'static str,
    /// Transparent huge pages as `--huge-pages` sets them, whatever the
    /// command would inherit from the harness (which turns them off for
    /// itself).
    pub huge_pages: crate::config::HugePages,
}

/// Starts `cmd` with its placeholders filled from `values` and waits, at
/// most `ready_timeout`, until each of `listeners` accepts a connection;
/// one that exits first or is not ready in time is stopped and named with
/// its output's last lines. Both `harness conform` and a run start a
/// foreign tier here.
pub async fn start_filled(
    cmd: Command<'_>,
    values: &Values,
    listeners: &Listeners,
    ready_timeout: Duration,
) -> Result<Tier, TierError> {
    let Command { tier, template, arm, huge_pages } = cmd;
    let failed = |what: String, stderr: String| TierError::Foreign { tier, command: template.to_owned(), what, stderr };
    let words = fill(template, values);
    let Some((program, args)) = words.split_first() else {
        return Err(failed("is empty".into(), String::new()));
    };
    let mut command = tokio::process::Command::new(program);
    command.args(args);
    crate::tiers::process::with_huge_pages(&mut command, huge_pages);
    // Whatever the harness ends by, its reaper kills the group (below); the
    // parent-death signal stops the command's first process at once.
    reaper::start_reaper().map_err(|e| failed(e, String::new()))?;
    let (mut child, tail) =
        launch(tier, command, Signal::SIGKILL).map_err(|e| failed(format!("{e}"), String::new()))?;
    if let Some(out) = child.stdout.take() {
        keep_tail(out, tail.clone(), "stdout: ");
    }
    let pid = child.id().unwrap_or(0);
    reaper::watch_group(pid);
    let deadline = Instant::now() + ready_timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            tokio::time::sleep(Duration::from_millis(50)).await;
            reaper::unwatch_group(pid);
            return Err(failed(format!("exited before it was ready ({status})"), tail_text(&tail)));
        }
        if ready(listeners.values()).await {
            break;
        }
        if Instant::now() >= deadline {
            let addrs: Vec<String> = listeners.iter().map(|(k, a)| format!("{k} {a}")).collect();
            let ready = ReadyLine { service: tier.as_str().into(), pid, listeners: BTreeMap::new() };
            let mut t = Tier::from_process(tier, ready, child, tail.clone());
            t.foreign = Some(Foreign { command: template.to_owned(), arm });
            let stderr = tail_text(&tail);
            stop(t, Duration::ZERO, &CancellationToken::new()).await;
            let what = format!(
                "was not ready within {ready_timeout:?}: nothing accepted a connection on {}",
                addrs.join(", ")
            );
            return Err(failed(what, stderr));
        }
        tokio::time::sleep(READY_POLL).await;
    }
    let ready = ReadyLine { service: tier.as_str().into(), pid, listeners: listeners.clone() };
    let mut t = Tier::from_process(tier, ready, child, tail);
    t.foreign = Some(Foreign { command: words.join(" "), arm });
    Ok(t)
}

/// Whether every one of `addrs` accepts a TCP connection now (a foreign
/// tier's readiness, as a process or in a container).
pub(crate) async fn ready<'a>(addrs: impl IntoIterator<Item = &'a SocketAddr>) -> bool {
    for addr in addrs {
        let connect = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr)).await;
        if !matches!(connect, Ok(Ok(_))) {
            return false;
        }
    }
    true
}

/// Every process whose chain of parents leads to `root`, `root` first
/// (from /proc's parent pids); empty once `root` is gone.
pub fn tree(root: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let parents: Vec<(u32, u32)> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, parent_of(pid)?)))
        .collect();
    if !parents.iter().any(|(p, _)| *p == root) {
        return Vec::new();
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let at = found[i];
        found.extend(parents.iter().filter(|(_, pp)| *pp == at).map(|(p, _)| *p));
        i += 1;
    }
    found
}

/// The parent pid in `/proc/<pid>/stat` (after the command's closing paren).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// Sends `signal` to the tree under `root` and to its process group.
fn signal_tree(root: u32, signal: Signal) {
    for pid in tree(root) {
        let _ = kill(Pid::from_raw(pid as i32), signal);
    }
    let _ = killpg(Pid::from_raw(root as i32), signal);
}

/// Stops a foreign tier: SIGTERM to its whole tree, up to `grace` for it to
/// exit (none once `cut`), then SIGKILL to whatever is left of it. A tier
/// that outlived the grace is noted by name with its output's last lines.
pub async fn stop(mut tier: Tier, grace: Duration, cut: &CancellationToken) -> Option<ExitStatus> {
    let pid = tier.ready.pid;
    let (label, name) = (tier.label(), tier.name);
    let arm = tier.foreign.as_ref().map_or("", |f| f.arm);
    // Its members now: one its first process leaves behind is re-parented
    // away from the tree, and killed by this list.
    let members = tree(pid);
    let (child, tail) = tier.parts();
    let status = match child.try_wait().ok().flatten() {
        Some(status) => Some(status),
        None => {
            signal_tree(pid, Signal::SIGTERM);
            let drained = tokio::select! {
                waited = tokio::time::timeout(grace, child.wait()) => waited.ok().and_then(Result::ok),
                _ = cut.cancelled() => None,
            };
            if drained.is_none() && !grace.is_zero() && !cut.is_cancelled() {
                let text = format!(
                    "the {label} ignored SIGTERM for {grace:?} and was killed (SIGKILL); its last output lines:\n{}",
                    tail_text(tail)
                );
                NOTES.lock().unwrap_or_else(|e| e.into_inner()).push(Note { arm, tier: name, text });
            }
            drained
        }
    };
    // Children that outlived the first process (or ignored SIGTERM) go too;
    // /proc is read again after the kill, for any a dying parent started.
    let left = tree(pid);
    signal_tree(pid, Signal::SIGKILL);
    for p in left.into_iter().chain(members) {
        let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
    }
    let status = match status {
        Some(s) => Some(s),
        None => child.wait().await.ok(),
    };
    reaper::unwatch_group(pid);
    status
}
