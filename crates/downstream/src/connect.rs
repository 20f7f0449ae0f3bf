//! Connect and gRPC-Web on the REST listener, at each method's gRPC path
//! (`/bench.v1.Downstream/Fetch`, a team's `/package.Service/Method`), told
//! apart by Content-Type as a Connect server tells its protocols apart:
//!
//! * **Connect unary** (the `connect` and `connect-pb` arms): the message is
//!   the whole HTTP body, `application/json` or `application/proto`, with no
//!   length prefix and no trailers; the answer is `200` in the request's
//!   codec; an error is the HTTP status the protocol maps its code to with
//!   the JSON body `{"code": "...", "message": "..."}`
//!   (<https://connectrpc.com/docs/protocol>). Written here from the
//!   protocol: the `connectrpc` crate is built on its own protobuf runtime
//!   (buffa), not on prost, which the built-in messages and a team's dynamic
//!   messages (prost-reflect) are.
//! * **gRPC-Web** (`application/grpc-web*`, the `grpc-web` arm): the gRPC
//!   listener's own tonic services behind tonic-web's layer: gRPC's 5-byte
//!   length-prefixed frames in an HTTP/1.1 body, the status in a last frame
//!   flagged `0x80`. Sent there before the REST routes ([`WebFirst`]), so at
//!   a path no method has it is answered UNIMPLEMENTED, as gRPC would.
//!
//! Both count on the REST listener's counters, where their bytes arrive.
//! The in-flight limit is the REST listener's edge; Connect's body limits
//! and compression (`Content-Encoding`) are its routes' layers, gRPC-Web's
//! (`grpc-encoding`) tonic's own.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, post};
use prost::Message;
use prost_reflect::DynamicMessage;
use service::WorkPermit;
use service::api::{ApiError, BodyPolicy, media_type, read_body};
use telemetry::Counters;
use tower::Layer;

use crate::core::Core;
use crate::custom::Custom;
use crate::rest::{Encoding, fetch_error};

/// Connect's media type of protobuf bodies (`connect-pb`).
pub const PROTO_MEDIA_TYPE: &str = "application/proto";
/// Connect's media type of JSON bodies (`connect`).
pub const JSON_MEDIA_TYPE: &str = "application/json";
/// The header a Connect client sends with the value `1`.
pub const PROTOCOL_VERSION_HEADER: http::HeaderName = http::HeaderName::from_static("connect-protocol-version");
/// The built-in method's gRPC path, where Connect and gRPC-Web call it.
pub const FETCH_PATH: &str = "/bench.v1.Downstream/Fetch";

/// The Connect code for an error this listener answers with `status`, and
/// the HTTP status the protocol sends that code with.
pub fn connect_code(status: StatusCode) -> (&'static str, StatusCode) {
    match status {
        StatusCode::BAD_REQUEST => ("invalid_argument", StatusCode::BAD_REQUEST),
        StatusCode::PAYLOAD_TOO_LARGE => ("resource_exhausted", StatusCode::TOO_MANY_REQUESTS),
        StatusCode::SERVICE_UNAVAILABLE => ("unavailable", StatusCode::SERVICE_UNAVAILABLE),
        StatusCode::REQUEST_TIMEOUT => ("deadline_exceeded", StatusCode::GATEWAY_TIMEOUT),
        StatusCode::NOT_FOUND => ("not_found", StatusCode::NOT_FOUND),
        _ => ("internal", StatusCode::INTERNAL_SERVER_ERROR),
    }
}

/// `e` as a Connect error: its code's HTTP status and `{"code", "message"}`.
fn connect_error(e: &ApiError) -> Response {
    let (code, status) = connect_code(e.status);
    let mut resp = (status, axum::Json(serde_json::json!({ "code": code, "message": e.reason }))).into_response();
    if matches!(e.status, StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT) {
        resp.headers_mut().insert(header::CONNECTION, http::HeaderValue::from_static("close"));
    }
    resp
}

/// What a route answers: the built-in method or a team's own.
#[derive(Debug, Clone)]
enum Answers {
    BuiltIn,
    Custom(Arc<Custom>),
}

struct Shared {
    answers: Answers,
    core: Core,
    counters: Arc<Counters>,
    body: BodyPolicy,
    json_codec: payload::JsonCodec,
}

/// Everything the routes share, from the downstream's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub compression: Option<tonic::codec::CompressionEncoding>,
    pub body_read_timeout: Duration,
    /// The JSON library of `connect`'s bodies (`--json-codec`).
    pub json_codec: payload::JsonCodec,
}

