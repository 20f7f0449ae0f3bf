//! The one shape of a tier's edge layers: something done before each call
//! and something after, around whatever the router serves. Each layer is
//! one [`Around`], a concrete future, no box: `axum::middleware::from_fn`
//! boxes a future and clones a boxed service on every call, which a tier
//! paid for and an idiomatic service without the layer does not
//! (bench/README.md, "Ratios: the tool against its peers, in one run").

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::Router;
use axum::extract::Request;
use axum::response::Response;
use tower::{Layer, Service};

/// What an edge layer does around each call.
pub trait Around: Send + Sync + 'static {
    /// What `before` hands to `after`.
    type Carry: Send + 'static;

    /// What to carry to `after`, the request passed on as `req` is left, or
    /// the answer to give instead (the inner service is not called, `after`
    /// is not). The request is changed in place, not moved: a request is
    /// some two hundred bytes, and a pair of layers moved it through each.
    fn before(&self, req: &mut Request) -> Before<Self::Carry>;

    /// The answer to give for the inner service's `resp`.
    fn after(&self, resp: Response, carry: Self::Carry) -> Response;
}

/// What [`Around::before`] decided.
pub enum Before<C> {
    /// Call the inner service with the request; carry `C` to `after`.
    Pass(C),
    /// Answer this, without calling the inner service.
    Answer(Response),
}

/// Two layers as one: `.0` outside, `.1` inside, as if `.1` were layered
/// first and `.0` over it (an answer of `.1`'s own `before` still passes
/// `.0`'s `after`). One layer of several moves a request and its answer
/// once, where a stack of [`around`]s moved them through each layer's
/// future and service (callgrind, the paced REST downstream's three folded
/// into one: 95,354 to 92,702 instructions a call, bench/README.md, issue 56).
impl<A: Around, B: Around> Around for (A, B) {
    type Carry = (A::Carry, B::Carry);

    fn before(&self, req: &mut Request) -> Before<Self::Carry> {
        match self.0.before(req) {
            Before::Answer(resp) => Before::Answer(resp),
            Before::Pass(outer) => match self.1.before(req) {
                Before::Pass(inner) => Before::Pass((outer, inner)),
                Before::Answer(resp) => Before::Answer(self.0.after(resp, outer)),
            },
        }
    }

    fn after(&self, resp: Response, (outer, inner): Self::Carry) -> Response {
        self.0.after(self.1.after(resp, inner), outer)
    }
}

/// A layer that may be left out: `None` passes every call as it came.
impl<A: Around> Around for Option<A> {
    type Carry = Option<A::Carry>;

    fn before(&self, req: &mut Request) -> Before<Self::Carry> {
        match self {
            None => Before::Pass(None),
            Some(a) => match a.before(req) {
                Before::Pass(carry) => Before::Pass(Some(carry)),
                Before::Answer(resp) => Before::Answer(resp),
            },
        }
    }

    fn after(&self, resp: Response, carry: Self::Carry) -> Response {
        match (self, carry) {
            (Some(a), Some(carry)) => a.after(resp, carry),
            _ => resp,
        }
    }
}

/// `router` with `around` done around every call (fallbacks included), as
/// a layer axum puts over each route: for a router that is merged or nested
/// into another. A listener's own edge is [`wrap`]ped around its router.
pub fn around<A: Around>(router: Router, around: A) -> Router {
    router.layer(AroundLayer(Arc::new(around)))
}

/// `inner` with `around` done around every call, as the one service a
/// listener serves ([`crate::serve`]). axum's `Router::layer` boxes the layer
/// over each route, so a call through it clones a boxed service and boxes
/// a future once more than a call through this (callgrind, the paced REST
/// listener serving Connect: bench/README.md, issue 56).
pub fn wrap<S, A: Around>(inner: S, around: A) -> Wrapped<S, A> {
    Wrapped { inner, around: Arc::new(around) }
}

struct AroundLayer<A>(Arc<A>);

impl<A> Clone for AroundLayer<A> {
    fn clone(&self) -> Self {
        AroundLayer(self.0.clone())
    }
}

impl<S, A> Layer<S> for AroundLayer<A> {
    type Service = Wrapped<S, A>;

    fn layer(&self, inner: S) -> Wrapped<S, A> {
        Wrapped { inner, around: self.0.clone() }
    }
}

/// A service with an [`Around`] done around each call ([`wrap`]).
pub struct Wrapped<S, A> {
    inner: S,
    around: Arc<A>,
}

impl<S: Clone, A> Clone for Wrapped<S, A> {
    fn clone(&self) -> Self {
        Wrapped { inner: self.inner.clone(), around: self.around.clone() }
    }
}

