//! The gRPC adapter: protobuf in, [`Core`], protobuf out; and its JSON twin
//! (`bench.v1.Downstream/FetchJson`, `application/grpc+json`: the REST API's
//! JSON in gRPC frames, the `grpc-json` arm) on the same listener.
//!
//! Besides the conversion it owns what every gRPC server must do at its edge
//! and tonic leaves to the server: a request message that does not decode is
//! INVALID_ARGUMENT (tonic's codec says INTERNAL), a request body that does
//! not arrive in time is DEADLINE_EXCEEDED, and every status sent, whoever
//! produced it (tonic's framing, an unknown method, the handler), is counted.

use proto::json::{FETCH_JSON_PATH, GRPC_JSON_CONTENT_TYPE, RawCodec};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use bytes::{BufMut, Bytes};
use http_body::Frame;
use prost::Message;
use proto::downstream_server::{Downstream, DownstreamServer};
use telemetry::Counters;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::{NamedService, UnaryService};
use tonic::{Code, Request as GrpcRequest, Response as GrpcResponse, Status};
use tonic_prost::{ProstDecoder, ProstEncoder};

use crate::core::{Core, FetchError};
use payload::{JsonCodec, PayloadError};
use service::around::{Around, Before, wrap};
use service::{HeldUntilSent, InFlightLimit, Refused, WorkPermit};
use tokio::sync::OwnedSemaphorePermit;

/// Outcome labels counted on the gRPC listener: one per gRPC status code,
/// `shed` for requests refused by the in-flight limit, and `other` for an
/// answer without a readable status.
pub const OUTCOMES: &[&str] = &[
    "ok",
    "cancelled",
    "unknown",
    "invalid_argument",
    "deadline_exceeded",
    "not_found",
    "already_exists",
    "permission_denied",
    "resource_exhausted",
    "failed_precondition",
    "aborted",
    "out_of_range",
    "unimplemented",
    "internal",
    "unavailable",
    "data_loss",
    "unauthenticated",
    service::SHED,
    "other",
];

/// The outcome label of a gRPC status code.
pub fn outcome(code: Code) -> &'static str {
    match code {
        Code::Ok => "ok",
        Code::Cancelled => "cancelled",
        Code::Unknown => "unknown",
        Code::InvalidArgument => "invalid_argument",
        Code::DeadlineExceeded => "deadline_exceeded",
        Code::NotFound => "not_found",
        Code::AlreadyExists => "already_exists",
        Code::PermissionDenied => "permission_denied",
        Code::ResourceExhausted => "resource_exhausted",
        Code::FailedPrecondition => "failed_precondition",
        Code::Aborted => "aborted",
        Code::OutOfRange => "out_of_range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::Unavailable => "unavailable",
        Code::DataLoss => "data_loss",
        Code::Unauthenticated => "unauthenticated",
    }
}

const FETCH_PATH: &str = "/bench.v1.Downstream/Fetch";

#[derive(Debug)]
pub struct GrpcService {
    core: Core,
    counters: Arc<Counters>,
    compression: Option<tonic::codec::CompressionEncoding>,
    /// What `FetchJson`'s messages are read and written with.
    json_codec: JsonCodec,
}

impl GrpcService {
    pub fn new(core: Core, counters: Arc<Counters>) -> Self {
        GrpcService { core, counters, compression: None, json_codec: JsonCodec::default() }
    }

    /// `FetchJson`'s messages read and written with `codec`.
    pub fn with_json_codec(self, codec: JsonCodec) -> Self {
        GrpcService { json_codec: codec, ..self }
    }

    /// Accepts requests compressed with `encoding` and compresses responses
    /// with it for clients that accept it (`grpc-accept-encoding`).
    pub fn with_compression(self, encoding: Option<tonic::codec::CompressionEncoding>) -> Self {
        GrpcService { compression: encoding, ..self }
    }

    /// The `bench.v1.Downstream` service with explicit message limits.
    pub fn into_server(self) -> FetchServer {
        let max_request = self.core.limits.max_encoded_request_bytes();
        let service = Arc::new(self);
        FetchServer {
            service: service.clone(),
            generated: DownstreamServer::from_arc(service),
            max_request_bytes: max_request,
        }
    }
}

