//! The downstream's work, shared by both transports.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use payload::{FetchRequest, FetchResponse, Limits, PayloadError};
use service::{Refused, WorkBudget, WorkPermit};

/// Validates a request, admits its work, waits the service time, and builds
/// the response.
#[derive(Debug, Clone)]
pub struct Core {
    pub delay: Duration,
    pub jitter: Duration,
    pub limits: Limits,
    /// The records and uploads the tier holds at once (`--max-work-bytes`).
    pub budget: WorkBudget,
}

/// Why a request got no records.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Payload(#[from] PayloadError),
    /// Its work did not fit the tier's budget: shed.
    #[error(transparent)]
    Refused(#[from] Refused),
}

impl Core {
    /// The simulated service time of `req`: `delay` plus a jitter in
    /// `[0, jitter]` derived from the request id, so a run is reproducible.
    pub fn service_time(&self, req: &FetchRequest) -> Duration {
        self.service_time_of(&req.request_id)
    }

    /// The service time of the request whose id is `key`.
    pub(crate) fn service_time_of(&self, key: impl Hash) -> Duration {
        if self.jitter.is_zero() {
            return self.delay;
        }
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        let jitter_us = self.jitter.as_micros().min(u128::from(u64::MAX)) as u64;
        self.delay + Duration::from_micros(h.finish() % (jitter_us + 1))
    }

    /// The answer to `req`, with the permit its work holds until the answer
    /// has been sent (the caller keeps it alive that long).
    pub async fn fetch(&self, req: FetchRequest) -> Result<(FetchResponse, WorkPermit), FetchError> {
        payload::validate(&req, &self.limits)?;
        // Weighed before the wait: what a request will build is held from
        // the moment it is accepted.
        let permit = self.budget.try_admit(self.budget.weigh(u64::from(req.items), req.body.len() as u64))?;
        // The wait parks this request without holding a thread, so a 500 ms
        // service time never starves the runtime (the failure mode of blocking
        // sleeps in published comparisons); it waits on the runtime's own
        // timer as a real handler waiting on I/O would, never less than the
        // service time, and a zero delay touches no timer (see `timer`).
        crate::timer::wait(self.service_time(&req)).await;
        Ok((payload::respond(&req), permit))
    }

    /// A call of a team's own method (`crate::custom`): admits `weight`
    /// bytes of work and waits the service time of call `n` (its jitter
    /// derived from `n`); the permit is held until the answer is sent.
    pub async fn hold(&self, n: u64, weight: u64) -> Result<WorkPermit, FetchError> {
        let permit = self.budget.try_admit(weight)?;
        crate::timer::wait(self.service_time_of(n)).await;
        Ok(permit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(jitter_ms: u64) -> Core {
        Core {
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(jitter_ms),
            limits: Limits::default(),
            budget: WorkBudget::new(service::DEFAULT_MAX_WORK_BYTES),
        }
    }

    fn req(id: &str) -> FetchRequest {
        FetchRequest { request_id: id.into(), items: 2, ..FetchRequest::default() }
    }

    #[test]
    fn jitter_is_bounded_and_reproducible() {
        let c = core(5);
        for i in 0..200 {
            let r = req(&format!("r{i}"));
            let t = c.service_time(&r);
            assert!(t >= c.delay && t <= c.delay + c.jitter, "{t:?}");
            assert_eq!(t, c.service_time(&r));
        }
        assert_eq!(core(0).service_time(&req("x")), Duration::from_millis(10));
    }

    #[tokio::test]
    async fn rejects_before_waiting_and_answers_after() {
        let c = core(0);
        let mut bad = req("x");
        bad.items = Limits::DEFAULT_MAX_ITEMS + 1;
        assert!(matches!(c.fetch(bad).await, Err(FetchError::Payload(PayloadError::TooManyItems { .. }))));
        let (resp, _permit) = c.fetch(req("ok")).await.unwrap();
        assert_eq!(payload::verify(&req("ok"), &resp), Ok(()));
    }

    #[tokio::test]
    async fn work_is_held_from_admission_until_the_answer_is_dropped() {
        let c = Core { budget: WorkBudget::new(6 * 1024 * 1024), ..core(0) };
        let big = FetchRequest { request_id: "big".into(), items: 10_000, ..FetchRequest::default() };
        let weight = c.budget.weigh(10_000, 0);
        let (first, second) = tokio::join!(c.fetch(big.clone()), c.fetch(big.clone()));
        let held: Vec<_> = [first, second].into_iter().filter_map(Result::ok).collect();
        assert_eq!(held.len(), 2, "two fit under seven eighths of 6 MiB, three do not");
        assert_eq!(c.budget.used(), 2 * weight);
        let third = c.fetch(big.clone()).await;
        assert!(matches!(third, Err(FetchError::Refused(Refused::Busy { .. }))), "{third:?}");
        assert!(c.fetch(req("small")).await.is_ok(), "a small request is still served");
        drop(held);
        assert_eq!(c.budget.used(), 0);
        assert!(c.fetch(big).await.is_ok());
    }
}
