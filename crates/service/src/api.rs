//! The JSON error shape and body decoding every HTTP API of the product shares
//! (the downstream's REST listener and the caller's front door), so both answer
//! bad input the same way.

use axum::body::Body;
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
            StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => "headers_too_large",
            StatusCode::BAD_GATEWAY => "bad_gateway",
            StatusCode::GATEWAY_TIMEOUT => "gateway_timeout",
            StatusCode::REQUEST_TIMEOUT => "request_timeout",
            StatusCode::SERVICE_UNAVAILABLE => crate::limit::SHED,
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
    "method_not_allowed",
    "headers_too_large",
    "bad_gateway",
    "gateway_timeout",
    "request_timeout",
    "shed",
    "other",
];

/// The answer to a request shed by [`crate::InFlightLimit`]: 503 with a reason.
pub fn overloaded(max_in_flight: usize) -> Response {
    let reason = format!("this service is at its limit of {max_in_flight} requests in flight; retry later");
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, reason).into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, axum::Json(serde_json::json!({ "error": self.reason }))).into_response();
        if matches!(self.status, StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT) {
            // The unread rest of the body would otherwise keep the connection
            // (and whatever the client still sends) busy: close it.
            resp.headers_mut().insert(header::CONNECTION, http::HeaderValue::from_static("close"));
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            // Shed, not failed: the same request may succeed in a moment.
            resp.headers_mut().insert(header::RETRY_AFTER, http::HeaderValue::from_static("1"));
        }
        resp
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

/// How much of a request body a handler reads, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct BodyPolicy {
    /// Larger bodies are refused with 413, by their Content-Length before a
    /// byte of them is read, or as soon as they pass the limit.
    pub limit_bytes: usize,
    /// A body not complete within this time is refused with 408.
    pub read_timeout: std::time::Duration,
}

/// Checks the content type (415) and the declared length (413), reads the
/// body within the policy's limit and time (413, 408), and decodes the JSON
/// (400 with serde's reason). Returns the value and the body's size.
///
/// The headers are read before the returned future is: it borrows nothing,
/// so a handler can drop the request's head before it waits on the body.
/// A handler takes the whole `Request` for this, not a `HeaderMap`, which
/// axum extracts by cloning the request's headers (bench/README.md, issue
/// 56, twelfth pass).
pub fn read_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    policy: &BodyPolicy,
) -> impl Future<Output = Result<(T, usize), ApiError>> + use<T> {
    use futures::future::{Either, FutureExt, ready};
    if !is_json(headers) {
        let refused = ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "Content-Type must be application/json");
        return Either::Left(ready(Err(refused)));
    }
    // A combinator: an `async` block would hold the read twice, the future
    // it was given and the one it awaits.
    Either::Right(read_body(headers, body, policy).map(|read| {
        let bytes = read?;
        Ok((decode_object(&bytes)?, bytes.len()))
    }))
}

/// Decodes a request body that must be a JSON object (400 otherwise, with
/// serde's reason): serde's derived structs also take an array of the
/// fields in order, which is not the contract.
pub fn decode_object<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    decode_object_with(bytes, |b| serde_json::from_slice(b).map_err(|e| e.to_string()))
}

/// [`decode_object`] with the parsing done by `decode` (a hop's JSON
/// codec): the same object check first, the same 400 and reason shape
/// after, whatever library reads the body.
pub fn decode_object_with<T>(bytes: &[u8], decode: impl FnOnce(&[u8]) -> Result<T, String>) -> Result<T, ApiError> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first.is_some_and(|b| *b != b'{') {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "malformed JSON request: the body must be a JSON object"));
    }
    decode(bytes).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("malformed JSON request: {e}")))
}

/// The media type of a request's Content-Type, without parameters, lower case.
pub fn media_type(headers: &HeaderMap) -> Option<std::borrow::Cow<'_, str>> {
    let media = headers.get(header::CONTENT_TYPE)?.to_str().ok()?.split(';').next()?.trim();
    // Lowercased only when it has capitals: a copy per request otherwise.
    Some(if media.bytes().any(|b| b.is_ascii_uppercase()) {
        std::borrow::Cow::Owned(media.to_ascii_lowercase())
    } else {
        std::borrow::Cow::Borrowed(media)
    })
}

/// Checks the declared length (413) and reads the body within the policy's
/// limit and time (413, 408), whatever its content type. The headers are
/// read before the returned future is, as in [`read_json`].
pub fn read_body(
    headers: &HeaderMap,
    body: Body,
    policy: &BodyPolicy,
) -> impl Future<Output = Result<bytes::Bytes, ApiError>> + use<> {
    let policy = *policy;
    let too_large = move || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body is larger than the {} bytes this service accepts", policy.limit_bytes),
        )
    };
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let refused = declared.is_some_and(|n| n > policy.limit_bytes as u64);
    async move {
        if refused {
            return Err(too_large());
        }
        match tokio::time::timeout(policy.read_timeout, axum::body::to_bytes(body, policy.limit_bytes)).await {
            Err(_) => Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!("the request body did not arrive within {:?}", policy.read_timeout),
            )),
            Ok(Err(e)) if is_length_limit(&e) => Err(too_large()),
            Ok(Err(e)) => Err(ApiError::new(StatusCode::BAD_REQUEST, format!("reading the request body: {e}"))),
            Ok(Ok(b)) => Ok(b),
        }
    }
}

fn is_length_limit(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = err.source();
    }
    false
}

/// A `200 application/json` response from already-encoded bytes.
pub fn json_response(json: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], json).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_media_type_is_lower_case_without_parameters_and_copied_only_when_it_must_be() {
        let of = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, value.parse().unwrap());
            media_type(&headers).map(|m| (m.to_string(), matches!(m, std::borrow::Cow::Borrowed(_))))
        };
        assert_eq!(of("application/json"), Some(("application/json".into(), true)));
        assert_eq!(of(" application/proto ; charset=utf-8"), Some(("application/proto".into(), true)));
        assert_eq!(of("Application/JSON; charset=utf-8"), Some(("application/json".into(), false)));
        assert_eq!(media_type(&HeaderMap::new()), None);
    }
}
