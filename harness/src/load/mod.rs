//! The open-loop, fixed-rate load generator.
//!
//! Request *i* is due at `t0 + i/qps`. The dispatcher wakes on a high-resolution timer, sends
//! every request now due (so the 1 ms timer granularity never caps the rate),
//! and never waits for a response: each request runs in its own task and sends
//! one [`Shot`] to the collector when it ends (oha's one-record-per-request
//! habit). Latency is measured from the due time, which corrects for
//! coordinated omission the way wrk2 does (Gil Tene, "How NOT to measure
//! latency"); the time from the actual send is kept as service time. A request
//! due while `max_in_flight` are outstanding is counted as dropped, never
//! delayed.
//!
//! * [`dispatch`]: the open-loop dispatcher and the closed-loop workers;
//! * [`target`]: where requests go (the caller's front door, or the
//!   downstream directly) and how one request is sent and classified;
//! * [`answer`]: how one request ended, and a failure's reason in words.
//!
//! Load only sends and stamps; it records nothing (that is
//! `measure::record`) and judges nothing.

pub mod answer;
mod deferred;
pub mod dispatch;
pub mod front;
mod lean;
mod pump;
mod stamped;
pub mod stream;
pub mod target;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::result::ErrorReason;

pub use answer::Answer;
pub use dispatch::{Alarms, closed_loop, dispatch};
pub use pump::reader_priority;
pub use target::{Checks, Endpoint, Exchanged, Target};

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// The connection to the caller could not be made.
    Connect,
    /// No answer within `--timeout`.
    Timeout,
    /// The caller answered with a non-200 status.
    Status(u16),
    /// The downstream, called directly, answered with an error status (HTTP or gRPC).
    DownstreamStatus,
    /// An answer that did not parse or was not the one asked for.
    BadResponse,
    /// Not sent: `--max-in-flight` requests were outstanding when it was due.
    Dropped,
    /// A stream that ended before its last item (its record says after how many).
    StreamCut,
    /// An answer cut by the harness: the answers being read held all the
    /// bytes it holds at once (`front::MAX_HELD_ANSWER_BYTES`).
    AnswersFull,
}

impl Outcome {
    /// The error class name of an outcome (`None` for a success), as rounds
    /// count errors.
    pub fn error_class(self) -> Option<String> {
        match self {
            Outcome::Ok => None,
            Outcome::Connect => Some("connect".into()),
            Outcome::Timeout => Some("timeout".into()),
            Outcome::Status(code) => Some(format!("http_{code}")),
            Outcome::DownstreamStatus => Some("status".into()),
            Outcome::BadResponse => Some("bad_response".into()),
            Outcome::Dropped => Some("dropped".into()),
            Outcome::StreamCut => Some("stream_cut".into()),
            Outcome::AnswersFull => Some("answers_full".into()),
        }
    }
}

/// One request's record.
#[derive(Debug, Clone)]
pub struct Shot {
    pub index: u64,
    pub due: Instant,
    /// When the request task actually started sending; `None` if dropped.
    pub sent: Option<Instant>,
    pub done: Instant,
    pub outcome: Outcome,
    /// The caller's `Server-Timing: downstream;dur=` in microseconds.
    pub downstream_us: Option<u64>,
    /// Whether `done` is the kernel's receive stamp of the answer's last byte.
    pub kernel_stamped: bool,
    /// What a stream delivered (streaming arms only): `done` is then its
    /// last item's arrival.
    pub stream: Option<Box<StreamFacts>>,
}

/// What one stream delivered, item by item.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamFacts {
    /// When its first item arrived; `None` for a stream with none.
    pub first: Option<Instant>,
    /// Items received whole and in order.
    pub items: u64,
    /// Each item's delay in µs: its arrival at the harness (the kernel's
    /// stamp of the packet that completed it) minus its due time on the
    /// downstream's schedule, both on the system clock; every arm alike.
    /// Items whose due time the downstream did not say are left out.
    pub delays_us: Vec<u64>,
    /// Of which production lateness: its production time minus its due
    /// time, both the downstream's stamps (µs).
    pub lateness_us: Vec<u64>,
    /// And transit: its arrival minus its production time (µs), every item.
    pub transit_us: Vec<u64>,
    /// The most items in transit at once: produced by the downstream, not
    /// yet taken by the harness (held in the tiers' and the kernel's
    /// buffers).
    pub buffered_peak: u64,
    /// For a stream cut short, the items it delivered before the cut.
    pub cut_after: Option<u64>,
}

