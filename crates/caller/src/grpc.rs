//! The gRPC clients: tonic channels over HTTP/2 cleartext (or TLS with ALPN h2,
//! tonic's own TLS over the counting socket). [`GrpcClient`] is the generated
//! protobuf client; [`GrpcJsonClient`] (the `grpc-json` arm) carries the REST
//! arm's JSON in gRPC frames on the same channels, with tonic's own client
//! and a pass-through codec, as `application/grpc+json`.

use proto::json::{FETCH_JSON_PATH, GRPC_JSON_CONTENT_TYPE, RawCodec};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{Buf, BufMut, Bytes};
use futures::future::BoxFuture;
use hyper_util::rt::TokioIo;
use payload::{FetchRequest, FetchResponse};
use telemetry::{Counters, CountingStream};
use tokio::net::TcpStream;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint, Uri};

use tonic_prost::{ProstDecoder, ProstEncoder};

use crate::hop::{HopOptions, merged};
use crate::outbound::{CallError, Delivery, ItemStream, Method, Outbound};
use contract::CALL_HEADER;
use contract::codec::DynamicCodec;
use futures::{StreamExt, TryStreamExt};
use payload::{PageResponse, StreamItem, StreamRequest};
use prost::Message;
use prost_reflect::DynamicMessage;

/// Why a gRPC client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum GrpcBuildError {
    #[error(transparent)]
    Transport(#[from] tonic::transport::Error),
    #[error("{0}")]
    Files(std::io::Error),
}

/// Largest response message the client decodes ([`crate::outbound::MAX_ANSWER_BYTES`]).
pub const MAX_DECODING_MESSAGE_BYTES: usize = crate::outbound::MAX_ANSWER_BYTES;

/// Spreads calls round-robin over `connections` HTTP/2 connections.
#[derive(Debug)]
pub struct GrpcClient {
    /// Shared by every call, for its errors: a `String` was copied for each.
    target: Arc<str>,
    clients: Vec<tonic::client::Grpc<Channel>>,
    next: AtomicUsize,
    counters: Arc<Counters>,
    hop: HopOptions,
}

/// `bench.v1.Downstream/Fetch`, called as the generated client calls it.
const FETCH_PATH: &str = "/bench.v1.Downstream/Fetch";

impl GrpcClient {
    /// Prepares `connections` lazily-connected channels to `target`; each
    /// connection is made through a connector that sets TCP_NODELAY and counts
    /// the connection and its wire bytes on `counters`.
    pub fn new(target: &str, connections: usize, counters: Arc<Counters>) -> Result<Self, tonic::transport::Error> {
        Self::with_hop(target, connections, &HopOptions::default(), counters).map_err(|e| match e {
            GrpcBuildError::Transport(e) => e,
            // Without TLS no file is read.
            GrpcBuildError::Files(_) => unreachable!("plaintext reads no file"),
        })
    }

    /// [`GrpcClient::new`] with TLS (an `https://` target) and compression.
    /// TLS sits above the byte counter, so wire bytes include TLS records.
    pub fn with_hop(
        target: &str,
        connections: usize,
        hop: &HopOptions,
        counters: Arc<Counters>,
    ) -> Result<Self, GrpcBuildError> {
        let encoding = hop.compression.grpc_encoding();
        let clients = channels(target, connections, hop, &counters)?
            .into_iter()
            .map(|channel| {
                let client = tonic::client::Grpc::new(channel).max_decoding_message_size(MAX_DECODING_MESSAGE_BYTES);
                match encoding {
                    Some(e) => client.send_compressed(e).accept_compressed(e),
                    None => client,
                }
            })
            .collect();
        Ok(GrpcClient { target: target.into(), clients, next: AtomicUsize::new(0), counters, hop: hop.clone() })
    }
}

