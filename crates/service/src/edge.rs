//! The edge of a REST listener (the caller's front door, the downstream's
//! REST listener) as one layer around the whole router: the in-flight bound
//! outermost, then the JSON error shape, then the refusal of a coding the
//! listener does not decode. The same three as the in-flight bound's layer over [`json_errors`]
//! over [`Compression::rest_layers`], folded into one [`Around`] so that a
//! request and its answer pass one layer, not three (callgrind, the paced
//! REST downstream: bench/README.md, issue 56).
//!
//! [`json_errors`]: crate::json_errors

use std::sync::Arc;

use axum::Router;
use axum::response::Response;
use telemetry::Counters;

use crate::around::wrap;
use crate::compression::IdentityOnly;
use crate::serve::App;
use crate::{Compression, InFlightLimit};

/// `router` behind the REST edge: at most `limit` requests in flight (the
/// rest answered `shed(max)`), every bare error answer given a JSON reason
/// naming `api`, counted on `counters`; request bodies in `compression`'s
/// coding decoded and answers coded in it (tower-http), or, without one, a
/// coded body answered 415. What a listener serves ([`crate::serve`]).
pub fn rest_edge(
    router: Router,
    compression: Compression,
    limit: &InFlightLimit,
    counters: Arc<Counters>,
    api: &'static str,
    shed: fn(usize) -> Response,
) -> impl App {
    rest_edge_over(compression.rest_layers(router), compression, limit, counters, api, shed)
}

/// The same edge around an app whose routes have their coding layers
/// already (`compression.rest_layers`), or that sends some requests past
/// them (the downstream's gRPC-Web, which codes its own frames).
pub fn rest_edge_over<S>(
    app: S,
    compression: Compression,
    limit: &InFlightLimit,
    counters: Arc<Counters>,
    api: &'static str,
    shed: fn(usize) -> Response,
) -> impl App
where
    S: App,
    S::Future: Unpin,
{
    let outer = (limit.admission(counters.clone(), shed), crate::errors::explainer(Some(counters), api));
    let identity_only = (compression == Compression::None).then_some(IdentityOnly);
    wrap(app, (outer, identity_only))
}
