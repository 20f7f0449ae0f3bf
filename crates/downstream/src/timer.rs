//! The service-time wait, on the runtime's own timer, and the
//! high-resolution [`Alarm`] the harness's dispatcher wakes on.
//!
//! A real handler that waits 500 ms on a database waits on its runtime's
//! timer or socket, not on a timer of its own, so the simulated service time
//! is a `tokio::time::sleep_until` of its due time: what it costs a call is
//! what a real wait costs (until 2026-12 a heap of deadlines and a timerfd
//! armed for the earliest, which cost the downstream instructions per call
//! that a plain tokio service does not spend; bench/README.md, "The service
//! time on the runtime's timer"). tokio's timer wheel has 1 ms slots: a wait
//! ends on the first tick at or after its deadline, never before it, so a
//! service time is the delay rounded up to the tick, plus the wake-up
//! ([`RESOLUTION`], which `/stats` reports and report.md states). A zero
//! delay never touches a timer.
//!
//! Why not busy-wait or `spawn_blocking` with `thread::sleep`: spinning burns a
//! core that the tiers are measured on, and a blocking thread per request
//! would hold thousands of threads at a 500 ms delay and 10,000 req/s.

use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::{Duration, Instant};

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// How the service-time wait is done, for the downstream's settings.
pub const DESCRIPTION: &str = "tokio::time::sleep_until of the due time, on the runtime's own timer (1 ms ticks), as \
a handler waiting on I/O waits; zero delay: no timer";

/// The tick of the runtime's timer: a wait ends on the first tick at or after
/// its due time (tokio's wheel has 1 ms slots, `tokio::time` module docs), so
/// a service time is never below its delay and is rounded up to this.
pub const RESOLUTION: Duration = Duration::from_millis(1);

/// Waits `duration` from now on the runtime's timer (nothing at all for
/// zero); never ends before it.
pub async fn wait(duration: Duration) {
    if !duration.is_zero() {
        wait_until(Instant::now() + duration).await;
    }
}

/// Waits until `deadline` on the runtime's timer; never ends before it.
pub async fn wait_until(deadline: Instant) {
    tokio::time::sleep_until(deadline.into()).await;
}

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

    /// Returns once `d` has passed (at once for zero): the alarm set to
    /// `d`, then the reactor's word that it went off.
    ///
    /// The expiry is not read. Re-arming resets the timerfd's count, and the
    /// reactor's edge-triggered registration hears each expiry on its own,
    /// read or not, so a read per expiry (one system call per request sent
    /// on its due time, `bench/syscalls.sh`, bench/README.md) told nothing the clock
    /// does not: readiness left over from an expiry nobody waited for (a
    /// wait given up, the alarm kept for the next segment) ends a wait only
    /// once its deadline has passed, and is otherwise cleared and the rest
    /// of the wait armed again.
    pub async fn sleep(&self, d: Duration) -> std::io::Result<()> {
        if d.is_zero() {
            return Ok(());
        }
        let deadline = Instant::now() + d;
        self.set(d)?;
        loop {
            let mut ready = self.0.readable().await?;
            // tokio clears only the readiness this guard saw: an expiry the
            // reactor reports after it stays ready.
            ready.clear_ready();
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            self.set(deadline - now)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The service time is never below the delay, whatever the delay's
    /// phase against the timer's 1 ms ticks (sub-millisecond delays, waits
    /// started between ticks), on a multi-threaded runtime as the tier runs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn zero_does_not_wait_and_a_service_time_is_never_below_its_delay() {
        let t = Instant::now();
        wait(Duration::ZERO).await;
        assert!(t.elapsed() < Duration::from_millis(1), "{:?}", t.elapsed());
        // Out of order, overlapping, off the tick: each ends no earlier than its own deadline.
        let waits = [30_000u64, 10_000, 20_300, 10_000, 1_000, 700, 1, 2_500].map(|us| async move {
            let started = Instant::now();
            wait(Duration::from_micros(us)).await;
            (us, started.elapsed())
        });
        for (us, took) in futures::future::join_all(waits).await {
            assert!(took >= Duration::from_micros(us), "{us} µs ended after {took:?}");
        }
        // One after another, started wherever the last one ended.
        for us in [100u64, 900, 1_000, 1_100, 2_000] {
            let started = Instant::now();
            wait(Duration::from_micros(us)).await;
            assert!(started.elapsed() >= Duration::from_micros(us), "{us} µs ended after {:?}", started.elapsed());
            let deadline = Instant::now() + Duration::from_micros(us);
            wait_until(deadline).await;
            assert!(Instant::now() >= deadline);
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

    /// An expiry leaves no readiness behind and is not read: the next wait
    /// asks the reactor, and twenty waits make no read at all (this
    /// thread's `syscr` in /proc; a read per expiry would make twenty).
    #[tokio::test(flavor = "current_thread")]
    async fn an_expiry_is_heard_without_a_read_and_leaves_no_readiness() {
        use futures::FutureExt;
        let reads = || {
            let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
            io.lines().find_map(|l| l.strip_prefix("syscr: ")).unwrap().trim().parse::<u64>().unwrap()
        };
        let alarm = Alarm::new().expect("a timerfd");
        // What reading /proc itself takes, between two readings.
        let itself = -(reads() as i64) + reads() as i64;
        let before = reads();
        for _ in 0..20 {
            let started = Instant::now();
            tokio::time::timeout(Duration::from_secs(5), alarm.sleep(Duration::from_micros(200)))
                .await
                .expect("each expiry is heard")
                .unwrap();
            assert!(started.elapsed() >= Duration::from_micros(200));
            assert!(alarm.0.readable().now_or_never().is_none(), "readiness left after the expiry");
        }
        let made = reads() as i64 - before as i64 - itself;
        assert!(made <= 0, "{made} reads for 20 expiries (besides {itself} reading /proc)");
    }

    /// Readiness left by an expiry nobody waited for (a wait given up)
    /// does not end the next wait early.
    #[tokio::test]
    async fn a_wait_given_up_does_not_end_the_next_one_early() {
        let alarm = Alarm::new().expect("a timerfd");
        let given_up = tokio::time::timeout(Duration::from_millis(1), alarm.sleep(Duration::from_millis(50))).await;
        assert!(given_up.is_err());
        // Its expiry comes while nobody waits.
        std::thread::sleep(Duration::from_millis(60));
        let started = Instant::now();
        alarm.sleep(Duration::from_millis(20)).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(20), "{:?}", started.elapsed());
    }
}
