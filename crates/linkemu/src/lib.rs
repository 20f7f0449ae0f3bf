//! A **user-space link emulator**: a TCP relay on loopback that makes one hop
//! behave like a link with a round-trip time and a rate.
//!
//! Why user space: the kernels these runs meet have `tbf` but no `netem`
//! (`tc qdisc add … netem` answers "Specified qdisc kind is unknown"), so the
//! kernel cannot add delay. The relay does what `netem delay` plus `tbf rate`
//! would do on a veth:
//!
//! * every chunk read from one side is **serialised** onto that direction of
//!   the link: `departure = max(arrival, previous departure) + bytes × 8 / rate`,
//!   with one serialiser per direction shared by **all** connections (one
//!   link, not one per connection);
//! * it is **delivered** to the other side at `departure + rtt / 2`;
//! * each connection buffers at most [`LinkSettings::queue_limit_bytes`] per
//!   direction (at least a bandwidth-delay product), and stops reading while
//!   that is full, so TCP backpressure reaches the sender as it would on a
//!   real link.
//!
//! Timing is done on OS threads with `std::thread::sleep` (a high-resolution
//! kernel timer; the process's timer slack is lowered to 1 µs), not tokio's
//! 1 ms timer wheel. Each connection gets four small threads (a reader and a
//! delivering writer per direction): simple, and exact enough for the tens to
//! hundreds of connections a run opens.
//!
//! What it does not emulate: loss, reordering, jitter, and the TCP handshake
//! (the relay accepts at once and connects upstream at once; only data is
//! delayed). It owns no measurement and no rendering.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// The least each connection may buffer per direction.
pub const MIN_QUEUE_BYTES: usize = 64 * 1024;
/// The most one read takes from a socket (one chunk on the link).
pub const MAX_CHUNK_BYTES: usize = 64 * 1024;
/// What a connection buffers per direction on a link without a rate (about
/// what Linux lets one socket's send buffer grow to by default).
pub const UNLIMITED_QUEUE_BYTES: usize = 4 * 1024 * 1024;
/// The least one read may take.
pub const MIN_CHUNK_BYTES: usize = 1448;
/// Stack of each relay thread: they hold one chunk buffer and little else.
const THREAD_STACK_BYTES: usize = 256 * 1024;
/// How long connecting upstream may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The timer slack asked of the kernel for the relay's threads.
pub const TIMER_SLACK_NS: u64 = 1_000;

/// What the link is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkSettings {
    /// Round-trip time the link adds (half each way).
    pub rtt: Duration,
    /// Rate of each direction, bits per second; `None`: not limited (only
    /// the delay is added).
    pub rate_bits_per_second: Option<u64>,
}

impl LinkSettings {
    /// The delay each direction adds after serialisation.
    pub fn one_way(&self) -> Duration {
        self.rtt / 2
    }

    /// Bandwidth-delay product, bytes; `None` without a rate.
    pub fn bdp_bytes(&self) -> Option<u64> {
        self.rate_bits_per_second.map(|r| (r as f64 * self.rtt.as_secs_f64() / 8.0).ceil() as u64)
    }

    /// Bytes one connection buffers per direction before it stops reading:
    /// the bandwidth-delay product, at least [`MIN_QUEUE_BYTES`];
    /// [`UNLIMITED_QUEUE_BYTES`] without a rate.
    pub fn queue_limit_bytes(&self) -> usize {
        self.bdp_bytes().map_or(UNLIMITED_QUEUE_BYTES, |b| (b as usize).max(MIN_QUEUE_BYTES))
    }

    /// Bytes read at most at once: about a millisecond of the link's rate, so
    /// a chunk's own serialisation never hides the pacing.
    pub fn chunk_bytes(&self) -> usize {
        self.rate_bits_per_second
            .map_or(MAX_CHUNK_BYTES, |r| ((r / 8 / 1000) as usize).clamp(MIN_CHUNK_BYTES, MAX_CHUNK_BYTES))
    }

    /// How long `bytes` take on the link (zero without a rate).
    pub fn serialisation(&self, bytes: usize) -> Duration {
        match self.rate_bits_per_second {
            Some(rate) => Duration::from_nanos(((bytes as u128 * 8 * 1_000_000_000) / u128::from(rate.max(1))) as u64),
            None => Duration::ZERO,
        }
    }
}

/// Why the relay could not start.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("binding the link emulator's listener on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error(
        "the link emulator only listens on loopback or a private address (a container network's gateway), not on {0}"
    )]
    NotLoopback(SocketAddr),
    #[error("the link's rate must be above 0 bits per second")]
    ZeroRate,
}

/// One direction of the link, shared by every connection: when its last
/// chunk leaves the sender's side.
#[derive(Debug)]
struct Serialiser {
    settings: LinkSettings,
    last_departure: Mutex<Option<Instant>>,
}

impl Serialiser {
    /// When a chunk of `bytes` that arrived at `arrival` has left the sender:
    /// `max(arrival, previous departure) + bytes × 8 / rate`.
    fn depart(&self, arrival: Instant, bytes: usize) -> Instant {
        let mut last = lock(&self.last_departure);
        let start = last.map_or(arrival, |l| l.max(arrival));
        let departure = start + self.settings.serialisation(bytes);
        *last = Some(departure);
        departure
    }
}

