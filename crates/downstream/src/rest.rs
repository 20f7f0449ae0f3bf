//! The REST adapter: `POST /v1/fetch`, JSON or protobuf in, [`Core`], the
//! same encoding (or the one `Accept` names) out.
//!
//! One listener serves both encodings: the request body is decoded by its
//! Content-Type (`application/json`, or `application/x-protobuf` with the
//! gRPC arm's messages: the `rest-pb` arm), and the answer is encoded as the
//! `Accept` header asks, or as the request was when it names neither.
//! Errors are always the JSON error shape.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use payload::{FetchRequest, FetchResponse, JsonCodec, PayloadError};
use prost::Message;
use serde::Serialize;
use serde::de::DeserializeOwned;
use service::api::{ApiError, BodyPolicy, media_type, read_body};
use service::{Refused, WorkPermit};
use telemetry::Counters;

use crate::core::{Core, FetchError};

/// Outcome labels counted on the REST listener.
pub use service::api::API_OUTCOMES as OUTCOMES;

/// The media type of protobuf bodies.
pub const PROTOBUF_MEDIA_TYPE: &str = "application/x-protobuf";

/// The two encodings the REST listener speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Json,
    Protobuf,
}

impl Encoding {
    /// The encoding of a media type this listener speaks.
    fn of(media: &str) -> Option<Encoding> {
        match media {
            "application/json" => Some(Encoding::Json),
            PROTOBUF_MEDIA_TYPE | "application/protobuf" => Some(Encoding::Protobuf),
            _ => None,
        }
    }

    /// The request body's encoding, by its Content-Type (415 otherwise).
    pub fn of_request(headers: &HeaderMap) -> Result<Encoding, ApiError> {
        media_type(headers).as_deref().and_then(Encoding::of).ok_or_else(|| {
            ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("Content-Type must be application/json or {PROTOBUF_MEDIA_TYPE}"),
            )
        })
    }

    /// The answer's encoding: the first of `Accept`'s media types this
    /// listener speaks, else the request's.
    pub fn of_answer(headers: &HeaderMap, request: Encoding) -> Encoding {
        headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|m| Encoding::of(&m.split(';').next().unwrap_or("").trim().to_ascii_lowercase()))
            .next()
            .unwrap_or(request)
    }

    pub(crate) fn decode(self, codec: JsonCodec, bytes: &[u8]) -> Result<FetchRequest, ApiError> {
        let bad = |what: String| ApiError::new(StatusCode::BAD_REQUEST, what);
        match self {
            Encoding::Json => decode_json(codec, bytes),
            Encoding::Protobuf => {
                let pb =
                    proto::FetchRequest::decode(bytes).map_err(|e| bad(format!("malformed protobuf request: {e}")))?;
                FetchRequest::try_from(pb).map_err(api_error)
            }
        }
    }

    pub(crate) fn encode(self, codec: JsonCodec, resp: FetchResponse) -> Result<Vec<u8>, ApiError> {
        match self {
            Encoding::Json => encode_json(codec, &resp),
            Encoding::Protobuf => Ok(proto::FetchResponse::from(resp).encode_to_vec()),
        }
    }

    /// The answer `encoded`, holding `permit` until it is sent or dropped.
    pub(crate) fn response(self, encoded: Vec<u8>, permit: WorkPermit) -> Response {
        let media = match self {
            Encoding::Json => "application/json",
            Encoding::Protobuf => PROTOBUF_MEDIA_TYPE,
        };
        ([(header::CONTENT_TYPE, media)], service::bytes_holding(encoded, permit)).into_response()
    }
}

/// A JSON request body read by the hop's codec: a JSON object or 400, the
/// reason in the refusal's JSON body whichever library read it.
pub fn decode_json<T: DeserializeOwned>(codec: JsonCodec, bytes: &[u8]) -> Result<T, ApiError> {
    service::api::decode_object_with(bytes, |b| codec.decode(b).map_err(|e| e.to_string()))
}