/// Size limits are RESOURCE_EXHAUSTED (HTTP 413 on REST); every other
/// validation failure is INVALID_ARGUMENT (HTTP 400).
pub fn status_of(e: &PayloadError) -> Status {
    if e.is_too_large() { Status::resource_exhausted(e.to_string()) } else { Status::invalid_argument(e.to_string()) }
}

/// A request's status: [`status_of`] its payload error, or
/// RESOURCE_EXHAUSTED for work over the budget; work that did not fit now
/// carries [`SHED_MARK`], so the listener's edge counts it with the requests
/// the in-flight limit shed.
pub(crate) fn fetch_status(e: &FetchError) -> Status {
    match e {
        FetchError::Payload(e) => status_of(e),
        FetchError::Refused(r) => {
            let mut status = Status::resource_exhausted(r.to_string());
            if let Refused::Busy { .. } = r {
                status.metadata_mut().insert(SHED_MARK, tonic::metadata::MetadataValue::from_static("1"));
            }
            status
        }
    }
}

/// The header a handler's shed answer carries to the listener's edge
/// ([`edge`], [`counted`]), which takes it off before the answer is sent.
/// Only an error carries it, in a trailers-only answer: a served request
/// pays nothing for the mark (a shared flag in every request's extensions
/// cost an allocated map and two boxes a call).
const SHED_MARK: &str = "x-shed-by-handler";

impl GrpcService {
    /// `Fetch`'s answer and the work permit its encoder holds until the
    /// answer's body is sent or dropped ([`ResponseEncoder`]).
    async fn serve_fetch(&self, request: GrpcRequest<proto::FetchRequest>) -> Result<GrpcResponse<Held>, Status> {
        // Outcomes are counted where the status is sent (`count_outcomes`),
        // so the ones tonic answers without calling this count too.
        let req = request.into_inner();
        let request_bytes = req.encoded_len() as u64;
        let fetched = match payload::FetchRequest::try_from(req) {
            Ok(req) => self.core.fetch(req).await,
            Err(e) => Err(e.into()),
        };
        // The answer's bytes are counted as it is encoded
        // ([`ResponseEncoder`]), not measured twice.
        self.counters.add_message_bytes(request_bytes, 0);
        match fetched {
            Ok((resp, permit)) => Ok(GrpcResponse::new(Held(proto::FetchResponse::from(resp), permit))),
            Err(e) => Err(fetch_status(&e)),
        }
    }
}

/// `Fetch`'s answer with the work permit it holds until sent.
#[derive(Debug)]
pub struct Held(proto::FetchResponse, WorkPermit);

/// The generated server's `Fetch`, for completeness: [`FetchServer`] routes
/// `Fetch` to [`FetchMethod`], so only a caller of the generated server
/// directly gets here; the permit is then held in the answer's extensions.
#[tonic::async_trait]
impl Downstream for GrpcService {
    async fn fetch(
        &self,
        request: GrpcRequest<proto::FetchRequest>,
    ) -> Result<GrpcResponse<proto::FetchResponse>, Status> {
        let Held(resp, permit) = self.serve_fetch(request).await?.into_inner();
        let mut answer = GrpcResponse::new(resp);
        answer.extensions_mut().insert(HeldUntilSent::new(permit));
        Ok(answer)
    }
}

/// `bench.v1.Downstream`: `Fetch` decoded with [`FetchCodec`]; any other
/// method goes to the generated server, which answers UNIMPLEMENTED.
#[derive(Debug, Clone)]
pub struct FetchServer {
    service: Arc<GrpcService>,
    generated: DownstreamServer<GrpcService>,
    max_request_bytes: usize,
}

impl NamedService for FetchServer {
    const NAME: &'static str = proto::downstream_server::SERVICE_NAME;
}

