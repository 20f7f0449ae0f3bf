//! A TCP stream that knows when the kernel received the bytes it reads.
//!
//! The front client stamps an answer "done" when its last byte arrives. A
//! clock read after the read returns is late by everything between the
//! packet's arrival and the read: the wake-up of an idle core (on a virtual
//! machine, tens to hundreds of µs), the runtime's scheduling, hyper's
//! parsing. With `SO_TIMESTAMPNS` the kernel stamps each packet as it is
//! received (on loopback, as it crosses the device, where a packet capture
//! stamps it too), and `recvmsg` hands the stamp of the last packet read back
//! with the bytes. This stream reads with `recvmsg` and keeps that stamp; the
//! client turns it into the answer's arrival time (`Arrival`).
//!
//! Where the option is refused, or a read carries no stamp, the client
//! falls back to its clock after the read, and says so (`Arrival::clock`).
//!
//! A stream's answer needs a stamp per item, the packet that completed
//! it: [`StampedTcp::lines`] leaves the reads to a thread of their own
//! (`pump.rs`), which keeps every line end's stamp; the reader takes them in
//! order ([`RxStamp::take_line`]).
//!
//! The socket is registered with the reactor as an [`AsyncFd`], not a tokio
//! `TcpStream`, so that a read shorter than asked can clear its readiness, as
//! tokio's own stream does: the socket is drained then, and the next poll
//! (hyper's, while the connection idles between exchanges) waits for the
//! reactor instead of calling `recvmsg` for an EAGAIN. `TcpStream` clears
//! readiness only on EAGAIN; that read was one system call per answer.

use std::io::{self, Write};
use std::net::Shutdown;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::socket::{MsgFlags, setsockopt, sockopt::ReceiveTimestampns};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

use super::deferred::{Deferred, Registered};
use super::pump::{self, SCRATCH_BYTES, Shared};

thread_local! {
    /// Where reads land before they are copied into the caller's buffer.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; SCRATCH_BYTES]);
}

/// A connected TCP stream whose reads record the kernel's receive time.
#[derive(Debug)]
pub struct StampedTcp {
    tcp: Io,
    /// Receive time of the last packet read, ns since the Unix epoch
    /// (`CLOCK_REALTIME`, the kernel's clock for these stamps); 0 = none yet.
    last_rx_ns: Arc<AtomicU64>,
    /// Whether the kernel accepted `SO_TIMESTAMPNS`.
    stamping: bool,
    /// With every line stamped: what the reading thread has read.
    pumped: Option<Arc<Shared>>,
}

/// Where a socket's readiness comes from: the runtime's reactor, or an
/// epoll set read when the dispatcher sends (`deferred.rs`).
#[derive(Debug)]
enum Io {
    Reactor(AsyncFd<Arc<std::net::TcpStream>>),
    Deferred(Registered),
}

impl Io {
    fn tcp(&self) -> &std::net::TcpStream {
        match self {
            Io::Reactor(fd) => fd.get_ref(),
            Io::Deferred(r) => &r.tcp,
        }
    }

    /// `op` once the socket is ready to read (or write): its result, the
    /// readiness cleared where `op` found the socket empty (or full), or
    /// `short` says it did.
    fn poll_io<T>(
        &self,
        cx: &mut Context<'_>,
        write: bool,
        mut op: impl FnMut(&std::net::TcpStream) -> io::Result<T>,
        short: impl Fn(&T) -> bool,
    ) -> Poll<io::Result<T>> {
        match self {
            Io::Reactor(fd) => loop {
                let mut ready = ready!(if write { fd.poll_write_ready(cx) } else { fd.poll_read_ready(cx) })?;
                match ready.try_io(|tcp| op(tcp.get_ref())) {
                    Ok(Ok(v)) => {
                        // tokio clears only the readiness this call answered;
                        // what the reactor reports after it stays ready.
                        if short(&v) {
                            ready.clear_ready();
                        }
                        return Poll::Ready(Ok(v));
                    }
                    Ok(Err(e)) => return Poll::Ready(Err(e)),
                    // EAGAIN: the readiness is cleared; wait for the reactor.
                    Err(_would_block) => continue,
                }
            },
            Io::Deferred(r) => loop {
                let side = if write { &r.slot.write } else { &r.slot.read };
                let seen = ready!(side.poll_ready(cx));
                match op(&r.tcp) {
                    Ok(v) => {
                        if short(&v) {
                            side.clear(seen);
                        }
                        return Poll::Ready(Ok(v));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => side.clear(seen),
                    Err(e) => return Poll::Ready(Err(e)),
                }
            },
        }
    }
}

/// The handle the client keeps to read a connection's receive times.
#[derive(Debug, Clone)]
pub struct RxStamp(Arc<AtomicU64>, Option<Arc<Shared>>);

impl StampedTcp {
    /// Turns on receive timestamps for `tcp` and registers it with the
    /// current runtime's reactor (inside a runtime only). A kernel that
    /// refuses the stamps leaves a stream that reads normally and never has
    /// a stamp.
    pub fn new(tcp: TcpStream) -> io::Result<(Self, RxStamp)> {
        Self::build(tcp, false, None)
    }

