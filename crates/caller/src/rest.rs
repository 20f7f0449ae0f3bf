//! The REST client: reqwest, JSON over HTTP/1.1 keep-alive (or HTTP/2 cleartext
//! with prior knowledge as a control arm).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use payload::{FetchRequest, FetchResponse};
use telemetry::Counters;

use crate::outbound::{CallError, Outbound};

/// How long an idle pooled connection is kept.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Debug)]
pub struct RestClient {
    target: String,
    url: String,
    http2: bool,
    client: reqwest::Client,
    counters: Arc<Counters>,
}

impl RestClient {
    /// A client for `target` (`http://host:port`). reqwest owns the sockets, so
    /// only connections opened are counted here; the hop's wire bytes are
    /// counted by the downstream's listener.
    pub fn new(target: &str, http2: bool, counters: Arc<Counters>) -> Result<Self, reqwest::Error> {
        let builder = reqwest::Client::builder()
            .no_proxy()
            .tcp_nodelay(true)
            // One connection per concurrent request, as many as the load needs:
            // HTTP/1.1 has no multiplexing, so a cap would queue requests.
            .pool_max_idle_per_host(usize::MAX)
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .retry(reqwest::retry::never())
            .connector_layer(CountConnectsLayer(counters.clone()));
        let builder = if http2 { builder.http2_prior_knowledge() } else { builder.http1_only() };
        Ok(RestClient {
            target: target.trim_end_matches('/').to_owned(),
            url: format!("{}/v1/fetch", target.trim_end_matches('/')),
            http2,
            client: builder.build()?,
            counters,
        })
    }
}

impl Outbound for RestClient {
    fn fetch(&self, req: FetchRequest) -> BoxFuture<'static, Result<FetchResponse, CallError>> {
        let (client, url, target, counters) =
            (self.client.clone(), self.url.clone(), self.target.clone(), self.counters.clone());
        Box::pin(async move {
            let body = serde_json::to_vec(&req)
                .map_err(|e| CallError::BadResponse { target: target.clone(), reason: e.to_string() })?;
            let request_bytes = body.len() as u64;
            let resp = client
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body)
                .send()
                .await
                .map_err(|e| transport_error(&target, e))?;
            let status = resp.status();
            let bytes = resp.bytes().await.map_err(|e| transport_error(&target, e))?;
            counters.add_message_bytes(request_bytes, bytes.len() as u64);
            if !status.is_success() {
                let reason = serde_json::from_slice::<serde_json::Value>(&bytes)
                    .ok()
                    .and_then(|v| v["error"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                return Err(CallError::Status { target, status: format!("HTTP {}: {reason}", status.as_u16()) });
            }
            serde_json::from_slice(&bytes).map_err(|e| CallError::BadResponse { target, reason: e.to_string() })
        })
    }

    fn target(&self) -> &str {
        &self.target
    }

    fn settings(&self) -> serde_json::Value {
        serde_json::json!({
            "transport": "rest",
            "library": "reqwest 0.13",
            "http_version": if self.http2 { "HTTP/2 cleartext (prior knowledge)" } else { "HTTP/1.1 keep-alive" },
            "pool_max_idle_per_host": "unlimited",
            "pool_max_connections": "unlimited (one per concurrent request on HTTP/1.1)",
            "pool_idle_timeout_ms": POOL_IDLE_TIMEOUT.as_millis() as u64,
            "tcp_nodelay": true,
            "retries": "none",
            "proxy": "none",
            "compression": "none",
        })
    }
}

fn transport_error(target: &str, e: reqwest::Error) -> CallError {
    let target = target.to_owned();
    if e.is_connect() {
        CallError::Connect { target, reason: error_chain(&e) }
    } else {
        CallError::BadResponse { target, reason: error_chain(&e) }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

/// A connector layer that counts every connection reqwest manages to open.
#[derive(Debug, Clone)]
struct CountConnectsLayer(Arc<Counters>);

impl<S> tower::Layer<S> for CountConnectsLayer {
    type Service = CountConnects<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CountConnects { inner, counters: self.0.clone() }
    }
}

#[derive(Debug, Clone)]
struct CountConnects<S> {
    inner: S,
    counters: Arc<Counters>,
}

impl<S, R> tower::Service<R> for CountConnects<S>
where
    S: tower::Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let fut = self.inner.call(req);
        let counters = self.counters.clone();
        Box::pin(async move {
            let conn = fut.await?;
            counters.connection_opened();
            Ok(conn)
        })
    }
}
