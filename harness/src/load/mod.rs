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
//!   downstream directly) and how one request is sent and classified.
//!
//! Load only sends and stamps; it records nothing (that is
//! `measure::record`) and judges nothing.

pub mod dispatch;
pub mod front;
mod stamped;
pub mod target;

use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use dispatch::{Alarms, closed_loop, dispatch};
pub use target::{Answer, Checks, Endpoint, Target};

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
}

/// One request's record.
#[derive(Debug, Clone, Copy)]
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
}

/// When each request is due.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub t0: Instant,
    pub qps: f64,
}

impl Schedule {
    pub fn due(&self, i: u64) -> Instant {
        self.t0 + Duration::from_secs_f64(i as f64 / self.qps)
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_spaces_requests_evenly() {
        let s = Schedule { t0: Instant::now(), qps: 4.0 };
        assert_eq!(s.due(0), s.t0);
        assert_eq!(s.due(4) - s.t0, Duration::from_secs(1));
        assert_eq!(s.due(3) - s.due(2), Duration::from_millis(250));
    }
}
