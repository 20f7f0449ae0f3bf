//! A team's own method (`--proto`, `--call`), served beside the built-in one
//! on both listeners: gRPC at its real path (`/package.Service/Method`,
//! protobuf, or the REST arm's JSON as `application/grpc+json`), and REST
//! at `POST /v1/package.Service/Method` (the proto3 JSON mapping, or
//! protobuf for the `rest-pb` arm).
//!
//! Each request is decoded into the method's input type, as a service
//! decodes what it is sent; after the service time, call *n* (its
//! [`contract::CALL_HEADER`]) is answered with answer *n* mod their count,
//! encoded as it is sent. The messages are dynamic (prost-reflect): what
//! that costs against generated types is measured in bench/README.md.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, post};
use bytes::Bytes;
use contract::codec::{Received, ServerCodec};
use contract::{CALL_HEADER, Loaded};
use prost::Message;
use prost_reflect::DynamicMessage;
use proto::json::{GRPC_JSON_CONTENT_TYPE, RawCodec};
use service::api::{ApiError, BodyPolicy, read_body};
use service::{HeldUntilSent, WorkPermit};
use telemetry::Counters;
use tonic::server::UnaryService;
use tonic::{Request as GrpcRequest, Response as GrpcResponse, Status};

use crate::core::{Core, FetchError};
use crate::grpc::fetch_status;
use crate::rest::{Encoding, fetch_error};
use payload::JsonCodec;

/// The method and its answers, shared by both listeners.
#[derive(Debug)]
pub struct Custom {
    pub loaded: Loaded,
    /// Each answer's protobuf size: what holding it weighs.
    answer_bytes: Vec<u64>,
    /// What its JSON bodies (REST and gRPC+JSON) are read and written with.
    pub codec: JsonCodec,
}

impl Custom {
    pub fn new(loaded: Loaded, codec: JsonCodec) -> Arc<Custom> {
        let answer_bytes = loaded.answers.messages.iter().map(|m| m.encoded_len() as u64).collect();
        Arc::new(Custom { loaded, answer_bytes, codec })
    }

    /// Admits call `n`'s work (its answer, weighed by its protobuf size on
    /// every arm), waits its service time, and hands back its answer with the
    /// permit its work holds.
    pub(crate) async fn answer(&self, core: &Core, n: u64) -> Result<(DynamicMessage, WorkPermit), FetchError> {
        let i = contract::pick(n, self.answer_bytes.len());
        let permit = core.hold(n, core.budget.weigh(0, self.answer_bytes[i])).await?;
        Ok((self.loaded.answers.messages[i].clone(), permit))
    }

    /// Call `n`'s answer's protobuf size: what the codec writes for it.
    fn answer_bytes(&self, n: u64) -> u64 {
        self.answer_bytes[contract::pick(n, self.answer_bytes.len())]
    }
}

/// Counts call `n` and its message bytes under the load segment it belongs to.
pub(crate) fn count_call(counters: &Counters, n: u64, request_bytes: u64, response_bytes: u64) {
    counters.add_call(contract::call_segment(n), request_bytes, response_bytes);
}

pub(crate) fn call_number(headers: &http::HeaderMap) -> u64 {
    const CALL: http::HeaderName = http::HeaderName::from_static(CALL_HEADER);
    contract::call_number(headers.get(&CALL).map(|v| v.as_bytes()))
}

/// The method on the gRPC listener, at [`contract::Contract::grpc_path`].
#[derive(Debug, Clone)]
pub struct CustomGrpc(Arc<GrpcShared>);

#[derive(Debug)]
struct GrpcShared {
    custom: Arc<Custom>,
    core: Core,
    counters: Arc<Counters>,
    compression: Option<tonic::codec::CompressionEncoding>,
}

impl CustomGrpc {
    pub fn new(
        custom: Arc<Custom>,
        core: Core,
        counters: Arc<Counters>,
        compression: Option<tonic::codec::CompressionEncoding>,
    ) -> Self {
        CustomGrpc(Arc::new(GrpcShared { custom, core, counters, compression }))
    }
}

