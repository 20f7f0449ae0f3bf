//! Answers heard at the next send: the front hop's sockets on an epoll set
//! of their own, which the dispatcher reads when it wakes to send.
//!
//! Open loop, every request costs the generator two wake-ups when its
//! sockets are on the runtime's reactor: one at its due time, to send, and
//! one when its answer arrives. An answer's arrival is the kernel's receive
//! stamp of its last packet (`stamped.rs`), not the moment the harness reads
//! it, so reading it a little later changes no figure: while the dispatcher
//! will wake to send within [`HEAR_WITHIN`], the sockets are left off the
//! reactor and the dispatcher reads their readiness (`epoll_wait` with no
//! wait) each time it has sent. When no send is due that soon (a low rate,
//! the end of a segment, between segments), a watcher task puts the set on
//! the reactor and answers are heard as they come.
//!
//! What waits: the reading of an answer, never a send (a write that finds
//! the socket full waits at most [`HEAR_WITHIN`], and requests are small).
//! Where the kernel gave no stamp, an answer's arrival is the clock after the
//! read, late by at most [`HEAR_WITHIN`] then.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Answers wait for the dispatcher's next wake-up when it is due within
/// this; past it, they are heard as they come.
pub const HEAR_WITHIN: Duration = Duration::from_millis(2);

/// The most events taken from the set by one `epoll_wait`.
const EVENTS: usize = 256;

/// One side (read or write) of a socket's readiness: set by the set's
/// events, cleared by a read or write that found the socket empty or full.
/// A tick counts the events, so that a clear based on an older look at the
/// socket does not clear readiness an event brought since (as tokio's own).
#[derive(Debug)]
pub(super) struct Readiness {
    /// Events seen × 2, plus 1 while ready.
    state: AtomicU64,
    waker: AtomicWaker,
}

impl Readiness {
    fn new() -> Self {
        // Ready until a read or write says otherwise.
        Readiness { state: AtomicU64::new(1), waker: AtomicWaker::new() }
    }

    fn set(&self) {
        let _ = self.state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| Some((s | 1) + 2));
        self.waker.wake();
    }

    /// Ready (with the state seen, for [`clear`](Self::clear)), or pending
    /// with the task's waker kept for the next event.
    pub(super) fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<u64> {
        let s = self.state.load(Ordering::Acquire);
        if s & 1 == 1 {
            return Poll::Ready(s);
        }
        self.waker.register(cx.waker());
        let s = self.state.load(Ordering::Acquire);
        if s & 1 == 1 { Poll::Ready(s) } else { Poll::Pending }
    }

    /// Not ready, unless an event came since `seen` was read.
    pub(super) fn clear(&self, seen: u64) {
        let _ = self.state.compare_exchange(seen, seen & !1, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// A socket's two readinesses.
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) read: Readiness,
    pub(super) write: Readiness,
}

/// Who read the set's events (counted, for the tests and the bench).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// The dispatcher, after sending.
    AtSend,
    /// The watcher, the set on the reactor.
    Watcher,
}

/// The set, its sockets' readiness, and whether a dispatcher is deferring.
#[derive(Debug)]
pub struct Deferred {
    epoll: Epoll,
    slots: Mutex<HashMap<u64, Weak<Slot>>>,
    next_key: AtomicU64,
    /// Dispatchers holding a [`Deferring`] now: while any does, the set is
    /// off the reactor.
    deferring: AtomicUsize,
    changed: Notify,
    watcher: std::sync::Once,
    gone: CancellationToken,
    /// Socket events read by each reader.
    heard_at_send: AtomicU64,
    heard_by_watcher: AtomicU64,
}

impl Deferred {
    pub fn new() -> io::Result<Arc<Self>> {
        Ok(Arc::new(Deferred {
            epoll: Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?,
            slots: Mutex::new(HashMap::new()),
            next_key: AtomicU64::new(0),
            deferring: AtomicUsize::new(0),
            changed: Notify::new(),
            watcher: std::sync::Once::new(),
            gone: CancellationToken::new(),
            heard_at_send: AtomicU64::new(0),
            heard_by_watcher: AtomicU64::new(0),
        }))
    }

