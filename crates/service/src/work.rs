//! A bound on the work a tier holds at once, weighed by what it costs in
//! memory, not by how many requests carry it: a request for 10,000 records
//! weighs as much as a thousand requests for ten. [`crate::InFlightLimit`]
//! counts requests; this counts their records and uploads, so a few large
//! requests cannot take a tier to gigabytes and make every other request
//! wait behind them.
//!
//! A request is weighed once its size is known (decoded), admitted if its
//! weight fits, and holds its weight until its answer has been sent or
//! dropped (by the answer's body: [`crate::bytes_holding`],
//! [`HeldUntilSent`]). One that does not fit is shed at once, as an
//! over-limit request is (503 / RESOURCE_EXHAUSTED, counted `shed`). The last
//! eighth of the budget is kept for small requests (at most 1/1024 of it
//! each), so requests of the usual size are still served while large ones
//! fill the rest.
//!
//! A sequence of items (`bench.v1.Items`) weighs in the same budget: a page
//! weighs its items, each its record and its filler [`FILLER_COPIES`] times
//! (made, encoded, framed), from admission until the page is sent; a stream
//! makes one item at a time and weighs one item for its whole life.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of work one tier holds at once by default: a few hundred MiB of
/// records and uploads in flight at most.
pub const DEFAULT_MAX_WORK_BYTES: u64 = 256 * 1024 * 1024;

/// What one record the downstream holds in flight is weighed at by default:
/// its built form and its encoding, both alive while the answer is sent. A
/// caller holds more of each record (the decoded answers and the front
/// answer built from them) and weighs it at twice this (`caller::front`).
pub const WORK_BYTES_PER_RECORD: u64 = 256;

/// How many copies of an item's filler are alive at once while it is sent:
/// the bytes made, their base64 in the item's JSON (4/3 of them), and the
/// framed line or page holding that JSON (4/3 again), rounded up.
pub const FILLER_COPIES: u64 = 4;

/// The work one tier holds at once, shared by its listeners.
#[derive(Debug, Clone)]
pub struct WorkBudget {
    max: u64,
    per_record: u64,
    used: Arc<AtomicU64>,
}

/// A request's admitted weight, given back when dropped.
#[derive(Debug)]
pub struct WorkPermit {
    used: Arc<AtomicU64>,
    weight: u64,
}

impl Drop for WorkPermit {
    fn drop(&mut self) {
        self.used.fetch_sub(self.weight, Ordering::AcqRel);
    }
}

/// Why a request was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// It does not fit now: the client may retry later.
    #[error(
        "this service holds {used} of its {max} bytes of work in flight and this request weighs {weight}; retry later"
    )]
    Busy { weight: u64, used: u64, max: u64 },
    /// It would never fit: no retry helps.
    #[error("this request weighs {weight} bytes of work, more than this service holds at once ({max})")]
    TooLarge { weight: u64, max: u64 },
}

impl WorkBudget {
    pub fn new(max_bytes: u64) -> Self {
        WorkBudget { max: max_bytes.max(1), per_record: WORK_BYTES_PER_RECORD, used: Arc::new(AtomicU64::new(0)) }
    }

    /// Weighs each record at `bytes` instead of [`WORK_BYTES_PER_RECORD`].
    pub fn per_record(self, bytes: u64) -> Self {
        WorkBudget { per_record: bytes, ..self }
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// Bytes of work held now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// The weight of a request for `records` records carrying `upload_bytes`.
    pub fn weigh(&self, records: u64, upload_bytes: u64) -> u64 {
        records.saturating_mul(self.per_record).saturating_add(upload_bytes)
    }

    /// The weight of `items` items of a sequence carrying `item_bytes` of
    /// filler each: a page of that many items, or (with 1) an open stream.
    pub fn weigh_items(&self, items: u64, item_bytes: u64) -> u64 {
        items.saturating_mul(self.per_record.saturating_add(item_bytes.saturating_mul(FILLER_COPIES)))
    }

    /// The largest weight a request may have: seven eighths of the budget
    /// (the last eighth is kept for small requests).
    pub fn largest(&self) -> u64 {
        self.max - self.max / 8
    }

    /// Admits `weight` if it fits under the budget (a large request: under
    /// seven eighths of it), without waiting.
    pub fn try_admit(&self, weight: u64) -> Result<WorkPermit, Refused> {
        let small = weight <= self.max / 1024;
        let limit = if small { self.max } else { self.largest() };
        if weight > limit {
            return Err(Refused::TooLarge { weight, max: limit });
        }
        let mut used = self.used.load(Ordering::Acquire);
        loop {
            if used + weight > limit {
                return Err(Refused::Busy { weight, used, max: self.max });
            }
            match self.used.compare_exchange_weak(used, used + weight, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(WorkPermit { used: self.used.clone(), weight }),
                Err(now) => used = now,
            }
        }
    }

    /// The budget as a tier's settings report it.
    pub fn settings(&self) -> serde_json::Value {
        serde_json::json!({
            "max_work_bytes": self.max,
            "work_bytes_per_record": self.per_record,
            "work_reserved_for_small_requests": "the last eighth, for requests of at most 1/1024 of the budget",
        })
    }
}

/// Something a response keeps alive until its body has been sent or
/// dropped (a [`WorkPermit`]), put in the response's extensions by a gRPC
/// handler, whose body tonic makes; the gRPC listener's edge moves it into
/// the body. A handler that makes its own body holds it there
/// ([`crate::bytes_holding`], or in the stream the body is made from).
#[derive(Clone)]
pub struct HeldUntilSent(#[allow(dead_code)] Arc<dyn std::any::Any + Send + Sync>);

impl HeldUntilSent {
    pub fn new<T: Send + Sync + 'static>(value: T) -> Self {
        HeldUntilSent(Arc::new(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_is_held_until_the_permit_drops() {
        let budget = WorkBudget::new(1024 * 1024);
        let a = budget.try_admit(500_000).unwrap();
        let b = budget.try_admit(400_000).unwrap();
        assert_eq!(budget.used(), 900_000);
        assert!(matches!(budget.try_admit(100_000), Err(Refused::Busy { .. })), "a large one keeps the reserve free");
        let small = budget.try_admit(1024).expect("a small one may use the reserve");
        drop((a, small));
        assert_eq!(budget.used(), 400_000);
        assert!(budget.try_admit(400_000).is_ok());
        drop(b);
        assert_eq!(budget.used(), 0);
        assert!(matches!(budget.try_admit(1024 * 1024), Err(Refused::TooLarge { .. })));
    }

    #[test]
    fn many_threads_never_overshoot() {
        let budget = WorkBudget::new(1_000_000);
        let held = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        if let Ok(p) = budget.try_admit(10_000) {
                            held.lock().unwrap().push(p);
                        }
                    }
                });
            }
        });
        let held = held.into_inner().unwrap();
        assert_eq!(budget.used(), held.len() as u64 * 10_000);
        assert_eq!(held.len(), 87, "seven eighths of a million in weights of ten thousand");
    }
}
