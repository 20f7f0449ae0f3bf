//! The accept loop every listener of every tier runs.
//!
//! One loop, so both transports (and the admin and front listeners) get the same
//! socket options, the same HTTP limits and the same drain behaviour: a
//! difference between gRPC and REST in a report then comes from the transports,
//! not from how they were served.
//!
//! Besides serving, the loop closes what a client leaves behind: a connection
//! without a complete first request within the header-read timeout, an
//! HTTP/1.1 one without its next request head within it, one with no request
//! in flight for the idle timeout (HTTP/2 gets a GOAWAY), and one whose peer
//! stops answering HTTP/2 PINGs.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use futures::FutureExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::{Service, ServiceExt};

use crate::body::{ConnectionBodies, hold_until_dropped};
use telemetry::{Counters, CountingStream};

/// Which HTTP versions a listener speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocols {
    /// HTTP/1.1, and HTTP/2 cleartext with prior knowledge (detected by preface).
    Auto,
    /// HTTP/2 cleartext only (gRPC).
    Http2Only,
}

/// HTTP settings that affect fairness; set explicitly and reported in `/stats`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ServerSettings {
    pub protocols: Protocols,
    /// Most concurrent HTTP/2 streams one client connection may open.
    pub http2_max_concurrent_streams: u32,
    /// Streams a client may reset before they were accepted, before the
    /// connection is closed (HTTP/2 rapid-reset protection). A caller whose
    /// calls time out while the service is stalled resets every one of them,
    /// so the limit must sit above what a stall produces.
    pub http2_max_pending_accept_reset_streams: usize,
    /// A client must finish sending a request head within this time (the first
    /// one on a connection, HTTP/1.1 or HTTP/2, and every later HTTP/1.1 one,
    /// timed from the end of the answer before it); otherwise the connection
    /// is closed. Kept by the connection's own control, not by a timer per
    /// head: an HTTP/1.1 connection with no request in flight for this long
    /// is closed, the bound hyper's per-head timer keeps (which starts as
    /// soon as the answer before is sent).
    #[serde(with = "millis")]
    pub header_read_timeout: Duration,
    /// A connection with no request in flight (HTTP/2: no open stream) for
    /// this long is closed: HTTP/2 with GOAWAY once its last stream is done
    /// (gRPC's MAX_CONNECTION_IDLE). PINGs do not count as activity.
    #[serde(with = "millis")]
    pub idle_timeout: Duration,
    /// An HTTP/2 PING is sent after this long without a frame from the peer
    /// (`None`: never).
    #[serde(with = "millis_opt")]
    pub http2_keep_alive_interval: Option<Duration>,
    /// A PING not answered within this time closes the connection: the peer
    /// is dead or wedged.
    #[serde(with = "millis")]
    pub http2_keep_alive_timeout: Duration,
    /// How long shutdown waits for in-flight requests before closing connections.
    #[serde(with = "millis")]
    pub drain_timeout: Duration,
    /// TCP_NODELAY on every accepted socket.
    pub tcp_nodelay: bool,
    /// An HTTP/1.1 client that sends its request and then shuts down its
    /// write side is still answered (hyper's default closes at the EOF
    /// without an answer; nginx answers).
    pub http1_half_close: bool,
    /// Accept queue length asked of the kernel.
    pub listen_backlog: u32,
    /// Request-body bytes one connection may hold at once, all its streams
    /// together (read but not yet decoded and dropped); the request whose
    /// body passes it fails (RESOURCE_EXHAUSTED / 400).
    pub max_connection_body_bytes: usize,
    /// A connection older than this (within ±10%, so connections opened
    /// together do not all end together) is ended gracefully: HTTP/2 gets a
    /// GOAWAY and its open streams finish; the client reconnects (grpc-go's
    /// `MaxConnectionAge`). `None`: connections live as long as they are used.
    #[serde(with = "millis_opt")]
    pub max_connection_age: Option<Duration>,
    /// The largest HTTP/2 header block a connection reads (HPACK-decoded);
    /// a larger one is refused by h2 itself with a bare 431. Set well above
    /// [`crate::MAX_HEADER_BYTES`], so that the listener's own check answers
    /// first, in its own shape (a JSON 431 on REST, RESOURCE_EXHAUSTED with a
    /// `grpc-status` on gRPC).
    pub http2_max_header_list_bytes: u32,
}