impl<B> tower::Service<http::Request<B>> for FetchServer
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = tonic::codegen::BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() == FETCH_JSON_PATH {
            let (service, max_request) = (self.service.clone(), self.max_request_bytes);
            return Box::pin(async move {
                let mut grpc =
                    tonic::server::Grpc::new(RawCodec).apply_max_message_size_config(Some(max_request), None);
                if let Some(encoding) = service.compression {
                    grpc = grpc.accept_compressed(encoding).send_compressed(encoding);
                }
                let mut resp = grpc.unary(FetchJsonMethod(service), req).await;
                resp.headers_mut()
                    .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(GRPC_JSON_CONTENT_TYPE));
                Ok(resp)
            });
        }
        if req.uri().path() != FETCH_PATH {
            return self.generated.call(req);
        }
        let (service, max_request) = (self.service.clone(), self.max_request_bytes);
        Box::pin(async move {
            let codec = FetchCodec { counters: service.counters.clone() };
            let mut grpc = tonic::server::Grpc::new(codec).apply_max_message_size_config(Some(max_request), None);
            if let Some(encoding) = service.compression {
                grpc = grpc.accept_compressed(encoding).send_compressed(encoding);
            }
            Ok(grpc.unary(FetchMethod(service), req).await)
        })
    }
}

struct FetchMethod(Arc<GrpcService>);

impl UnaryService<proto::FetchRequest> for FetchMethod {
    type Response = Held;
    type Future = tonic::codegen::BoxFuture<GrpcResponse<Held>, Status>;

    fn call(&mut self, request: GrpcRequest<proto::FetchRequest>) -> Self::Future {
        let service = self.0.clone();
        Box::pin(async move { service.serve_fetch(request).await })
    }
}

struct FetchJsonMethod(Arc<GrpcService>);

impl UnaryService<Bytes> for FetchJsonMethod {
    type Response = Bytes;
    type Future = tonic::codegen::BoxFuture<GrpcResponse<Bytes>, Status>;

    fn call(&mut self, request: GrpcRequest<Bytes>) -> Self::Future {
        let service = self.0.clone();
        Box::pin(async move {
            let body = request.into_inner();
            let request_bytes = body.len() as u64;
            let codec = service.json_codec;
            let fetched = match crate::rest::decode_json::<payload::FetchRequest>(codec, &body) {
                Ok(req) => service.core.fetch(req).await.map_err(|e| fetch_status(&e)),
                Err(e) => Err(Status::invalid_argument(e.reason)),
            };
            let encoded = fetched.and_then(|(resp, permit)| {
                let json = codec.encode(&resp).map_err(|e| Status::internal(format!("encoding the answer: {e}")));
                json.map(|json| (json, permit))
            });
            match encoded {
                Ok((json, permit)) => {
                    service.counters.add_message_bytes(request_bytes, json.len() as u64);
                    let mut answer = GrpcResponse::new(Bytes::from(json));
                    answer.extensions_mut().insert(HeldUntilSent::new(permit));
                    Ok(answer)
                }
                Err(status) => {
                    service.counters.add_message_bytes(request_bytes, 0);
                    Err(status)
                }
            }
        })
    }
}

/// Prost encoding, with a request that does not decode answered
/// INVALID_ARGUMENT: the client sent it wrong, the server did not fail; each
/// answer's message bytes counted as they are written; and its work permit
/// held by the encoder, which lives in the answer's body until the body is
/// sent or dropped (no extension to carry it: an allocated map and a boxed
/// value saved per call).
#[derive(Debug, Clone)]
pub struct FetchCodec {
    counters: Arc<Counters>,
}

impl Codec for FetchCodec {
    type Encode = Held;
    type Decode = proto::FetchRequest;
    type Encoder = ResponseEncoder;
    type Decoder = RequestDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        ResponseEncoder { prost: ProstEncoder::default(), counters: self.counters.clone(), _held: None }
    }

    fn decoder(&mut self) -> Self::Decoder {
        RequestDecoder(ProstDecoder::default())
    }
}