/// `connections` lazily-connected channels to `target`, each connection made
/// through a connector that sets TCP_NODELAY and counts the connection and its
/// wire bytes on `counters`; TLS (an `https://` target) above the counter.
fn channels(
    target: &str,
    connections: usize,
    hop: &HopOptions,
    counters: &Arc<Counters>,
) -> Result<Vec<Channel>, GrpcBuildError> {
    let mut endpoint = Endpoint::from_shared(target.to_owned())?
        // Flow-control windows set explicitly (see `service::h2`).
        .initial_stream_window_size(service::h2::CLIENT_STREAM_WINDOW_BYTES)
        .initial_connection_window_size(service::h2::CLIENT_CONNECTION_WINDOW_BYTES)
        .http2_adaptive_window(service::h2::ADAPTIVE_WINDOW);
    if let Some(tls) = hop.grpc_tls().map_err(GrpcBuildError::Files)? {
        endpoint = endpoint.tls_config(tls)?;
    }
    Ok((0..connections.max(1))
        .map(|_| {
            let counters = counters.clone();
            let connector = tower::service_fn(move |uri: Uri| {
                let counters = counters.clone();
                async move {
                    let host = uri.host().unwrap_or("127.0.0.1").trim_matches(['[', ']']).to_owned();
                    let port = uri.port_u16().unwrap_or(80);
                    let tcp = TcpStream::connect((host.as_str(), port)).await?;
                    tcp.set_nodelay(true)?;
                    Ok::<_, std::io::Error>(TokioIo::new(CountingStream::new(tcp, counters)))
                }
            });
            endpoint.clone().connect_with_connector_lazy(connector)
        })
        .collect())
}

pub(crate) fn classify(target: &str, status: tonic::Status) -> CallError {
    let target = target.to_owned();
    // tonic reports a failed connect as UNAVAILABLE with the transport error as
    // its source; an UNAVAILABLE that the server itself sent has no source.
    let transport_failure = std::error::Error::source(&status).is_some();
    if status.code() == tonic::Code::Unavailable && transport_failure {
        CallError::Connect { target, reason: status.message().to_owned() }
    } else {
        CallError::Status { target, status: format!("gRPC {:?}: {}", status.code(), status.message()) }
    }
}

impl Outbound for GrpcClient {
    fn fetch(&self, req: FetchRequest) -> BoxFuture<'static, Result<FetchResponse, CallError>> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
        let (client, target, counters) = (self.clients[i].clone(), self.target.clone(), self.counters.clone());
        Box::pin(unary_fetch(client, FETCH_PATH, target, counters, req))
    }

    fn call(
        &self,
        method: &Arc<Method>,
        n: u64,
        message: DynamicMessage,
    ) -> BoxFuture<'static, Result<DynamicMessage, CallError>> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
        let codec = DynamicCodec { decodes: method.output.clone(), counters: self.counters.clone() };
        Box::pin(unary_call(self.clients[i].clone(), self.target.clone(), method.grpc_path.clone(), n, message, codec))
    }

    fn items(
        &self,
        req: payload::StreamRequest,
        delivery: crate::outbound::Delivery,
        page_size: u32,
    ) -> crate::outbound::ItemStream {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
        let (client, target, counters) = (self.clients[i].clone(), self.target.to_string(), self.counters.clone());
        items(client, target, counters, req, delivery, page_size)
    }

    fn target(&self) -> &str {
        &self.target
    }

    fn settings(&self) -> serde_json::Value {
        grpc_settings("grpc", self.clients.len(), &self.hop)
    }
}

/// What a tonic client's channel must be for the unary calls below: HTTP/2
/// (`Channel`, the gRPC arms) or gRPC-Web's client layer.
pub(crate) trait UnaryChannel:
    tonic::client::GrpcService<
        tonic::body::Body,
        Error: Into<tonic::codegen::StdError>,
        ResponseBody: tonic::codegen::Body<Data = Bytes, Error: Into<tonic::codegen::StdError>> + Send + 'static,
    >
{
}

