//! The front door: `POST /v1/call`, the same for every transport.
//!
//! A front request fans out to `fanout` concurrent downstream calls; each is
//! bounded by the downstream timeout, checked as a real caller checks an
//! answer (decoded, a success status, its id echoed and its record count, with
//! [`payload::check_shape`]) and counted by outcome, the same way for both
//! transports. The records' content is not recomputed here: the harness
//! verifies it end to end, off the measured path. The answer carries
//! every record as JSON plus a `Server-Timing: downstream;dur=<ms>` header with
//! the time spent waiting on the downstream, so the harness can split latency
//! by tier.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::FutureExt;
use payload::{CallRequest, FetchRequest, FetchResponse, Limits};
use service::api::{ApiError, BodyPolicy, json_response, read_json};
use service::{Refused, WorkBudget};
use telemetry::Counters;

use crate::outbound::{CallError, Outbound};

/// The name of the hop-timing metric in `Server-Timing`.
pub const SERVER_TIMING_METRIC: &str = "downstream";

pub struct Front {
    pub client: Arc<dyn Outbound>,
    pub fanout: u32,
    pub timeout: Duration,
    pub limits: Limits,
    /// Most records one front request may ask for in total (items × fan-out).
    pub max_records: u64,
    pub front_counters: Arc<Counters>,
    pub client_counters: Arc<Counters>,
    /// Front request bodies are small JSON objects.
    pub body: BodyPolicy,
    /// The records and uploads the caller holds at once (`--max-work-bytes`).
    pub budget: WorkBudget,
    /// A team's own method, called instead of `Fetch` (`--proto`).
    pub custom: Option<Custom>,
    /// How a streaming arm's items travel (`POST /v1/stream`); `None` for a unary arm.
    pub delivery: Option<crate::outbound::Delivery>,
    /// Items per page for the paging arms (`--page-size`).
    pub page_size: u32,
}

/// A team's own method and the requests the caller sends on it.
#[derive(Debug)]
pub struct Custom {
    pub method: Arc<crate::outbound::Method>,
    pub requests: contract::Messages,
    /// Each request's protobuf size: what holding it weighs.
    request_bytes: Vec<u64>,
}

impl Custom {
    pub fn new(loaded: &contract::Loaded) -> Custom {
        use prost::Message;
        let requests = loaded.requests.clone();
        let request_bytes = requests.messages.iter().map(|m| m.encoded_len() as u64).collect();
        Custom { method: crate::outbound::Method::of(&loaded.contract), requests, request_bytes }
    }
}

/// A front request for a team's own method: `{"requestId": "17"}`, whose
/// id is the call's number (it picks the request and the answer).
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CustomCall {
    request_id: String,
}

/// Records one front request may ask for in total by default: ten downstream
/// calls at the default `--max-items`.
pub const DEFAULT_MAX_RECORDS: u64 = 100_000;

/// What one record a caller holds in flight weighs: its decoded answer and
/// its part of the front answer built from them, about twice what the
/// downstream holds of it (`bench/amplification.sh` measures the peak).
pub const WORK_BYTES_PER_RECORD: u64 = 2 * service::WORK_BYTES_PER_RECORD;

/// What the front door serves, for the reason of a 404 or 405.
pub const API: &str = "POST /v1/call";

/// The largest front request body the caller reads.
pub const MAX_FRONT_BODY_BYTES: usize = 64 * 1024;

impl From<CallError> for ApiError {
    fn from(e: CallError) -> Self {
        let status = match e {
            CallError::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            CallError::Connect { .. } | CallError::Status { .. } | CallError::BadResponse { .. } => {
                StatusCode::BAD_GATEWAY
            }
        };
        ApiError::new(status, e.to_string())
    }
}

impl Front {
    /// Admits `weight` bytes of work: a request that does not fit now is
    /// shed (503), one that never would is too large (413).
    fn admit(&self, weight: u64) -> Result<service::WorkPermit, ApiError> {
        self.budget.try_admit(weight).map_err(|r| {
            let status = match r {
                Refused::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
                Refused::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            };
            ApiError::new(status, r.to_string())
        })
    }