    /// [`new`](Self::new), its readiness on `set` rather than the reactor:
    /// its answer read when the dispatcher next sends (`deferred.rs`).
    pub fn deferred(tcp: TcpStream, set: &Arc<Deferred>) -> io::Result<(Self, RxStamp)> {
        Self::build(tcp, false, Some(set))
    }

    /// [`new`](Self::new), reading so that every line end has its own
    /// stamp ([`RxStamp::take_line`]), at the cost of a peek per read.
    pub fn lines(tcp: TcpStream) -> io::Result<(Self, RxStamp)> {
        Self::build(tcp, true, None)
    }

    fn build(tcp: TcpStream, lines: bool, set: Option<&Arc<Deferred>>) -> io::Result<(Self, RxStamp)> {
        let stamping = setsockopt(&tcp.as_fd(), ReceiveTimestampns, &true).is_ok();
        let tcp = Arc::new(tcp.into_std()?);
        // A thread of its own reads a line-stamped socket (where it can
        // run); this side then only writes.
        let pumped = if lines { pump::start(tcp.clone(), stamping) } else { None };
        let interest = if pumped.is_some() { Interest::WRITABLE } else { Interest::READABLE | Interest::WRITABLE };
        // Out of tokio's reactor (non-blocking still), into it as a plain fd.
        // `with_interest` is deprecated because it cannot promise that the
        // descriptor outlives its registration; here it does: the `AsyncFd`
        // owns a share of the stream and deregisters before dropping it (as
        // the reading thread's does; `register`, the replacement, is `unsafe`).
        let tcp = match set {
            Some(set) if pumped.is_none() => Io::Deferred(set.register(tcp)?),
            #[allow(deprecated)]
            _ => Io::Reactor(AsyncFd::with_interest(tcp, interest)?),
        };
        let last_rx_ns = Arc::new(AtomicU64::new(0));
        let stream = StampedTcp { tcp, last_rx_ns: last_rx_ns.clone(), stamping, pumped: pumped.clone() };
        Ok((stream, RxStamp(last_rx_ns, pumped)))
    }

    /// One `recvmsg`: the bytes read and the receive stamp of the last packet
    /// they came from, if the kernel gave one.
    fn recv(tcp: &std::net::TcpStream, dst: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
        pump::recv_with(tcp, dst, MsgFlags::empty())
    }

