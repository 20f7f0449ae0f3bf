//! The real `downstream` binary: ready line on stdout, serves, exits 0 on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use service::ReadyLine;

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

fn ready_line(child: &mut std::process::Child) -> ReadyLine {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

fn sigterm_and_wait(child: &mut std::process::Child) -> Option<i32> {
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    child.wait().unwrap().code()
}

#[test]
fn at_the_open_files_limit_the_accept_warning_is_rate_limited_and_has_no_colour_codes() {
    let log = std::env::temp_dir().join(format!("downstream-emfile-{}.log", std::process::id()));
    let started = std::time::Instant::now();
    // A soft limit of 64 open files, stderr to a file (not a terminal), and
    // NO_COLOR unset: only the non-terminal rule can turn colour off.
    let mut child = Command::new("sh")
        .args(["-c", "ulimit -n 64 && exec \"$0\" \"$@\"", env!("CARGO_BIN_EXE_downstream"), "--delay", "1ms"])
        .env_remove("NO_COLOR")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let ready = ready_line(&mut child);
    // More connections than the process has descriptors: the kernel queues
    // them, every accept fails with EMFILE, and the loop retries every 20 ms.
    let held: Vec<_> = (0..100).filter_map(|_| std::net::TcpStream::connect(ready.listeners["rest"]).ok()).collect();
    assert!(held.len() > 64, "only {} connections were made", held.len());
    std::thread::sleep(std::time::Duration::from_millis(1500));
    sigterm_and_wait(&mut child);
    let ran = started.elapsed();
    drop(held);

    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let warnings = text.lines().filter(|l| l.contains("accept failed")).count();
    assert!(warnings >= 1, "the open-files limit was never hit: {text}");
    // At most one line a second, plus the first.
    assert!(warnings as f64 <= ran.as_secs_f64() + 1.0, "{warnings} warnings in {ran:?}:\n{text}");
    if warnings >= 2 {
        assert!(text.contains("more since the last report"), "{text}");
    }
    assert!(!text.contains('\x1b'), "colour codes in a log file:\n{text}");
}

#[test]
fn idle_timeout_and_in_flight_limit_flags_are_reported_in_stats() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_downstream"))
        .args(["--delay", "1ms", "--idle-timeout", "300ms", "--max-in-flight", "7"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = ready_line(&mut child);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let stats: serde_json::Value = rt.block_on(async {
        reqwest::get(format!("http://{}/stats", ready.listeners["admin"])).await.unwrap().json().await.unwrap()
    });
    let settings = &stats["settings"];
    assert_eq!(settings["grpc_server"]["idle_timeout"], 300);
    assert_eq!(settings["rest_server"]["idle_timeout"], 300);
    assert_eq!(settings["max_in_flight"], 7);
    assert_eq!(settings["max_in_flight_source"], "--max-in-flight");
    assert_eq!(sigterm_and_wait(&mut child), Some(0));

    for bad in [["--idle-timeout", "0s"], ["--idle-timeout", "soon"], ["--max-in-flight", "0"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_downstream")).args(bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(bad[0]), "{bad:?}");
    }
}
