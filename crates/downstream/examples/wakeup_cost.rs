//! What one wake-up of a parked tokio worker costs on this machine, measured
//! (bench/run.sh section 8; bench/README.md, "What a wake-up costs").
//!
//! An echo server on tokio's default runtime (one worker per core, as the
//! tiers run) in a child process answers 1-byte messages over loopback TCP.
//! Blocking client threads drive it in regimes that differ only in how often
//! a message finds the server's workers parked: paced (each message alone,
//! every one a wake-up) and closed loops on 1 to 32 connections (the more
//! connections, the likelier the next message is already waiting). For each
//! regime the server's on-CPU time (`/proc/<pid>/task/*/schedstat`) and its
//! threads' context switches (voluntary: a thread blocked and was woken;
//! involuntary: it was preempted, mostly by the client it had just woken) are
//! divided by the messages it echoed. The work per message is the same
//! everywhere (one read, one write), so what differs between the rows is what
//! the kernel and the runtime add for how the messages arrive: the sleep and
//! wake-up of a parked worker, the wake-up of the peer that each write
//! makes, the epoll_wait that found nothing ready.
//!
//! ```sh
//! cargo run --release -p downstream --example wakeup_cost            # 4 s per regime
//! SECS=2 cargo run --release -p downstream --example wakeup_cost
//! ONLY="closed loop, 1 " SECS=10 ...   # the regimes whose name holds ONLY (to profile one)
//! ```
//!
//! The server's pid is printed on stderr.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn main() -> std::io::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("serve") {
        return serve();
    }
    let secs: f64 = std::env::var("SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(4.0);
    let mut child = std::process::Command::new(std::env::current_exe()?)
        .arg("serve")
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line)?;
    let addr: std::net::SocketAddr = line.trim().parse().map_err(std::io::Error::other)?;
    let pid = child.id();
    eprintln!("echo server: pid {pid}, {addr}");
    let regimes: Vec<(String, Regime)> = [500.0, 2000.0, 8000.0]
        .map(|r| (format!("paced, {r:.0} msg/s over 4 connections"), Regime::Paced { rate: r, connections: 4 }))
        .into_iter()
        .chain([1, 2, 8, 32].map(|c| (format!("closed loop, {c} connection(s)"), Regime::Closed { connections: c })))
        .filter(|(name, _)| std::env::var("ONLY").map_or(true, |only| name.contains(&only)))
        .collect();
    println!(
        "| regime | messages/s | mean round trip, µs | server CPU µs/msg | × the least | voluntary switches/msg | involuntary/msg |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut rows = Vec::new();
    for (name, regime) in &regimes {
        // A short unmeasured start: connections open, workers warm.
        drive(addr, regime, Duration::from_millis(300))?;
        let before = server(pid)?;
        let n = drive(addr, regime, Duration::from_secs_f64(secs))?;
        let after = server(pid)?;
        let connections = match regime {
            Regime::Paced { connections, .. } | Regime::Closed { connections } => *connections,
        };
        // A closed loop's round trip is its connections over its rate; a paced one's is not measured here.
        let rtt = matches!(regime, Regime::Closed { .. }).then(|| connections as f64 * secs / n as f64 * 1e6);
        rows.push((
            name,
            n as f64 / secs,
            rtt,
            (after.cpu_ns - before.cpu_ns) as f64 / 1e3 / n as f64,
            (after.voluntary - before.voluntary) as f64 / n as f64,
            (after.involuntary - before.involuntary) as f64 / n as f64,
        ));
    }
    let _ = child.kill();
    let _ = child.wait();
    let least = rows.iter().map(|r| r.3).fold(f64::INFINITY, f64::min);
    let most = rows.iter().map(|r| r.3).fold(0.0, f64::max);
    for (name, rate, rtt, cpu, vol, invol) in &rows {
        let rtt = rtt.map_or("—".to_owned(), |r| format!("{r:.1}"));
        println!("| {name} | {rate:.0} | {rtt} | {cpu:.2} | {:.2} | {vol:.3} | {invol:.3} |", cpu / least);
    }
    println!();
    println!(
        "The same echo (one read, one write) cost the server {least:.2} to {most:.2} µs of CPU per message, \
         {:.1}× from one regime to another: only how its messages arrived differed.",
        most / least
    );
    Ok(())
}

/// The echo server: tokio's default multi-thread runtime, one task per connection.
fn serve() -> std::io::Result<()> {
    tokio::runtime::Runtime::new()?.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("{}", listener.local_addr()?);
        loop {
            let (mut s, _) = listener.accept().await?;
            s.set_nodelay(true)?;
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    })
}

enum Regime {
    /// `rate` messages a second in all, spread over `connections` threads,
    /// each waiting for its echo before its next due time.
    Paced { rate: f64, connections: usize },
    /// Each of `connections` threads sends its next message as soon as the
    /// echo of the last is read.
    Closed { connections: usize },
}

/// Runs `regime` for `length` on fresh connections; returns the messages echoed.
fn drive(addr: std::net::SocketAddr, regime: &Regime, length: Duration) -> std::io::Result<u64> {
    let (connections, interval) = match *regime {
        Regime::Paced { rate, connections } => (connections, Some(Duration::from_secs_f64(connections as f64 / rate))),
        Regime::Closed { connections } => (connections, None),
    };
    let start = Instant::now() + Duration::from_millis(20);
    let threads: Vec<_> = (0..connections)
        .map(|k| {
            std::thread::spawn(move || -> std::io::Result<u64> {
                let mut s = TcpStream::connect(addr)?;
                s.set_nodelay(true)?;
                // Paced threads are offset from each other so that messages arrive one at a time.
                let offset = interval.map_or(Duration::ZERO, |i| i.mul_f64(k as f64 / connections as f64));
                let (mut n, mut byte) = (0u64, [0u8; 1]);
                let end = start + length;
                loop {
                    if let Some(i) = interval {
                        let due = start + offset + i * n as u32;
                        if due >= end {
                            break;
                        }
                        if let Some(wait) = due.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                    } else if Instant::now() >= end {
                        break;
                    }
                    s.write_all(&byte)?;
                    s.read_exact(&mut byte)?;
                    n += 1;
                }
                Ok(n)
            })
        })
        .collect();
    let mut total = 0;
    for t in threads {
        total += t.join().map_err(|_| std::io::Error::other("a client thread panicked"))??;
    }
    Ok(total)
}

struct ServerCounters {
    cpu_ns: u64,
    voluntary: u64,
    involuntary: u64,
}

/// The server's on-CPU nanoseconds and context switches, summed over its threads.
fn server(pid: u32) -> std::io::Result<ServerCounters> {
    let mut c = ServerCounters { cpu_ns: 0, voluntary: 0, involuntary: 0 };
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let dir = task?.path();
        let (Ok(sched), Ok(status)) =
            (std::fs::read_to_string(dir.join("schedstat")), std::fs::read_to_string(dir.join("status")))
        else {
            continue; // a thread that ended between the listing and the read
        };
        c.cpu_ns += sched.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        for line in status.lines() {
            let value = |l: &str| l.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            if line.starts_with("voluntary_ctxt_switches:") {
                c.voluntary += value(line);
            } else if line.starts_with("nonvoluntary_ctxt_switches:") {
                c.involuntary += value(line);
            }
        }
    }
    Ok(c)
}
