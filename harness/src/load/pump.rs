//! The reads of a stream's answer, made by a thread that does nothing else,
//! so that each item keeps the kernel's stamp of the packet that completed it.
//!
//! A TCP read hands back one stamp, its last packet's. Reading item by item
//! is not enough: packets that wait unread in a socket are merged by the
//! kernel (`tcp_try_coalesce`), the merged buffer keeping the later stamp,
//! so an item that waited one interval for a busy reader took the next
//! one's stamp (measured with a core kept busy, `bench/stream-wire-check.sh`:
//! REST NDJSON's per-item p99 3.7 ms above a capture's, gRPC stream's 5 ms
//! even with reads cut at line ends). So the packets must be
//! read as they come: one thread (`stamp-reader`, its own current-thread
//! runtime) reads every line-stamped socket the moment it is readable,
//! cutting each read at the first line end (a peek first), and files the
//! bytes with their stamp and each line end's stamp for the connection's
//! reader (`stamped.rs`), which takes them at its own pace. The thread
//! holds at most [`MAX_HELD_BYTES`] per connection; past that it stops
//! reading it, and TCP holds the producer back as before.
//!
//! What it does not own: the connection's writes, its HTTP, its stamps'
//! conversion to the monotonic clock (`stamped.rs`).

use std::collections::VecDeque;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Waker;

use bytes::Bytes;
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio_util::sync::CancellationToken;

/// Most bytes one read takes.
pub(super) const SCRATCH_BYTES: usize = 64 * 1024;

/// The most bytes read ahead of a connection's reader.
pub(super) const MAX_HELD_BYTES: usize = 1 << 20;

/// The most line stamps a connection holds for its reader: a stream's
/// reader takes each as its line is parsed, a few behind the reads. Past
/// this (a reader that never takes them) the queue stops and says so.
const MAX_LINE_STAMPS: usize = 4096;

/// Room for one `SCM_TIMESTAMPNS` control message (a 16-byte header and a
/// 16-byte timespec), aligned as a `cmsghdr` must be.
#[repr(C, align(8))]
struct ControlBuffer([u8; 64]);

/// One `recvmsg` with `flags`: the bytes read and the receive stamp of the
/// last packet they came from (ns since the Unix epoch), if the kernel gave one.
pub(super) fn recv_with(
    tcp: &std::net::TcpStream,
    dst: &mut [u8],
    flags: MsgFlags,
) -> io::Result<(usize, Option<u64>)> {
    let mut control = ControlBuffer([0; 64]);
    let mut iov = [io::IoSliceMut::new(dst)];
    let msg = recvmsg::<()>(tcp.as_raw_fd(), &mut iov, Some(&mut control.0), flags)?;
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

/// True for the byte at `i` of `read` ending a line: a `\n` after anything
/// but `\r` (`prev` is the byte before `read`). HTTP's own lines (the head,
/// chunk sizes) end in `\r\n`, a JSON line in a bare `\n`.
fn ends_line(read: &[u8], i: usize, prev: u8) -> bool {
    read[i] == b'\n' && (if i == 0 { prev } else { read[i - 1] }) != b'\r'
}

/// How much of `scratch` to read so that the read ends at the first line
/// end waiting (the line's last packet is then the read's), and whether
/// that is all that is waiting: peeked, not taken.
fn line_span(tcp: &std::net::TcpStream, scratch: &mut [u8], prev: u8) -> io::Result<(usize, bool)> {
    let (n, _) = recv_with(tcp, scratch, MsgFlags::MSG_PEEK)?;
    Ok(match (0..n).find(|&i| ends_line(&scratch[..n], i, prev)) {
        Some(i) => (i + 1, i + 1 == n && n < scratch.len()),
        // No line end: all of it (at the end of the stream, one byte: 0 read).
        None => (scratch.len().min(n.max(1)), n < scratch.len()),
    })
}

/// What the thread has read of one connection and its reader has not taken.
#[derive(Debug, Default)]
pub(super) struct Held {
    /// The bytes, each read with its stamp (ns; `None`: the read had none).
    pub chunks: VecDeque<(Bytes, Option<u64>)>,
    pub bytes: usize,
    /// Each line end's stamp (ns; 0: its read had none), in order.
    pub lines: VecDeque<u64>,
    /// A line end was read with `lines` full: `lines` no longer lines up.
    pub overflowed: bool,
    /// The stream ended: `Some(None)` at its end, `Some(Some(e))` on an error.
    pub end: Option<Option<io::Error>>,
    /// The reader waiting for bytes.
    pub waker: Option<Waker>,
}

/// One connection as its reader and the thread share it.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub held: Mutex<Held>,
    /// The reader took bytes: the thread may read again.
    pub room: tokio::sync::Notify,
    /// The reader is gone: the thread lets the socket go.
    pub gone: CancellationToken,
}

impl Shared {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Files one read: its bytes, its stamp, its line ends.
    fn file(&self, read: &[u8], stamp: Option<u64>, prev: u8) {
        let mut held = self.lock();
        for i in 0..read.len() {
            if ends_line(read, i, prev) {
                if held.lines.len() < MAX_LINE_STAMPS {
                    held.lines.push_back(stamp.unwrap_or(0));
                } else {
                    held.overflowed = true;
                }
            }
        }
        held.bytes += read.len();
        held.chunks.push_back((Bytes::copy_from_slice(read), stamp));
        if let Some(w) = held.waker.take() {
            w.wake();
        }
    }

