//! The REST client: reqwest, JSON over HTTP/1.1 keep-alive (or HTTP/2 cleartext
//! with prior knowledge as a control arm); over TLS with rustls (ALPN
//! http/1.1 or h2) and with Content-Encoding when the hop asks. The same
//! client sends protobuf bodies (`application/x-protobuf`, the `rest-pb` arm)
//! to the same listener, which answers in the encoding asked for.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use payload::{FetchRequest, FetchResponse, JsonCodec};
use prost::Message;
use telemetry::Counters;

use crate::hop::{HopOptions, merged};
use crate::outbound::{CallError, MAX_ANSWER_BYTES, Method, Outbound};
use prost_reflect::DynamicMessage;

/// Why a REST client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RestBuildError {
    #[error(transparent)]
    Client(reqwest::Error),
    #[error("{0}")]
    Files(std::io::Error),
    #[error("not a URL: {0}")]
    Url(String),
}

/// The media type of protobuf bodies on the REST listener.
pub const PROTOBUF_MEDIA_TYPE: &str = "application/x-protobuf";

/// The body encoding of a REST client: JSON (the `rest` arm) or protobuf, the
/// gRPC arm's messages (`rest-pb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestEncoding {
    Json,
    Protobuf,
}

impl RestEncoding {
    pub fn media_type(self) -> &'static str {
        match self {
            RestEncoding::Json => "application/json",
            RestEncoding::Protobuf => PROTOBUF_MEDIA_TYPE,
        }
    }

    fn encode(self, codec: JsonCodec, req: &FetchRequest) -> Result<Vec<u8>, String> {
        match self {
            RestEncoding::Json => codec.encode(req).map_err(|e| e.to_string()),
            RestEncoding::Protobuf => Ok(proto::FetchRequest::from(req.clone()).encode_to_vec()),
        }
    }

    fn decode(self, codec: JsonCodec, bytes: &[u8]) -> Result<FetchResponse, String> {
        match self {
            RestEncoding::Json => codec.decode(bytes).map_err(|e| e.to_string()),
            RestEncoding::Protobuf => {
                let pb =
                    proto::FetchResponse::decode(bytes).map_err(|e| format!("malformed protobuf response: {e}"))?;
                FetchResponse::try_from(pb).map_err(|e| e.to_string())
            }
        }
    }
}

/// How long an idle pooled connection is kept.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Debug)]
pub struct RestClient {
    target: Arc<str>,
    /// Parsed once: a `&str` would be parsed (and its host name checked by
    /// IDNA) for every request.
    url: reqwest::Url,
    http2: bool,
    encoding: RestEncoding,
    /// Connect's unary protocol instead of REST (`connect`, `connect-pb`).
    connect: bool,
    /// Connect's server streaming (`connect-stream`): the items, not `Fetch`.
    connect_stream: bool,
    client: reqwest::Client,
    counters: Arc<Counters>,
    hop: HopOptions,
}

impl RestClient {
    /// A client for `target` (`http://host:port`). reqwest owns the sockets, so
    /// only connections opened are counted here; the hop's wire bytes are
    /// counted by the downstream's listener.
    pub fn new(target: &str, http2: bool, counters: Arc<Counters>) -> Result<Self, RestBuildError> {
        Self::with_hop(target, http2, &HopOptions::default(), counters)
    }

    /// [`RestClient::new`] with TLS (an `https://` target: rustls trusting the
    /// run's CA) and compression: request bodies compressed, responses
    /// accepted in the same coding and decompressed by reqwest.
    pub fn with_hop(
        target: &str,
        http2: bool,
        hop: &HopOptions,
        counters: Arc<Counters>,
    ) -> Result<Self, RestBuildError> {
        Self::with_encoding(target, http2, RestEncoding::Json, hop, counters)
    }

    /// [`RestClient::with_hop`] with bodies in `encoding`, sent with that
    /// Content-Type and asked for with that Accept.
    pub fn with_encoding(
        target: &str,
        http2: bool,
        encoding: RestEncoding,
        hop: &HopOptions,
        counters: Arc<Counters>,
    ) -> Result<Self, RestBuildError> {
        let client = http_client(http2, hop, hop.compression, counters.clone())?;
        let target = target.trim_end_matches('/');
        let url = fetch_url(target)?;
        Ok(RestClient {
            target: target.into(),
            url,
            http2,
            encoding,
            connect: false,
            connect_stream: false,
            client,
            counters,
            hop: hop.clone(),
        })
    }