impl<T> UnaryChannel for T where
    T: tonic::client::GrpcService<
            tonic::body::Body,
            Error: Into<tonic::codegen::StdError>,
            ResponseBody: tonic::codegen::Body<Data = Bytes, Error: Into<tonic::codegen::StdError>> + Send + 'static,
        >
{
}

/// The built-in `Fetch` on any tonic client (HTTP/2, or through gRPC-Web's
/// layer) at `path`: what the generated `DownstreamClient::fetch` does, with
/// a codec that counts the message bytes as prost writes and reads them:
/// `encoded_len()` on each side would measure both messages again
/// (bench/README.md, "Ratios: the tool against its peers").
pub(crate) async fn unary_fetch<T>(
    mut client: tonic::client::Grpc<T>,
    path: &'static str,
    target: Arc<str>,
    counters: Arc<Counters>,
    req: FetchRequest,
) -> Result<FetchResponse, CallError>
where
    T: UnaryChannel,
{
    let unreachable = |e: T::Error| CallError::Connect { target: target.to_string(), reason: e.into().to_string() };
    client.ready().await.map_err(unreachable)?;
    let mut req = tonic::Request::new(proto::FetchRequest::from(req));
    req.extensions_mut().insert(tonic::GrpcMethod::new(proto::downstream_server::SERVICE_NAME, "Fetch"));
    let resp = client
        .unary(req, PathAndQuery::from_static(path), CountingCodec(counters))
        .await
        .map_err(|s| classify(&target, s))?
        .into_inner();
    FetchResponse::try_from(resp)
        .map_err(|e| CallError::BadResponse { target: target.to_string(), reason: e.to_string() })
}

/// A team's own method on any tonic client, its number in the call header.
pub(crate) async fn unary_call<T>(
    mut client: tonic::client::Grpc<T>,
    target: Arc<str>,
    path: PathAndQuery,
    n: u64,
    message: DynamicMessage,
    codec: DynamicCodec,
) -> Result<DynamicMessage, CallError>
where
    T: UnaryChannel,
{
    let unreachable = |e: T::Error| CallError::Connect { target: target.to_string(), reason: e.into().to_string() };
    client.ready().await.map_err(unreachable)?;
    let mut req = tonic::Request::new(message);
    req.metadata_mut().insert(CALL_HEADER, tonic::metadata::MetadataValue::from(n));
    let resp = client.unary(req, path, codec).await.map_err(|s| classify(&target, s))?;
    Ok(resp.into_inner())
}

const ITEMS_STREAM_PATH: &str = "/bench.v1.Items/Stream";
const ITEMS_PAGE_PATH: &str = "/bench.v1.Items/Page";

/// The items of `req` over gRPC (`bench.v1.Items`): `Items/Stream`, or `Items/Page` for pages.
fn items(
    mut client: tonic::client::Grpc<Channel>,
    target: String,
    counters: Arc<Counters>,
    req: StreamRequest,
    delivery: Delivery,
    page_size: u32,
) -> ItemStream {
    if delivery == Delivery::Pages {
        return crate::items::paged(req, page_size, move |page| {
            let (mut client, target, counters) = (client.clone(), target.clone(), counters.clone());
            async move {
                client
                    .ready()
                    .await
                    .map_err(|e| CallError::Connect { target: target.clone(), reason: e.to_string() })?;
                let pb = proto::PageRequest::from(page);
                counters.add_message_bytes(pb.encoded_len() as u64, 0);
                let codec = tonic_prost::ProstCodec::<proto::PageRequest, proto::PageResponse>::default();
                let resp = client
                    .unary(tonic::Request::new(pb), PathAndQuery::from_static(ITEMS_PAGE_PATH), codec)
                    .await
                    .map_err(|s| classify(&target, s))?
                    .into_inner();
                counters.add_message_bytes(0, resp.encoded_len() as u64);
                PageResponse::try_from(resp).map_err(|e| crate::items::bad(&target, e))
            }
        });
    }
    if delivery != Delivery::Stream {
        let status = format!("gRPC delivers a stream or pages, not {delivery:?}");
        return Box::pin(futures::stream::once(async move { Err(CallError::Status { target, status }) }));
    }
    let opened = async move {
        client.ready().await.map_err(|e| CallError::Connect { target: target.clone(), reason: e.to_string() })?;
        let pb = proto::StreamRequest::from(req);
        counters.add_message_bytes(pb.encoded_len() as u64, 0);
        let codec = tonic_prost::ProstCodec::<proto::StreamRequest, proto::StreamItem>::default();
        let items = client
            .server_streaming(tonic::Request::new(pb), PathAndQuery::from_static(ITEMS_STREAM_PATH), codec)
            .await
            .map_err(|s| classify(&target, s))?
            .into_inner();
        Ok(items.map(move |item| {
            let item = item.map_err(|s| classify(&target, s))?;
            counters.add_message_bytes(0, item.encoded_len() as u64);
            StreamItem::try_from(item).map_err(|e| crate::items::bad(&target, e))
        }))
    };
    Box::pin(futures::stream::once(opened).try_flatten())
}

