//! The REST adapter: `POST /v1/fetch`, JSON in, [`Core`], JSON out.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use payload::{FetchRequest, PayloadError};
use telemetry::Counters;
use telemetry::api::{ApiError, decode_json, json_response};

use crate::core::Core;

/// Outcome labels counted on the REST listener.
pub use telemetry::api::API_OUTCOMES as OUTCOMES;

fn api_error(e: PayloadError) -> ApiError {
    let status = if e.is_too_large() { StatusCode::PAYLOAD_TOO_LARGE } else { StatusCode::BAD_REQUEST };
    ApiError::new(status, e.to_string())
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
                ApiError::new(StatusCode::NOT_FOUND, "no such route; the API is POST /v1/fetch")
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
            json_response(json)
        }
        Err(e) => {
            st.counters.add_message_bytes(request_bytes, 0);
            st.counters.record(e.outcome());
            e.into_response()
        }
    }
}

async fn handle(core: &Core, headers: &HeaderMap, body: Result<Bytes, BytesRejection>) -> Result<Vec<u8>, ApiError> {
    let req: FetchRequest = decode_json(headers, body)?;
    let resp = core.fetch(req).await.map_err(api_error)?;
    serde_json::to_vec(&resp).map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}
