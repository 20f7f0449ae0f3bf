//! The accept loop every listener of every tier runs.
//!
//! One loop, so both transports (and the admin and front listeners) get the same
//! socket options, the same HTTP limits and the same drain behaviour: a
//! difference between gRPC and REST in a report then comes from the transports,
//! not from how they were served.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::{Counters, CountingStream};

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
    /// one on a connection, HTTP/1.1 or HTTP/2, and every later HTTP/1.1 one);
    /// otherwise the connection is closed.
    #[serde(with = "millis")]
    pub header_read_timeout: Duration,
    /// How long shutdown waits for in-flight requests before closing connections.
    #[serde(with = "millis")]
    pub drain_timeout: Duration,
    /// TCP_NODELAY on every accepted socket.
    pub tcp_nodelay: bool,
    /// Accept queue length asked of the kernel.
    pub listen_backlog: u32,
}

impl ServerSettings {
    pub const DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS: u32 = 16_384;

    pub fn new(protocols: Protocols) -> Self {
        ServerSettings {
            protocols,
            http2_max_concurrent_streams: Self::DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS,
            http2_max_pending_accept_reset_streams: 4096,
            header_read_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(5),
            tcp_nodelay: true,
            listen_backlog: LISTEN_BACKLOG,
        }
    }
}

mod millis {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
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

/// Serves `app` on `listener` until `shutdown` is cancelled, then stops
/// accepting, lets in-flight requests finish for up to `drain_timeout`, and
/// returns. With `counters`, every accepted connection is counted on them.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    counters: Option<Arc<Counters>>,
    settings: ServerSettings,
    shutdown: CancellationToken,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(settings.header_read_timeout).keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(settings.http2_max_concurrent_streams)
        .max_pending_accept_reset_streams(settings.http2_max_pending_accept_reset_streams);
    let builder = match settings.protocols {
        Protocols::Auto => builder,
        Protocols::Http2Only => builder.http2_only(),
    };
    let graceful = GracefulShutdown::new();
    let mut accept_errors = LogLimiter::new(Duration::from_secs(1));

    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let tcp = match accepted {
            Ok((tcp, _peer)) => tcp,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning; the
                // connections already open keep being served. The condition
                // lasts as long as the connections that cause it, so it is
                // reported at most once a second, not on every retry.
                if let Some(suppressed) = accept_errors.admit(Instant::now()) {
                    if suppressed == 0 {
                        tracing::warn!("accept failed: {e}");
                    } else {
                        tracing::warn!("accept failed: {e} ({suppressed} more since the last report)");
                    }
                }
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        if settings.tcp_nodelay {
            let _ = tcp.set_nodelay(true);
        }
        // A connection must deliver its first complete request head within the
        // header-read timeout (hyper enforces it for later HTTP/1.1 requests;
        // this covers HTTP/2 prefaces and frames that never complete too).
        let seen_request = Arc::new(AtomicBool::new(false));
        let seen = seen_request.clone();
        let service = TowerToHyperService::new(app.clone().map_request(move |req: http::Request<Incoming>| {
            seen.store(true, Relaxed);
            req
        }));
        let watcher = graceful.watcher();
        let builder = builder.clone();
        let counters = counters.clone();
        let first_request_deadline = settings.header_read_timeout;
        tokio::spawn(async move {
            let conn = async {
                match counters {
                    Some(c) => {
                        let io = TokioIo::new(CountingStream::new(tcp, c));
                        watcher.watch(builder.serve_connection_with_upgrades(io, service).into_owned()).await
                    }
                    None => {
                        let io = TokioIo::new(tcp);
                        watcher.watch(builder.serve_connection_with_upgrades(io, service).into_owned()).await
                    }
                }
            };
            tokio::pin!(conn);
            let result = tokio::select! {
                r = &mut conn => r,
                _ = tokio::time::sleep(first_request_deadline) => {
                    if !seen_request.load(Relaxed) {
                        tracing::debug!("no complete request within {first_request_deadline:?}; closing the connection");
                        return;
                    }
                    conn.await
                }
            };
            if let Err(e) = result {
                tracing::debug!("connection ended with error: {e}");
            }
        });
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(settings.drain_timeout) => {
            tracing::warn!("drain timed out after {:?}; closing remaining connections", settings.drain_timeout);
        }
    }
}

/// How long the accept loop waits after a failed accept before trying again.
const ACCEPT_RETRY: Duration = Duration::from_millis(20);

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
}