impl ServerSettings {
    pub const DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS: u32 = 16_384;
    /// Sixty-four of the largest default request bodies (1 MiB) in transit
    /// on one connection at once.
    pub const DEFAULT_MAX_CONNECTION_BODY_BYTES: usize = 64 * 1024 * 1024;
    /// Well under a minute: what one client's idle connections can pin is
    /// bounded by how fast it can open new ones.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
    /// Eight times [`crate::MAX_HEADER_BYTES`], under hyper's HTTP/1.1 read
    /// buffer (about 400 KiB), the bound on the other protocol.
    pub const DEFAULT_HTTP2_MAX_HEADER_LIST_BYTES: u32 = 8 * crate::errors::MAX_HEADER_BYTES as u32;

    pub fn new(protocols: Protocols) -> Self {
        ServerSettings {
            protocols,
            http2_max_concurrent_streams: Self::DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS,
            http2_max_pending_accept_reset_streams: 4096,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            http2_keep_alive_interval: Some(Duration::from_secs(20)),
            http2_keep_alive_timeout: Duration::from_secs(20),
            drain_timeout: Duration::from_secs(5),
            tcp_nodelay: true,
            http1_half_close: true,
            listen_backlog: LISTEN_BACKLOG,
            max_connection_body_bytes: Self::DEFAULT_MAX_CONNECTION_BODY_BYTES,
            max_connection_age: None,
            http2_max_header_list_bytes: Self::DEFAULT_HTTP2_MAX_HEADER_LIST_BYTES,
        }
    }
}

/// `age` spread by up to ±10%, from `seed` (a connection's own number), as
/// grpc-go spreads `MaxConnectionAge`.
fn jittered(age: Duration, seed: u64) -> Duration {
    // SplitMix64: an even spread from consecutive seeds.
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let unit = (z >> 11) as f64 / (1u64 << 53) as f64;
    age.mul_f64(0.9 + 0.2 * unit)
}

mod millis {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
}

mod millis_opt {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_millis() as u64)),
            None => s.serialize_none(),
        }
    }
}

/// The accept queue every listener asks for (the kernel caps it at
/// `net.core.somaxconn`): a REST arm at thousands of requests per second opens
/// hundreds of connections at once, and a short queue would drop their SYNs.
pub const LISTEN_BACKLOG: u32 = 4096;

/// Binds a TCP listener on `addr` with [`LISTEN_BACKLOG`], naming the listener
/// in the error.
pub async fn bind(what: &str, addr: SocketAddr) -> io::Result<TcpListener> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("binding {what} listener on {addr}: {e}"));
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4() } else { tokio::net::TcpSocket::new_v6() }
        .map_err(named)?;
    socket.set_reuseaddr(true).map_err(named)?;
    socket.bind(addr).map_err(named)?;
    socket.listen(LISTEN_BACKLOG).map_err(named)
}

/// What a listener serves: an `axum::Router`, or a router with its edge
/// around it whole ([`crate::around::wrap`]), so that a request passes the
/// edge once, not as a layer axum boxes over each of its routes.
pub trait App:
    Service<Request, Response = Response, Error = Infallible, Future: Send + 'static> + Clone + Send + Sync + 'static
{
}

impl<T> App for T where
    T: Service<Request, Response = Response, Error = Infallible, Future: Send + 'static>
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// Serves `app` on `listener` until `shutdown` is cancelled, then stops
/// accepting, lets in-flight requests finish for up to `drain_timeout`, and
/// returns. With `counters`, every accepted connection is counted on them.
pub async fn serve(
    listener: TcpListener,
    app: impl App,
    counters: Option<Arc<Counters>>,
    settings: ServerSettings,
    shutdown: CancellationToken,
) {
    serve_tls(listener, app, counters, settings, None, shutdown).await;
}

