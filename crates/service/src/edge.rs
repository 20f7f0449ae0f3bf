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
    let outer = (limit.admission(counters.clone(), shed), crate::errors::explainer(Some(counters), api));
    let identity_only = (compression == Compression::None).then_some(IdentityOnly);
    wrap(compression.rest_layers(router), (outer, identity_only))
}
