//! The REST adapter: `POST /v1/fetch`, JSON in, [`Core`], JSON out.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use payload::{FetchRequest, PayloadError};
use telemetry::Counters;

use crate::core::Core;

/// Outcome labels counted on the REST listener.
pub const OUTCOMES: &[&str] = &["ok", "bad_request", "too_large", "unsupported_media_type", "not_found", "other"];

/// A REST error: a status and a reason, sent as `{"error": "..."}`.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub reason: String,
}

impl ApiError {
    pub fn new(status: StatusCode, reason: impl Into<String>) -> Self {
        ApiError { status, reason: reason.into() }
    }

    fn outcome(&self) -> &'static str {
        match self.status {
            StatusCode::BAD_REQUEST => "bad_request",
            StatusCode::PAYLOAD_TOO_LARGE => "too_large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            StatusCode::NOT_FOUND => "not_found",
            _ => "other",
        }
    }
}

impl From<PayloadError> for ApiError {
    fn from(e: PayloadError) -> Self {
        let status = if e.is_too_large() { StatusCode::PAYLOAD_TOO_LARGE } else { StatusCode::BAD_REQUEST };
        ApiError::new(status, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(serde_json::json!({ "error": self.reason }))).into_response()
    }
}

/// True for `application/json`, with or without parameters.
pub fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// Turns a body-read failure into the error a client should see.
pub fn body_error(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "request body is larger than the service accepts")
    } else {
        ApiError::new(StatusCode::BAD_REQUEST, rejection.body_text())
    }
}

/// A JSON 404 for every path the API does not have.
pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such route; the API is POST /v1/fetch")
}

#[derive(Debug)]
struct RestState {
    core: Core,
    counters: Arc<Counters>,
}

pub fn router(core: Core, counters: Arc<Counters>) -> Router {
    let body_limit = core.limits.max_encoded_request_bytes();
    let state = Arc::new(RestState { core, counters });
    let not_found_state = state.clone();
    Router::new()
        .route("/v1/fetch", post(fetch))
        .fallback(move || {
            let st = not_found_state.clone();
            async move {
                st.counters.record("not_found");
                not_found().await
            }
        })
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
}

async fn fetch(State(st): State<Arc<RestState>>, headers: HeaderMap, body: Result<Bytes, BytesRejection>) -> Response {
    let request_bytes = body.as_ref().map_or(0, |b| b.len() as u64);
    match handle(&st.core, &headers, body).await {
        Ok(json) => {
            st.counters.add_message_bytes(request_bytes, json.len() as u64);
            st.counters.record("ok");
            ([(header::CONTENT_TYPE, "application/json")], json).into_response()
        }
        Err(e) => {
            st.counters.add_message_bytes(request_bytes, 0);
            st.counters.record(e.outcome());
            e.into_response()
        }
    }
}

async fn handle(core: &Core, headers: &HeaderMap, body: Result<Bytes, BytesRejection>) -> Result<Vec<u8>, ApiError> {
    if !is_json(headers) {
        return Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "Content-Type must be application/json"));
    }
    let body = body.map_err(body_error)?;
    let req: FetchRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("malformed JSON request: {e}")))?;
    let resp = core.fetch(req).await?;
    serde_json::to_vec(&resp).map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}