/// [`serve`], with TLS on every accepted connection when `tls` is given. The
/// byte counter sits under TLS, so wire bytes include TLS records and the
/// handshake; each handshake (and what it negotiated) is counted on
/// `counters`, and one that does not finish within the header-read timeout
/// closes the connection.
pub async fn serve_tls<A: App>(
    listener: TcpListener,
    app: A,
    counters: Option<Arc<Counters>>,
    settings: ServerSettings,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: CancellationToken,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let builder = http_builder(&settings);
    // Every connection task is tracked so shutdown can wait for them to drain.
    let connections = TaskTracker::new();
    let mut accept_errors = LogLimiter::new(Duration::from_secs(1));
    let mut accepted_count = 0u64;

    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let tcp = match accepted {
            Ok((tcp, _peer)) => tcp,
            Err(e) => {
                accept_failed(&mut accept_errors, e).await;
                continue;
            }
        };
        if settings.tcp_nodelay {
            let _ = tcp.set_nodelay(true);
        }
        accepted_count += 1;
        let conn = Conn {
            builder: builder.clone(),
            app: app.clone(),
            settings,
            max_age: settings.max_connection_age.map(|age| jittered(age, accepted_count)),
            shutdown: shutdown.clone(),
            counters: counters.clone(),
        };
        conn.spawn(&connections, tcp, counters.clone(), acceptor.clone());
    }
    drop(listener);
    drain(connections, settings.drain_timeout).await;
}

/// The HTTP/1.1 and HTTP/2 connection builder for `settings`.
fn http_builder(settings: &ServerSettings) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // No timer per HTTP/1.1 head: [`Control`] bounds every head from the
    // connection's activity. hyper's timer was a boxed sleep armed and
    // dropped for every request, 1,543 instructions a call (callgrind, the
    // paced REST listener serving Connect, bench/README.md, issue 56).
    builder.http1().header_read_timeout(None).keep_alive(true).half_close(settings.http1_half_close);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(settings.http2_max_concurrent_streams)
        .max_pending_accept_reset_streams(settings.http2_max_pending_accept_reset_streams)
        .max_header_list_size(settings.http2_max_header_list_bytes)
        // Flow-control windows set explicitly (hyper's defaults, named in
        // `h2`), so the report's figures are what runs.
        .initial_stream_window_size(crate::h2::SERVER_STREAM_WINDOW_BYTES)
        .initial_connection_window_size(crate::h2::SERVER_CONNECTION_WINDOW_BYTES)
        .adaptive_window(crate::h2::ADAPTIVE_WINDOW)
        // A peer that stops answering PINGs is dead (or wedged): close its
        // connection instead of keeping its streams and buffers forever.
        .keep_alive_interval(settings.http2_keep_alive_interval)
        .keep_alive_timeout(settings.http2_keep_alive_timeout);
    match settings.protocols {
        Protocols::Auto => builder,
        Protocols::Http2Only => builder.http2_only(),
    }
}

/// After a failed accept (EMFILE and friends): back off briefly instead of
/// spinning; the connections already open keep being served. The condition
/// lasts as long as the connections that cause it, so it is reported at most
/// once a second, not on every retry.
async fn accept_failed(accept_errors: &mut LogLimiter, e: io::Error) {
    if let Some(suppressed) = accept_errors.admit(Instant::now()) {
        if suppressed == 0 {
            tracing::warn!("accept failed: {e}");
        } else {
            tracing::warn!("accept failed: {e} ({suppressed} more since the last report)");
        }
    }
    tokio::time::sleep(ACCEPT_RETRY).await;
}

/// Lets the tracked connections finish, waiting for them at most
/// `drain_timeout`.
async fn drain(connections: TaskTracker, drain_timeout: Duration) {
    connections.close();
    tokio::select! {
        _ = connections.wait() => {}
        _ = tokio::time::sleep(drain_timeout) => {
            tracing::warn!("drain timed out after {:?}; closing remaining connections", drain_timeout);
        }
    }
}

/// How long the accept loop waits after a failed accept before trying again.
const ACCEPT_RETRY: Duration = Duration::from_millis(20);

/// One accepted connection and what it is served with.
struct Conn<A> {
    builder: auto::Builder<TokioExecutor>,
    app: A,
    settings: ServerSettings,
    /// This connection's age limit: [`ServerSettings::max_connection_age`], jittered.
    max_age: Option<Duration>,
    shutdown: CancellationToken,
    /// Where each request is counted as it starts (a measured listener).
    counters: Option<Arc<Counters>>,
}