    /// Call `n` of a team's own method, `fanout` times at once: each bounded
    /// and counted as a `Fetch` is; the answers, as the proto3 JSON mapping,
    /// in one JSON array.
    async fn handle_custom(&self, call: CustomCall) -> Result<Response, ApiError> {
        let Some(custom) = &self.custom else {
            return Err(ApiError::new(StatusCode::NOT_FOUND, "this caller serves no contract of its own"));
        };
        let n: u64 = call.request_id.parse().map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("requestId {:?}: the call's number (a whole number) picks its request", call.request_id),
            )
        })?;
        let i = contract::pick(n, custom.requests.messages.len());
        let weight = self.budget.weigh(0, custom.request_bytes[i] * u64::from(self.fanout));
        let permit = self.admit(weight)?;
        let started = Instant::now();
        let calls = (0..self.fanout).map(|_| async {
            let message = custom.requests.messages[i].clone();
            let result = match tokio::time::timeout(self.timeout, self.client.call(&custom.method, n, message)).await {
                Err(_) => Err(CallError::Timeout {
                    target: self.client.target().to_owned(),
                    timeout_ms: self.timeout.as_millis(),
                }),
                Ok(r) => r,
            };
            self.client_counters.record(result.as_ref().map_or_else(CallError::outcome, |_| "ok"));
            result
        });
        let results = futures::future::join_all(calls).await;
        let downstream = started.elapsed();
        let mut json = vec![b'['];
        for (k, r) in results.into_iter().enumerate() {
            if k > 0 {
                json.push(b',');
            }
            json.extend(contract::to_json(&r?));
        }
        json.push(b']');
        Ok(timed(json_response(json), permit, downstream))
    }

    /// One downstream call: bounded, shape-checked and counted.
    async fn call_one(&self, req: FetchRequest) -> Result<FetchResponse, CallError> {
        // What the answer's shape is checked against: the request without its
        // upload, which goes to the client as it is (no copy of the body).
        let asked =
            FetchRequest { request_id: req.request_id.clone(), items: req.items, shape: req.shape, body: Vec::new() };
        let result = match tokio::time::timeout(self.timeout, self.client.fetch(req)).await {
            Err(_) => Err(CallError::Timeout {
                target: self.client.target().to_owned(),
                timeout_ms: self.timeout.as_millis(),
            }),
            Ok(Err(e)) => Err(e),
            Ok(Ok(resp)) => payload::check_shape(&asked, &resp)
                .map(|()| resp)
                .map_err(|e| CallError::BadResponse { target: self.client.target().to_owned(), reason: e.to_string() }),
        };
        self.client_counters.record(result.as_ref().map_or_else(CallError::outcome, |_| "ok"));
        result
    }

    async fn handle(&self, call: CallRequest) -> Result<Response, ApiError> {
        if self.delivery.is_some() {
            return Err(ApiError::new(StatusCode::NOT_FOUND, "this caller's arm streams: POST /v1/stream"));
        }
        let probe = FetchRequest { request_id: call.request_id.clone(), items: call.items, ..FetchRequest::default() };
        payload::validate(&probe, &self.limits).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
        if call.request_bytes as usize > self.limits.max_body_bytes {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "requestBytes is {}; the limit of one upload is {} bytes",
                    call.request_bytes, self.limits.max_body_bytes
                ),
            ));
        }
        let asked = u64::from(call.items) * u64::from(self.fanout);
        if asked > self.max_records {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "{} items × fan-out {} = {asked} records, over this caller's limit of {} records per request",
                    call.items, self.fanout, self.max_records
                ),
            ));
        }

        // Every downstream answer, and the one built from them, is held
        // until the front answer has been sent.
        let weight = self.budget.weigh(asked, u64::from(call.request_bytes) * u64::from(self.fanout));
        let permit = self.admit(weight)?;

        let started = Instant::now();
        let mut requests = payload::fanout_requests(&call, self.fanout);
        // One call (no fan-out, the default) is awaited as itself: `join_all`
        // cost 290 instructions a call more (bench/README.md, seventh pass).
        let results = match (requests.pop(), requests.is_empty()) {
            (Some(only), true) => vec![self.call_one(only).await],
            (last, _) => {
                requests.extend(last);
                futures::future::join_all(requests.into_iter().map(|req| self.call_one(req))).await
            }
        };
        let downstream = started.elapsed();

        let mut answer = FetchResponse { request_id: call.request_id, ..FetchResponse::default() };
        for r in results {
            let r = r?;
            answer.records.extend(r.records);
            answer.points.extend(r.points);
        }
        let json =
            serde_json::to_vec(&answer).map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        Ok(timed(json_response(json), permit, downstream))
    }
}