    /// A read from what the reading thread holds: as many bytes as `buf`
    /// takes, stamped with the read that brought the last of them.
    fn poll_pumped(&self, shared: &Shared, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let mut held = shared.lock();
        let mut taken = 0;
        while buf.remaining() > 0 {
            let Some((chunk, stamp)) = held.chunks.front_mut() else { break };
            let n = chunk.len().min(buf.remaining());
            buf.put_slice(&chunk.split_to(n));
            taken += n;
            if let Some(ns) = *stamp {
                self.last_rx_ns.store(ns, Relaxed);
            }
            if chunk.is_empty() {
                held.chunks.pop_front();
            }
        }
        if taken > 0 {
            held.bytes -= taken;
            drop(held);
            shared.room.notify_one();
            return Poll::Ready(Ok(()));
        }
        match held.end.as_mut() {
            Some(end) => Poll::Ready(end.take().map_or(Ok(()), Err)),
            None => {
                held.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for StampedTcp {
    fn drop(&mut self) {
        if let Some(shared) = &self.pumped {
            shared.gone.cancel();
        }
    }
}

impl RxStamp {
    /// Forgets the last stamp, so a stamp read later belongs to bytes read
    /// after this call.
    pub fn clear(&self) {
        self.0.store(0, Relaxed);
        if let Some(shared) = &self.1 {
            let mut held = shared.lock();
            held.lines.clear();
            held.overflowed = false;
        }
    }

    /// The stamp of the next line end read (ns since the Unix epoch as
    /// [`raw`](Self::raw); 0: its read carried none), in the order the
    /// lines came: `None` where the stream does not stamp lines, the line
    /// has not been read (never, for a reader that takes one per line it
    /// parsed), or the queue overflowed.
    pub fn take_line(&self) -> Option<u64> {
        let mut held = self.1.as_ref()?.lock();
        if held.overflowed {
            return None;
        }
        held.lines.pop_front()
    }

    /// The last packet's stamp as the kernel gave it (ns since the Unix
    /// epoch; 0: none): two reads with the same stamp read one packet.
    pub fn raw(&self) -> u64 {
        self.0.load(Relaxed)
    }

    /// When the last packet read so far arrived, on the monotonic clock:
    /// `None` if no read since [`clear`](Self::clear) carried a stamp, or the
    /// stamp is not in the past (the wall clock was stepped).
    pub fn arrived(&self) -> Option<Instant> {
        Self::instant_of(self.0.load(Relaxed))
    }

    /// A stamp (ns since the Unix epoch) on the monotonic clock: `None` for
    /// 0 (no stamp) or a stamp not in the past (the wall clock was stepped).
    pub fn instant_of(ns: u64) -> Option<Instant> {
        if ns == 0 {
            return None;
        }
        // The stamp is on the wall clock; its age on the wall clock is its age
        // on the monotonic clock, but for a slew of a few ppm over its
        // (sub-second) age.
        let (now, wall) = clocks_now();
        let age = wall.duration_since(UNIX_EPOCH + Duration::from_nanos(ns)).ok()?;
        now.checked_sub(age)
    }
}

/// The monotonic clock and the wall clock at one moment: the wall clock read
/// between two monotonic reads, the narrowest of a few such brackets, the
/// monotonic time taken at its middle. Two reads one after the other are
/// apart by however long the thread lost its core between them; on a host
/// that steals the cores (bench/README, 2026-12-02) that dated a stamp early
/// by the whole preemption, before the exchange it belonged to had begun, and
/// the answer was then counted as unstamped.
pub(super) fn clocks_now() -> (Instant, SystemTime) {
    /// A bracket this narrow is a few clock reads with nothing between them.
    const TIGHT: Duration = Duration::from_micros(5);
    let bracket = || {
        let before = Instant::now();
        let wall = SystemTime::now();
        let width = before.elapsed();
        (width, before + width / 2, wall)
    };
    let mut best = bracket();
    for _ in 1..4 {
        if best.0 <= TIGHT {
            break;
        }
        let next = bracket();
        if next.0 < best.0 {
            best = next;
        }
    }
    (best.1, best.2)
}

impl AsyncRead for StampedTcp {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(shared) = &this.pumped {
            return this.poll_pumped(shared, cx, buf);
        }
        // The read lands in this thread's scratch buffer and is copied into
        // `buf`: `buf` is uninitialised memory (hyper's read buffer, up to
        // hundreds of KiB), which safe code would have to zero on every
        // read (bench/README.md has the profile).
        let want = buf.remaining().min(SCRATCH_BYTES);
        let read = SCRATCH.with_borrow_mut(|scratch| {
            let read = ready!(this.tcp.poll_io(
                cx,
                false,
                |tcp| StampedTcp::recv(tcp, &mut scratch[..want]),
                // Fewer bytes than there was room for: the socket is empty.
                |&(n, _)| n > 0 && n < want,
            ));
            if let Ok((n, _)) = read {
                buf.put_slice(&scratch[..n]);
            }
            Poll::Ready(read)
        });
        let (n, stamp) = ready!(read)?;
        if let (true, true, Some(ns)) = (this.stamping, n > 0, stamp) {
            this.last_rx_ns.store(ns, Relaxed);
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for StampedTcp {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        self.tcp.poll_io(
            cx,
            true,
            |mut tcp| tcp.write_vectored(bufs),
            // A short write filled the send buffer.
            |&n| n > 0 && n < len,
        )
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.tcp.tcp().shutdown(Shutdown::Write))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A loopback connection: the server's end, and a stamped stream on the
    /// client's.
    async fn connected() -> (TcpStream, (StampedTcp, RxStamp)) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tcp = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (server, StampedTcp::new(tcp).unwrap())
    }

    /// Waits until the kernel stamps this stream's packets. The first socket
    /// of the machine to ask for stamps turns them on through a deferred
    /// work item (`net_enable_timestamp`), so packets right after may carry
    /// none (seen here once in eight runs of a test alone). A run meets it
    /// only on its first connection, in the calibration before any round.
    async fn stamps_are_live(server: &mut TcpStream, stream: &mut StampedTcp, stamp: &RxStamp) {
        for _ in 0..500 {
            server.write_all(b".").await.unwrap();
            let mut probe = [0u8; 1];
            assert_eq!(stream.read(&mut probe).await.unwrap(), 1);
            if stamp.arrived().is_some() {
                stamp.clear();
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("no receive stamp on 500 packets");
    }

    /// The stamp is the packet's arrival, not the read: bytes that wait
    /// 50 ms in the socket before they are read carry a stamp from before
    /// the wait.
    #[tokio::test]
    async fn a_read_carries_the_time_its_bytes_arrived_not_the_time_they_were_read() {
        let (mut server, (mut stream, stamp)) = connected().await;
        assert!(stream.stamping, "this kernel refused SO_TIMESTAMPNS");
        assert_eq!(stamp.arrived(), None);
        stamps_are_live(&mut server, &mut stream, &stamp).await;

        let before_send = Instant::now();
        server.write_all(b"hello").await.unwrap();
        let after_send = Instant::now();
        std::thread::sleep(Duration::from_millis(50));
        let mut got = [0u8; 16];
        let n = stream.read(&mut got).await.unwrap();
        let read_at = Instant::now();
        assert_eq!(&got[..n], b"hello");
        let arrived = stamp.arrived().expect("a stamp");
        // Within the send (loopback delivers during the write), give or take
        // the wall/monotonic conversion's few µs.
        let slack = Duration::from_millis(2);
        assert!(arrived + slack >= before_send && arrived <= after_send + slack, "{arrived:?} vs send");
        assert!(read_at - arrived >= Duration::from_millis(45), "{:?}", read_at - arrived);

        // Cleared, and nothing read since: no stamp.
        stamp.clear();
        assert_eq!(stamp.arrived(), None);
        // Writes pass through; EOF is a zero-length read that leaves no stamp.
        stream.write_all(b"back").await.unwrap();
        let mut back = [0u8; 4];
        server.read_exact(&mut back).await.unwrap();
        drop(server);
        assert_eq!(stream.read(&mut got).await.unwrap(), 0);
        assert_eq!(stamp.arrived(), None);
    }

    /// A read shorter than its buffer drained the socket: the stream waits
    /// for the reactor before it reads again (no `recvmsg` to learn EAGAIN),
    /// and bytes that come later are read.
    #[tokio::test]
    async fn a_short_read_clears_the_readiness_and_later_bytes_are_still_read() {
        let (mut server, (mut stream, _stamp)) = connected().await;
        server.write_all(b"hello").await.unwrap();
        let mut got = [0u8; 16];
        assert_eq!(stream.read(&mut got).await.unwrap(), 5);
        let ready_now = std::future::poll_fn(|cx| {
            Poll::Ready(match &stream.tcp {
                Io::Reactor(fd) => fd.poll_read_ready(cx).is_ready(),
                Io::Deferred(_) => unreachable!("a stream made by new()"),
            })
        })
        .await;
        assert!(!ready_now, "readiness left after a read that drained the socket");
        server.write_all(b"again").await.unwrap();
        let n =
            tokio::time::timeout(Duration::from_secs(5), stream.read(&mut got)).await.expect("later bytes").unwrap();
        assert_eq!(&got[..n], b"again");
    }

    /// More than one read's worth (the scratch buffer holds 64 KiB) arrives
    /// whole and in order.
    #[tokio::test]
    async fn a_long_answer_is_read_whole_and_in_order() {
        // Stamps live first, as for every run's first connection: bytes the
        // kernel received before its deferred switch-on carry none (this test
        // failed so 3 times in 8 on a machine whose host steals the cores).
        let (mut server, (mut stream, stamp)) = connected().await;
        stamps_are_live(&mut server, &mut stream, &stamp).await;
        let sent: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let to_send = sent.clone();
        tokio::spawn(async move {
            server.write_all(&to_send).await.unwrap();
        });
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.unwrap();
        assert!(got == sent, "{} bytes read of {}", got.len(), sent.len());
        assert!(stamp.arrived().is_some());
    }
}