impl<A: App> Conn<A> {
    /// Serves an accepted socket on a task of `connections`: counted on
    /// `counters` (under TLS, so wire bytes include its records), through
    /// TLS when there is an `acceptor`. One task kind per stream kind: a
    /// task's future is as large as the largest it could become, and one
    /// future for all four held a plain connection at the size of a TLS
    /// one (an idle plain connection's RSS 12.3 KiB, now 6.3:
    /// `bench/conn-memory.py`, bench/README.md, issue 56).
    fn spawn(
        self,
        connections: &TaskTracker,
        tcp: tokio::net::TcpStream,
        counters: Option<Arc<Counters>>,
        acceptor: Option<tokio_rustls::TlsAcceptor>,
    ) {
        // Each connection's future boxed once: it is some 9 to 12 KB (both
        // protocols' state, the timers, TLS), which `spawn` otherwise copied
        // whole three times on its way into the task (callgrind with its
        // cache simulation, bench/README.md, issue 56, twelfth pass).
        match (counters, acceptor) {
            (Some(c), Some(tls)) => {
                connections.spawn(Box::pin(async move {
                    self.run_tls(CountingStream::new(tcp, c.clone()), &tls, Some(&c)).await
                }));
            }
            (None, Some(tls)) => {
                connections.spawn(Box::pin(async move { self.run_tls(tcp, &tls, None).await }));
            }
            (Some(c), None) => {
                connections.spawn(Box::pin(self.run(TokioIo::new(CountingStream::new(tcp, c)))));
            }
            (None, None) => {
                connections.spawn(Box::pin(self.run(TokioIo::new(tcp))));
            }
        }
    }

    /// The TLS handshake (bounded by the header-read timeout, counted), then
    /// [`Conn::run`] over the decrypted stream.
    async fn run_tls<S>(self, io: S, tls: &tokio_rustls::TlsAcceptor, counters: Option<&Counters>)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let handshake = tokio::time::timeout(self.settings.header_read_timeout, tls.accept(io));
        let stream = tokio::select! {
            _ = self.shutdown.cancelled() => return,
            done = handshake => match done {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tracing::debug!("TLS handshake failed: {e}");
                    counters.inspect(|c| c.tls().failed());
                    return;
                }
                Err(_) => {
                    tracing::debug!("TLS handshake not finished within {:?}", self.settings.header_read_timeout);
                    counters.inspect(|c| c.tls().failed());
                    return;
                }
            },
        };
        counters.inspect(|c| c.tls().handshake(stream.get_ref().1));
        self.run(TokioIo::new(stream)).await;
    }

    async fn run<I>(self, io: I)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let activity = Arc::new(Activity::new());
        let refused = self.counters.clone();
        let (app, tracked, started) = (self.app, activity.clone(), self.counters);
        let bodies = ConnectionBodies::new(self.settings.max_connection_body_bytes);
        let service = TowerToHyperService::new(tower::service_fn(move |req: http::Request<Incoming>| {
            let req = req.map(|body| Body::new(bodies.count(body)));
            if let Some(c) = &started {
                c.request_started();
            }
            // The guard lives until the response body is dropped (sent or
            // abandoned), so a stream counts as open while it is answered.
            let open = tracked.request_started(req.version() < http::Version::HTTP_2);
            // A combinator, not `async move { answer.await }`: that future
            // held the answer twice (the captured one and the one awaited),
            // 1,032 bytes hyper moves into its slot for each request where
            // this is 512 (`-Zprint-type-sizes`; bench/README.md, issue 56,
            // twelfth pass).
            app.clone()
                .oneshot(req)
                .map(move |answer| answer.map(|resp| resp.map(|body| hold_until_dropped(body, open))))
        }));
        let control = Control {
            activity,
            settings: self.settings,
            max_age: self.max_age,
            shutdown: self.shutdown,
            counters: refused,
        };
        match self.settings.protocols {
            // The auto builder sniffs the protocol when upgrades are served,
            // whatever version it was told; only `serve_connection` honours
            // `http2_only`, so an HTTP/1.1 client gets no answer from an
            // HTTP/2-only listener.
            Protocols::Http2Only => {
                let conn = self.builder.serve_connection(io, service).into_owned();
                control.drive(conn, |c| c.graceful_shutdown()).await;
            }
            Protocols::Auto => {
                let conn = self.builder.serve_connection_with_upgrades(io, service).into_owned();
                control.drive(conn, |c| c.graceful_shutdown()).await;
            }
        }
    }
}