/// Prost's encoder, counting the message bytes it writes: prost measures the
/// message once to encode it, and `encoded_len` beforehand would measure it
/// again (4% of the downstream's instructions per request, 10 records;
/// bench/README.md, "Ratios: the tool against its peers, in one run").
#[derive(Debug)]
pub struct ResponseEncoder {
    prost: ProstEncoder<proto::FetchResponse>,
    counters: Arc<Counters>,
    /// The permit of the answer encoded: dropped with the body.
    _held: Option<WorkPermit>,
}

impl Encoder for ResponseEncoder {
    type Item = Held;
    type Error = Status;

    fn encode(&mut self, Held(item, permit): Self::Item, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        let before = buf.remaining_mut();
        self.prost.encode(item, buf)?;
        self.counters.add_message_bytes(0, (before - buf.remaining_mut()) as u64);
        self._held = Some(permit);
        Ok(())
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.prost.buffer_settings()
    }
}

#[derive(Debug)]
pub struct RequestDecoder(ProstDecoder<proto::FetchRequest>);

impl Decoder for RequestDecoder {
    type Item = proto::FetchRequest;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Status> {
        self.0.decode(buf).map_err(|s| Status::invalid_argument(format!("malformed protobuf request: {}", s.message())))
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}

/// The answer to a request shed by the in-flight limit.
pub fn overloaded(max_in_flight: usize) -> Response {
    Status::resource_exhausted(format!(
        "this service is at its limit of {max_in_flight} requests in flight; retry later"
    ))
    .into_http()
}

/// `router` behind the gRPC listener's edge, one hand-written layer (not
/// three `axum::middleware::from_fn`, each of which boxes a future and clones
/// a boxed service per call; bench/README.md, "Ratios: the tool against its
/// peers, in one run"). Outermost first, it
/// * answers a header block over [`service::MAX_HEADER_BYTES`] with
///   RESOURCE_EXHAUSTED, counted under it;
/// * sheds a request over `limit` with [`overloaded`], counted `shed`; an
///   admitted one holds its permit until its answer is sent or dropped;
/// * counts the status of every answer on `counters` under [`outcome`]:
///   from the headers of a trailers-only answer, from the trailers
///   otherwise, and as `cancelled` if the request or its answer was dropped
///   before a status was sent (the client reset the stream or went away);
/// * bounds the request body in time: one not complete within
///   `body_timeout` of its headers fails with DEADLINE_EXCEEDED, which ends
///   the stream, frees what the decoder reserved for the message, and
///   answers the client (REST's 408).
pub fn edge(
    router: Router,
    limit: &InFlightLimit,
    counters: Arc<Counters>,
    body_timeout: Duration,
) -> impl service::App {
    wrap(router, Edge { limit: Some(limit.clone()), counters, body_timeout })
}

/// [`edge`] without the in-flight limit: for gRPC services served on a
/// listener whose own edge already admits each request (the gRPC-Web arm
/// on the REST listener), so a request is admitted once. Wrapped around
/// the whole router, as [`edge`] is, not layered over each route.
pub(crate) fn counted(router: Router, counters: Arc<Counters>, body_timeout: Duration) -> Counted {
    wrap(router, Edge { limit: None, counters, body_timeout })
}

/// What [`counted`] makes.
pub(crate) type Counted = service::around::Wrapped<Router, Edge>;

/// The answer to a request whose header block is over
/// [`service::MAX_HEADER_BYTES`] (REST's 431), as a gRPC client reads it:
/// RESOURCE_EXHAUSTED in a `grpc-status`. A block over the connection's
/// HTTP/2 limit (`ServerSettings::http2_max_header_list_bytes`, eight times
/// larger) never gets here: h2 answers it with a bare 431.
fn headers_too_large(headers: &http::HeaderMap) -> Option<Response> {
    let head_bytes: usize = headers.iter().map(|(n, v)| n.as_str().len() + v.len() + 4).sum();
    (head_bytes > service::MAX_HEADER_BYTES).then(|| {
        Status::resource_exhausted(format!(
            "the request's metadata is {head_bytes} bytes, more than the {} this listener accepts",
            service::MAX_HEADER_BYTES
        ))
        .into_http()
    })
}

pub(crate) struct Edge {
    limit: Option<InFlightLimit>,
    counters: Arc<Counters>,
    body_timeout: Duration,
}

impl Around for Edge {
    type Carry = (PendingOutcome, Option<OwnedSemaphorePermit>);