    /// Puts `tcp` (non-blocking) on the set, edge-triggered; starts the
    /// watcher on the current runtime the first time.
    pub(super) fn register(self: &Arc<Self>, tcp: Arc<std::net::TcpStream>) -> io::Result<Registered> {
        self.watcher.call_once(|| {
            tokio::spawn(self.clone().watch());
        });
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot { read: Readiness::new(), write: Readiness::new() });
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).insert(key, Arc::downgrade(&slot));
        let flags = EpollFlags::EPOLLIN | EpollFlags::EPOLLOUT | EpollFlags::EPOLLRDHUP | EpollFlags::EPOLLET;
        if let Err(e) = self.epoll.add(tcp.as_fd(), EpollEvent::new(flags, key)) {
            self.slots.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
            return Err(e.into());
        }
        Ok(Registered { deferred: self.clone(), key, slot, tcp })
    }

    /// Reads every event waiting on the set, without waiting, and wakes
    /// the tasks they concern; returns how many there were.
    pub fn deliver(&self, by: Heard) -> usize {
        let mut events = [EpollEvent::empty(); EVENTS];
        let mut all = 0;
        loop {
            let n = match self.epoll.wait(&mut events, EpollTimeout::ZERO) {
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => break,
            };
            {
                let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
                for e in &events[..n] {
                    let Some(slot) = slots.get(&e.data()).and_then(Weak::upgrade) else { continue };
                    let f = e.events();
                    let gone = EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR;
                    if f.intersects(EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP | gone) {
                        slot.read.set();
                    }
                    if f.intersects(EpollFlags::EPOLLOUT | gone) {
                        slot.write.set();
                    }
                }
            }
            all += n;
            if n < EVENTS {
                break;
            }
        }
        let count = if by == Heard::AtSend { &self.heard_at_send } else { &self.heard_by_watcher };
        count.fetch_add(all as u64, Ordering::Relaxed);
        all
    }

    /// Socket events read at sends and by the watcher, so far.
    pub fn heard(&self) -> (u64, u64) {
        (self.heard_at_send.load(Ordering::Relaxed), self.heard_by_watcher.load(Ordering::Relaxed))
    }

    /// Takes the set off the reactor until the guard is dropped: the
    /// holder reads it ([`deliver`](Self::deliver)) when it wakes.
    pub fn defer(self: &Arc<Self>) -> Deferring {
        self.deferring.fetch_add(1, Ordering::AcqRel);
        self.changed.notify_one();
        Deferring(self.clone())
    }

    /// Ends the watcher (the client is gone).
    pub fn close(&self) {
        self.gone.cancel();
    }

    /// While no dispatcher defers, the set is on the reactor and its events
    /// are read as they come; while one does, it is off.
    async fn watch(self: Arc<Self>) {
        /// The set's descriptor, borrowed for its registration (the set
        /// outlives it: `self` holds both).
        struct SetFd(RawFd);
        impl AsRawFd for SetFd {
            fn as_raw_fd(&self) -> RawFd {
                self.0
            }
        }
        loop {
            if self.deferring.load(Ordering::Acquire) > 0 {
                tokio::select! {
                    _ = self.gone.cancelled() => return,
                    _ = self.changed.notified() => continue,
                }
            }
            // Deprecated because it cannot promise that the descriptor
            // outlives its registration; here it does (`SetFd`).
            #[allow(deprecated)]
            let on = match AsyncFd::with_interest(SetFd(self.epoll.0.as_raw_fd()), Interest::READABLE) {
                Ok(on) => Some(on),
                Err(e) => {
                    tracing::warn!("the front hop's answers are read every millisecond: {e}");
                    None
                }
            };
            // What came while the set was off.
            self.deliver(Heard::Watcher);
            loop {
                let readable = async {
                    match &on {
                        Some(on) => match on.readable().await {
                            Ok(mut g) => {
                                self.deliver(Heard::Watcher);
                                g.clear_ready();
                            }
                            Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
                        },
                        None => {
                            tokio::time::sleep(Duration::from_millis(1)).await;
                            self.deliver(Heard::Watcher);
                        }
                    }
                };
                tokio::select! {
                    biased;
                    _ = self.gone.cancelled() => return,
                    _ = self.changed.notified() => {
                        if self.deferring.load(Ordering::Acquire) > 0 {
                            break;
                        }
                    }
                    _ = readable => {}
                }
            }
            // Dropping `on` takes the set off the reactor.
        }
    }
}

