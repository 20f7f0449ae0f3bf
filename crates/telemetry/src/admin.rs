//! The admin listener's routes: `/healthz`, `/metrics`, `/stats`.
//!
//! It is served by the `service` crate's accept loop without counters, so its
//! own traffic never shows up in the measured bytes.

use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::Registry;

/// What the admin listener serves, for the reason of a 404 or 405.
pub const ADMIN_API: &str = "GET /healthz, /metrics or /stats";

pub fn admin_router(registry: Arc<Registry>) -> Router {
    let metrics_reg = registry.clone();
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/metrics",
            get(move || {
                let reg = metrics_reg.clone();
                async move { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], reg.prometheus()) }
            }),
        )
        .route(
            "/stats",
            get(move || {
                let reg = registry.clone();
                async move { axum::Json(reg.snapshot()).into_response() }
            }),
        )
}