    /// The Connect client (the `connect` and `connect-pb` arms): Connect's
    /// unary protocol, the message as the whole body (`application/json` or
    /// `application/proto`) POSTed to the method's gRPC path with
    /// `Connect-Protocol-Version: 1`, on the same reqwest client as REST.
    pub fn connect(
        target: &str,
        http2: bool,
        encoding: RestEncoding,
        hop: &HopOptions,
        counters: Arc<Counters>,
    ) -> Result<Self, RestBuildError> {
        let client = Self::with_encoding(target, http2, encoding, hop, counters)?;
        let url = client.url.join(CONNECT_FETCH_PATH).map_err(|e| RestBuildError::Url(format!("{target}: {e}")))?;
        Ok(RestClient { url, connect: true, ..client })
    }

    /// The `connect-stream` arm's client: [`RestClient::connect`] whose items
    /// come as one Connect server-streaming call.
    pub fn connect_stream(self) -> Self {
        RestClient { connect_stream: true, ..self }
    }
}

/// The built-in method's path in Connect's protocol (and gRPC-Web's).
pub const CONNECT_FETCH_PATH: &str = "/bench.v1.Downstream/Fetch";
/// Connect's media type of protobuf bodies.
pub const CONNECT_PROTO_MEDIA_TYPE: &str = "application/proto";

/// The reqwest client every HTTP/1.1 (or h2c) arm sends with: one
/// connection per concurrent request, no retries, TLS trusting the run's CA,
/// and `Accept-Encoding` offering `accept` only; each connection counted.
fn http_client(
    http2: bool,
    hop: &HopOptions,
    accept: service::Compression,
    counters: Arc<Counters>,
) -> Result<reqwest::Client, RestBuildError> {
    let builder = reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        // One connection per concurrent request, as many as the load needs:
        // HTTP/1.1 has no multiplexing, so a cap would queue requests.
        .pool_max_idle_per_host(usize::MAX)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .retry(reqwest::retry::never())
        .connector_layer(CountConnectsLayer(counters));
    let builder = if http2 {
        // Flow-control windows set explicitly (see `service::h2`).
        builder
            .http2_prior_knowledge()
            .http2_initial_stream_window_size(service::h2::CLIENT_STREAM_WINDOW_BYTES)
            .http2_initial_connection_window_size(service::h2::CLIENT_CONNECTION_WINDOW_BYTES)
            .http2_adaptive_window(service::h2::ADAPTIVE_WINDOW)
    } else {
        builder.http1_only()
    };
    // Accept-Encoding only for the hop's own coding (reqwest would offer
    // every coding it was built with).
    let builder = accept.reqwest_accept(builder);
    let builder = match hop.rest_tls(http2).map_err(RestBuildError::Files)? {
        Some(tls) => builder.tls_backend_preconfigured(tls).https_only(true),
        None => builder.tls_backend_preconfigured(crate::hop::plaintext_only()),
    };
    builder.build().map_err(RestBuildError::Client)
}

/// The downstream's fetch URL under `target` (`http://host:port`), parsed as
/// the client sends to it: what a command line checks before any client is
/// built.
pub fn fetch_url(target: &str) -> Result<reqwest::Url, RestBuildError> {
    let target = target.trim_end_matches('/');
    let bad = |e: &dyn std::fmt::Display| RestBuildError::Url(format!("{target}: {e}"));
    // The target itself must name a host: `http://` would otherwise become
    // `http:///v1/fetch`, a request to a host called `v1`.
    if reqwest::Url::parse(target).map_err(|e| bad(&e))?.host().is_none() {
        return Err(bad(&"no host"));
    }
    reqwest::Url::parse(&format!("{target}/v1/fetch")).map_err(|e| bad(&e))
}

/// What one exchange needs, cloned out of the client for its future.
struct Exchange {
    client: reqwest::Client,
    target: Arc<str>,
    counters: Arc<Counters>,
    compression: service::Compression,
    encoding: RestEncoding,
    codec: JsonCodec,
    connect: bool,
}