/// The REST listener's routes at the gRPC paths: the built-in method, and a
/// team's own when there is one, each answering Connect ([`WebFirst`] sends
/// gRPC-Web past them).
pub fn routes(core: &Core, counters: &Arc<Counters>, settings: &Settings, custom: Option<&Arc<Custom>>) -> Router {
    let body =
        BodyPolicy { limit_bytes: core.limits.max_encoded_request_bytes(), read_timeout: settings.body_read_timeout };
    let route = |answers: Answers| -> MethodRouter {
        let shared =
            Shared { answers, core: core.clone(), counters: counters.clone(), body, json_codec: settings.json_codec };
        post(serve).with_state(Arc::new(shared))
    };
    match custom {
        None => Router::new().route(FETCH_PATH, route(Answers::BuiltIn)),
        // A team's contract that is the built-in method answers at its path.
        Some(c) if c.loaded.contract.grpc_path() == FETCH_PATH => {
            Router::new().route(FETCH_PATH, route(Answers::Custom(c.clone())))
        }
        Some(c) => Router::new()
            .route(FETCH_PATH, route(Answers::BuiltIn))
            .route(&c.loaded.contract.grpc_path(), route(Answers::Custom(c.clone()))),
    }
}

/// The REST listener's app: a gRPC-Web request (`application/grpc-web*`)
/// straight to tonic-web, at whatever path, as a Connect server tells its
/// protocols apart by Content-Type before its routes; every other request to
/// the REST routes. So a gRPC-Web call passes one router (tonic's), not the
/// REST routes' as well (callgrind, the paced gRPC-Web downstream:
/// bench/README.md, issue 56).
#[derive(Clone)]
pub(crate) struct WebFirst {
    web: tonic_web::GrpcWebService<crate::grpc::Counted>,
    rest: Router,
}

impl WebFirst {
    /// `rest` (with its coding layers) behind gRPC-Web's services: the
    /// built-in `Fetch` and a team's method, counted on `counters`.
    pub fn new(
        rest: Router,
        core: &Core,
        counters: &Arc<Counters>,
        settings: &Settings,
        custom: Option<&Arc<Custom>>,
    ) -> Self {
        WebFirst { web: grpc_web(core, counters, settings, custom), rest }
    }
}

/// Whether a request's Content-Type is gRPC-Web's (any case, any suffix).
fn is_grpc_web(headers: &HeaderMap) -> bool {
    const WEB: &[u8] = b"application/grpc-web";
    headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().get(..WEB.len()).is_some_and(|p| p.eq_ignore_ascii_case(WEB)))
}

impl tower::Service<Request> for WebFirst {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = WebOrRest;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        // Both are always ready: an axum Router and tonic-web over one.
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> WebOrRest {
        if is_grpc_web(req.headers()) {
            WebOrRest::Web(Box::new(self.web.call(req)))
        } else {
            WebOrRest::Rest(self.rest.call(req))
        }
    }
}

/// The answer of [`WebFirst`]: tonic-web's, its body boxed as axum's, or the
/// REST routes'. tonic-web's future is boxed: held inline, its size made
/// every REST answer's future larger to move (+600 to +970 instructions a
/// call on the REST listener, callgrind: bench/README.md, issue 56). The
/// REST routes' future (320 bytes) stays inline: boxing it would cost every
/// REST call an allocation to make the rarer gRPC-Web answer smaller.
#[allow(clippy::large_enum_variant)]
pub(crate) enum WebOrRest {
    Web(Box<<tonic_web::GrpcWebService<crate::grpc::Counted> as tower::Service<Request>>::Future>),
    Rest(<Router as tower::Service<Request>>::Future),
}

impl std::future::Future for WebOrRest {
    type Output = Result<Response, std::convert::Infallible>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        match self.get_mut() {
            WebOrRest::Web(f) => std::pin::Pin::new(f).poll(cx).map(|r| r.map(|resp| resp.map(Body::new))),
            WebOrRest::Rest(f) => std::pin::Pin::new(f).poll(cx),
        }
    }
}

/// The gRPC services (built-in `Fetch`, a team's method) behind tonic-web,
/// counting on the REST listener's counters; the REST listener's edge has
/// admitted the request already, so only its status is counted here.
fn grpc_web(
    core: &Core,
    counters: &Arc<Counters>,
    settings: &Settings,
    custom: Option<&Arc<Custom>>,
) -> tonic_web::GrpcWebService<crate::grpc::Counted> {
    let fetch = crate::grpc::GrpcService::new(core.clone(), counters.clone()).with_compression(settings.compression);
    let mut router = tonic::service::Routes::new(fetch.into_server()).prepare().into_axum_router();
    if let Some(c) = custom {
        let service = crate::custom::CustomGrpc::new(c.clone(), core.clone(), counters.clone(), settings.compression);
        router = router.route_service(&c.loaded.contract.grpc_path(), service);
    }
    let router = crate::grpc::counted(router, counters.clone(), settings.body_read_timeout);
    tonic_web::GrpcWebLayer::new().layer(router)
}