impl tower::Service<http::Request<Body>> for CustomGrpc {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = tonic::codegen::BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let shared = self.0.clone();
        Box::pin(async move {
            let max_request = Some(shared.core.limits.max_encoded_request_bytes());
            let json = req
                .headers()
                .get(http::header::CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(GRPC_JSON_CONTENT_TYPE.as_bytes()));
            if json {
                let mut grpc = tonic::server::Grpc::new(RawCodec).apply_max_message_size_config(max_request, None);
                if let Some(e) = shared.compression {
                    grpc = grpc.accept_compressed(e).send_compressed(e);
                }
                let mut resp = grpc.unary(JsonMethod(shared), req).await;
                resp.headers_mut()
                    .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(GRPC_JSON_CONTENT_TYPE));
                return Ok(resp);
            }
            let codec =
                ServerCodec { decodes: shared.custom.loaded.contract.input(), counters: shared.counters.clone() };
            let mut grpc = tonic::server::Grpc::new(codec).apply_max_message_size_config(max_request, None);
            if let Some(e) = shared.compression {
                grpc = grpc.accept_compressed(e).send_compressed(e);
            }
            Ok(grpc.unary(ProtobufMethod(shared), req).await)
        })
    }
}

/// Protobuf: the codec decoded the request (its bytes counted here, as the
/// request ends) and counts the answer's as it writes them.
struct ProtobufMethod(Arc<GrpcShared>);

impl UnaryService<Received> for ProtobufMethod {
    type Response = DynamicMessage;
    type Future = tonic::codegen::BoxFuture<GrpcResponse<DynamicMessage>, Status>;

    fn call(&mut self, request: GrpcRequest<Received>) -> Self::Future {
        let shared = self.0.clone();
        Box::pin(async move {
            let n = contract::call_number(request.metadata().get(CALL_HEADER).map(|v| v.as_bytes()));
            let request_bytes = request.get_ref().bytes;
            drop(request);
            let answered = shared.custom.answer(&shared.core, n).await;
            shared.counters.add_message_bytes(request_bytes, 0);
            let answer_bytes = if answered.is_ok() { shared.custom.answer_bytes(n) } else { 0 };
            count_call(&shared.counters, n, request_bytes, answer_bytes);
            let (answer, permit) = answered.map_err(|e| fetch_status(&e))?;
            let mut resp = GrpcResponse::new(answer);
            resp.extensions_mut().insert(HeldUntilSent::new(permit));
            Ok(resp)
        })
    }
}

/// `application/grpc+json`: the proto3 JSON mapping in gRPC frames.
struct JsonMethod(Arc<GrpcShared>);

impl UnaryService<Bytes> for JsonMethod {
    type Response = Bytes;
    type Future = tonic::codegen::BoxFuture<GrpcResponse<Bytes>, Status>;

    fn call(&mut self, request: GrpcRequest<Bytes>) -> Self::Future {
        let shared = self.0.clone();
        Box::pin(async move {
            let n = contract::call_number(request.metadata().get(CALL_HEADER).map(|v| v.as_bytes()));
            let body = request.into_inner();
            let request_bytes = body.len() as u64;
            let (input, codec) = (shared.custom.loaded.contract.input(), shared.custom.codec);
            let answered = match contract::from_json_with(codec, input, &body) {
                Err(e) => Err(Status::invalid_argument(format!("malformed JSON request: {e}"))),
                Ok(_decoded) => shared.custom.answer(&shared.core, n).await.map_err(|e| fetch_status(&e)),
            };
            match answered {
                Ok((answer, permit)) => {
                    let json = contract::to_json_with(codec, &answer);
                    shared.counters.add_message_bytes(request_bytes, json.len() as u64);
                    count_call(&shared.counters, n, request_bytes, json.len() as u64);
                    let mut resp = GrpcResponse::new(Bytes::from(json));
                    resp.extensions_mut().insert(HeldUntilSent::new(permit));
                    Ok(resp)
                }
                Err(status) => {
                    shared.counters.add_message_bytes(request_bytes, 0);
                    count_call(&shared.counters, n, request_bytes, 0);
                    Err(status)
                }
            }
        })
    }
}

#[derive(Debug)]
struct RestShared {
    custom: Arc<Custom>,
    core: Core,
    counters: Arc<Counters>,
    body: BodyPolicy,
}

/// The method on the REST listener, for the route
/// [`contract::Contract::rest_path`]: the body decoded by its Content-Type,
/// the answer encoded as `Accept` asks (as `POST /v1/fetch` does).
pub fn rest_method(
    custom: Arc<Custom>,
    core: Core,
    counters: Arc<Counters>,
    body_read_timeout: std::time::Duration,
) -> MethodRouter {
    let body = BodyPolicy { limit_bytes: core.limits.max_encoded_request_bytes(), read_timeout: body_read_timeout };
    post(rest_call).with_state(Arc::new(RestShared { custom, core, counters, body }))
}