/// A dispatcher's hold on a [`Deferred`]: the set stays off the reactor.
#[derive(Debug)]
pub struct Deferring(Arc<Deferred>);

impl Deferring {
    pub fn deliver(&self) -> usize {
        self.0.deliver(Heard::AtSend)
    }
}

impl Drop for Deferring {
    fn drop(&mut self) {
        self.0.deferring.fetch_sub(1, Ordering::AcqRel);
        self.0.changed.notify_one();
    }
}

/// A dispatcher's use of its target's set (if it has one): off the
/// reactor while the next wake-up is near, read after each wake-up's sends.
#[derive(Debug)]
pub struct Hearing {
    set: Option<Arc<Deferred>>,
    held: Option<Deferring>,
}

impl Hearing {
    pub fn new(set: Option<Arc<Deferred>>) -> Self {
        Hearing { set, held: None }
    }

    /// Before a sleep of `wait`: answers wait for the wake-up if it comes
    /// within [`HEAR_WITHIN`], and are heard as they come otherwise.
    pub fn sleeping(&mut self, wait: Duration) {
        if let Some(set) = &self.set {
            if wait <= HEAR_WITHIN {
                self.held.get_or_insert_with(|| set.defer());
            } else {
                self.held = None;
            }
        }
    }

    /// After a wake-up's sends: reads what came since the last one.
    pub fn sent(&self) {
        if let Some(d) = &self.held {
            d.deliver();
        }
    }
}

/// A socket on the set: its readiness, and its removal when dropped.
#[derive(Debug)]
pub(super) struct Registered {
    deferred: Arc<Deferred>,
    key: u64,
    pub(super) slot: Arc<Slot>,
    pub(super) tcp: Arc<std::net::TcpStream>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let _ = self.deferred.epoll.delete(self.tcp.as_fd());
        self.deferred.slots.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::load::stamped::StampedTcp;

    /// Reads 4 bytes off `s` in a task of its own.
    fn read4(mut s: StampedTcp) -> tokio::task::JoinHandle<(Vec<u8>, StampedTcp)> {
        tokio::spawn(async move {
            let mut b = vec![0u8; 4];
            s.read_exact(&mut b).await.unwrap();
            (b, s)
        })
    }

    #[tokio::test]
    async fn an_answer_waits_for_the_next_send_while_deferred_and_not_otherwise() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let set = Deferred::new().unwrap();
        let (stamped, _) = StampedTcp::deferred(client, &set).unwrap();
        let held = set.defer();
        let reader = read4(stamped);
        // The reader finds nothing and waits; then the bytes come.
        tokio::time::sleep(Duration::from_millis(20)).await;
        server.write_all(b"ping").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!reader.is_finished(), "read while the set was off the reactor and not read");
        // The dispatcher's read of the set, after its sends, wakes the reader.
        assert!(held.deliver() >= 1);
        let (got, stamped) = tokio::time::timeout(Duration::from_secs(5), reader).await.unwrap().unwrap();
        assert_eq!(got, b"ping");
        // No dispatcher deferring: the watcher hears the next bytes as they come.
        drop(held);
        let reader = read4(stamped);
        tokio::time::sleep(Duration::from_millis(20)).await;
        server.write_all(b"pong").await.unwrap();
        let (got, _) = tokio::time::timeout(Duration::from_secs(5), reader).await.unwrap().unwrap();
        assert_eq!(got, b"pong");
        let (at_send, by_watcher) = set.heard();
        assert!(at_send >= 1 && by_watcher >= 1, "{at_send} at sends, {by_watcher} by the watcher");
        set.close();
    }
}
