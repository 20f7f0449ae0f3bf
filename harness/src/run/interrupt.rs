//! How the user stops a run. The first Ctrl-C or SIGTERM *stops* it: sending
//! ends at once, requests in flight get a short grace, the tiers drain, and
//! the partial report is written. A second one *cuts* every wait that is left
//! (the drain, a `/stats` read, the tiers' own drain) so that what was
//! finished is written at once. The signals themselves are caught in `app`;
//! this is what the run sees of them.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    stop: CancellationToken,
    cut: CancellationToken,
    inner: Arc<Signals>,
}

#[derive(Debug, Default)]
struct Signals {
    count: AtomicU32,
    /// The first signal's name (`SIGINT`, `SIGTERM`).
    first: Mutex<Option<String>>,
    /// When the second arrived.
    cut_at: Arc<OnceLock<Instant>>,
}

impl Interrupt {
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Records one more signal named `name`: the first stops the run, the
    /// second cuts it short. Returns how many have arrived.
    pub fn signal(&self, name: &str) -> u32 {
        let n = self.inner.count.fetch_add(1, Ordering::SeqCst) + 1;
        if n == 1 {
            *self.inner.first.lock().unwrap_or_else(|e| e.into_inner()) = Some(name.to_owned());
            self.stop.cancel();
        } else {
            let _ = self.inner.cut_at.set(Instant::now());
            self.cut.cancel();
        }
        n
    }

    pub fn is_stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    pub fn is_cut(&self) -> bool {
        self.cut.is_cancelled()
    }

    /// Resolves at the first signal.
    pub async fn stopped(&self) {
        self.stop.cancelled().await;
    }

    /// When the second signal arrived, once it has: requests that fail from
    /// then on are left out (their tiers are stopped under them).
    pub fn cut_at(&self) -> Arc<OnceLock<Instant>> {
        self.inner.cut_at.clone()
    }

    /// Cancelled at the second signal: every wait that is left ends.
    pub fn cut_token(&self) -> &CancellationToken {
        &self.cut
    }

    /// The run's `status_reason`, naming the signal and, after a second one,
    /// what was cut short.
    pub fn reason(&self) -> String {
        let name = self.inner.first.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut reason = format!("interrupted by the user ({})", name.as_deref().unwrap_or("SIGINT"));
        if self.is_cut() {
            reason.push_str(
                "; a second signal cut the drain and the tiers' shutdown short: requests still in flight then are \
                 left out of the round's counts, its scheduled requests (which its achieved rate is over) among them",
            );
        }
        reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_signal_stops_and_the_second_cuts() {
        let i = Interrupt::new();
        assert!(!i.is_stopped() && !i.is_cut());
        assert_eq!(i.signal("SIGTERM"), 1);
        assert!(i.is_stopped() && !i.is_cut());
        assert_eq!(i.reason(), "interrupted by the user (SIGTERM)");
        assert_eq!(i.clone().signal("SIGINT"), 2);
        assert!(i.is_cut() && i.cut_token().is_cancelled());
        assert!(i.reason().starts_with("interrupted by the user (SIGTERM); a second signal cut"), "{}", i.reason());
        assert!(i.reason().ends_with("its scheduled requests (which its achieved rate is over) among them"));
    }
}