    fn before(&self, req: &mut Request) -> Before<Self::Carry> {
        if let Some(refused) = headers_too_large(req.headers()) {
            self.counters.record(outcome(Code::ResourceExhausted));
            return Before::Answer(refused);
        }
        let permit = match &self.limit {
            None => None,
            Some(limit) => match limit.try_admit() {
                Some(permit) => Some(permit),
                None => {
                    self.counters.record(service::SHED);
                    return Before::Answer(overloaded(limit.max()));
                }
            },
        };
        let pending = PendingOutcome(Some(self.counters.clone()));
        let timeout = self.body_timeout;
        let body = std::mem::take(req.body_mut());
        *req.body_mut() = Body::new(DeadlineBody::new(body, timeout));
        Before::Pass((pending, permit))
    }

    fn after(&self, mut resp: Response, (mut pending, permit): Self::Carry) -> Response {
        let watching = match status_in(resp.headers()) {
            Some(code) => {
                let shed = code == Code::ResourceExhausted && resp.headers_mut().remove(SHED_MARK).is_some();
                pending.record(if shed { service::SHED } else { outcome(code) });
                None
            }
            None => Some(pending),
        };
        let held = resp.extensions_mut().remove::<HeldUntilSent>();
        resp.map(|inner| Body::new(Answered { inner, pending: watching, _held: (permit, held) }))
    }
}

/// An answer's body on its way out: its status counted from the trailers,
/// and its permits held until it is sent or dropped.
struct Answered {
    inner: Body,
    pending: Option<PendingOutcome>,
    _held: (Option<OwnedSemaphorePermit>, Option<HeldUntilSent>),
}

impl http_body::Body for Answered {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let (Poll::Ready(Some(Ok(frame))), Some(pending)) = (&polled, &mut this.pending)
            && let Some(code) = frame.trailers_ref().and_then(status_in)
        {
            pending.record(outcome(code));
            this.pending = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

fn status_in(headers: &http::HeaderMap) -> Option<Code> {
    headers.get(Status::GRPC_STATUS).map(|v| Code::from_bytes(v.as_bytes()))
}

/// A request whose outcome is not yet counted; counted `cancelled` if dropped.
pub(crate) struct PendingOutcome(Option<Arc<Counters>>);

impl PendingOutcome {
    fn record(&mut self, label: &str) {
        if let Some(counters) = self.0.take() {
            counters.record(label);
        }
    }
}

impl Drop for PendingOutcome {
    fn drop(&mut self) {
        self.record("cancelled");
    }
}

struct DeadlineBody {
    inner: Body,
    timeout: Duration,
    /// When the deadline passes: `timeout` after the headers.
    due: tokio::time::Instant,
    /// The timer, made only once the body is waited for: a unary message
    /// usually arrives with its headers and never needs one (a boxed sleep
    /// and a timer registration saved per call).
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The body is complete (or failed): no deadline any more.
    done: bool,
}

impl DeadlineBody {
    fn new(inner: Body, timeout: Duration) -> Self {
        DeadlineBody { inner, timeout, due: tokio::time::Instant::now() + timeout, deadline: None, done: false }
    }
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(None) => {
                (this.done, this.deadline) = (true, None);
                Poll::Ready(None)
            }
            Poll::Ready(Some(frame)) => {
                if this.inner.is_end_stream() {
                    (this.done, this.deadline) = (true, None);
                }
                Poll::Ready(Some(frame.map_err(|e| Status::from_error(e.into()))))
            }
            Poll::Pending if this.done => Poll::Pending,
            Poll::Pending => {
                let due = this.due;
                let deadline = this.deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
                match deadline.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        (this.done, this.deadline) = (true, None);
                        Poll::Ready(Some(Err(Status::deadline_exceeded(format!(
                            "the request message did not arrive within {:?}",
                            this.timeout
                        )))))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
