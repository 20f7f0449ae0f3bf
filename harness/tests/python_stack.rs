//! The Python stack (`examples/stacks/python/`): its downstream, started by
//! `harness conform --downstream-cmd`, and both its callers pass every check;
//! a short `--transport both` run with both Python tiers started by the
//! harness as commands exits 0 with every answer verified, each tier's CPU
//! and memory read from outside and the internal hop counted at the relay. The venv is
//! made by the stack's own setup.sh when missing; the test says so and
//! returns only when PyPI cannot be reached.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use harness::result::TierName;

use crate::common::{load, out_dir, run_folder, short_run};
use crate::conform::{conform, line, report};

fn stack() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/stacks/python")
}

/// True once the stack's venv and stubs are there; false (said on stderr)
/// when they cannot be made because PyPI is out of reach. Any other
/// failure of setup.sh fails the test.
fn ready_or_unreachable() -> bool {
    let dir = stack();
    if dir.join(".venv/bin/python").exists() && dir.join("gen/bench/v1/bench_pb2.py").exists() {
        return true;
    }
    let o = Command::new("sh").arg(dir.join("setup.sh")).output().unwrap();
    if o.status.success() {
        return true;
    }
    let stderr = String::from_utf8_lossy(&o.stderr);
    let unreachable = ["Could not find a version", "NewConnectionError", "Network is unreachable", "Temporary failure"]
        .iter()
        .any(|s| stderr.contains(s));
    assert!(unreachable, "setup.sh failed, and not for want of PyPI:\n{stderr}");
    eprintln!("SKIPPED python_stack: PyPI cannot be reached, so setup.sh could not make the venv:\n{stderr}");
    false
}

/// A Python tier, stopped (SIGTERM, then killed) when dropped.
struct PythonTier {
    child: Child,
    /// The JSON line it printed once listening: its ports.
    ready: serde_json::Value,
}

impl Drop for PythonTier {
    fn drop(&mut self) {
        crate::common::signal(self.child.id() as i32, nix::sys::signal::Signal::SIGTERM);
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl PythonTier {
    fn start(script: &str, args: &[&str]) -> PythonTier {
        let mut child = Command::new("python3")
            .arg(stack().join(script))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let ready = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{script} ready line {line:?}: {e}"));
        PythonTier { child, ready }
    }

    fn addr(&self, key: &str) -> String {
        format!("127.0.0.1:{}", self.ready[key])
    }
}

#[test]
fn the_python_stack_conforms_and_runs_both_arms_verified() {
    if !ready_or_unreachable() {
        return;
    }
    let script = stack().join("downstream.py");
    let cmd = format!("python3 {} --grpc {{grpc_addr}} --rest {{rest_addr}} --delay-ms 1", script.display());
    let (code, text) = report(&conform(&["--downstream-cmd", &cmd]));
    assert_eq!(code, Some(0), "{text}");
    for name in ["grpc.fetch.order", "grpc.fetch.timeseries", "grpc.health", "grpc.reflection", "rest.fetch.order"] {
        assert!(line(&text, name).starts_with("PASS"), "{name}:\n{text}");
    }

    let downstream =
        PythonTier::start("downstream.py", &["--grpc", "127.0.0.1:0", "--rest", "127.0.0.1:0", "--delay-ms", "5"]);
    let (grpc, rest) = (downstream.addr("grpc_port"), downstream.addr("rest_port"));
    let caller = |transport: &str| {
        let args = ["--listen", "127.0.0.1:0", "--downstream-grpc", &grpc, "--downstream-rest", &rest];
        PythonTier::start("caller.py", &[&args[..], &["--transport", transport]].concat())
    };
    let (via_grpc, via_rest) = (caller("grpc"), caller("rest"));
    let front = |c: &PythonTier| format!("http://{}", c.addr("listen_port"));
    for c in [&via_grpc, &via_rest] {
        let (code, text) = report(&conform(&["--caller-url", &front(c)]));
        assert_eq!(code, Some(0), "{text}");
        assert!(line(&text, "caller.call.timeseries").starts_with("PASS"), "{text}");
    }

    // Both tiers Python, started by the harness as commands and measured
    // from outside: each one's process tree for CPU and memory, and the
    // internal hop's bytes at the relay the harness puts between them.
    let out = out_dir("python-stack");
    let py = |script: &str| format!("python3 {}", stack().join(script).display());
    let downstream =
        format!("{} --grpc {{grpc_addr}} --rest {{rest_addr}} --delay-ms {{delay_ms}}", py("downstream.py"));
    let caller = format!(
        "{} --listen {{listen}} --transport {{transport}} --downstream-grpc {{downstream_grpc}} \
         --downstream-rest {{downstream_rest}}",
        py("caller.py")
    );
    let o = short_run(&out)
        .args(&["--downstream-cmd", &downstream, "--caller-cmd", &caller])
        .flags("--transport both --qps 20 --duration 2s --warmup 1s --rounds 1 --delay 5ms")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    for arm in ["grpc", "rest"] {
        let run = load(&folder.join(arm));
        let round = &run.rounds[0];
        let requests = &round.requests;
        // An answer is counted ok only once its records passed the
        // end-to-end check; one that fails it is a `bad_response` error.
        assert!(requests.ok > 0, "{arm}: {requests:?}");
        assert_eq!(requests.error_total(), 0, "{arm}: {requests:?}");
        for tier in [TierName::Downstream, TierName::Caller] {
            let foreign = &run.tiers[&tier].settings["foreign"];
            assert!(foreign["command"].as_str().is_some_and(|c| c.contains(".py")), "{arm} {tier:?}: {foreign}");
            let r = &round.resources[&tier];
            assert!(r.cpu_seconds.is_some_and(|c| c > 0.0) && r.rss_mib_peak.is_some_and(|m| m > 5.0), "{r:?}");
        }
        let relay = round.bytes.relay.as_ref().expect("the internal hop counted at the relay");
        assert!(relay.request_wire_bytes.is_some_and(|b| b > 0) && relay.response_wire_bytes.is_some_and(|b| b > 0));
        // The relay forwards bytes and reads no message: not measured, not zero.
        let internal = &round.bytes.internal;
        assert_eq!((internal.request_message_bytes, relay.response_message_bytes), (None, None), "{internal:?}");
    }
    let _ = std::fs::remove_dir_all(&out);
}
