//! A bound on the requests one tier works on at once; the excess is shed at
//! once (503 / RESOURCE_EXHAUSTED) instead of queueing until every request is
//! slow and memory runs out.
//!
//! The limit is per tier: the listeners of a tier share one [`InFlightLimit`],
//! each counting what it shed under the outcome `shed`. What a shed answer
//! looks like belongs to the transport, so the listener passes it in.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::Router;
use axum::extract::Request;
use axum::response::Response;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::{Layer, Service};

use telemetry::Counters;

use crate::body::hold_until_dropped;
use crate::work::HeldUntilSent;

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

    /// `router` with every request (fallbacks included) admitted only while
    /// fewer than the limit are in flight; a request counts until its response
    /// body has been sent or dropped. Refused ones get `shed(max)` and are
    /// counted on `counters` as [`SHED`].
    ///
    /// A hand-written layer, not `axum::middleware::from_fn`: that boxes a
    /// future and clones a boxed service on every call, which a tier pays
    /// for and an idiomatic service without a limit does not (bench/README.md,
    /// "Ratios: the tool against its peers, in one run").
    pub fn apply(&self, router: Router, counters: Arc<Counters>, shed: fn(usize) -> Response) -> Router {
        router.layer(LimitLayer(Arc::new(Shared { limit: self.clone(), counters, shed })))
    }
}

struct Shared {
    limit: InFlightLimit,
    counters: Arc<Counters>,
    shed: fn(usize) -> Response,
}

#[derive(Clone)]
struct LimitLayer(Arc<Shared>);

impl<S> Layer<S> for LimitLayer {
    type Service = Limited<S>;

    fn layer(&self, inner: S) -> Limited<S> {
        Limited { inner, shared: self.0.clone() }
    }
}

/// A service behind the in-flight limit ([`InFlightLimit::apply`]).
#[derive(Clone)]
struct Limited<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> Service<Request> for Limited<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Admitted<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        match self.shared.limit.try_admit() {
            Some(permit) => Admitted::Serving { answer: self.inner.call(req), permit: Some(permit) },
            None => {
                self.shared.counters.record(SHED);
                Admitted::Shed(Some((self.shared.shed)(self.shared.limit.max)))
            }
        }
    }
}

/// The answer of a [`Limited`] service: the inner one's, holding its permit
/// until the body is sent or dropped, or the shed answer.
enum Admitted<F> {
    Serving { answer: F, permit: Option<OwnedSemaphorePermit> },
    Shed(Option<Response>),
}

impl<F> Future for Admitted<F>
where
    F: Future<Output = Result<Response, Infallible>> + Unpin,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Admitted::Serving { answer, permit } => {
                let Ok(resp) = ready!(Pin::new(answer).poll(cx));
                let permit = permit.take().expect("an answer is polled until it is ready, not after");
                Poll::Ready(Ok(hold_answer(resp, permit)))
            }
            Admitted::Shed(resp) => Poll::Ready(Ok(resp.take().expect("a shed answer is taken once"))),
        }
    }
}

/// `resp` with `permit` and what its handler holds until it is sent
/// ([`HeldUntilSent`]) moved into its body.
fn hold_answer<T: Send + Unpin + 'static>(mut resp: Response, permit: T) -> Response {
    let held = resp.extensions_mut().remove::<HeldUntilSent>();
    resp.map(|body| hold_until_dropped(body, (permit, held)))
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
