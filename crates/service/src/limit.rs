//! A bound on the requests one tier works on at once; the excess is shed at
//! once (503 / RESOURCE_EXHAUSTED) instead of queueing until every request is
//! slow and memory runs out.
//!
//! The limit is per tier: the listeners of a tier share one [`InFlightLimit`],
//! each counting what it shed under the outcome `shed`. What a shed answer
//! looks like belongs to the transport, so the listener passes it in.

use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use telemetry::Counters;

use crate::around::{Around, Before};
use crate::body::hold_until_dropped;

/// The outcome label a shed request is counted under.
pub const SHED: &str = "shed";

/// The in-flight bound of one tier.
#[derive(Debug, Clone)]
pub struct InFlightLimit {
    permits: Arc<Semaphore>,
    max: usize,
    derived: bool,
}

/// Never below this: four HTTP/2 connections' worth of streams at the default
/// per-connection limit.
pub const MIN_DEFAULT_MAX_IN_FLIGHT: usize = 65_536;

impl InFlightLimit {
    pub fn new(max: usize) -> Self {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        InFlightLimit { permits: Arc::new(Semaphore::new(max)), max, derived: false }
    }

    /// The limit a `--max-in-flight` flag asked for, or [`Self::default_max`].
    pub fn from_flag(flag: Option<usize>) -> Self {
        match flag {
            Some(max) => Self::new(max),
            None => InFlightLimit { derived: true, ..Self::new(Self::default_max()) },
        }
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// Where the limit came from, for a tier's settings.
    pub fn source(&self) -> String {
        if self.derived {
            format!("default: the larger of the open-files limit and {MIN_DEFAULT_MAX_IN_FLIGHT}")
        } else {
            "--max-in-flight".to_owned()
        }
    }

    /// The default bound, generous enough never to bind in a measured run:
    /// the larger of the open-files limit (over HTTP/1.1 every request in
    /// flight holds a socket, so a run whose connections fit in that limit
    /// stays under it) and [`MIN_DEFAULT_MAX_IN_FLIGHT`] (HTTP/2 carries many
    /// requests on one socket).
    pub fn default_max() -> usize {
        let open_files = rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(0, |(soft, _hard)| soft);
        usize::try_from(open_files).unwrap_or(usize::MAX).max(MIN_DEFAULT_MAX_IN_FLIGHT)
    }

    /// A permit for one more request in flight, or `None` at the limit.
    pub fn try_admit(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.clone().try_acquire_owned().ok()
    }

    /// Every request (fallbacks included) admitted only while fewer than the
    /// limit are in flight; a request counts until its response body has
    /// been sent or dropped. Refused ones get `shed(max)` and are counted on
    /// `counters` as [`SHED`]. A layer to fold with others ([`crate::rest_edge`]).
    pub(crate) fn admission(&self, counters: Arc<Counters>, shed: fn(usize) -> Response) -> impl Around {
        Limited { limit: self.clone(), counters, shed }
    }
}

struct Limited {
    limit: InFlightLimit,
    counters: Arc<Counters>,
    shed: fn(usize) -> Response,
}

impl Around for Limited {
    type Carry = OwnedSemaphorePermit;

    fn before(&self, _: &mut Request) -> Before<OwnedSemaphorePermit> {
        match self.limit.try_admit() {
            Some(permit) => Before::Pass(permit),
            None => {
                self.counters.record(SHED);
                Before::Answer((self.shed)(self.limit.max))
            }
        }
    }

    /// A handler's own answer holds its work permit in its body
    /// ([`crate::bytes_holding`]); this holds the in-flight one there too.
    fn after(&self, resp: Response, permit: OwnedSemaphorePermit) -> Response {
        resp.map(|body| hold_until_dropped(body, permit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_never_below_the_floor_or_the_open_files_limit() {
        let max = InFlightLimit::default_max();
        assert!(max >= MIN_DEFAULT_MAX_IN_FLIGHT);
        let (soft, _) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
        assert!(max as u64 >= soft);
        assert_eq!(InFlightLimit::new(0).max(), 1, "a limit of zero would refuse everything");
    }
}