/// What closes a connection other than its peer: no first request in time,
/// no request in flight for the idle timeout, or shutdown.
struct Control {
    activity: Arc<Activity>,
    settings: ServerSettings,
    max_age: Option<Duration>,
    shutdown: CancellationToken,
    /// Where a request head hyper refused itself is counted.
    counters: Option<Arc<Counters>>,
}

/// What [`Control`] acts on, besides the connection ending.
enum Event {
    /// The header-read timeout since the connection opened has passed.
    FirstRequestDue,
    Shutdown,
    /// No request in flight for the idle timeout.
    Idle,
    /// The connection is as old as `--max-connection-age`.
    Aged,
}

impl Control {
    async fn drive<C>(self, conn: C, graceful_shutdown: fn(Pin<&mut C>))
    where
        C: Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>>,
    {
        tokio::pin!(conn);
        // A connection must deliver its first complete request head within the
        // header-read timeout (hyper enforces it for later HTTP/1.1 requests;
        // this covers HTTP/2 prefaces and frames that never complete too).
        let opened = tokio::time::Instant::now();
        let first_request_due = opened + self.settings.header_read_timeout;
        let aged_at = self.max_age.map(|age| opened + age);
        let (mut first_request_pending, mut closing) = (true, false);
        loop {
            let watched = self.next_event(first_request_pending.then_some(first_request_due), closing, aged_at);
            match conn_or_event(conn.as_mut(), watched).await {
                Ok(result) => {
                    if let Err(e) = result {
                        tracing::debug!("connection ended with error: {e}");
                        if let (Some(c), Some(label)) = (&self.counters, refused_head(&*e)) {
                            c.record(label);
                        }
                    }
                    return;
                }
                Err(Event::FirstRequestDue) => {
                    first_request_pending = false;
                    if !self.activity.seen_request() {
                        tracing::debug!(
                            "no complete request within {:?}; closing the connection",
                            self.settings.header_read_timeout
                        );
                        return;
                    }
                }
                // HTTP/2: GOAWAY, let open streams finish, close. HTTP/1.1:
                // finish the request in flight, then close.
                Err(Event::Shutdown) => {
                    closing = true;
                    graceful_shutdown(conn.as_mut());
                }
                // Counted in requests, not frames: a client that only answers
                // PINGs is idle (gRPC's MAX_CONNECTION_IDLE). On HTTP/1.1 this
                // is also a next head not read in time.
                Err(Event::Idle) => {
                    closing = true;
                    tracing::debug!(
                        "no request for {:?}; closing the connection",
                        self.activity.timeout(&self.settings)
                    );
                    graceful_shutdown(conn.as_mut());
                }
                // Old enough: GOAWAY, let open streams finish, close; the
                // client opens a new connection (and a balancer in front may
                // send it to another replica).
                Err(Event::Aged) => {
                    closing = true;
                    if let Some(c) = &self.counters {
                        c.connection_aged();
                    }
                    graceful_shutdown(conn.as_mut());
                }
            }
        }
    }

    /// The first of what is still watched: the first request's deadline
    /// while it is pending and, until the connection is closing, shutdown,
    /// idleness and age. Never ends when nothing is left to watch.
    async fn next_event(
        &self,
        first_request_due: Option<tokio::time::Instant>,
        closing: bool,
        aged_at: Option<tokio::time::Instant>,
    ) -> Event {
        let first_request = async {
            match first_request_due {
                Some(due) => tokio::time::sleep_until(due).await,
                None => std::future::pending().await,
            }
        };
        let aged = async {
            match aged_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = first_request => Event::FirstRequestDue,
            _ = self.shutdown.cancelled(), if !closing => Event::Shutdown,
            _ = self.activity.idle_for(&self.settings), if !closing => Event::Idle,
            _ = aged, if !closing => Event::Aged,
        }
    }
}