impl Exchange {
    /// POSTs `body` (compressed when the hop asks) to `url` in the client's
    /// encoding, with `n` as the call's request id when there is one; counts
    /// the message bytes; a non-success status is an error with the JSON
    /// error body's reason.
    async fn send(
        self,
        verb: reqwest::Method,
        url: reqwest::Url,
        n: Option<u64>,
        body: Option<Vec<u8>>,
    ) -> Result<bytes::Bytes, CallError> {
        let target = &self.target;
        // Message bytes are the logical (uncompressed) body.
        let request_bytes = body.as_ref().map_or(0, |b| b.len() as u64);
        let media = self.media_type();
        let mut request = self.client.request(verb, url);
        request = if self.connect {
            // Connect answers in the request's codec: no Accept.
            request.header("connect-protocol-version", "1")
        } else {
            request.header(reqwest::header::ACCEPT, media)
        };
        if let Some(n) = n {
            request = request.header(contract::CALL_HEADER, n);
        }
        if let Some(body) = body {
            request = request.header(reqwest::header::CONTENT_TYPE, media);
            let body = match self.compression.content_coding() {
                None => body,
                Some(coding) => {
                    request = request.header(reqwest::header::CONTENT_ENCODING, coding);
                    self.compression
                        .compress(&body)
                        .map_err(|e| CallError::BadResponse { target: target.to_string(), reason: e.to_string() })?
                }
            };
            request = request.body(body);
        }
        let resp = request.send().await.map_err(|e| transport_error(target, e))?;
        let status = resp.status();
        // Bounded as the gRPC client's decoding is: an answer without end
        // fails the call (`bad_response`) rather than filling this tier.
        let bytes = crate::items::read_bounded(resp, MAX_ANSWER_BYTES)
            .await
            .map_err(|e| e.into_call_error(target, |e| transport_error(target, e)))?;
        self.counters.add_message_bytes(request_bytes, bytes.len() as u64);
        if !status.is_success() {
            // REST's `{"error"}`, or Connect's `{"code", "message"}`.
            let reason = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| match (v["code"].as_str(), v["message"].as_str()) {
                    (Some(code), message) => Some(format!("{code}: {}", message.unwrap_or_default())),
                    _ => v["error"].as_str().map(str::to_owned),
                })
                .unwrap_or_default();
            return Err(CallError::Status {
                target: target.to_string(),
                status: format!("HTTP {}: {reason}", status.as_u16()),
            });
        }
        Ok(bytes)
    }
}

impl Exchange {
    fn media_type(&self) -> &'static str {
        match (self.connect, self.encoding) {
            (true, RestEncoding::Protobuf) => CONNECT_PROTO_MEDIA_TYPE,
            _ => self.encoding.media_type(),
        }
    }
}

impl RestClient {
    fn exchange(&self) -> Exchange {
        Exchange {
            client: self.client.clone(),
            target: self.target.clone(),
            counters: self.counters.clone(),
            compression: self.hop.compression,
            encoding: self.encoding,
            codec: self.hop.json_codec,
            connect: self.connect,
        }
    }
}