/// Counters the relay keeps (for its ready line and tests).
#[derive(Debug, Default)]
pub struct RelayCounters {
    pub connections: AtomicU64,
    pub bytes_up: AtomicU64,
    pub bytes_down: AtomicU64,
}

/// A bound relay, not yet running.
#[derive(Debug)]
pub struct Relay {
    listener: TcpListener,
    upstream: SocketAddr,
    settings: LinkSettings,
}

/// A running relay: its address, counters, and a way to stop accepting.
#[derive(Debug)]
pub struct RelayHandle {
    pub local_addr: SocketAddr,
    pub counters: Arc<RelayCounters>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl RelayHandle {
    /// Stops accepting (connections already open keep their threads until
    /// either side closes).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocked accept.
        let _ = TcpStream::connect_timeout(&self.local_addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Relay {
    /// Binds `listen` for a link in front of `upstream`: loopback, or a
    /// private IPv4 address such as the gateway of a container network the
    /// harness made (never every address, never a public one).
    pub fn bind(listen: SocketAddr, upstream: SocketAddr, settings: LinkSettings) -> Result<Relay, RelayError> {
        let private = matches!(listen.ip(), std::net::IpAddr::V4(ip) if ip.is_private());
        if !listen.ip().is_loopback() && !private {
            return Err(RelayError::NotLoopback(listen));
        }
        if settings.rate_bits_per_second == Some(0) {
            return Err(RelayError::ZeroRate);
        }
        let listener = TcpListener::bind(listen).map_err(|source| RelayError::Bind { addr: listen, source })?;
        Ok(Relay { listener, upstream, settings })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Runs the accept loop on a thread of its own.
    pub fn spawn(self) -> std::io::Result<RelayHandle> {
        lower_timer_slack();
        let local_addr = self.listener.local_addr()?;
        let counters = Arc::new(RelayCounters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counters.clone(), stop.clone());
        let thread = thread::Builder::new().name("link-accept".into()).spawn(move || self.accept_loop(&c, &s))?;
        Ok(RelayHandle { local_addr, counters, stop, thread: Some(thread) })
    }

    /// Runs the accept loop on this thread, until the process ends.
    pub fn run(self) {
        self.run_counted(&Arc::new(RelayCounters::default()));
    }

    /// [`Relay::run`], counting on `counters` (read by another thread).
    pub fn run_counted(self, counters: &Arc<RelayCounters>) {
        lower_timer_slack();
        self.accept_loop(counters, &AtomicBool::new(false));
    }

    fn accept_loop(self, counters: &Arc<RelayCounters>, stop: &AtomicBool) {
        let up = Arc::new(Serialiser { settings: self.settings, last_departure: Mutex::new(None) });
        let down = Arc::new(Serialiser { settings: self.settings, last_departure: Mutex::new(None) });
        loop {
            let accepted = self.listener.accept();
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let Ok((client, _)) = accepted else {
                // EMFILE and the like: back off instead of spinning.
                thread::sleep(Duration::from_millis(10));
                continue;
            };
            let Ok(server) = TcpStream::connect_timeout(&self.upstream, CONNECT_TIMEOUT) else {
                // Dropping the client closes it: the caller sees a refused hop.
                continue;
            };
            counters.connections.fetch_add(1, Ordering::Relaxed);
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (Ok(client2), Ok(server2)) = (client.try_clone(), server.try_clone()) else { continue };
            let settings = self.settings;
            direction(client, server, up.clone(), settings, counters.clone(), true);
            direction(server2, client2, down.clone(), settings, counters.clone(), false);
        }
    }
}

/// Lowers this thread's timer slack (inherited by the threads it spawns), so
/// a sleep ends within microseconds of its deadline instead of the default
/// 50 µs window the kernel may coalesce into.
fn lower_timer_slack() {
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_timerslack(TIMER_SLACK_NS as _);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A chunk on its way: when it is due at the receiver, and its bytes
/// (`None`: the sender closed its side).
type Chunk = (Instant, Option<Vec<u8>>);

#[derive(Debug, Default)]
struct QueueState {
    chunks: VecDeque<Chunk>,
    bytes: usize,
    /// The writer gave up (the receiver is gone): the reader stops too.
    writer_done: bool,
}

#[derive(Debug, Default)]
struct Queue {
    state: Mutex<QueueState>,
    changed: Condvar,
}

/// One direction of one connection: a reader that stamps chunks onto the
/// shared serialiser, and a writer that delivers each when it is due.
fn direction(
    from: TcpStream,
    to: TcpStream,
    link: Arc<Serialiser>,
    settings: LinkSettings,
    counters: Arc<RelayCounters>,
    upstream: bool,
) {
    let queue = Arc::new(Queue::default());
    let q = queue.clone();
    let reader = move || read_onto_link(from, &link, settings, &counters, upstream, &q);
    let writer = move || deliver(to, &queue);
    let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
        let _ = thread::Builder::new().name(name.into()).stack_size(THREAD_STACK_BYTES).spawn(f);
    };
    spawn("link-read", Box::new(reader));
    spawn("link-write", Box::new(writer));
}

/// The reader of one direction: reads chunks from `from` while the queue has
/// room, stamps each with its departure from `link` and its arrival at the
/// other side, and queues it; a read of nothing (the sender closed its side,
/// or failed) is queued as the end.
fn read_onto_link(
    mut from: TcpStream,
    link: &Serialiser,
    settings: LinkSettings,
    counters: &RelayCounters,
    upstream: bool,
    q: &Queue,
) {
    let limit = settings.queue_limit_bytes();
    let one_way = settings.one_way();
    let mut buf = vec![0u8; settings.chunk_bytes()];
    loop {
        {
            // Bounded buffering: stop reading while the queue is full,
            // so the sender's TCP window closes as on a real link.
            let mut s = lock(&q.state);
            while s.bytes >= limit && !s.writer_done {
                s = q.changed.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            if s.writer_done {
                return;
            }
        }
        let n = from.read(&mut buf).unwrap_or(0);
        let arrival = Instant::now();
        let due = link.depart(arrival, n) + one_way;
        let chunk = (n > 0).then(|| buf[..n].to_vec());
        let counter = if upstream { &counters.bytes_up } else { &counters.bytes_down };
        counter.fetch_add(n as u64, Ordering::Relaxed);
        let mut s = lock(&q.state);
        s.bytes += n;
        s.chunks.push_back((due, chunk));
        q.changed.notify_all();
        if n == 0 {
            return;
        }
    }
}

/// The writer of one direction: writes each queued chunk to `to` when it is
/// due, and passes the end on; if `to` is gone, stops the reader too.
fn deliver(mut to: TcpStream, q: &Queue) {
    loop {
        let due = {
            let mut s = lock(&q.state);
            while s.chunks.is_empty() {
                s = q.changed.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            s.chunks[0].0
        };
        sleep_until(due);
        let (_, chunk) = {
            let mut s = lock(&q.state);
            let Some(front) = s.chunks.pop_front() else { continue };
            s.bytes -= front.1.as_ref().map_or(0, Vec::len);
            q.changed.notify_all();
            front
        };
        let written = match &chunk {
            Some(bytes) => to.write_all(bytes),
            None => {
                // The sender closed its side: pass the FIN on.
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
        };
        if written.is_err() {
            // The receiver is gone: stop the reader and close both ways.
            lock(&q.state).writer_done = true;
            q.changed.notify_all();
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// Sleeps until `due` on a high-resolution timer.
fn sleep_until(due: Instant) {
    let now = Instant::now();
    if due > now {
        thread::sleep(due - now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialiser_paces_back_to_back_chunks_and_idles_between_bursts() {
        let settings = LinkSettings { rtt: Duration::from_millis(10), rate_bits_per_second: Some(8_000_000) };
        let s = Serialiser { settings, last_departure: Mutex::new(None) };
        let t0 = Instant::now();
        // 1000 bytes at 1 MB/s = 1 ms each.
        assert_eq!(s.depart(t0, 1000), t0 + Duration::from_millis(1));
        assert_eq!(s.depart(t0, 1000), t0 + Duration::from_millis(2));
        // After an idle gap the link starts at the arrival.
        let later = t0 + Duration::from_millis(10);
        assert_eq!(s.depart(later, 500), later + Duration::from_micros(500));
    }

    #[test]
    fn queue_holds_at_least_a_bandwidth_delay_product() {
        let wan = LinkSettings { rtt: Duration::from_millis(40), rate_bits_per_second: Some(100_000_000) };
        assert_eq!(wan.bdp_bytes(), Some(500_000));
        assert_eq!(wan.queue_limit_bytes(), 500_000);
        let slow = LinkSettings { rtt: Duration::from_millis(1), rate_bits_per_second: Some(1_000_000) };
        assert_eq!(slow.queue_limit_bytes(), MIN_QUEUE_BYTES);
        assert_eq!(slow.chunk_bytes(), MIN_CHUNK_BYTES);
        let delay_only = LinkSettings { rtt: Duration::from_millis(1), rate_bits_per_second: None };
        assert_eq!(delay_only.serialisation(1_000_000), Duration::ZERO);
        assert_eq!(delay_only.queue_limit_bytes(), UNLIMITED_QUEUE_BYTES);
        let fast = LinkSettings { rtt: Duration::from_millis(1), rate_bits_per_second: Some(10_000_000_000) };
        assert_eq!(fast.chunk_bytes(), MAX_CHUNK_BYTES);
    }

    #[test]
    fn refuses_a_listener_beyond_loopback() {
        let s = LinkSettings { rtt: Duration::ZERO, rate_bits_per_second: None };
        let up: SocketAddr = "127.0.0.1:9".parse().unwrap();
        for refused in ["0.0.0.0:0", "8.8.8.8:0", "[::]:0"] {
            assert!(
                matches!(Relay::bind(refused.parse().unwrap(), up, s), Err(RelayError::NotLoopback(_))),
                "{refused}"
            );
        }
    }
}
