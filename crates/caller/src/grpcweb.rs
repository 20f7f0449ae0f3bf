//! The gRPC-Web client (the `grpc-web` arm): tonic's own client, its
//! requests turned into gRPC-Web by tonic-web's `GrpcWebClientLayer`
//! (`application/grpc-web`, gRPC's 5-byte length-prefixed frames, the
//! status read from a last frame flagged `0x80` instead of HTTP/2
//! trailers), sent over HTTP/1.1 by hyper-util's client as tonic-web's
//! documentation builds it (one connection per concurrent call, TLS through
//! hyper-rustls trusting the run's CA, each connection counted as REST's
//! are). Compression is gRPC's per message (`grpc-encoding`), as on the gRPC
//! arm.
//!
//! It was reqwest, the REST arm's client: tonic's request collected and
//! rebuilt as reqwest's cost the caller 27% more instructions per call than
//! its plain twin (bench/README.md, issue 56).

use std::sync::Arc;

use contract::codec::DynamicCodec;
use futures::future::BoxFuture;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use payload::{FetchRequest, FetchResponse};
use prost_reflect::DynamicMessage;
use telemetry::Counters;
use tonic_web::{GrpcWebCall, GrpcWebClientLayer, GrpcWebClientService};
use tower::Layer;

use crate::grpc::{MAX_DECODING_MESSAGE_BYTES, unary_call, unary_fetch};
use crate::hop::{HopOptions, merged};
use crate::outbound::{CallError, Method, Outbound};
use crate::rest::{CONNECT_FETCH_PATH, CountConnects, POOL_IDLE_TIMEOUT, RestBuildError};

/// TCP, then TLS when the hop has it, each connection counted once made.
type Connector = CountConnects<hyper_rustls::HttpsConnector<HttpConnector>>;
type WebChannel = GrpcWebClientService<Client<Connector, GrpcWebCall<tonic::body::Body>>>;

/// hyper-util's HTTP/1.1 client with the REST arm's pool settings: unbounded
/// idle connections per host (HTTP/1.1 has no multiplexing, so a cap would
/// queue calls), the same idle timeout, TCP_NODELAY, no proxy, no retries.
fn http_client(
    hop: &HopOptions,
    counters: Arc<Counters>,
) -> Result<Client<Connector, GrpcWebCall<tonic::body::Body>>, RestBuildError> {
    let mut tcp = HttpConnector::new();
    tcp.set_nodelay(true);
    tcp.enforce_http(false);
    // The config as the REST arm's (ALPN http/1.1): the connector is made
    // directly, as hyper-rustls's builder refuses a config with ALPN set.
    let (config, https_only) = match hop.rest_tls(false).map_err(RestBuildError::Files)? {
        Some(config) => (config, true),
        // Plain HTTP only: the config is never used.
        None => (crate::hop::plaintext_only(), false),
    };
    let resolver = Arc::new(hyper_rustls::DefaultServerNameResolver::default());
    let https = hyper_rustls::HttpsConnector::new(tcp, config, https_only, resolver);
    let connector = CountConnects::new(https, counters);
    Ok(Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_max_idle_per_host(usize::MAX)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .build(connector))
}

/// The `grpc-web` arm's client.
#[derive(Debug)]
pub struct GrpcWebClient {
    target: Arc<str>,
    client: tonic::client::Grpc<WebChannel>,
    counters: Arc<Counters>,
    hop: HopOptions,
}

impl GrpcWebClient {
    pub fn with_hop(target: &str, hop: &HopOptions, counters: Arc<Counters>) -> Result<Self, RestBuildError> {
        let target = target.trim_end_matches('/');
        // The fetch URL checks the target names a host, as REST's does.
        crate::rest::fetch_url(target)?;
        let origin: http::Uri = target.parse().map_err(|e| RestBuildError::Url(format!("{target}: {e}")))?;
        let channel = GrpcWebClientLayer::new().layer(http_client(hop, counters.clone())?);
        let client =
            tonic::client::Grpc::with_origin(channel, origin).max_decoding_message_size(MAX_DECODING_MESSAGE_BYTES);
        let client = match hop.compression.grpc_encoding() {
            Some(e) => client.send_compressed(e).accept_compressed(e),
            None => client,
        };
        Ok(GrpcWebClient { target: target.into(), client, counters, hop: hop.clone() })
    }
}

impl Outbound for GrpcWebClient {
    fn fetch(&self, req: FetchRequest) -> BoxFuture<'static, Result<FetchResponse, CallError>> {
        let (client, target, counters) = (self.client.clone(), self.target.clone(), self.counters.clone());
        Box::pin(unary_fetch(client, CONNECT_FETCH_PATH, target, counters, req))
    }

    fn call(
        &self,
        method: &Arc<Method>,
        n: u64,
        message: DynamicMessage,
    ) -> BoxFuture<'static, Result<DynamicMessage, CallError>> {
        let codec = DynamicCodec { decodes: method.output.clone(), counters: self.counters.clone() };
        Box::pin(unary_call(self.client.clone(), self.target.clone(), method.grpc_path.clone(), n, message, codec))
    }

    fn target(&self) -> &str {
        &self.target
    }

    fn settings(&self) -> serde_json::Value {
        let tls = self.hop.tls.is_some();
        let settings = serde_json::json!({
            "transport": "grpc-web",
            "encoding": "application/grpc-web+proto",
            "library": "tonic 0.14 + tonic-web 0.14 (GrpcWebClientLayer) over hyper-util 0.1's client (hyper 1)",
            "http_version": if tls { "HTTP/1.1 keep-alive over TLS (ALPN http/1.1)" } else { "HTTP/1.1 keep-alive" },
            "pool_max_connections": "unlimited (one per concurrent request on HTTP/1.1)",
            "pool_idle_timeout_ms": crate::rest::POOL_IDLE_TIMEOUT.as_millis() as u64,
            "tcp_nodelay": true,
            "retries": "none",
            "proxy": "none",
            "max_decoding_message_bytes": MAX_DECODING_MESSAGE_BYTES,
        });
        merged(settings, self.hop.settings("http/1.1"))
    }
}