impl Outbound for RestClient {
    fn fetch(&self, req: FetchRequest) -> BoxFuture<'static, Result<FetchResponse, CallError>> {
        let (exchange, url) = (self.exchange(), self.url.clone());
        Box::pin(async move {
            let target = exchange.target.clone();
            let (encoding, codec) = (exchange.encoding, exchange.codec);
            let body = encoding
                .encode(codec, &req)
                .map_err(|reason| CallError::BadResponse { target: target.to_string(), reason })?;
            let bytes = exchange.send(reqwest::Method::POST, url, None, Some(body)).await?;
            encoding
                .decode(codec, &bytes)
                .map_err(|reason| CallError::BadResponse { target: target.to_string(), reason })
        })
    }

    fn call(
        &self,
        method: &Arc<Method>,
        n: u64,
        message: DynamicMessage,
    ) -> BoxFuture<'static, Result<DynamicMessage, CallError>> {
        // The JSON arm calls a method with a google.api.http rule where the
        // rule puts it, as a REST client of that API does.
        let codec = self.hop.json_codec;
        let request = match (self.encoding, &method.http) {
            _ if self.connect => {
                let body = match self.encoding {
                    RestEncoding::Json => contract::to_json_with(codec, &message),
                    RestEncoding::Protobuf => message.encode_to_vec(),
                };
                Ok((reqwest::Method::POST, method.grpc_path.path().to_owned(), Some(body)))
            }
            (RestEncoding::Json, Some(rule)) => rule.request_with(codec, &message).and_then(|(path, body)| {
                let verb = reqwest::Method::from_bytes(rule.verb.as_bytes()).map_err(|e| e.to_string())?;
                Ok((verb, path, body))
            }),
            (RestEncoding::Json, None) => {
                Ok((reqwest::Method::POST, method.rest_path.clone(), Some(contract::to_json_with(codec, &message))))
            }
            (RestEncoding::Protobuf, _) => {
                Ok((reqwest::Method::POST, method.rest_path.clone(), Some(message.encode_to_vec())))
            }
        };
        let (exchange, base, output) = (self.exchange(), self.url.clone(), method.output.clone());
        Box::pin(async move {
            let target = exchange.target.clone();
            let encoding = exchange.encoding;
            let bad = |reason: String| CallError::BadResponse { target: target.to_string(), reason };
            let (verb, path, body) = request.map_err(bad)?;
            let url = base.join(&path).map_err(|e| bad(e.to_string()))?;
            let bytes = exchange.send(verb, url, Some(n), body).await?;
            let decoded = match encoding {
                RestEncoding::Json => contract::from_json_with(codec, output, &bytes),
                RestEncoding::Protobuf => DynamicMessage::decode(output, bytes.as_ref())
                    .map_err(|e| format!("malformed protobuf response: {e}")),
            };
            decoded.map_err(|reason| CallError::BadResponse { target: target.to_string(), reason })
        })
    }

    fn items(
        &self,
        req: payload::StreamRequest,
        delivery: crate::outbound::Delivery,
        page_size: u32,
    ) -> crate::outbound::ItemStream {
        let to = crate::items::RestTarget {
            client: self.client.clone(),
            target: self.target.clone(),
            counters: self.counters.clone(),
            codec: self.hop.json_codec,
        };
        if self.connect_stream {
            return crate::connect_stream::items(to, req, self.hop.compression);
        }
        crate::items::rest(to, req, delivery, page_size)
    }

    fn target(&self) -> &str {
        &self.target
    }

    fn settings(&self) -> serde_json::Value {
        let http_version = match (self.http2, self.hop.tls.is_some()) {
            (true, false) => "HTTP/2 cleartext (prior knowledge)",
            (false, false) => "HTTP/1.1 keep-alive",
            (true, true) => "HTTP/2 over TLS (ALPN h2)",
            (false, true) => "HTTP/1.1 keep-alive over TLS (ALPN http/1.1)",
        };
        let settings = serde_json::json!({
            "transport": match (self.connect, self.encoding) {
                _ if self.connect_stream => "connect-stream",
                (false, RestEncoding::Json) => "rest",
                (false, RestEncoding::Protobuf) => "rest-pb",
                (true, RestEncoding::Json) => "connect",
                (true, RestEncoding::Protobuf) => "connect-pb",
            },
            "encoding": self.exchange().media_type(),
            "protocol": match (self.connect_stream, self.connect) {
                (true, _) => "Connect server streaming (application/connect+proto, enveloped messages)",
                (false, true) => "Connect unary (connect-protocol-version 1)",
                (false, false) => "REST",
            },
            "library": "reqwest 0.13",
            "http_version": http_version,
            "pool_max_idle_per_host": "unlimited",
            "pool_max_connections": "unlimited (one per concurrent request on HTTP/1.1)",
            "pool_idle_timeout_ms": POOL_IDLE_TIMEOUT.as_millis() as u64,
            "tcp_nodelay": true,
            "retries": "none",
            "proxy": "none",
            "max_answer_bytes": MAX_ANSWER_BYTES,
        });
        let mut settings = settings;
        if self.http2 {
            settings["http2_flow_control"] = service::h2::windows_json(true);
        }
        let settings = merged(settings, self.hop.settings(if self.http2 { "h2" } else { "http/1.1" }));
        match self.encoding {
            RestEncoding::Json => merged(settings, self.hop.json_settings()),
            RestEncoding::Protobuf => settings,
        }
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
        CountConnects::new(inner, self.0.clone())
    }
}

#[derive(Debug, Clone)]
pub(crate) struct CountConnects<S> {
    inner: S,
    counters: Arc<Counters>,
}

impl<S> CountConnects<S> {
    pub(crate) fn new(inner: S, counters: Arc<Counters>) -> Self {
        CountConnects { inner, counters }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_is_parsed_once_and_a_bad_one_is_refused_up_front() {
        let counters = || Arc::new(Counters::new("test", &[]));
        let client = RestClient::new("http://127.0.0.1:8080/", false, counters()).expect("a client");
        assert_eq!(client.url.as_str(), "http://127.0.0.1:8080/v1/fetch");
        assert_eq!(client.target(), "http://127.0.0.1:8080");
        let err = RestClient::new("http://bad host:1", false, counters()).unwrap_err();
        assert!(matches!(&err, RestBuildError::Url(r) if r.starts_with("http://bad host:1: ")), "{err}");
    }
}