/// `downstream;dur=<ms>`, milliseconds to the nearest microsecond, written
/// from integers into the header's own buffer: `{:.3}` of an f64 took 600
/// instructions a call, `format!` of integers and a copy into the header
/// 1,450 (bench/README.md, seventh and eighth passes).
fn server_timing(downstream: std::time::Duration) -> HeaderValue {
    let us = (downstream.as_nanos() + 500) / 1000;
    let mut out = Vec::with_capacity(SERVER_TIMING_METRIC.len() + 32);
    out.extend_from_slice(SERVER_TIMING_METRIC.as_bytes());
    out.extend_from_slice(b";dur=");
    out.extend_from_slice(itoa::Buffer::new().format(us / 1000).as_bytes());
    let frac = (us % 1000) as u16;
    out.extend_from_slice(&[b'.', b'0' + (frac / 100) as u8, b'0' + (frac / 10 % 10) as u8, b'0' + (frac % 10) as u8]);
    // Digits, letters, ';', '=' and '.' only: always a valid header value.
    HeaderValue::from_maybe_shared(bytes::Bytes::from(out)).expect("digits, letters and ;=. only")
}

/// `resp` holding `permit` until it is sent (in its body: no extension map
/// to carry it to the edge), with the time spent on the downstream in
/// `Server-Timing`.
fn timed(resp: Response, permit: service::WorkPermit, downstream: std::time::Duration) -> Response {
    let mut resp = resp.map(|body| service::hold_until_dropped(body, permit));
    resp.headers_mut().insert("server-timing", server_timing(downstream));
    resp
}

pub fn router(front: Arc<Front>) -> Router {
    let not_found = front.clone();
    let call = if front.custom.is_some() { post(call_custom) } else { post(call) };
    Router::new()
        .route("/v1/call", call)
        .fallback(move || {
            let front = not_found.clone();
            async move {
                front.front_counters.record("not_found");
                ApiError::new(StatusCode::NOT_FOUND, format!("no such route; the API is {API}"))
            }
        })
        .with_state(front)
}

/// The whole request, not a `HeaderMap` (which axum extracts by cloning
/// the headers), its head read here and dropped before the body is awaited
/// ([`read_json`]); a combinator, not an `async fn`, which held the request
/// it was given (240 bytes) and the read twice (the future given and the
/// one awaited): 1,616 bytes in axum's box for each request, where this is
/// 680 (`-Zprint-type-sizes`; bench/README.md, issue 56, twelfth pass).
fn call(State(front): State<Arc<Front>>, req: Request) -> impl Future<Output = Response> {
    let (head, body) = req.into_parts();
    read_json::<CallRequest>(&head.headers, body, &front.body).then(move |read| async move {
        let (result, request_bytes) = match read {
            Ok((call, n)) => (front.handle(call).await, n as u64),
            Err(e) => (Err(e), 0),
        };
        answered(&front, result, request_bytes)
    })
}

/// As [`call`].
fn call_custom(State(front): State<Arc<Front>>, req: Request) -> impl Future<Output = Response> {
    let (head, body) = req.into_parts();
    read_json::<CustomCall>(&head.headers, body, &front.body).then(move |read| async move {
        let (result, request_bytes, number) = match read {
            Ok((call, n)) => {
                let number = call.request_id.parse::<u64>().ok();
                (front.handle_custom(call).await, n as u64, number)
            }
            Err(e) => (Err(e), 0, None),
        };
        let resp = answered(&front, result, request_bytes);
        // The call's bytes counted under the load segment its number names too.
        if let Some(n) = number {
            let response_bytes = if resp.status().is_success() {
                axum::body::HttpBody::size_hint(resp.body()).exact().unwrap_or(0)
            } else {
                0
            };
            front.front_counters.add_call(contract::call_segment(n), request_bytes, response_bytes);
        }
        resp
    })
}

/// Counts a front answer and its message bytes by outcome.
pub(crate) fn answered(front: &Front, result: Result<Response, ApiError>, request_bytes: u64) -> Response {
    match result {
        Ok(resp) => {
            let response_bytes = axum::body::HttpBody::size_hint(resp.body()).exact().unwrap_or(0);
            front.front_counters.add_message_bytes(request_bytes, response_bytes);
            front.front_counters.record("ok");
            resp
        }
        Err(e) => {
            front.front_counters.add_message_bytes(request_bytes, 0);
            front.front_counters.record(e.outcome());
            e.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn server_timing_is_milliseconds_to_the_nearest_microsecond() {
        let cases = [(0, "0.000"), (499, "0.000"), (500, "0.001"), (1_234_567, "1.235"), (12_345_499, "12.345")];
        for (nanos, ms) in cases {
            assert_eq!(super::server_timing(Duration::from_nanos(nanos)), format!("downstream;dur={ms}"), "{nanos} ns");
        }
        assert_eq!(super::server_timing(Duration::from_secs(30)), "downstream;dur=30000.000");
        assert_eq!(super::server_timing(Duration::from_micros(7_050)), "downstream;dur=7.050");
    }
}
