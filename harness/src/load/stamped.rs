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

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt::ReceiveTimestampns};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// Most bytes one read takes.
const SCRATCH_BYTES: usize = 64 * 1024;

thread_local! {
    /// Where reads land before they are copied into the caller's buffer.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; SCRATCH_BYTES]);
}

/// Room for one `SCM_TIMESTAMPNS` control message (a 16-byte header and a
/// 16-byte timespec), aligned as a `cmsghdr` must be.
#[repr(C, align(8))]
struct ControlBuffer([u8; 64]);

/// A connected TCP stream whose reads record the kernel's receive time.
#[derive(Debug)]
pub struct StampedTcp {
    tcp: TcpStream,
    /// Receive time of the last packet read, ns since the Unix epoch
    /// (`CLOCK_REALTIME`, the kernel's clock for these stamps); 0 = none yet.
    last_rx_ns: Arc<AtomicU64>,
    /// Whether the kernel accepted `SO_TIMESTAMPNS`.
    stamping: bool,
}

/// The handle the client keeps to read a connection's last receive time.
#[derive(Debug, Clone)]
pub struct RxStamp(Arc<AtomicU64>);

impl StampedTcp {
    /// Turns on receive timestamps for `tcp`. A kernel that refuses them
    /// leaves a stream that reads normally and never has a stamp.
    pub fn new(tcp: TcpStream) -> (Self, RxStamp) {
        let stamping = setsockopt(&tcp.as_fd(), ReceiveTimestampns, &true).is_ok();
        let last_rx_ns = Arc::new(AtomicU64::new(0));
        (StampedTcp { tcp, last_rx_ns: last_rx_ns.clone(), stamping }, RxStamp(last_rx_ns))
    }

    /// One `recvmsg`: the bytes read and the receive stamp of the last packet
    /// they came from, if the kernel gave one.
    fn recv(&self, dst: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
        let mut control = ControlBuffer([0; 64]);
        let mut iov = [io::IoSliceMut::new(dst)];
        let msg = recvmsg::<()>(self.tcp.as_raw_fd(), &mut iov, Some(&mut control.0), MsgFlags::empty())?;
        let stamp = msg.cmsgs().ok().and_then(|mut all| {
            all.find_map(|c| match c {
                ControlMessageOwned::ScmTimestampns(ts) => {
                    u64::try_from(ts.tv_sec()).ok()?.checked_mul(1_000_000_000)?.checked_add(ts.tv_nsec() as u64)
                }
                _ => None,
            })
        });
        Ok((msg.bytes, stamp))
    }
}

impl RxStamp {
    /// Forgets the last stamp, so a stamp read later belongs to bytes read
    /// after this call.
    pub fn clear(&self) {
        self.0.store(0, Relaxed);
    }

    /// When the last packet read so far arrived, on the monotonic clock:
    /// `None` if no read since [`clear`](Self::clear) carried a stamp, or the
    /// stamp is not in the past (the wall clock was stepped).
    pub fn arrived(&self) -> Option<Instant> {
        let ns = self.0.load(Relaxed);
        if ns == 0 {
            return None;
        }
        // The stamp is on the wall clock; its age on the wall clock is its age
        // on the monotonic clock, but for a slew of a few ppm over its
        // (sub-second) age.
        let (now, wall) = (Instant::now(), SystemTime::now());
        let age = wall.duration_since(UNIX_EPOCH + Duration::from_nanos(ns)).ok()?;
        now.checked_sub(age)
    }
}

impl AsyncRead for StampedTcp {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.stamping {
            return Pin::new(&mut this.tcp).poll_read(cx, buf);
        }
        loop {
            ready!(this.tcp.poll_read_ready(cx))?;
            // The read lands in this thread's scratch buffer and is copied into
            // `buf`: `buf` is uninitialised memory (hyper's read buffer, up to
            // hundreds of KiB), which safe code would have to zero on every
            // read (measured: 16k instructions per request in memset).
            let want = buf.remaining().min(SCRATCH_BYTES);
            let read = SCRATCH.with_borrow_mut(|scratch| {
                let read = this.tcp.try_io(Interest::READABLE, || this.recv(&mut scratch[..want]));
                if let Ok((n, _)) = read {
                    buf.put_slice(&scratch[..n]);
                }
                read
            });
            match read {
                Ok((n, stamp)) => {
                    if let (true, Some(ns)) = (n > 0, stamp) {
                        this.last_rx_ns.store(ns, Relaxed);
                    }
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for StampedTcp {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// The stamp is the packet's arrival, not the read: bytes that wait
    /// 50 ms in the socket before they are read carry a stamp from before
    /// the wait.
    #[tokio::test]
    async fn a_read_carries_the_time_its_bytes_arrived_not_the_time_they_were_read() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tcp = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let (mut stream, stamp) = StampedTcp::new(tcp);
        assert!(stream.stamping, "this kernel refused SO_TIMESTAMPNS");
        assert_eq!(stamp.arrived(), None);

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

    /// More than one read's worth (the scratch buffer holds 64 KiB) arrives
    /// whole and in order.
    #[tokio::test]
    async fn a_long_answer_is_read_whole_and_in_order() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tcp = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let sent: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let to_send = sent.clone();
        // The answer is sent only once the stream asks for stamps, as in use
        // (the request goes out after): bytes received before that carry none.
        let (asked, go) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = go.await;
            server.write_all(&to_send).await.unwrap();
        });
        let (mut stream, stamp) = StampedTcp::new(tcp);
        let _ = asked.send(());
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.unwrap();
        assert!(got == sent, "{} bytes read of {}", got.len(), sent.len());
        assert!(stamp.arrived().is_some());
    }
}
