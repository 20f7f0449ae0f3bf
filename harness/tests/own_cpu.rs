//! The harness's own CPU seconds over a round agree with the kernel's
//! per-thread run time (`/proc/self/task/*/schedstat`) read at the round's
//! boundaries, to within a scheduler tick, even when a tier's `/stats` read
//! at a boundary is slow and the harness is busy meanwhile.
//!
//! Measured in a child process running only [`measured_in_a_process_of_its_own`]:
//! the other tests' threads come and go, and a thread that ends takes its
//! run time out of every schedstat sum.

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use harness::measure::tier_stats::TierStatsReader;
use harness::tiers::Topology;

/// What a tier's `/stats` takes to answer here.
const SLOW_READ: Duration = Duration::from_millis(400);
/// A scheduler tick at the slowest common rate (HZ=100): the most a running
/// thread's run time can lag behind in either reading.
const TICK_SECONDS: f64 = 0.010;

#[test]
fn the_harness_cpu_seconds_agree_with_schedstat_over_the_same_window() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "own_cpu::measured_in_a_process_of_its_own", "--ignored", "--nocapture", "--test-threads=1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the measurement did not run: {text}");
    if let Some(line) = text.lines().find(|l| l.starts_with("harness CPU")) {
        println!("{line}");
    }
}

/// Run time of every thread of this process, from schedstat (nanoseconds).
fn schedstat_seconds() -> f64 {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) {
            total += text.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    total as f64 * 1e-9
}

/// An admin endpoint that answers every request after [`SLOW_READ`].
fn slow_admin() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            std::thread::sleep(SLOW_READ);
            let _ =
                conn.write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    url
}

#[test]
#[ignore = "run by the_harness_cpu_seconds_agree_with_schedstat_over_the_same_window, in a process of its own"]
fn measured_in_a_process_of_its_own() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut config = harness::testing::config(caller::Transport::Grpc);
    config.deploy.downstream_url = Some("http://127.0.0.1:9".into());
    config.deploy.remote.downstream_admin = Some(slow_admin());
    let topology = runtime.block_on(Topology::start(&config, None)).unwrap();
    let reader = TierStatsReader::new().unwrap();
    // A thread of the harness that works hard while the round's start is
    // read, and idles (alive: an ended thread leaves the schedstat sum)
    // while its end is read.
    let (burn, quit) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicBool::new(false)));
    let burner = {
        let (burn, quit) = (burn.clone(), quit.clone());
        std::thread::spawn(move || {
            let mut x = 0u64;
            while !quit.load(Relaxed) {
                if burn.load(Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                } else {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let (sched_start, t0) = (schedstat_seconds(), Instant::now());
    let start = runtime.block_on(reader.snapshot(&topology));
    assert!(t0.elapsed() >= SLOW_READ, "the boundary's read was not slow: the check proves nothing");
    std::thread::sleep(Duration::from_millis(100));
    burn.store(false, Relaxed);
    std::thread::sleep(Duration::from_millis(20));
    let sched_end = schedstat_seconds();
    let end = runtime.block_on(reader.snapshot(&topology));
    quit.store(true, Relaxed);
    burner.join().unwrap();
    let own = end.harness.cpu_seconds.unwrap() - start.harness.cpu_seconds.unwrap();
    let kernel = sched_end - sched_start;
    println!("harness CPU {own:.4} s, schedstat {kernel:.4} s over the same window");
    assert!(kernel > 0.1, "the burner hardly ran ({kernel:.3} s): the check proves nothing");
    assert!((own - kernel).abs() <= TICK_SECONDS, "harness CPU {own:.4} s, schedstat {kernel:.4} s");
}
