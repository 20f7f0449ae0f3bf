//! The collector: the one owner of every request's record. Workers send
//! [`Shot`]s over a channel; one collector per segment (warm-up or round)
//! files them, so every round starts with fresh histograms. Nothing renders here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use hdrhistogram::Histogram;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use crate::load::{Outcome, Shot};
use crate::measure::histogram::new_histogram;

/// How often the live p99 shown while a round runs is recomputed.
const LIVE_P99_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// One round's records.
#[derive(Debug, Clone)]
pub struct RoundRecord {
    /// From the intended send time.
    pub corrected: Histogram<u64>,
    /// From the actual send time.
    pub service: Histogram<u64>,
    pub send_lag: Histogram<u64>,
    pub downstream_hop: Histogram<u64>,
    pub caller_overhead: Histogram<u64>,
    pub sent: u64,
    pub ok: u64,
    /// OK answers whose arrival is the kernel's receive stamp.
    pub kernel_stamped: u64,
    /// Error counts by class.
    pub errors: BTreeMap<String, u64>,
    /// Requests that failed after the run was cut short (a second signal):
    /// their tiers were being stopped under them, so they are left out of
    /// every count, as the README says.
    pub left_out: u64,
}

impl Default for RoundRecord {
    fn default() -> Self {
        RoundRecord {
            corrected: new_histogram(),
            service: new_histogram(),
            send_lag: new_histogram(),
            downstream_hop: new_histogram(),
            caller_overhead: new_histogram(),
            sent: 0,
            ok: 0,
            left_out: 0,
            kernel_stamped: 0,
            errors: BTreeMap::new(),
        }
    }
}

impl RoundRecord {
    pub fn add(&mut self, shot: &Shot) {
        let us = |d: std::time::Duration| d.as_micros().min(u128::from(u64::MAX)) as u64;
        if let Some(class) = shot.outcome.error_class() {
            *self.errors.entry(class).or_default() += 1;
        }
        let Some(sent) = shot.sent else { return };
        self.sent += 1;
        if shot.outcome != Outcome::Ok {
            return;
        }
        self.ok += 1;
        self.kernel_stamped += u64::from(shot.kernel_stamped);
        // Latency percentiles describe successful calls; errors are counted by
        // class above, so a fast failure cannot flatter the percentiles.
        let service_us = us(shot.done.saturating_duration_since(sent));
        self.corrected.saturating_record(us(shot.done.saturating_duration_since(shot.due)));
        self.service.saturating_record(service_us);
        self.send_lag.saturating_record(us(sent.saturating_duration_since(shot.due)));
        if let Some(hop) = shot.downstream_us {
            self.downstream_hop.saturating_record(hop);
            self.caller_overhead.saturating_record(service_us.saturating_sub(hop));
        }
    }
}

/// Files the shots of one segment (a warm-up or a round) until every sender
/// is gone or `finish` fires (then it files what is already queued and
/// returns). `live_p99_us` is kept up to date with the corrected p99 for the
/// progress display.
///
/// A shot that failed at or after `cut_at` (once it is set) is left out.
pub async fn collect(
    mut shots: UnboundedReceiver<Shot>,
    live_p99_us: Arc<AtomicU64>,
    finish: CancellationToken,
    cut_at: Arc<std::sync::OnceLock<std::time::Instant>>,
) -> RoundRecord {
    let mut round = RoundRecord::default();
    let mut n = 0u64;
    let mut shown = std::time::Instant::now();
    loop {
        let shot = tokio::select! {
            biased;
            shot = shots.recv() => match shot {
                Some(s) => s,
                None => break,
            },
            _ = finish.cancelled() => match shots.try_recv() {
                Ok(s) => s,
                Err(_) => break,
            },
        };
        if shot.outcome != Outcome::Ok && cut_at.get().is_some_and(|cut| shot.done >= *cut) {
            round.left_out += 1;
            continue;
        }
        round.add(&shot);
        n += 1;
        // A quantile walks the counts array: a few times a second is plenty
        // for the display, and cheap at any rate.
        if n.is_multiple_of(64) && shown.elapsed() >= LIVE_P99_EVERY {
            live_p99_us.store(round.corrected.value_at_quantile(0.99), Relaxed);
            shown = std::time::Instant::now();
        }
    }
    round
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn corrected_latency_carries_the_wait_service_time_does_not() {
        let t = Instant::now();
        let mut r = RoundRecord::default();
        // Due at t, sent 2 s late (a stalled dispatcher), answered 10 ms later.
        r.add(&Shot {
            index: 0,
            due: t,
            sent: Some(t + Duration::from_secs(2)),
            done: t + Duration::from_millis(2010),
            outcome: Outcome::Ok,
            downstream_us: Some(8_000),
            kernel_stamped: true,
        });
        assert!(r.corrected.max() >= 2_009_000);
        assert!(r.service.max() <= 10_100);
        assert!(r.send_lag.min() >= 1_999_000);
        assert!(r.caller_overhead.max() <= 2_100);
        r.add(&Shot {
            index: 1,
            due: t,
            sent: None,
            done: t,
            outcome: Outcome::Dropped,
            downstream_us: None,
            kernel_stamped: false,
        });
        r.add(&Shot {
            index: 2,
            due: t,
            sent: Some(t),
            done: t,
            outcome: Outcome::Status(502),
            downstream_us: None,
            kernel_stamped: false,
        });
        assert_eq!((r.sent, r.ok, r.kernel_stamped), (2, 1, 1));
        assert_eq!(r.errors["dropped"], 1);
        assert_eq!(r.errors["http_502"], 1);
        assert_eq!(r.corrected.len(), 1, "errors must not enter the latency histogram");
    }

    #[tokio::test]
    async fn failures_after_the_cut_are_left_out_and_answers_still_count() {
        let t = Instant::now();
        let shot = |index: u64, done_ms: u64, outcome: Outcome| Shot {
            index,
            due: t,
            sent: Some(t),
            done: t + Duration::from_millis(done_ms),
            outcome,
            downstream_us: None,
            kernel_stamped: false,
        };
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let cut = Arc::new(std::sync::OnceLock::new());
        cut.set(t + Duration::from_millis(100)).unwrap();
        // Before the cut a failure counts; after it, a failure is the tiers
        // being stopped and is left out, while an answer is still an answer.
        tx.send(shot(0, 50, Outcome::BadResponse)).unwrap();
        tx.send(shot(1, 150, Outcome::BadResponse)).unwrap();
        tx.send(shot(2, 160, Outcome::Connect)).unwrap();
        tx.send(shot(3, 170, Outcome::Ok)).unwrap();
        drop(tx);
        let r = collect(rx, Arc::new(AtomicU64::new(0)), CancellationToken::new(), cut).await;
        assert_eq!((r.sent, r.ok, r.left_out), (2, 1, 2));
        assert_eq!(r.errors.get("bad_response"), Some(&1));
        assert!(!r.errors.contains_key("connect"));
    }
}
