//! The JSON error shape and body decoding every HTTP API of the product shares
//! (the downstream's REST listener and the caller's front door), so both answer
//! bad input the same way.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

/// An HTTP API error: a status and a reason, sent as `{"error": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub reason: String,
}

impl ApiError {
    pub fn new(status: StatusCode, reason: impl Into<String>) -> Self {
        ApiError { status, reason: reason.into() }
    }

    /// The outcome label this error is counted under.
    pub fn outcome(&self) -> &'static str {
        match self.status {
            StatusCode::BAD_REQUEST => "bad_request",
            StatusCode::PAYLOAD_TOO_LARGE => "too_large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            StatusCode::NOT_FOUND => "not_found",
            StatusCode::BAD_GATEWAY => "bad_gateway",
            StatusCode::GATEWAY_TIMEOUT => "gateway_timeout",
            _ => "other",
        }
    }
}

/// Outcome labels an API built on [`ApiError`] counts.
pub const API_OUTCOMES: &[&str] = &[
    "ok",
    "bad_request",
    "too_large",
    "unsupported_media_type",
    "not_found",
    "bad_gateway",
    "gateway_timeout",
    "other",
];

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

/// Checks the content type (415), the body read (413 over the router's body
/// limit, 400 otherwise) and decodes the JSON (400 with serde's reason).
pub fn decode_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    if !is_json(headers) {
        return Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "Content-Type must be application/json"));
    }
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "request body is larger than the service accepts")
        } else {
            ApiError::new(StatusCode::BAD_REQUEST, rejection.body_text())
        }
    })?;
    serde_json::from_slice(&body)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("malformed JSON request: {e}")))
}

/// A `200 application/json` response from already-encoded bytes.
pub fn json_response(json: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], json).into_response()
}