/// The whole request, not a `HeaderMap` (which axum extracts by cloning the
/// headers).
async fn rest_call(State(st): State<Arc<RestShared>>, req: Request) -> Response {
    let (head, body) = req.into_parts();
    let headers = &head.headers;
    let (result, request_bytes) = match Encoding::of_request(headers) {
        Err(e) => (Err(e), 0),
        Ok(encoding) => {
            let (input, codec) = (st.custom.loaded.contract.input(), st.custom.codec);
            rest_answer(
                &st,
                headers,
                body,
                |bytes| match encoding {
                    Encoding::Json => contract::from_json_with(codec, input, bytes)
                        .map_err(|e| format!("malformed JSON request: {e}")),
                    Encoding::Protobuf => {
                        DynamicMessage::decode(input, bytes).map_err(|e| format!("malformed protobuf request: {e}"))
                    }
                },
                encoding,
            )
            .await
        }
    };
    rest_answered(&st, result, request_bytes, call_number(headers))
}

/// The method at its `google.api.http` route: the message read from the
/// path, the query and the JSON body as the rule says.
pub fn rest_annotated(
    custom: Arc<Custom>,
    core: Core,
    counters: Arc<Counters>,
    body_read_timeout: std::time::Duration,
) -> Option<MethodRouter> {
    let rule = custom.loaded.contract.http.clone()?;
    let filter = axum::routing::MethodFilter::try_from(http::Method::from_bytes(rule.verb.as_bytes()).ok()?).ok()?;
    let body = BodyPolicy { limit_bytes: core.limits.max_encoded_request_bytes(), read_timeout: body_read_timeout };
    let st = Arc::new(RestShared { custom, core, counters, body });
    Some(axum::routing::on(
        filter,
        move |Path(vars): Path<Vec<(String, String)>>, RawQuery(query): RawQuery, req: Request| {
            let st = st.clone();
            let rule = rule.clone();
            async move {
                let input = st.custom.loaded.contract.input();
                let codec = st.custom.codec;
                let decode =
                    |bytes: &[u8]| rule.message_with(codec, &input, &vars, query.as_deref(), bytes).map(|_| ());
                let (head, body) = req.into_parts();
                let (result, request_bytes) = rest_answer(&st, &head.headers, body, decode, Encoding::Json).await;
                rest_answered(&st, result, request_bytes, call_number(&head.headers))
            }
        },
    ))
}

fn rest_answered(
    st: &RestShared,
    result: Result<(Encoding, Vec<u8>, WorkPermit), ApiError>,
    request_bytes: usize,
    n: u64,
) -> Response {
    match result {
        Ok((encoding, encoded, permit)) => {
            st.counters.add_message_bytes(request_bytes as u64, encoded.len() as u64);
            count_call(&st.counters, n, request_bytes as u64, encoded.len() as u64);
            st.counters.record("ok");
            encoding.response(encoded, permit)
        }
        Err(e) => {
            st.counters.add_message_bytes(request_bytes as u64, 0);
            count_call(&st.counters, n, request_bytes as u64, 0);
            st.counters.record(e.outcome());
            e.into_response()
        }
    }
}

/// Reads the body, decodes the request with `decode` (a request that does
/// not decode is a 400 with the reason), and answers call *n* in the
/// encoding `Accept` asks for (else `encoding`, the request's).
async fn rest_answer<R>(
    st: &RestShared,
    headers: &HeaderMap,
    body: Body,
    decode: impl FnOnce(&[u8]) -> Result<R, String>,
    encoding: Encoding,
) -> (Result<(Encoding, Vec<u8>, WorkPermit), ApiError>, usize) {
    let bytes = match read_body(headers, body, &st.body).await {
        Ok(b) => b,
        Err(e) => return (Err(e), 0),
    };
    let out = Encoding::of_answer(headers, encoding);
    let result = match decode(&bytes) {
        Err(reason) => Err(ApiError::new(StatusCode::BAD_REQUEST, reason)),
        Ok(_request) => match st.custom.answer(&st.core, call_number(headers)).await {
            Err(e) => Err(fetch_error(e)),
            Ok((answer, permit)) => {
                let encoded = match out {
                    Encoding::Json => contract::to_json_with(st.custom.codec, &answer),
                    Encoding::Protobuf => answer.encode_to_vec(),
                };
                Ok((out, encoded, permit))
            }
        },
    };
    (result, bytes.len())
}
