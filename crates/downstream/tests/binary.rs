//! The real `downstream` binary: ready line on stdout, serves, exits 0 on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use telemetry::ReadyLine;

#[test]
fn binary_prints_ready_line_serves_and_exits_cleanly_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_downstream"))
        .args(["--delay", "20ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let ready: ReadyLine = serde_json::from_str(&line).unwrap();
    assert_eq!(ready.service, "downstream");
    assert_eq!(ready.pid, child.id());
    for name in ["grpc", "rest", "admin"] {
        assert!(ready.listeners[name].ip().is_loopback(), "{name} should bind loopback by default");
    }

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let resp = reqwest::Client::new()
            .post(format!("http://{}/v1/fetch", ready.listeners["rest"]))
            .json(&serde_json::json!({"requestId": "bin-1", "items": 3}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    });

    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert_eq!(exit.code(), Some(0), "downstream should exit 0 after SIGTERM");
}

#[test]
fn bad_flags_exit_2_with_a_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_downstream")).args(["--delay", "soon"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--delay"));
}

#[test]
fn a_taken_port_is_named_in_the_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_downstream")).args(["--rest-addr", &addr]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("REST listener") && err.contains(&addr), "{err}");
}