    fn end(&self, error: Option<io::Error>) {
        let mut held = self.lock();
        held.end = Some(error);
        if let Some(w) = held.waker.take() {
            w.wake();
        }
    }
}

/// The thread's runtime, started on first use; `None` if it cannot be.
fn runtime() -> Option<&'static tokio::runtime::Handle> {
    static READER: OnceLock<Option<tokio::runtime::Handle>> = OnceLock::new();
    READER
        .get_or_init(|| {
            let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().ok()?;
            let handle = rt.handle().clone();
            let (told, priority) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .name("stamp-reader".into())
                .spawn(move || {
                    let _ = told.send(first_in_line());
                    rt.block_on(std::future::pending::<()>())
                })
                .ok()?;
            let _ = PRIORITY.set(priority.recv().ok()?);
            Some(handle)
        })
        .as_ref()
}

/// Asks that this thread run the moment it wakes: the lowest real-time
/// priority (`SCHED_FIFO` 1), else the highest nice value it may take. On
/// a machine kept busy, a thread at the default priority waited for a core
/// while packets merged unread (a shell loop and other builds, load 9 on 2
/// cores: per-item p99 0.3 to 3.5 ms above a capture's; at this priority
/// within 0.003 ms on every arm, bench/README.md). It only reads, at most
/// [`MAX_HELD_BYTES`] ahead of its reader, so it cannot hold a core.
/// Refused (no `CAP_SYS_NICE`): it runs as every other thread does.
/// Returns what it was given, as run.json's environment records it.
fn first_in_line() -> String {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: both calls take plain values (and a pointer to a local that
    // outlives the call) and change only this thread's scheduling.
    #[allow(unsafe_code)]
    let fifo = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
    if fifo {
        return "SCHED_FIFO 1".to_owned();
    }
    #[allow(unsafe_code)]
    // SAFETY: as above; 0 is this thread on Linux.
    let niced = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -20) } == 0;
    // SAFETY: reads this thread's nice value; errno is not consulted, as
    // -1 is a nice value too.
    #[allow(unsafe_code)]
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    if niced { format!("nice {nice}") } else { format!("nice {nice} (neither SCHED_FIFO nor nice -20 was granted)") }
}

/// What the thread was given, set when it starts.
static PRIORITY: OnceLock<String> = OnceLock::new();

/// The scheduling the `stamp-reader` thread runs at (starting the thread
/// if it is not yet running); `None` if it cannot run.
pub fn reader_priority() -> Option<String> {
    runtime()?;
    PRIORITY.get().cloned()
}

/// Starts reading `tcp` on the thread; `None` if the thread cannot run.
/// `stamping`: whether the kernel stamps its packets.
pub(super) fn start(tcp: Arc<std::net::TcpStream>, stamping: bool) -> Option<Arc<Shared>> {
    let shared = Arc::new(Shared::default());
    runtime()?.spawn(pump(tcp, shared.clone(), stamping));
    Some(shared)
}

/// Reads `tcp` as its packets come, until its end, an error, or its reader goes.
async fn pump(tcp: Arc<std::net::TcpStream>, shared: Arc<Shared>, stamping: bool) {
    // Deprecated for want of a promise that the descriptor outlives the
    // registration: it does, this `AsyncFd` owning a share of the stream.
    #[allow(deprecated)]
    let fd = match AsyncFd::with_interest(tcp, Interest::READABLE) {
        Ok(fd) => fd,
        Err(e) => return shared.end(Some(e)),
    };
    let mut scratch = vec![0u8; SCRATCH_BYTES];
    let mut prev = 0u8;
    loop {
        // Room first: past the bound the socket's buffer holds the rest.
        let room = shared.room.notified();
        if shared.lock().bytes >= MAX_HELD_BYTES {
            tokio::select! {
                _ = room => continue,
                _ = shared.gone.cancelled() => return,
            }
        }
        let mut ready = tokio::select! {
            r = fd.readable() => match r {
                Ok(r) => r,
                Err(e) => return shared.end(Some(e)),
            },
            _ = shared.gone.cancelled() => return,
        };
        let read = ready.try_io(|tcp| {
            let (len, all) = line_span(tcp.get_ref(), &mut scratch, prev)?;
            let (n, stamp) = recv_with(tcp.get_ref(), &mut scratch[..len], MsgFlags::empty())?;
            Ok((n, stamp, all && n == len))
        });
        match read {
            Ok(Ok((0, _, _))) => return shared.end(None),
            Ok(Ok((n, stamp, drained))) => {
                shared.file(&scratch[..n], stamp.filter(|_| stamping), prev);
                prev = scratch[n - 1];
                if drained {
                    ready.clear_ready();
                }
            }
            Ok(Err(e)) => return shared.end(Some(e)),
            // EAGAIN: the readiness is cleared; wait for the reactor.
            Err(_would_block) => continue,
        }
    }
}
