//! The front door of the streaming arms: `POST /v1/stream` with
//! `{"requestId", "items", "itemBytes"}` answers one chunked HTTP/1.1
//! NDJSON response, the same for every arm, relaying each item as it
//! arrives over the internal hop (re-encoded as JSON, as a
//! backend-for-frontend does), so the harness stamps every item end to end.
//!
//! Each next item is bounded by the downstream timeout and its index
//! checked (items arrive whole and in order); the items' content is
//! verified by the harness, off the measured path. A stream that fails
//! after *k* items ends with one line `{"error": …, "afterItems": k}`: its
//! status was sent with the first byte.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use payload::StreamRequest;
use service::api::{ApiError, read_json};

use crate::front::Front;
use crate::outbound::{CallError, ItemStream};

/// The streaming front route.
pub const STREAM_PATH: &str = "/v1/stream";
/// The media type of its answer.
pub const NDJSON: &str = "application/x-ndjson";

/// What is left of a relayed stream.
struct Relay {
    items: ItemStream,
    front: Arc<Front>,
    relayed: u32,
    /// Items the stream asked for.
    asked: u32,
    done: bool,
}

/// The front listener's tally counts each stream relayed and each item as
/// its line is handed to the socket, beside the bytes it counts: a
/// round's front bytes per item divide by the items of the same window.
impl Drop for Relay {
    fn drop(&mut self) {
        self.front.front_counters.streams().ended(self.relayed >= self.asked);
    }
}

/// The last line of a stream that failed after `after` items.
fn error_line(e: &CallError, after: u32) -> String {
    let mut line = serde_json::json!({ "error": e.to_string(), "afterItems": after }).to_string();
    line.push('\n');
    line
}

impl Relay {
    /// The next line to relay, or `None` at the end.
    async fn next(mut self) -> Option<(Result<String, std::convert::Infallible>, Relay)> {
        if self.done {
            return None;
        }
        let front = self.front.clone();
        let next = tokio::time::timeout(front.timeout, self.items.next()).await;
        let failed = |e: CallError, mut relay: Relay| {
            front.client_counters.record(e.outcome());
            relay.done = true;
            let line = error_line(&e, relay.relayed);
            Some((Ok(line), relay))
        };
        match next {
            Err(_) => {
                let target = front.client.target().to_owned();
                failed(CallError::Timeout { target, timeout_ms: front.timeout.as_millis() }, self)
            }
            Ok(None) => {
                front.client_counters.record("ok");
                None
            }
            Ok(Some(Err(e))) => failed(e, self),
            Ok(Some(Ok(item))) if item.index != self.relayed => {
                let target = front.client.target().to_owned();
                let reason = format!("item {} arrived where item {} was due", item.index, self.relayed);
                failed(CallError::BadResponse { target, reason }, self)
            }
            Ok(Some(Ok(item))) => {
                let mut line = serde_json::to_string(&item).unwrap_or_default();
                front.front_counters.add_message_bytes(0, line.len() as u64);
                front.front_counters.streams().item(0);
                line.push('\n');
                self.relayed += 1;
                Some((Ok(line), self))
            }
        }
    }
}

/// The streaming route, to merge into the front door's router.
pub fn router(front: Arc<Front>) -> axum::Router {
    axum::Router::new().route(STREAM_PATH, axum::routing::post(stream)).with_state(front)
}

/// `POST /v1/stream`: the items of the stream asked for, as NDJSON.
async fn stream(State(front): State<Arc<Front>>, req: axum::extract::Request) -> Response {
    let (head, body) = req.into_parts();
    let read = read_json::<StreamRequest>(&head.headers, body, &front.body);
    drop(head);
    let (result, request_bytes) = match read.await {
        Ok((req, n)) => (open(&front, req), n as u64),
        Err(e) => (Err(e), 0),
    };
    // Counted as every front answer is; the items' bytes as they are relayed.
    crate::front::answered(&front, result, request_bytes)
}

fn open(front: &Arc<Front>, req: StreamRequest) -> Result<Response, ApiError> {
    let Some(delivery) = front.delivery else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "this caller's arm is unary (POST /v1/call); the streaming arms (grpc-stream, grpc-pages, rest-pages, \
             rest-ndjson, rest-sse) serve POST /v1/stream",
        ));
    };
    payload::validate_stream(&req, &front.limits).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    let asked = req.items;
    let items = front.client.items(req, delivery, front.page_size);
    front.front_counters.streams().started();
    let relay = Relay { items, front: front.clone(), relayed: 0, asked, done: false };
    let lines = futures::stream::unfold(relay, Relay::next).fuse();
    Ok(([(header::CONTENT_TYPE, NDJSON)], Body::from_stream(lines)).into_response())
}