/// Waits for the connection to end (`Ok`) or for `watched` (`Err`), polling
/// `watched` only when one of its own wake-ups came. A `select!` of the two
/// polled every branch on every wake-up of the connection's task, each a
/// read or write of the connection (callgrind, paced: the REST
/// downstream's 92,399 instructions a call became 90,892, bench/README.md,
/// issue 56).
async fn conn_or_event<C, W>(mut conn: Pin<&mut C>, watched: W) -> Result<C::Output, W::Output>
where
    C: Future + ?Sized,
    W: Future,
{
    let woke = Arc::new(WatchedWoke { woken: AtomicBool::new(true), task: futures::task::AtomicWaker::new() });
    let waker = std::task::Waker::from(woke.clone());
    let mut watched = std::pin::pin!(watched);
    std::future::poll_fn(move |cx| {
        if let Poll::Ready(ended) = conn.as_mut().poll(cx) {
            return Poll::Ready(Ok(ended));
        }
        // Registered before the flag is read: a wake-up after the read
        // finds this task's waker.
        woke.task.register(cx.waker());
        if woke.woken.swap(false, SeqCst)
            && let Poll::Ready(event) = watched.as_mut().poll(&mut Context::from_waker(&waker))
        {
            return Poll::Ready(Err(event));
        }
        Poll::Pending
    })
    .await
}

/// The waker of what [`conn_or_event`] watches: notes that it was woken and
/// wakes the connection's task.
struct WatchedWoke {
    woken: AtomicBool,
    task: futures::task::AtomicWaker,
}

impl std::task::Wake for WatchedWoke {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, SeqCst);
        self.task.wake();
    }
}

/// The outcome of a request head hyper refused before any service saw it
/// (it answers 400 or 431 itself, with an empty body, and closes): a head
/// with more than hyper's 100 header fields or larger than its read buffer,
/// or one that does not parse. `None` for any other connection error.
fn refused_head(e: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    let hyper = e.downcast_ref::<hyper::Error>()?;
    if hyper.is_parse_too_large() {
        Some("headers_too_large")
    } else if hyper.is_parse() {
        Some("bad_request")
    } else {
        None
    }
}

/// Requests (HTTP/2 streams) open on one connection, and since when none is.
#[derive(Debug)]
struct Activity {
    open: AtomicUsize,
    seen: AtomicBool,
    /// The connection speaks HTTP/1.1: between requests it is reading the
    /// next head, bounded by the header-read timeout.
    http1: AtomicBool,
    idle_since: Mutex<Instant>,
}

/// One open request; dropping it closes it.
#[derive(Debug)]
struct OpenRequest(Arc<Activity>);

impl Activity {
    fn new() -> Self {
        Activity {
            open: AtomicUsize::new(0),
            seen: AtomicBool::new(false),
            http1: AtomicBool::new(false),
            idle_since: Mutex::new(Instant::now()),
        }
    }

    fn request_started(self: &Arc<Self>, http1: bool) -> OpenRequest {
        self.seen.store(true, Relaxed);
        if http1 {
            self.http1.store(true, Relaxed);
        }
        self.open.fetch_add(1, SeqCst);
        OpenRequest(self.clone())
    }

    fn seen_request(&self) -> bool {
        self.seen.load(Relaxed)
    }

