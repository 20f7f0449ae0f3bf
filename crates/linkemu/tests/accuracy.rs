//! The emulator's accuracy over real sockets on loopback: the round-trip time
//! it adds and the rate it paces at, each against its setting. The bounds are
//! the ones the README quotes (RTT within ±10%, throughput within ±5%).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use linkemu::{LinkSettings, Relay, RelayHandle};

/// An echo server on 127.0.0.1:0 (one thread per connection).
fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            thread::spawn(move || {
                let mut s = stream;
                let _ = s.set_nodelay(true);
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// What a sink saw on one connection: bytes after the first read, and the
/// time from the first read to the last.
struct Received {
    bytes_after_first: u64,
    first: Instant,
    last: Instant,
}

/// A sink server on 127.0.0.1:0 that reports what each connection delivered.
fn sink_server(connections: usize) -> (SocketAddr, std::sync::mpsc::Receiver<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        for stream in listener.incoming().flatten().take(connections) {
            let tx = tx.clone();
            thread::spawn(move || {
                let mut s = stream;
                let mut buf = vec![0u8; 64 * 1024];
                let mut first = None;
                let (mut after_first, mut last) = (0u64, Instant::now());
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let now = Instant::now();
                    if first.is_none() {
                        first = Some(now);
                    } else {
                        after_first += n as u64;
                    }
                    last = now;
                }
                if let Some(first) = first {
                    let _ = tx.send(Received { bytes_after_first: after_first, first, last });
                }
            });
        }
    });
    (addr, rx)
}

fn relay(upstream: SocketAddr, rtt_ms: u64, rate: u64) -> RelayHandle {
    let settings = LinkSettings { rtt: Duration::from_millis(rtt_ms), rate_bits_per_second: Some(rate) };
    Relay::bind("127.0.0.1:0".parse().unwrap(), upstream, settings).unwrap().spawn().unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn ping_pong_round_trip_is_the_set_rtt() {
    let rtt_ms = 20;
    let relay = relay(echo_server(), rtt_ms, 100_000_000);
    let mut c = TcpStream::connect(relay.local_addr).unwrap();
    c.set_nodelay(true).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rtts_ms = Vec::new();
    let mut buf = [0u8; 32];
    for i in 0..40u8 {
        let msg = [i; 32];
        let t = Instant::now();
        c.write_all(&msg).unwrap();
        c.read_exact(&mut buf).unwrap();
        rtts_ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(buf, msg, "the relay must deliver the bytes unchanged");
    }
    let m = median(rtts_ms.clone());
    eprintln!(
        "rtt=20ms: median measured {m:.3} ms, min {:.3}, max {:.3}",
        rtts_ms.iter().copied().fold(f64::MAX, f64::min),
        rtts_ms.iter().copied().fold(0.0, f64::max)
    );
    assert!((m - rtt_ms as f64).abs() <= 0.1 * rtt_ms as f64, "median RTT {m:.3} ms is not within 10% of {rtt_ms} ms");
    // Never faster than the link allows.
    assert!(rtts_ms.iter().all(|&r| r >= rtt_ms as f64), "a round trip beat the link's RTT: {rtts_ms:?}");
    relay.stop();
}

/// Sends `bytes` to `addr` in one direction and closes.
fn send_bulk(addr: SocketAddr, bytes: usize) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        let block = vec![0x5au8; 64 * 1024];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(block.len());
            c.write_all(&block[..n]).unwrap();
            left -= n;
        }
        c.shutdown(std::net::Shutdown::Write).unwrap();
    })
}

#[test]
fn bulk_transfer_runs_at_the_set_rate() {
    let rate = 40_000_000u64;
    let (sink, rx) = sink_server(1);
    let relay = relay(sink, 2, rate);
    send_bulk(relay.local_addr, 4 * 1024 * 1024).join().unwrap();
    let r = rx.recv_timeout(Duration::from_secs(20)).expect("the sink received nothing");
    let measured = r.bytes_after_first as f64 * 8.0 / (r.last - r.first).as_secs_f64();
    eprintln!("rate=40mbit: measured {:.3} Mbit/s", measured / 1e6);
    assert!((measured / rate as f64 - 1.0).abs() <= 0.05, "throughput {measured:.0} bit/s is not within 5% of {rate}");
    relay.stop();
}

#[test]
fn connections_share_one_link() {
    let rate = 40_000_000u64;
    let (sink, rx) = sink_server(2);
    let relay = relay(sink, 2, rate);
    let senders = [send_bulk(relay.local_addr, 2 * 1024 * 1024), send_bulk(relay.local_addr, 2 * 1024 * 1024)];
    for s in senders {
        s.join().unwrap();
    }
    let got: Vec<Received> = (0..2).map(|_| rx.recv_timeout(Duration::from_secs(20)).unwrap()).collect();
    let first = got.iter().map(|r| r.first).min().unwrap();
    let last = got.iter().map(|r| r.last).max().unwrap();
    let bytes: u64 = got.iter().map(|r| r.bytes_after_first).sum();
    let measured = bytes as f64 * 8.0 / (last - first).as_secs_f64();
    eprintln!("two connections on rate=40mbit: together {:.3} Mbit/s", measured / 1e6);
    // Two connections on one link get the link's rate together, not each.
    assert!((measured / rate as f64 - 1.0).abs() <= 0.05, "together {measured:.0} bit/s is not within 5% of {rate}");
    relay.stop();
}