/// An answer written by the hop's codec (500 should it fail).
pub fn encode_json<T: Serialize>(codec: JsonCodec, value: &T) -> Result<Vec<u8>, ApiError> {
    codec.encode(value).map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

pub(crate) fn api_error(e: PayloadError) -> ApiError {
    let status = if e.is_too_large() { StatusCode::PAYLOAD_TOO_LARGE } else { StatusCode::BAD_REQUEST };
    ApiError::new(status, e.to_string())
}

/// A request whose work does not fit now is shed (503, counted `shed`); one
/// that never would is too large (413).
pub fn fetch_error(e: FetchError) -> ApiError {
    match e {
        FetchError::Payload(e) => api_error(e),
        FetchError::Refused(r @ Refused::Busy { .. }) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, r.to_string()),
        FetchError::Refused(r @ Refused::TooLarge { .. }) => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, r.to_string())
        }
    }
}

#[derive(Debug)]
struct RestState {
    core: Core,
    counters: Arc<Counters>,
    body: BodyPolicy,
    codec: JsonCodec,
}

/// What the REST listener serves, for the reason of a 404 or 405.
pub const API: &str = "POST /v1/fetch";

/// The built-in method's route.
pub const API_PATH: &str = "/v1/fetch";

/// The REST API; request bodies must arrive within `body_read_timeout`,
/// JSON ones read and answered with `codec`.
pub fn router(core: Core, counters: Arc<Counters>, body_read_timeout: std::time::Duration, codec: JsonCodec) -> Router {
    let body = BodyPolicy { limit_bytes: core.limits.max_encoded_request_bytes(), read_timeout: body_read_timeout };
    let state = Arc::new(RestState { core, counters, body, codec });
    let not_found_state = state.clone();
    Router::new()
        .route(API_PATH, post(fetch))
        .fallback(move || {
            let st = not_found_state.clone();
            async move {
                st.counters.record("not_found");
                ApiError::new(StatusCode::NOT_FOUND, format!("no such route; the API is {API}"))
            }
        })
        .with_state(state)
}

/// Reads, decodes and answers one request; the request's message bytes are
/// known once its body is read, whatever happens after.
///
/// The whole request, not a `HeaderMap` (which axum extracts by cloning the
/// headers): its head is read and dropped before the body is awaited.
async fn answer(st: &RestState, req: Request) -> (Result<(Encoding, Vec<u8>, WorkPermit), ApiError>, usize) {
    let (head, body) = req.into_parts();
    let encoding = match Encoding::of_request(&head.headers) {
        Ok(e) => e,
        Err(e) => return (Err(e), 0),
    };
    let out = Encoding::of_answer(&head.headers, encoding);
    let read = read_body(&head.headers, body, &st.body);
    drop(head);
    let bytes = match read.await {
        Ok(b) => b,
        Err(e) => return (Err(e), 0),
    };
    let result = async {
        let req = encoding.decode(st.codec, &bytes)?;
        let (resp, permit) = st.core.fetch(req).await.map_err(fetch_error)?;
        Ok((out, out.encode(st.codec, resp)?, permit))
    }
    .await;
    (result, bytes.len())
}

async fn fetch(State(st): State<Arc<RestState>>, req: Request) -> Response {
    match answer(&st, req).await {
        (Ok((encoding, encoded, permit)), request_bytes) => {
            st.counters.add_message_bytes(request_bytes as u64, encoded.len() as u64);
            st.counters.record("ok");
            encoding.response(encoded, permit)
        }
        (Err(e), request_bytes) => {
            st.counters.add_message_bytes(request_bytes as u64, 0);
            st.counters.record(e.outcome());
            e.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &'static str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (k.clone(), http::HeaderValue::from_static(v))).collect()
    }

    #[test]
    fn the_request_picks_the_decoder_and_accept_the_answer() {
        let pb = headers(&[(header::CONTENT_TYPE, "application/x-protobuf")]);
        assert_eq!(Encoding::of_request(&pb), Ok(Encoding::Protobuf));
        assert_eq!(Encoding::of_answer(&pb, Encoding::Protobuf), Encoding::Protobuf);
        let json = headers(&[(header::CONTENT_TYPE, "application/json; charset=utf-8")]);
        assert_eq!(Encoding::of_request(&json), Ok(Encoding::Json));
        let asks = headers(&[
            (header::CONTENT_TYPE, "application/json"),
            (header::ACCEPT, "text/html, application/x-protobuf;q=0.9"),
        ]);
        assert_eq!(Encoding::of_answer(&asks, Encoding::Json), Encoding::Protobuf);
        let other = headers(&[(header::CONTENT_TYPE, "text/plain")]);
        assert_eq!(Encoding::of_request(&other).unwrap_err().status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
}
