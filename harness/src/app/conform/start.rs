//! A downstream given as a command (`--downstream-cmd`), started for the
//! checks and stopped after them: its placeholders filled with free
//! loopback addresses, ready once both listeners accept a connection.
//! Deliberately small, one function and a guard: the run-time launcher of
//! foreign tiers (`--downstream-cmd` on a run) replaces it.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A started command: its listeners' addresses; dropping it stops it
/// (SIGTERM to its process group, SIGKILL after a grace).
pub struct Started {
    pub grpc_addr: SocketAddr,
    pub rest_addr: SocketAddr,
    child: Child,
}

impl Drop for Started {
    fn drop(&mut self) {
        // The command ran in a process group of its own (a shell and what
        // it started): the group is signalled, so nothing is left behind.
        let group = nix::unistd::Pid::from_raw(-(self.child.id() as i32));
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// A free loopback port, as the harness picks one for a tier it starts.
fn free_addr() -> std::io::Result<SocketAddr> {
    TcpListener::bind("127.0.0.1:0")?.local_addr()
}

/// Starts `template` through `sh -c` with `{grpc_addr}` and `{rest_addr}`
/// replaced by free loopback `host:port`s, and waits until both accept a
/// connection, at most `ready_timeout`. A command that exits or is not ready
/// in time is an error that quotes its last lines of stderr.
pub fn start_downstream(template: &str, ready_timeout: Duration) -> Result<Started, String> {
    let (grpc_addr, rest_addr) = (free_addr().map_err(|e| e.to_string())?, free_addr().map_err(|e| e.to_string())?);
    let line = template.replace("{grpc_addr}", &grpc_addr.to_string()).replace("{rest_addr}", &rest_addr.to_string());
    let mut child = Command::new("sh")
        .args(["-c", &line])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("starting `{line}`: {e}"))?;
    let stderr = Arc::new(Mutex::new(VecDeque::new()));
    if let Some(pipe) = child.stderr.take() {
        let lines = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut kept = lines.lock().unwrap_or_else(|e| e.into_inner());
                if kept.len() == 10 {
                    kept.pop_front();
                }
                kept.push_back(line);
            }
        });
    }
    let mut started = Started { grpc_addr, rest_addr, child };
    let deadline = Instant::now() + ready_timeout;
    let ready = |a: &SocketAddr| TcpStream::connect_timeout(a, Duration::from_millis(200)).is_ok();
    let why = loop {
        if ready(&grpc_addr) && ready(&rest_addr) {
            return Ok(started);
        }
        if let Ok(Some(status)) = started.child.try_wait() {
            break format!("`{line}` exited ({status}) before it listened");
        }
        if Instant::now() >= deadline {
            break format!("`{line}` did not listen on {grpc_addr} and {rest_addr} within {ready_timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(started);
    std::thread::sleep(Duration::from_millis(100));
    let tail: Vec<String> = stderr.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect();
    Err(if tail.is_empty() { why } else { format!("{why}; its stderr ends:\n  {}", tail.join("\n  ")) })
}
