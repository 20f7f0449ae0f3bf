//! The service-time wait, to the tenth of a millisecond.
//!
//! tokio's timer wheel has 1 ms slots: a `sleep(d)` ends on the first tick at
//! or after its deadline, so every delay came out rounded up by up to a
//! millisecond and more (501.5 ms for 500 ms), and even a zero-length sleep
//! waited for the next tick. Here a zero delay never touches a timer, and a
//! nonzero one is registered with one process-wide timer thread: it keeps the
//! deadlines in a heap and waits for the earliest on a condition variable,
//! whose timed wait is a high-resolution kernel timer (hrtimer). The thread's
//! timer slack is 1 µs instead of the default 50 µs, which lets the kernel
//! end a wait up to 50 µs late to coalesce wake-ups: a service time should
//! not be late for the timer's convenience. On waking it releases every
//! request now due. The thread sleeps between deadlines: it
//! costs one wake-up per distinct deadline, no spinning.
//!
//! Why not busy-wait or `spawn_blocking` with `thread::sleep`: spinning burns a
//! core that the tiers are measured on, and a blocking thread per request
//! would hold thousands of threads at a 500 ms delay and 10,000 req/s.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// How the service-time wait is done, for the downstream's settings.
pub const DESCRIPTION: &str = "zero delay: no timer; otherwise one timer thread per process waits for the \
earliest deadline on a high-resolution kernel timer (condition variable, timer slack 1 µs instead of the default 50 µs) \
and wakes every request then due";

/// Waits `duration` (nothing at all for zero), ending within about 0.1 ms
/// after it on an idle machine.
pub async fn wait(duration: Duration) {
    if duration.is_zero() {
        return;
    }
    let (tx, rx) = oneshot::channel();
    timer().add(Instant::now() + duration, tx);
    // The sender is dropped only when it fires; an error cannot happen
    // while the thread runs, and if it ever did the wait simply ends.
    let _ = rx.await;
}

/// The timer thread's slack: how late the kernel may end its waits.
pub const TIMER_SLACK_NS: u64 = 1_000;

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

struct Timer {
    deadlines: Mutex<Deadlines>,
    changed: Condvar,
    /// The timer thread's slack as the kernel reports it back; `None` if it
    /// could not be read.
    slack_ns: OnceLock<Option<u64>>,
}

/// The timer thread's slack in nanoseconds, read back from the kernel on that
/// thread (starting the thread if no wait has yet): `TIMER_SLACK_NS` unless
/// the kernel refused it; `None` if it could not be read.
pub fn slack_ns() -> Option<u64> {
    let t = timer();
    // The thread sets its slack before anything else; wait for its report.
    loop {
        if let Some(slack) = t.slack_ns.get() {
            return *slack;
        }
        std::thread::yield_now();
    }
}

fn timer() -> &'static Timer {
    static TIMER: OnceLock<&'static Timer> = OnceLock::new();
    TIMER.get_or_init(|| {
        let timer: &'static Timer = Box::leak(Box::new(Timer {
            deadlines: Mutex::default(),
            changed: Condvar::new(),
            slack_ns: OnceLock::new(),
        }));
        // The thread lives as long as the process; if it cannot be started
        // the process has no threads left to serve with anyway.
        std::thread::Builder::new()
            .name("service-timer".into())
            .spawn(move || {
                // Best effort: a kernel that refuses keeps the default slack,
                // and the settings say which.
                let _ = nix::sys::prctl::set_timerslack(TIMER_SLACK_NS);
                let _ = timer.slack_ns.set(nix::sys::prctl::get_timerslack().ok().and_then(|s| u64::try_from(s).ok()));
                timer.run()
            })
            .expect("starting the service-time timer thread");
        timer
    })
}

impl Timer {
    fn add(&self, deadline: Instant, tx: oneshot::Sender<()>) {
        let mut d = self.deadlines.lock().unwrap_or_else(|e| e.into_inner());
        let earliest = d.heap.peek().is_none_or(|Reverse(e)| deadline < e.deadline);
        d.seq += 1;
        let seq = d.seq;
        d.heap.push(Reverse(Entry { deadline, seq, tx }));
        drop(d);
        // Only a new earliest deadline changes how long the thread waits.
        if earliest {
            self.changed.notify_one();
        }
    }

    fn run(&self) {
        let mut d = self.deadlines.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let now = Instant::now();
            while d.heap.peek().is_some_and(|Reverse(e)| e.deadline <= now) {
                if let Some(Reverse(e)) = d.heap.pop() {
                    // The request may have gone (client cancelled): nothing to wake.
                    let _ = e.tx.send(());
                }
            }
            d = match d.heap.peek() {
                None => self.changed.wait(d).unwrap_or_else(|e| e.into_inner()),
                Some(Reverse(e)) => {
                    let wait = e.deadline - now;
                    self.changed.wait_timeout(d, wait).unwrap_or_else(|e| e.into_inner()).0
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn zero_does_not_wait_and_a_delay_is_never_cut_short() {
        let t = Instant::now();
        wait(Duration::ZERO).await;
        assert!(t.elapsed() < Duration::from_millis(1), "{:?}", t.elapsed());
        // Out of order, overlapping: each ends no earlier than its own deadline.
        let waits = [30u64, 10, 20, 10, 1].map(|ms| async move {
            let started = Instant::now();
            wait(Duration::from_millis(ms)).await;
            (ms, started.elapsed())
        });
        for (ms, took) in futures::future::join_all(waits).await {
            assert!(took >= Duration::from_millis(ms), "{ms} ms ended after {took:?}");
        }
    }
}