/// When each request is due: at `qps` from `t0`, or after a ramp from zero.
///
/// With a `ramp`, the rate rises linearly from zero at `t0` to `qps` at
/// `t0 + ramp` and holds from there (k6's ramping executor, one stage). The
/// requests due by `t` after `t0` are `qps·t²/(2·ramp)` on the ramp, so
/// request *i* is due at `√(2·ramp·i/qps)`, and after it at
/// `ramp + (i − qps·ramp/2)/qps`. Only a cold warm-up ramps: on fresh tiers
/// the full rate at once means a new connection on each hop for every
/// request of the first service time, thousands at once, a burst no steady
/// state has (seen: REST at 6,000 req/s held 10,000 requests in flight for
/// three seconds and was still draining them in the round after a 5 s
/// warm-up).
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub t0: Instant,
    pub qps: f64,
    pub ramp: Duration,
    /// The part of the schedule this generator sends (`--segment I/N`).
    pub share: Share,
    /// How late a request may leave (`--send-precision`): the requests due
    /// within it of a wake-up go out on that one wake-up. Zero: a wake-up
    /// at each due time.
    pub precision: Duration,
}

/// Every `count`-th request of a schedule, starting with the `index`-th
/// (`--segment I/N`): `count` generators with indices `0..count` together
/// send each request of the one schedule exactly once, at its own due time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    pub index: u64,
    pub count: u64,
}

impl Default for Share {
    /// The whole schedule.
    fn default() -> Share {
        Share { index: 0, count: 1 }
    }
}

impl Share {
    /// The requests of `0..total` this share sends, in order.
    pub fn indices(self, total: u64) -> impl Iterator<Item = u64> {
        (self.index..total).step_by(self.count.max(1) as usize)
    }

    /// How many of `0..total` this share sends.
    pub fn of(self, total: u64) -> u64 {
        total.saturating_sub(self.index).div_ceil(self.count.max(1))
    }
}

impl Schedule {
    /// When a generator that last sent at `woke` next wakes for the
    /// request due at `next` (after `woke`): at `next`, or, within the
    /// window of `woke`, at `woke + window`, so that everything due until
    /// then goes out together. Never more than the window after `next`,
    /// never before it.
    pub fn wake_for(&self, next: Instant, woke: Option<Instant>) -> Instant {
        woke.map_or(next, |w| next.max(w + self.window()))
    }

    /// How late after its due time a request's wake-up is set: three
    /// quarters of the precision, the last quarter left for the wake-up's
    /// own delay (the kernel's and the runtime's), so that the send lag's
    /// p99 stays within the precision, not the precision plus that delay
    /// (at 5,000 req/s with `1ms` set as the whole window, the p99 came to
    /// 1.09 ms; bench/README.md, issue 56, thirteenth pass).
    pub fn window(&self) -> Duration {
        Schedule::window_of(self.precision)
    }

    /// The window of a precision (see [`Schedule::window`]).
    pub fn window_of(precision: Duration) -> Duration {
        precision - precision / 4
    }

    pub fn due(&self, i: u64) -> Instant {
        let (i, ramp) = (i as f64, self.ramp.as_secs_f64());
        let on_ramp = self.qps * ramp / 2.0;
        let t = if i < on_ramp { (2.0 * ramp * i / self.qps).sqrt() } else { ramp + (i - on_ramp) / self.qps };
        self.t0 + Duration::from_secs_f64(t)
    }

    /// How many requests fall due in the first `length`, which must hold
    /// the whole ramp (a segment's schedule is made with its ramp clamped to
    /// its length).
    pub fn requests_in(&self, length: Duration) -> u64 {
        (self.qps * (length.as_secs_f64() - self.ramp.as_secs_f64() / 2.0)).round() as u64
    }
}

/// Live counters the progress display and the sampler read.
#[derive(Debug, Default)]
pub struct Live {
    pub sent: AtomicU64,
    pub ok: AtomicU64,
    pub errors: AtomicU64,
    pub dropped: AtomicU64,
    pub in_flight: AtomicUsize,
    /// Times the open loop's dispatcher woke and sent what was due.
    pub wakeups: AtomicU64,
}