/// Any request body, as an axum `Router` takes (tonic-web's service hands
/// on tonic's): an axum `Body` is passed as it is, another is boxed into one.
impl<S, A, B> Service<http::Request<B>> for Wrapped<S, A>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Unpin,
    A: Around,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Answer<S::Future, A>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let mut req = req.map(axum::body::Body::new);
        match self.around.before(&mut req) {
            Before::Pass(carry) => {
                Answer::Inner { answer: self.inner.call(req), carry: Some(carry), around: self.around.clone() }
            }
            Before::Answer(resp) => Answer::Ready(Some(resp)),
        }
    }
}

/// The answer of a [`Wrapped`] service.
pub enum Answer<F, A: Around> {
    Inner { answer: F, carry: Option<A::Carry>, around: Arc<A> },
    Ready(Option<Response>),
}

// Nothing here is pinned structurally: `F` is required to be Unpin, the
// rest is moved out by value.
impl<F: Unpin, A: Around> Unpin for Answer<F, A> {}

impl<F, A> Future for Answer<F, A>
where
    F: Future<Output = Result<Response, Infallible>> + Unpin,
    A: Around,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Answer::Inner { answer, carry, around } => {
                let Ok(resp) = ready!(Pin::new(answer).poll(cx));
                let carry = carry.take().expect("an answer is polled until it is ready, not after");
                Poll::Ready(Ok(around.after(resp, carry)))
            }
            Answer::Ready(resp) => Poll::Ready(Ok(resp.take().expect("an answer is taken once"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::get;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tower::ServiceExt;

    /// Refuses `/no`, counts what it let through after the answer.
    struct Gate(Arc<AtomicUsize>);

    impl Around for Gate {
        type Carry = &'static str;

        fn before(&self, req: &mut Request) -> Before<&'static str> {
            if req.uri().path() == "/no" {
                return Before::Answer(Response::builder().status(403).body(Body::empty()).unwrap());
            }
            Before::Pass("through")
        }

        fn after(&self, mut resp: Response, carry: &'static str) -> Response {
            self.0.fetch_add(1, Ordering::Relaxed);
            resp.headers_mut().insert("x-carry", carry.parse().unwrap());
            resp
        }
    }

    #[tokio::test]
    async fn before_answers_or_passes_and_after_sees_what_was_carried() {
        let after = Arc::new(AtomicUsize::new(0));
        let app = around(Router::new().route("/yes", get(|| async { "yes" })), Gate(after.clone()));
        let yes = app.clone().oneshot(Request::get("/yes").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!((yes.status().as_u16(), yes.headers()["x-carry"].to_str().unwrap()), (200, "through"));
        let missing = app.clone().oneshot(Request::get("/gone").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(missing.status(), 404, "the fallback is wrapped too");
        assert!(missing.headers().contains_key("x-carry"));
        let no = app.oneshot(Request::get("/no").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(no.status(), 403);
        assert!(!no.headers().contains_key("x-carry"), "after is not called on before's answer");
        assert_eq!(after.load(Ordering::Relaxed), 2);
    }

    /// Marks its answers with its name, after what is already there; answers
    /// `/<name>` itself.
    struct Mark(&'static str);

    impl Around for Mark {
        type Carry = &'static str;

        fn before(&self, req: &mut Request) -> Before<&'static str> {
            if req.uri().path().trim_start_matches('/') == self.0 {
                return Before::Answer(Response::builder().status(403).body(Body::empty()).unwrap());
            }
            Before::Pass(self.0)
        }

        fn after(&self, mut resp: Response, carry: &'static str) -> Response {
            resp.headers_mut().append("x-mark", carry.parse().unwrap());
            resp
        }
    }

    async fn marks(app: Router, path: &str) -> (u16, Vec<String>) {
        let resp = app.oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
        let marks = resp.headers().get_all("x-mark").iter().map(|v| v.to_str().unwrap().to_owned()).collect();
        (resp.status().as_u16(), marks)
    }

    #[tokio::test]
    async fn a_pair_is_one_layer_answering_as_the_two_stacked() {
        let inner = || Router::new().route("/yes", get(|| async { "yes" }));
        let stacked = around(around(inner(), Mark("inner")), Mark("outer"));
        let paired = around(inner(), (Mark("outer"), Mark("inner")));
        for path in ["/yes", "/gone", "/inner", "/outer"] {
            let (want, got) = (marks(stacked.clone(), path).await, marks(paired.clone(), path).await);
            assert_eq!(got, want, "{path}");
        }
        // What the two stacked do: the inner's after first; an inner
        // refusal still passes the outer's after; an outer one passes none.
        assert_eq!(marks(paired.clone(), "/yes").await, (200, vec!["inner".into(), "outer".into()]));
        assert_eq!(marks(paired.clone(), "/inner").await, (403, vec!["outer".into()]));
        assert_eq!(marks(paired, "/outer").await, (403, vec![]));
    }
}
