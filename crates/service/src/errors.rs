//! Every error answer of an HTTP listener in the documented shape: the
//! answers a handler makes are [`ApiError`]s already, but the layers around
//! it answer on their own (axum's 405 for a wrong method, a 404 where no
//! fallback is routed, tower-http's 415 for a `Content-Encoding` the listener
//! does not decode, a 413 or 431 from a limit), with an empty body and
//! uncounted. [`json_errors`] gives those the `{"error": "..."}` body with a
//! reason naming what was refused, and counts each under its outcome.

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use telemetry::Counters;

use crate::api::{ApiError, is_json};
use crate::around::{Around, Before, around};

/// `router` with every error answer (4xx, 5xx) that does not carry a JSON
/// body replaced by an [`ApiError`] saying why, counted on `counters` under
/// its outcome. `api` names what the listener serves (`POST /v1/fetch`), for
/// the reason of a 404 or 405. A JSON error answer is left alone: its
/// handler counted it.
pub fn json_errors(router: Router, counters: Option<Arc<Counters>>, api: &'static str) -> Router {
    around(router, explainer(counters, api))
}

/// What [`json_errors`] does, as a layer to fold with others (`edge.rs`).
pub(crate) fn explainer(counters: Option<Arc<Counters>>, api: &'static str) -> impl Around {
    Explainer { counters, api }
}

struct Explainer {
    counters: Option<Arc<Counters>>,
    api: &'static str,
}

impl Around for Explainer {
    type Carry = Asked;

    fn before(&self, req: &mut Request) -> Before<Asked> {
        let asked = Asked::of(req);
        let head_bytes: usize = req.headers().iter().map(|(n, v)| n.as_str().len() + v.len() + 4).sum();
        if head_bytes > MAX_HEADER_BYTES {
            return Before::Answer(self.after(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE.into_response(), asked));
        }
        Before::Pass(asked)
    }

    /// `resp`, or the [`ApiError`] that explains it if it is a bare refusal.
    fn after(&self, resp: Response, asked: Asked) -> Response {
        let status = resp.status();
        if !(status.is_client_error() || status.is_server_error()) || is_json(resp.headers()) {
            return resp;
        }
        let error = ApiError::new(status, asked.reason(status, self.api));
        if let Some(c) = &self.counters {
            c.record(error.outcome());
        }
        let mut answer = error.into_response();
        // Keep what the refusal said besides its body (`Allow`,
        // `Accept-Encoding`, `Retry-After`, `Connection: close`).
        for (name, value) in resp.headers() {
            if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
                answer.headers_mut().insert(name.clone(), value.clone());
            }
        }
        answer
    }
}

/// The largest header block (names, values and their separators) a
/// listener serves, as nginx's default buffers allow; a larger one is
/// answered 431. hyper refuses a head over its own read buffer (about
/// 400 KiB) or with more than 100 fields before this layer sees it.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// What the request asked for, kept to explain a refusal: reference-counted
/// clones, so a request that is answered costs no copy of them.
struct Asked {
    method: Method,
    uri: Uri,
    content_encoding: Option<HeaderValue>,
}

impl Asked {
    fn of(req: &Request) -> Self {
        Asked {
            method: req.method().clone(),
            uri: req.uri().clone(),
            content_encoding: req.headers().get(header::CONTENT_ENCODING).cloned(),
        }
    }

    fn reason(&self, status: StatusCode, api: &str) -> String {
        let method = &self.method;
        // Only the path: a query may carry what should not be echoed.
        let path: String = self.uri.path().chars().take(200).collect();
        match status {
            StatusCode::NOT_FOUND => format!("no such route {path}; the API is {api}"),
            StatusCode::METHOD_NOT_ALLOWED => format!("{method} is not allowed on {path}; the API is {api}"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => match self.content_encoding.as_ref().and_then(|v| v.to_str().ok()) {
                Some(coding) => {
                    let coding: String = coding.chars().take(40).collect();
                    format!("Content-Encoding {coding:?} is not accepted by this listener")
                }
                None => "the request's media type is not accepted by this listener".to_owned(),
            },
            StatusCode::PAYLOAD_TOO_LARGE => "the request body is larger than this listener accepts".to_owned(),
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => {
                format!(
                    "the request's header fields are larger than the {MAX_HEADER_BYTES} bytes this listener accepts"
                )
            }
            other => format!("{} {}", other.as_u16(), other.canonical_reason().unwrap_or("error")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::HeaderMap;
    use axum::routing::post;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn answer(app: Router, req: http::Request<Body>) -> (StatusCode, HeaderMap, serde_json::Value) {
        let resp = app.oneshot(req).await.unwrap();
        let (parts, body) = resp.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        (parts.status, parts.headers, serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null))
    }

    #[tokio::test]
    async fn bare_refusals_get_the_json_body_and_are_counted() {
        let counters = Arc::new(Counters::new("rest", crate::api::API_OUTCOMES));
        let app = Router::new().route("/v1/fetch", post(|| async { "fine" }));
        let app = json_errors(app, Some(counters.clone()), "POST /v1/fetch");
        let get = http::Request::get("/v1/fetch").body(Body::empty()).unwrap();
        let (status, headers, json) = answer(app.clone(), get).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert!(json["error"].as_str().unwrap().contains("GET is not allowed on /v1/fetch"), "{json}");
        assert_eq!(headers[header::ALLOW], "POST", "the Allow header is kept");
        let (status, _, json) = answer(app.clone(), http::Request::get("/nope").body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(json["error"].as_str().unwrap().contains("the API is POST /v1/fetch"), "{json}");
        let ok = http::Request::post("/v1/fetch").body(Body::empty()).unwrap();
        assert_eq!(app.oneshot(ok).await.unwrap().status(), StatusCode::OK);
        let counted = counters.snapshot().requests;
        assert_eq!((counted["method_not_allowed"], counted["not_found"], counted["ok"]), (1, 1, 0));
    }

    #[tokio::test]
    async fn json_errors_from_handlers_are_left_alone() {
        let counters = Arc::new(Counters::new("rest", crate::api::API_OUTCOMES));
        let app = Router::new()
            .route("/v1/fetch", post(|| async { ApiError::new(StatusCode::BAD_REQUEST, "handler's own reason") }));
        let app = json_errors(app, Some(counters.clone()), "POST /v1/fetch");
        let (status, _, json) = answer(app, http::Request::post("/v1/fetch").body(Body::empty()).unwrap()).await;
        assert_eq!((status, json["error"].as_str()), (StatusCode::BAD_REQUEST, Some("handler's own reason")));
        assert_eq!(counters.snapshot().requests["bad_request"], 0, "the handler counts its own");
    }
}