/// The longest reason kept, in bytes (a reason is cut at a character boundary).
pub const MAX_REASON_BYTES: usize = 300;
/// Distinct reasons kept per error class; the rest are counted together.
pub const MAX_REASONS_PER_CLASS: usize = 5;
/// The reason under which a class's further distinct reasons are counted.
pub const OTHER_REASONS: &str = "(other reasons, not kept)";

/// The distinct reasons of failed requests by error class, each with a
/// count: what a count of `http_502` cannot say (the caller's message naming
/// the downstream's failure, a connect error's errno). Bounded: at most
/// [`MAX_REASONS_PER_CLASS`] reasons a class, each at most
/// [`MAX_REASON_BYTES`].
#[derive(Debug, Default)]
pub struct ErrorReasons(Mutex<BTreeMap<(String, String), u64>>);

impl ErrorReasons {
    pub fn note(&self, outcome: Outcome, reason: &str) {
        let Some(class) = outcome.error_class() else { return };
        let mut cut = reason.len().min(MAX_REASON_BYTES);
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        let reason = &reason[..cut];
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let key = (class, reason.to_owned());
        if let Some(n) = map.get_mut(&key) {
            *n += 1;
            return;
        }
        let kept = map.range((key.0.clone(), String::new())..).take_while(|((c, _), _)| *c == key.0).count();
        let key = if kept >= MAX_REASONS_PER_CLASS { (key.0, OTHER_REASONS.to_owned()) } else { key };
        *map.entry(key).or_default() += 1;
    }

