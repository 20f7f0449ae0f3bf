//! The gRPC-Web client (the `grpc-web` arm): tonic's own client, its
//! requests turned into gRPC-Web by tonic-web's `GrpcWebClientLayer`
//! (`application/grpc-web`, gRPC's 5-byte length-prefixed frames, the
//! status read from a last frame flagged `0x80` instead of HTTP/2
//! trailers), sent over HTTP/1.1 by the same reqwest client as the REST
//! arm (one connection per concurrent call, TLS trusting the run's CA).
//! Compression is gRPC's per message (`grpc-encoding`), as on the gRPC arm.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use contract::codec::DynamicCodec;
use futures::future::BoxFuture;
use http_body_util::BodyExt;
use payload::{FetchRequest, FetchResponse};
use prost_reflect::DynamicMessage;
use telemetry::Counters;
use tonic_web::{GrpcWebClientLayer, GrpcWebClientService};
use tower::Layer;

use crate::grpc::{MAX_DECODING_MESSAGE_BYTES, unary_call, unary_fetch};
use crate::hop::{HopOptions, merged};
use crate::outbound::{CallError, Method, Outbound};
use crate::rest::{CONNECT_FETCH_PATH, RestBuildError, http_client};

/// A tower service that sends an HTTP request with reqwest: the transport
/// under tonic-web's client layer.
#[derive(Debug, Clone)]
pub struct ReqwestService {
    client: reqwest::Client,
    /// `scheme://authority` every request goes to (tonic sends the path only).
    base: Arc<str>,
}

type WebBody = tonic_web::GrpcWebCall<tonic::body::Body>;

impl tower::Service<http::Request<WebBody>> for ReqwestService {
    type Response = http::Response<reqwest::Body>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<WebBody>) -> Self::Future {
        let (client, base) = (self.client.clone(), self.base.clone());
        Box::pin(async move {
            let (mut parts, body) = req.into_parts();
            // A unary call's request is one small frame: collected, then
            // sent with its length (tonic's body is not `Sync`, as reqwest
            // wants a streamed body to be).
            let body: Bytes = body.collect().await?.to_bytes();
            let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
            parts.uri = format!("{base}{path}").parse()?;
            // reqwest sets the version it negotiated (HTTP/1.1 here).
            parts.version = http::Version::HTTP_11;
            let req = reqwest::Request::try_from(http::Request::from_parts(parts, body))?;
            let resp = client.execute(req).await?;
            Ok(http::Response::from(resp))
        })
    }
}

type WebChannel = GrpcWebClientService<ReqwestService>;

/// The `grpc-web` arm's client.
#[derive(Debug)]
pub struct GrpcWebClient {
    target: String,
    client: tonic::client::Grpc<WebChannel>,
    counters: Arc<Counters>,
    hop: HopOptions,
}

impl GrpcWebClient {
    pub fn with_hop(target: &str, hop: &HopOptions, counters: Arc<Counters>) -> Result<Self, RestBuildError> {
        let target = target.trim_end_matches('/');
        // The fetch URL checks the target names a host, as REST's does.
        crate::rest::fetch_url(target)?;
        // No Accept-Encoding: gRPC-Web compresses messages, not the body.
        let http = http_client(false, hop, service::Compression::None, counters.clone())?;
        let channel = GrpcWebClientLayer::new().layer(ReqwestService { client: http, base: target.into() });
        let client = tonic::client::Grpc::new(channel).max_decoding_message_size(MAX_DECODING_MESSAGE_BYTES);
        let client = match hop.compression.grpc_encoding() {
            Some(e) => client.send_compressed(e).accept_compressed(e),
            None => client,
        };
        Ok(GrpcWebClient { target: target.to_owned(), client, counters, hop: hop.clone() })
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
            "library": "tonic 0.14 + tonic-web 0.14 (GrpcWebClientLayer) over reqwest 0.13",
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