/// Prost's codec, counting message bytes on `counters` as they are encoded
/// (the request, before any compression) and decoded (the answer, after).
pub(crate) struct CountingCodec(pub(crate) Arc<Counters>);

impl Codec for CountingCodec {
    type Encode = proto::FetchRequest;
    type Decode = proto::FetchResponse;
    type Encoder = CountingEncoder;
    type Decoder = CountingDecoder;

    fn encoder(&mut self) -> CountingEncoder {
        CountingEncoder(ProstEncoder::default(), self.0.clone())
    }

    fn decoder(&mut self) -> CountingDecoder {
        CountingDecoder(ProstDecoder::default(), self.0.clone())
    }
}

pub(crate) struct CountingEncoder(ProstEncoder<proto::FetchRequest>, Arc<Counters>);

impl Encoder for CountingEncoder {
    type Item = proto::FetchRequest;
    type Error = tonic::Status;

    fn encode(&mut self, item: Self::Item, buf: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        let before = buf.remaining_mut();
        self.0.encode(item, buf)?;
        self.1.add_message_bytes((before - buf.remaining_mut()) as u64, 0);
        Ok(())
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}

pub(crate) struct CountingDecoder(ProstDecoder<proto::FetchResponse>, Arc<Counters>);

impl Decoder for CountingDecoder {
    type Item = proto::FetchResponse;
    type Error = tonic::Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, tonic::Status> {
        // A decode buffer holds exactly one whole message.
        let bytes = buf.remaining() as u64;
        let decoded = self.0.decode(buf)?;
        self.1.add_message_bytes(0, bytes);
        Ok(decoded)
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}

fn grpc_settings(transport: &str, connections: usize, hop: &HopOptions) -> serde_json::Value {
    let settings = serde_json::json!({
        "transport": transport,
        "library": "tonic 0.14",
        "http_version": if hop.tls.is_some() { "HTTP/2 over TLS (ALPN h2)" } else { "HTTP/2 cleartext (prior knowledge)" },
        "connections": connections,
        "balancing": "round-robin over connections",
        "tcp_nodelay": true,
        "retries": "none",
        "max_concurrent_streams": "as advertised by the server (SETTINGS_MAX_CONCURRENT_STREAMS)",
        "max_decoding_message_bytes": MAX_DECODING_MESSAGE_BYTES,
        "http2_flow_control": service::h2::windows_json(true),
    });
    let settings = if transport == "grpc-json" {
        merged(
            settings,
            serde_json::json!({
                "encoding": GRPC_JSON_CONTENT_TYPE,
                "method": FETCH_JSON_PATH,
                "json_codec": crate::hop::json_codec_settings(hop.json_codec),
            }),
        )
    } else {
        settings
    };
    merged(settings, hop.settings("h2"))
}

/// A channel whose requests say `application/grpc+json` (tonic's client
/// always writes `application/grpc`).
type JsonChannel =
    tower::util::MapRequest<Channel, fn(http::Request<tonic::body::Body>) -> http::Request<tonic::body::Body>>;

fn json_content_type(mut req: http::Request<tonic::body::Body>) -> http::Request<tonic::body::Body> {
    req.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(GRPC_JSON_CONTENT_TYPE));
    req
}

/// The `grpc-json` arm: the REST arm's JSON (serde_json of the payload
/// types) in gRPC frames, on the same channels, settings and compression as
/// [`GrpcClient`].
#[derive(Debug)]
pub struct GrpcJsonClient {
    target: String,
    clients: Vec<tonic::client::Grpc<JsonChannel>>,
    next: AtomicUsize,
    counters: Arc<Counters>,
    hop: HopOptions,
}

impl GrpcJsonClient {
    pub fn with_hop(
        target: &str,
        connections: usize,
        hop: &HopOptions,
        counters: Arc<Counters>,
    ) -> Result<Self, GrpcBuildError> {
        let encoding = hop.compression.grpc_encoding();
        let clients = channels(target, connections, hop, &counters)?
            .into_iter()
            .map(|channel| {
                let channel: JsonChannel = tower::util::MapRequest::new(channel, json_content_type as fn(_) -> _);
                let client = tonic::client::Grpc::new(channel).max_decoding_message_size(MAX_DECODING_MESSAGE_BYTES);
                match encoding {
                    Some(e) => client.send_compressed(e).accept_compressed(e),
                    None => client,
                }
            })
            .collect();
        Ok(GrpcJsonClient { target: target.to_owned(), clients, next: AtomicUsize::new(0), counters, hop: hop.clone() })
    }
}

impl Outbound for GrpcJsonClient {
    fn fetch(&self, req: FetchRequest) -> BoxFuture<'static, Result<FetchResponse, CallError>> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
        let mut client = self.clients[i].clone();
        let (target, counters, codec) = (self.target.clone(), self.counters.clone(), self.hop.json_codec);
        Box::pin(async move {
            let body = codec
                .encode(&req)
                .map_err(|e| CallError::BadResponse { target: target.clone(), reason: e.to_string() })?;
            let request_bytes = body.len() as u64;
            client.ready().await.map_err(|e| CallError::Connect { target: target.clone(), reason: e.to_string() })?;
            let resp = client
                .unary(tonic::Request::new(Bytes::from(body)), PathAndQuery::from_static(FETCH_JSON_PATH), RawCodec)
                .await
                .map_err(|s| classify(&target, s))?
                .into_inner();
            counters.add_message_bytes(request_bytes, resp.len() as u64);
            codec.decode(&resp).map_err(|e| CallError::BadResponse { target, reason: e.to_string() })
        })
    }

