//! The service-time wait, to the tenth of a millisecond, and the
//! high-resolution [`Alarm`] it (and the harness's dispatcher) wakes on.
//!
//! tokio's timer wheel has 1 ms slots: a `sleep(d)` ends on the first tick at
//! or after its deadline, so every delay came out rounded up by up to a
//! millisecond and more (501.5 ms for 500 ms), and even a zero-length sleep
//! waited for the next tick. Here a zero delay never touches a timer, and a
//! nonzero one is registered with the runtime's [`Timer`]: a heap of
//! deadlines and one timerfd armed for the earliest. A timerfd's expiry is a
//! kernel hrtimer with no timer slack (`timerfd_settime(2)`), and it is
//! registered with tokio's reactor like a socket, so the worker that answers
//! the request is the thread it wakes, as a database's reply would: no thread
//! of its own to wake first and hand over from (an earlier design, a timer
//! thread on a condition variable, cost a tenth of the downstream's CPU at
//! 5,000 req/s and a second wake-up per request).
//!
//! Why not busy-wait or `spawn_blocking` with `thread::sleep`: spinning burns a
//! core that the tiers are measured on, and a blocking thread per request
//! would hold thousands of threads at a 500 ms delay and 10,000 req/s.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;

/// How the service-time wait is done, for the downstream's settings.
pub const DESCRIPTION: &str = "zero delay: no timer; otherwise the deadlines of the runtime in a heap and one timerfd \
(a high-resolution kernel timer, no timer slack) armed for the earliest, on the runtime's reactor; its expiry wakes \
every request then due";

/// A high-resolution wake-up on the current tokio runtime's reactor: a
/// timerfd registered like a socket. Must be made inside a runtime and used
/// on it.
pub struct Alarm(AsyncFd<TimerFdRaw>);

/// `AsyncFd` wants `AsRawFd`; nix's `TimerFd` is `AsFd`.
struct TimerFdRaw(TimerFd);

impl AsRawFd for TimerFdRaw {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

impl Alarm {
    pub fn new() -> std::io::Result<Alarm> {
        let fd = TimerFd::new(ClockId::CLOCK_MONOTONIC, TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC)?;
        // Deprecated because it cannot promise that the descriptor outlives
        // its registration; here it does: the `AsyncFd` owns the `TimerFd`,
        // and deregisters before dropping it. (The replacement, `register`, is
        // `unsafe`, which this workspace does not allow.)
        #[allow(deprecated)]
        Ok(Alarm(AsyncFd::with_interest(TimerFdRaw(fd), Interest::READABLE)?))
    }

    /// Arms the alarm to go off `d` from now (replacing any earlier setting);
    /// zero is taken as 1 ns, since a zero expiry would disarm it.
    pub fn set(&self, d: Duration) -> std::io::Result<()> {
        let d = d.max(Duration::from_nanos(1));
        Ok(self.0.get_ref().0.set(Expiration::OneShot(TimeSpec::from_duration(d)), TimerSetTimeFlags::empty())?)
    }

    /// Returns once the alarm has gone off since it was last waited for.
    pub async fn fired(&self) -> std::io::Result<()> {
        loop {
            let mut ready = self.0.readable().await?;
            // Reading takes the expiry count; EAGAIN (readiness left over
            // from an earlier expiry) clears the readiness and waits again.
            match ready.try_io(|fd| Ok(nix::unistd::read(fd.get_ref().0.as_fd(), &mut [0u8; 8])?)) {
                Ok(r) => {
                    // The read took every expiry so far, so the readiness it
                    // answered is spent: cleared now, the next wait does not
                    // begin with a read that can only say EAGAIN (one system
                    // call per expiry, measured with `perf stat`). tokio
                    // clears only the readiness this guard saw: an expiry
                    // the reactor reports after it (the alarm re-armed from
                    // another thread) stays ready.
                    if r.is_ok() {
                        ready.clear_ready();
                    }
                    return r.map(drop);
                }
                Err(_would_block) => continue,
            }
        }
    }

    /// Returns once `d` has passed (at once for zero).
    pub async fn sleep(&self, d: Duration) -> std::io::Result<()> {
        if d.is_zero() {
            return Ok(());
        }
        self.set(d)?;
        self.fired().await
    }
}

/// The service-time waits of one runtime (one per [`crate::Core`]; made on
/// the first wait, inside the runtime that serves).
#[derive(Clone, Default)]
pub struct Timer(Arc<OnceLock<Arc<Shared>>>);

impl std::fmt::Debug for Timer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Timer")
    }
}

struct Entry {
    deadline: Instant,
    seq: u64,
    tx: oneshot::Sender<()>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.deadline, self.seq) == (other.deadline, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.deadline, self.seq).cmp(&(other.deadline, other.seq))
    }
}

