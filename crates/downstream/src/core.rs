//! The downstream's work, shared by both transports.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use payload::{FetchRequest, FetchResponse, Limits, PayloadError};

/// Validates a request, waits the service time, and builds the response.
#[derive(Debug, Clone)]
pub struct Core {
    pub delay: Duration,
    pub jitter: Duration,
    pub limits: Limits,
    /// Where the service-time waits are kept (see `timer`).
    pub timer: crate::timer::Timer,
}

impl Core {
    /// The simulated service time of `req`: `delay` plus a jitter in
    /// `[0, jitter]` derived from the request id, so a run is reproducible.
    pub fn service_time(&self, req: &FetchRequest) -> Duration {
        if self.jitter.is_zero() {
            return self.delay;
        }
        let mut h = DefaultHasher::new();
        req.request_id.hash(&mut h);
        let jitter_us = self.jitter.as_micros().min(u128::from(u64::MAX)) as u64;
        self.delay + Duration::from_micros(h.finish() % (jitter_us + 1))
    }

    pub async fn fetch(&self, req: FetchRequest) -> Result<FetchResponse, PayloadError> {
        payload::validate(&req, &self.limits)?;
        // The wait parks this request without holding a thread, so a 500 ms
        // service time never starves the runtime (the failure mode of blocking
        // sleeps in published comparisons); it ends within about 0.1 ms of the
        // service time, and a zero delay touches no timer (see `timer`).
        self.timer.wait(self.service_time(&req)).await;
        Ok(payload::respond(&req))
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
            timer: Default::default(),
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
        assert!(matches!(c.fetch(bad).await, Err(PayloadError::TooManyItems { .. })));
        let resp = c.fetch(req("ok")).await.unwrap();
        assert_eq!(payload::verify(&req("ok"), &resp), Ok(()));
    }
}