    fn call(
        &self,
        method: &Arc<Method>,
        n: u64,
        message: DynamicMessage,
    ) -> BoxFuture<'static, Result<DynamicMessage, CallError>> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
        let mut client = self.clients[i].clone();
        let (target, counters, method) = (self.target.clone(), self.counters.clone(), method.clone());
        let codec = self.hop.json_codec;
        Box::pin(async move {
            let body = contract::to_json_with(codec, &message);
            let request_bytes = body.len() as u64;
            client.ready().await.map_err(|e| CallError::Connect { target: target.clone(), reason: e.to_string() })?;
            let mut req = tonic::Request::new(Bytes::from(body));
            req.metadata_mut().insert(CALL_HEADER, tonic::metadata::MetadataValue::from(n));
            let resp = client
                .unary(req, method.grpc_path.clone(), RawCodec)
                .await
                .map_err(|s| classify(&target, s))?
                .into_inner();
            counters.add_message_bytes(request_bytes, resp.len() as u64);
            contract::from_json_with(codec, method.output.clone(), &resp)
                .map_err(|reason| CallError::BadResponse { target, reason })
        })
    }

    fn target(&self) -> &str {
        &self.target
    }

    fn settings(&self) -> serde_json::Value {
        grpc_settings("grpc-json", self.clients.len(), &self.hop)
    }
}