#[derive(Default)]
struct Deadlines {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

struct Shared {
    deadlines: Mutex<Deadlines>,
    alarm: Alarm,
}

impl Timer {
    /// Waits `duration` (nothing at all for zero), ending within about 0.1 ms
    /// after it on an idle machine. Without a timerfd (none left to open) the
    /// wait falls back to tokio's timer, 1 ms ticks.
    pub async fn wait(&self, duration: Duration) {
        if duration.is_zero() {
            return;
        }
        let deadline = Instant::now() + duration;
        let Some(shared) = self.shared() else {
            return tokio::time::sleep_until(deadline.into()).await;
        };
        let (tx, rx) = oneshot::channel();
        shared.add(deadline, tx);
        // The sender is dropped only when it fires (or the runtime ends).
        let _ = rx.await;
    }

    fn shared(&self) -> Option<&Arc<Shared>> {
        if self.0.get().is_none() {
            match Alarm::new() {
                Ok(alarm) => {
                    let shared = Arc::new(Shared { deadlines: Mutex::default(), alarm });
                    if self.0.set(shared.clone()).is_ok() {
                        tokio::spawn(shared.run());
                    }
                }
                Err(e) => tracing::warn!("no timerfd ({e}): service times end on tokio's 1 ms timer ticks"),
            }
        }
        self.0.get()
    }
}

impl Shared {
    fn add(&self, deadline: Instant, tx: oneshot::Sender<()>) {
        let mut d = self.deadlines.lock().unwrap_or_else(|e| e.into_inner());
        let earliest = d.heap.peek().is_none_or(|Reverse(e)| deadline < e.deadline);
        d.seq += 1;
        let seq = d.seq;
        d.heap.push(Reverse(Entry { deadline, seq, tx }));
        // Only a new earliest deadline changes when the alarm must go off;
        // armed under the lock, so the driver's re-arming cannot interleave.
        if earliest {
            self.arm(deadline);
        }
    }

    fn arm(&self, deadline: Instant) {
        if let Err(e) = self.alarm.set(deadline.saturating_duration_since(Instant::now())) {
            tracing::warn!("arming the service-time timerfd: {e}");
        }
    }

    /// The driver: on each expiry, releases every request now due and arms
    /// the alarm for the next deadline.
    async fn run(self: Arc<Self>) {
        loop {
            if self.alarm.fired().await.is_err() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let mut d = self.deadlines.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            while d.heap.peek().is_some_and(|Reverse(e)| e.deadline <= now) {
                if let Some(Reverse(e)) = d.heap.pop() {
                    // The request may have gone (client cancelled): nothing to wake.
                    let _ = e.tx.send(());
                }
            }
            if let Some(Reverse(e)) = d.heap.peek() {
                self.arm(e.deadline);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn zero_does_not_wait_and_a_delay_is_never_cut_short() {
        let timer = Timer::default();
        let t = Instant::now();
        timer.wait(Duration::ZERO).await;
        assert!(t.elapsed() < Duration::from_millis(1), "{:?}", t.elapsed());
        // Out of order, overlapping: each ends no earlier than its own deadline.
        let waits = [30u64, 10, 20, 10, 1].map(|ms| {
            let timer = timer.clone();
            async move {
                let started = Instant::now();
                timer.wait(Duration::from_millis(ms)).await;
                (ms, started.elapsed())
            }
        });
        for (ms, took) in futures::future::join_all(waits).await {
            assert!(took >= Duration::from_millis(ms), "{ms} ms ended after {took:?}");
        }
        // One after another: the alarm is re-armed after every expiry.
        for _ in 0..5 {
            let started = Instant::now();
            timer.wait(Duration::from_millis(2)).await;
            assert!(started.elapsed() >= Duration::from_millis(2));
        }
    }

    #[tokio::test]
    async fn the_alarm_never_ends_a_wait_early_and_rearms_after_each_expiry() {
        let alarm = Alarm::new().expect("a timerfd");
        let t = Instant::now();
        alarm.sleep(Duration::ZERO).await.unwrap();
        // Twenty waits in a row: had an expiry's readiness not been cleared,
        // every wait after the first would end at once.
        for _ in 0..20 {
            let started = Instant::now();
            alarm.sleep(Duration::from_micros(300)).await.unwrap();
            assert!(started.elapsed() >= Duration::from_micros(300), "{:?}", started.elapsed());
        }
        assert!(t.elapsed() >= Duration::from_millis(6));
    }

    /// An expiry that was read leaves no readiness behind, so the next wait
    /// asks the reactor instead of reading first (a read that could only
    /// say EAGAIN); an expiry after that is still seen.
    #[tokio::test]
    async fn a_read_expiry_leaves_no_readiness_and_the_next_one_is_seen() {
        use futures::FutureExt;
        let alarm = Alarm::new().expect("a timerfd");
        alarm.sleep(Duration::from_micros(200)).await.unwrap();
        assert!(alarm.0.readable().now_or_never().is_none(), "readiness left after the expiry was read");
        alarm.set(Duration::from_micros(200)).unwrap();
        tokio::time::timeout(Duration::from_secs(5), alarm.fired()).await.expect("the second expiry is seen").unwrap();
    }
}