    /// Every reason with its count, by class then reason.
    pub fn snapshot(&self) -> Vec<ErrorReason> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.iter()
            .map(|((class, reason), n)| ErrorReason { class: class.clone(), reason: reason.clone(), count: *n })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wake-up is set at most three quarters of the precision after the
    /// earliest due time it serves, never before it; at rates whose due
    /// times are further apart than that, at each due time.
    #[test]
    fn a_wake_up_is_set_within_three_quarters_of_the_precision() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let at = |precision| Schedule { t0, qps: 5000.0, ramp: Duration::ZERO, share: Share::default(), precision };
        assert_eq!(Schedule::window_of(ms(1)), Duration::from_micros(750));
        let s = at(ms(1));
        assert_eq!(s.wake_for(t0, None), t0, "the first wake-up is at the first due time");
        // Due 200 µs after the last wake-up: woken 750 µs after it.
        assert_eq!(s.wake_for(t0 + Duration::from_micros(200), Some(t0)), t0 + Duration::from_micros(750));
        // Due after the window: woken at its due time.
        assert_eq!(s.wake_for(t0 + ms(2), Some(t0)), t0 + ms(2));
        let exact = at(Duration::ZERO);
        assert_eq!(exact.wake_for(t0 + Duration::from_micros(200), Some(t0)), t0 + Duration::from_micros(200));
    }

    #[test]
    fn error_reasons_are_counted_by_class_and_bounded() {
        let r = ErrorReasons::default();
        r.note(Outcome::Ok, "not an error");
        r.note(Outcome::Status(502), "downstream answered Unknown");
        r.note(Outcome::Status(502), "downstream answered Unknown");
        r.note(Outcome::Connect, &"é".repeat(MAX_REASON_BYTES));
        for i in 0..MAX_REASONS_PER_CLASS + 2 {
            r.note(Outcome::Timeout, &format!("reason {i}"));
        }
        let s: Vec<(String, String, u64)> = r.snapshot().into_iter().map(|e| (e.class, e.reason, e.count)).collect();
        assert!(s.contains(&("http_502".into(), "downstream answered Unknown".into(), 2)), "{s:?}");
        assert!(!s.iter().any(|(c, _, _)| c == "ok"));
        let connect = s.iter().find(|(c, _, _)| c == "connect").unwrap();
        assert!(connect.1.len() <= MAX_REASON_BYTES && connect.1.chars().all(|c| c == 'é'), "{connect:?}");
        let timeouts: Vec<_> = s.iter().filter(|(c, _, _)| c == "timeout").collect();
        assert_eq!(timeouts.len(), MAX_REASONS_PER_CLASS + 1, "{timeouts:?}");
        assert!(timeouts.contains(&&("timeout".into(), OTHER_REASONS.into(), 2)), "{timeouts:?}");
        assert_eq!(s.iter().map(|(_, _, n)| n).sum::<u64>(), 2 + 1 + MAX_REASONS_PER_CLASS as u64 + 2);
    }

    #[test]
    fn schedule_spaces_requests_evenly() {
        let s = Schedule {
            t0: Instant::now(),
            qps: 4.0,
            ramp: Duration::ZERO,
            share: Share::default(),
            precision: Duration::ZERO,
        };
        assert_eq!(s.due(0), s.t0);
        assert_eq!(s.due(4) - s.t0, Duration::from_secs(1));
        assert_eq!(s.due(3) - s.due(2), Duration::from_millis(250));
        assert_eq!(s.requests_in(Duration::from_secs(10)), 40);
    }

    #[test]
    fn a_ramp_rises_linearly_to_the_rate_and_holds_it() {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        // 1,000 req/s reached after 2 s: 1,000 requests on the ramp.
        let s = Schedule {
            t0: Instant::now(),
            qps: 1000.0,
            ramp: Duration::from_secs(2),
            share: Share::default(),
            precision: Duration::ZERO,
        };
        assert_eq!(s.due(0), s.t0);
        // A quarter of the ramp's requests by half its time (t² law).
        assert!((ms(s.due(250) - s.t0) - 1000.0).abs() < 0.01, "{:?}", s.due(250) - s.t0);
        assert!((ms(s.due(1000) - s.t0) - 2000.0).abs() < 0.01);
        // From then on at the full rate, 1 ms apart, the schedule's end where a
        // segment of its length ends.
        assert!((ms(s.due(1001) - s.due(1000)) - 1.0).abs() < 1e-6);
        assert!((ms(s.due(1500) - s.t0) - 2500.0).abs() < 0.01);
        let n = s.requests_in(Duration::from_secs(5));
        assert_eq!(n, 4000);
        assert!((ms(s.due(n) - s.t0) - 5000.0).abs() < 0.01);
        // Gaps shrink along the ramp and never go backwards.
        let gaps: Vec<Duration> = (1..1200).map(|i| s.due(i) - s.due(i - 1)).collect();
        assert!(gaps.windows(2).all(|w| w[1] <= w[0] + Duration::from_nanos(2)), "gaps grow somewhere");
        assert!(gaps[10] > gaps[900]);
    }

    #[test]
    fn segments_put_together_are_the_one_schedule() {
        let t0 = Instant::now();
        for count in [1u64, 2, 3, 7] {
            // Rates and lengths the count does not divide (and one it does).
            for (qps, seconds) in [(100.0, 1.0), (1000.0 / 3.0, 0.7), (999.0, 2.0), (7.0, 1.0)] {
                let whole = Schedule {
                    t0,
                    qps,
                    ramp: Duration::from_millis(300),
                    share: Share::default(),
                    precision: Duration::ZERO,
                };
                let total = whole.requests_in(Duration::from_secs_f64(seconds));
                let mut seen: Vec<(u64, Instant)> = Vec::new();
                for index in 0..count {
                    let share = Share { index, count };
                    let part = Schedule { share, ..whole };
                    let mine: Vec<u64> = share.indices(total).collect();
                    assert_eq!(mine.len() as u64, share.of(total), "{index}/{count} of {total}");
                    assert!(mine.iter().all(|i| i % count == index));
                    seen.extend(mine.iter().map(|&i| (i, part.due(i))));
                }
                seen.sort_by_key(|(i, _)| *i);
                // Every request once, none missing, each at the one schedule's due time.
                let indices: Vec<u64> = seen.iter().map(|(i, _)| *i).collect();
                assert_eq!(indices, (0..total).collect::<Vec<_>>(), "N = {count}, {qps} req/s");
                assert!(seen.iter().all(|(i, due)| *due == whole.due(*i)));
            }
        }
        // A share beyond the end sends nothing.
        assert_eq!(Share { index: 5, count: 7 }.of(3), 0);
        assert_eq!(Share { index: 5, count: 7 }.indices(3).count(), 0);
    }
}