async fn serve(State(st): State<Arc<Shared>>, req: Request) -> Response {
    let encoding = match media_type(req.headers()).as_deref() {
        Some(JSON_MEDIA_TYPE) => Encoding::Json,
        Some(PROTO_MEDIA_TYPE) => Encoding::Protobuf,
        _ => return unsupported(&st.counters),
    };
    let (parts, body) = req.into_parts();
    // The call number picks a team's answer; the built-in one reads none.
    let n = match st.answers {
        Answers::Custom(_) => crate::custom::call_number(&parts.headers),
        Answers::BuiltIn => 0,
    };
    let (result, request_bytes) = answer(&st, &parts.headers, body, encoding, n).await;
    let counted = |response_bytes: usize| {
        st.counters.add_message_bytes(request_bytes as u64, response_bytes as u64);
        if let Answers::Custom(_) = st.answers {
            crate::custom::count_call(&st.counters, n, request_bytes as u64, response_bytes as u64);
        }
    };
    match result {
        Ok((encoded, permit)) => {
            counted(encoded.len());
            st.counters.record("ok");
            let media = if encoding == Encoding::Json { JSON_MEDIA_TYPE } else { PROTO_MEDIA_TYPE };
            ([(header::CONTENT_TYPE, media)], service::bytes_holding(encoded, permit)).into_response()
        }
        Err(e) => {
            counted(0);
            st.counters.record(e.outcome());
            connect_error(&e)
        }
    }
}

/// A Content-Type neither Connect nor gRPC-Web: 415 with the types accepted
/// (`Accept-Post`), as the Connect protocol asks.
fn unsupported(counters: &Counters) -> Response {
    counters.record("unsupported_media_type");
    let accepted = "application/json, application/proto, application/grpc-web+proto";
    let reason = format!("Content-Type must be one of {accepted}");
    let mut resp = connect_error(&ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, reason));
    *resp.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
    resp.headers_mut().insert("accept-post", http::HeaderValue::from_static(accepted));
    resp
}

/// Reads and answers one Connect unary request; its message bytes are known
/// once its body is read, whatever happens after.
async fn answer(
    st: &Shared,
    headers: &HeaderMap,
    body: Body,
    encoding: Encoding,
    n: u64,
) -> (Result<(Vec<u8>, WorkPermit), ApiError>, usize) {
    let bad = |reason: String| ApiError::new(StatusCode::BAD_REQUEST, reason);
    if let Some(v) = headers.get(&PROTOCOL_VERSION_HEADER)
        && v.as_bytes() != b"1"
    {
        return (Err(bad(format!("{PROTOCOL_VERSION_HEADER} must be 1, not {v:?}"))), 0);
    }
    let bytes = match read_body(headers, body, &st.body).await {
        Ok(b) => b,
        Err(e) => return (Err(e), 0),
    };
    let result = match &st.answers {
        Answers::BuiltIn => {
            async {
                let req = encoding.decode(st.json_codec, &bytes)?;
                let (resp, permit) = st.core.fetch(req).await.map_err(fetch_error)?;
                Ok((encoding.encode(st.json_codec, resp)?, permit))
            }
            .await
        }
        Answers::Custom(c) => {
            let input = c.loaded.contract.input();
            let decoded = match encoding {
                Encoding::Json => {
                    contract::from_json_with(c.codec, input, &bytes).map_err(|e| format!("malformed JSON request: {e}"))
                }
                Encoding::Protobuf => DynamicMessage::decode(input, bytes.as_ref())
                    .map_err(|e| format!("malformed protobuf request: {e}")),
            };
            match decoded {
                Err(reason) => Err(bad(reason)),
                Ok(_request) => c.answer(&st.core, n).await.map_err(fetch_error).map(|(answer, permit)| {
                    let encoded = match encoding {
                        Encoding::Json => contract::to_json_with(c.codec, &answer),
                        Encoding::Protobuf => answer.encode_to_vec(),
                    };
                    (encoded, permit)
                }),
            }
        }
    };
    (result, bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_is_sent_with_the_status_the_protocol_maps_its_code_to() {
        assert_eq!(connect_code(StatusCode::BAD_REQUEST), ("invalid_argument", StatusCode::BAD_REQUEST));
        assert_eq!(connect_code(StatusCode::PAYLOAD_TOO_LARGE), ("resource_exhausted", StatusCode::TOO_MANY_REQUESTS));
        assert_eq!(connect_code(StatusCode::SERVICE_UNAVAILABLE), ("unavailable", StatusCode::SERVICE_UNAVAILABLE));
        assert_eq!(connect_code(StatusCode::REQUEST_TIMEOUT), ("deadline_exceeded", StatusCode::GATEWAY_TIMEOUT));
        assert_eq!(connect_code(StatusCode::IM_A_TEAPOT), ("internal", StatusCode::INTERNAL_SERVER_ERROR));
    }
}