    fn idle_since(&self) -> Instant {
        // A poisoned lock still holds a valid instant.
        *self.idle_since.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long the connection may go without a request in flight: the idle
    /// timeout, and on HTTP/1.1 no longer than the header-read timeout, as
    /// the next head is being read all that time.
    fn timeout(&self, settings: &ServerSettings) -> Duration {
        match self.http1.load(Relaxed) {
            true => settings.idle_timeout.min(settings.header_read_timeout),
            false => settings.idle_timeout,
        }
    }

    /// Resolves once no request has been open for [`Activity::timeout`].
    /// Until the first request the protocol is not known; the first request's
    /// own deadline in [`Control`] bounds that time, and rebuilds this wait
    /// when it passes.
    async fn idle_for(&self, settings: &ServerSettings) {
        loop {
            let timeout = self.timeout(settings);
            if self.open.load(SeqCst) > 0 {
                tokio::time::sleep(timeout).await;
                continue;
            }
            let idle = self.idle_since().elapsed();
            if idle >= timeout && self.open.load(SeqCst) == 0 {
                return;
            }
            tokio::time::sleep(timeout.saturating_sub(idle)).await;
        }
    }
}

impl Drop for OpenRequest {
    fn drop(&mut self) {
        if self.0.open.fetch_sub(1, SeqCst) == 1 {
            *self.0.idle_since.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        }
    }
}

/// Lets a repeated message through at most once per interval, and says how
/// many were held back since the last one.
#[derive(Debug)]
pub(crate) struct LogLimiter {
    every: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl LogLimiter {
    pub(crate) fn new(every: Duration) -> Self {
        LogLimiter { every, last: None, suppressed: 0 }
    }

    /// `Some(held back since the last one)` if a line may be written at `now`.
    pub(crate) fn admit(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(last) if now.saturating_duration_since(last) < self.every => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;

    #[test]
    fn a_repeated_warning_is_written_at_most_once_per_interval_with_a_count() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut limiter = LogLimiter::new(Duration::from_secs(1));
        assert_eq!(limiter.admit(ms(0)), Some(0));
        // Every 20 ms for the rest of the second: held back.
        for i in 1..50 {
            assert_eq!(limiter.admit(ms(i * 20)), None, "at {} ms", i * 20);
        }
        assert_eq!(limiter.admit(ms(1000)), Some(49));
        assert_eq!(limiter.admit(ms(1500)), None);
        assert_eq!(limiter.admit(ms(5000)), Some(1));
        assert_eq!(limiter.admit(ms(6000)), Some(0));
    }

    #[test]
    fn default_settings_close_idle_connections_well_under_a_minute() {
        let s = ServerSettings::new(Protocols::Http2Only);
        assert!(s.idle_timeout < Duration::from_secs(60));
        assert!(s.http2_keep_alive_interval.is_some_and(|i| i < s.idle_timeout));
        let json = serde_json::to_value(s).unwrap();
        assert_eq!(json["idle_timeout"], 30_000);
        assert_eq!(json["http2_keep_alive_interval"], 20_000);
        assert_eq!(json["http2_keep_alive_timeout"], 20_000);
    }

    /// The connection's many wake-ups do not poll what is watched beside
    /// it (the timers and the shutdown token): it is polled once, to
    /// register, and again only when its own wake-up comes, which ends the
    /// wait.
    #[tokio::test]
    async fn what_is_watched_is_polled_only_when_it_is_woken() {
        let (conn_polls, watched_polls) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let conn = std::future::poll_fn(|cx| {
            if conn_polls.fetch_add(1, SeqCst) < 100 {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready("ended")
        });
        let watched = std::future::poll_fn(|_| {
            watched_polls.fetch_add(1, SeqCst);
            Poll::<()>::Pending
        });
        assert_eq!(conn_or_event(std::pin::pin!(conn), watched).await, Ok("ended"));
        assert_eq!((conn_polls.load(SeqCst), watched_polls.load(SeqCst)), (101, 1));

        let watched_polls = AtomicUsize::new(0);
        let mut timer = std::pin::pin!(tokio::time::sleep(Duration::from_millis(20)));
        let watched = std::future::poll_fn(|cx| {
            watched_polls.fetch_add(1, SeqCst);
            timer.as_mut().poll(cx)
        });
        let never = std::future::pending::<()>();
        assert_eq!(conn_or_event(std::pin::pin!(never), watched).await, Err(()));
        assert_eq!(watched_polls.load(SeqCst), 2, "once to register, once when the timer woke it");
    }

    #[tokio::test]
    async fn a_half_closed_client_is_answered() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // A handler that takes a while, as every tier's does: the EOF arrives while it runs.
        let slow = || async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            "answered"
        };
        let app = Router::new().route("/", axum::routing::get(slow));
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(serve(listener, app, None, ServerSettings::new(Protocols::Auto), shutdown.clone()));
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
        // The request, then the end of what this client sends.
        tcp.shutdown().await.unwrap();
        let mut answer = String::new();
        tokio::time::timeout(Duration::from_secs(10), tcp.read_to_string(&mut answer)).await.unwrap().unwrap();
        assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("answered"), "{answer:?}");
        shutdown.cancel();
        let _ = server.await;
    }
}
