//! The REST adapter: `POST /v1/fetch`, JSON in, [`Core`], JSON out.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use payload::{FetchRequest, PayloadError};
use telemetry::Counters;
use telemetry::api::{ApiError, BodyPolicy, json_response, read_json};

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
    body: BodyPolicy,
}

/// The REST API; request bodies must arrive within `body_read_timeout`.
pub fn router(core: Core, counters: Arc<Counters>, body_read_timeout: std::time::Duration) -> Router {
    let body = BodyPolicy { limit_bytes: core.limits.max_encoded_request_bytes(), read_timeout: body_read_timeout };
    let state = Arc::new(RestState { core, counters, body });
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
        .with_state(state)
}

async fn fetch(State(st): State<Arc<RestState>>, headers: HeaderMap, body: Body) -> Response {
    let result = match read_json::<FetchRequest>(&headers, body, &st.body).await {
        Ok((req, request_bytes)) => match st.core.fetch(req).await.map_err(api_error) {
            Ok(resp) => serde_json::to_vec(&resp)
                .map(|json| (json, request_bytes))
                .map_err(|e| (ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()), request_bytes)),
            Err(e) => Err((e, request_bytes)),
        },
        Err(e) => Err((e, 0)),
    };
    match result {
        Ok((json, request_bytes)) => {
            st.counters.add_message_bytes(request_bytes as u64, json.len() as u64);
            st.counters.record("ok");
            json_response(json)
        }
        Err((e, request_bytes)) => {
            st.counters.add_message_bytes(request_bytes as u64, 0);
            st.counters.record(e.outcome());
            e.into_response()
        }
    }
}
