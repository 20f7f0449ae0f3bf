//! `bench.v1.Items`: one sequence of items, served in every delivery
//! pattern a team might choose. Item *i* is due `--delay` (with its jitter)
//! after the stream starts, then one more every `--stream-interval`:
//!
//! * gRPC `Stream`: a server-streaming RPC;
//! * gRPC `Page` and REST `GET /v1/items`: pages, each answered once its
//!   last item is due (the token carries the stream's start, so every page
//!   keeps the stream's schedule);
//! * REST `GET /v1/items/stream`: NDJSON (one JSON object per line), or
//!   server-sent events when `Accept` asks for `text/event-stream`.
//!
//! A streamed item is made when the transport asks for the next one (the
//! body is polled), never ahead into a queue: a consumer slower than the
//! schedule holds the producer back through HTTP/2 flow control or TCP,
//! and the listener's `streams` tally counts the items made late and by
//! how much. A stream that ends before its last item counts as cut.
//!
//! Pages and streams weigh in the tier's work budget as unary calls do
//! (`service::work`): a page its items, an open stream the one item it
//! makes at a time; what does not fit is shed (503 / RESOURCE_EXHAUSTED) or,
//! if it never could, too large (413 / RESOURCE_EXHAUSTED), before any item
//! is made. A page token is read back only if this downstream could have
//! written it: one whose stream starts in the future is refused.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use payload::{JsonCodec, PageRequest, PageResponse, PageToken, PayloadError, StreamItem, StreamRequest};
use prost::Message;
use service::api::ApiError;
use service::{HeldUntilSent, WorkPermit};
use telemetry::Counters;

use crate::core::{Core, FetchError};

/// The REST routes of the sequence.
pub const PAGES_PATH: &str = "/v1/items";
pub const STREAM_PATH: &str = "/v1/items/stream";
/// How far in the future a page token's start may lie (the clocks of
/// replicas on other hosts may disagree by this much): a later start is not
/// one this downstream wrote, and would hold the page until then.
pub const PAGE_TOKEN_CLOCK_SLACK: Duration = Duration::from_secs(1);
/// The media types of the REST streams.
pub const NDJSON: &str = "application/x-ndjson";
pub const EVENT_STREAM: &str = "text/event-stream";

/// Makes the items of a stream on its schedule.
#[derive(Debug, Clone)]
pub struct Producer {
    pub core: Core,
    /// The time between two items (`--stream-interval`; 0: as fast as asked).
    pub interval: Duration,
}

/// A REST stream's outcome, counted as the listener counts a call's when
/// its body is dropped: `ok` once its last item was made, `cancelled` if the
/// client went away before (gRPC's edge layer counts its streams itself).
pub(crate) struct Outcome {
    counters: Arc<Counters>,
    items: u32,
    pub(crate) made: u32,
}

impl Outcome {
    /// A stream of `items` items, none made yet.
    pub(crate) fn new(counters: Arc<Counters>, items: u32) -> Outcome {
        Outcome { counters, items, made: 0 }
    }
}

impl Drop for Outcome {
    fn drop(&mut self) {
        self.counters.record(if self.made >= self.items { "ok" } else { "cancelled" });
    }
}

/// Counts a stream as cut unless it was marked whole before it ends.
struct Open {
    counters: Arc<Counters>,
    whole: bool,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.counters.streams().ended(self.whole);
    }
}

fn unix_nanos(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos().min(i64::MAX as u128) as i64)
}

impl Producer {
    /// When item `index` of `req` is due, after the stream's start.
    fn due(&self, req: &StreamRequest, index: u32) -> Duration {
        payload::due_after_origin(self.core.service_time_of(&req.request_id), self.interval, index)
    }

    /// The items of `req`, each made when asked for and not before it is
    /// due; counted on `counters`.
    pub fn stream(
        &self,
        req: StreamRequest,
        counters: Arc<Counters>,
    ) -> impl Stream<Item = StreamItem> + Send + 'static {
        counters.streams().started();
        let open = Open { counters, whole: req.items == 0 };
        // The schedule on the monotonic clock, and its origin on the system
        // clock too, so each item can say when it was due.
        let (start, start_unix, producer) = (Instant::now(), unix_nanos(SystemTime::now()), self.clone());
        futures::stream::unfold((0u32, open), move |(index, mut open)| {
            let (req, producer) = (req.clone(), producer.clone());
            async move {
                if index >= req.items {
                    return None;
                }
                let after = producer.due(&req, index);
                let due = start + after;
                let asked = Instant::now();
                if asked < due {
                    crate::timer::wait_until(due).await;
                }
                let late = asked.saturating_duration_since(due).as_nanos() as u64;
                open.counters.streams().item(late);
                let due_unix = start_unix.saturating_add(after.as_nanos() as i64);
                let item = StreamItem::new(&req, index, due_unix, unix_nanos(SystemTime::now()));
                open.whole = index + 1 == req.items;
                Some((item, (index + 1, open)))
            }
        })
        // A body wrapper may poll once more after the end (tower-http's
        // compression did): an unfold panics then, a fused stream says None.
        .fuse()
    }

    /// Admits an open stream of `req`'s items: the one item it makes at a
    /// time, held until the stream ends.
    pub fn admit_stream(&self, req: &StreamRequest) -> Result<WorkPermit, FetchError> {
        payload::validate_stream(req, &self.core.limits)?;
        let budget = &self.core.budget;
        Ok(budget.try_admit(budget.weigh_items(1, u64::from(req.item_bytes)))?)
    }

    /// A page of `req`: its items, answered once the last is due. An item
    /// is made once it is due and its page has been asked for: its
    /// production time is the later of the two, so a page asked for late
    /// makes its items late, as a streamed item asked for late is; the wait
    /// for the page's last item is the pattern's, part of the transit.
    /// The page's work is admitted before the wait and held by the permit
    /// until the page is sent.
    pub async fn page(&self, req: PageRequest, counters: &Counters) -> Result<(PageResponse, WorkPermit), FetchError> {
        payload::validate_stream(&req.stream, &self.core.limits)?;
        let now = unix_nanos(SystemTime::now());
        let token = match req.page_token.as_str() {
            "" => PageToken { origin_unix_nanos: now, next: 0 },
            t => PageToken::decode(t)?,
        };
        if token.origin_unix_nanos > now.saturating_add(PAGE_TOKEN_CLOCK_SLACK.as_nanos() as i64) {
            return Err(PayloadError::InvalidField("page_token").into());
        }
        let range = payload::page_range(req.stream.items, req.page_size, token.next)?;
        let budget = &self.core.budget;
        let weight = budget.weigh_items(u64::from(range.end - range.start), u64::from(req.stream.item_bytes));
        let permit = budget.try_admit(weight)?;
        if token.next == 0 {
            counters.streams().started();
        }
        let at = |i: u32| token.origin_unix_nanos.saturating_add(self.due(&req.stream, i).as_nanos() as i64);
        if let Some(last) = range.clone().last() {
            let wait = at(last).saturating_sub(unix_nanos(SystemTime::now()));
            if wait > 0 {
                crate::timer::wait(Duration::from_nanos(wait as u64)).await;
            }
        }
        // An item whose page is asked for after it is due was held back by
        // the client, as a streamed item asked for late is.
        let items: Vec<StreamItem> =
            range.clone().map(|i| StreamItem::new(&req.stream, i, at(i), at(i).max(now))).collect();
        for i in range.clone() {
            counters.streams().item(now.saturating_sub(at(i)).max(0) as u64);
        }
        let done = range.end >= req.stream.items;
        if done {
            counters.streams().ended(true);
        }
        let next_page_token = if done { String::new() } else { PageToken { next: range.end, ..token }.encode() };
        Ok((PageResponse { items, next_page_token }, permit))
    }
}

/// The gRPC service (`bench.v1.Items`).
#[derive(Debug, Clone)]
pub struct ItemsGrpc {
    pub producer: Producer,
    pub counters: Arc<Counters>,
}

type ItemStream = Pin<Box<dyn Stream<Item = Result<proto::StreamItem, tonic::Status>> + Send>>;

impl ItemsGrpc {
    /// The tonic service: requests up to `max_request` bytes, messages
    /// compressed in `encoding` for clients that accept it (each streamed
    /// item a message of its own, compressed on its own).
    pub fn into_server(
        self,
        encoding: Option<tonic::codec::CompressionEncoding>,
        max_request: usize,
    ) -> proto::items_server::ItemsServer<ItemsGrpc> {
        let server = proto::items_server::ItemsServer::new(self).max_decoding_message_size(max_request);
        match encoding {
            Some(e) => server.send_compressed(e).accept_compressed(e),
            None => server,
        }
    }
}

#[tonic::async_trait]
impl proto::items_server::Items for ItemsGrpc {
    type StreamStream = ItemStream;

    async fn stream(
        &self,
        request: tonic::Request<proto::StreamRequest>,
    ) -> Result<tonic::Response<ItemStream>, tonic::Status> {
        let pb = request.into_inner();
        self.counters.add_message_bytes(pb.encoded_len() as u64, 0);
        let req = StreamRequest::from(pb);
        let permit = self.producer.admit_stream(&req).map_err(|e| crate::grpc::fetch_status(&e))?;
        let counters = self.counters.clone();
        let items = self.producer.stream(req, self.counters.clone()).map(move |item| {
            let pb = proto::StreamItem::from(item);
            counters.add_message_bytes(0, pb.encoded_len() as u64);
            Ok(pb)
        });
        let mut answer = tonic::Response::new(Box::pin(items) as ItemStream);
        answer.extensions_mut().insert(HeldUntilSent::new(permit));
        Ok(answer)
    }

    async fn page(
        &self,
        request: tonic::Request<proto::PageRequest>,
    ) -> Result<tonic::Response<proto::PageResponse>, tonic::Status> {
        let pb = request.into_inner();
        self.counters.add_message_bytes(pb.encoded_len() as u64, 0);
        let req = PageRequest::try_from(pb).map_err(|e| crate::grpc::status_of(&e))?;
        let status = |e: FetchError| crate::grpc::fetch_status(&e);
        let (page, permit) = self.producer.page(req, &self.counters).await.map_err(status)?;
        let pb = proto::PageResponse::from(page);
        self.counters.add_message_bytes(0, pb.encoded_len() as u64);
        let mut answer = tonic::Response::new(pb);
        answer.extensions_mut().insert(HeldUntilSent::new(permit));
        Ok(answer)
    }
}

/// The query of both REST routes: the stream, and for a page its size and token.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ItemsQuery {
    request_id: String,
    items: u32,
    #[serde(default)]
    item_bytes: u32,
    #[serde(default)]
    page_size: Option<u32>,
    #[serde(default)]
    page_token: String,
}

impl ItemsQuery {
    fn stream(&self) -> StreamRequest {
        StreamRequest { request_id: self.request_id.clone(), items: self.items, item_bytes: self.item_bytes }
    }
}

#[derive(Debug, Clone)]
struct RestItems {
    producer: Producer,
    counters: Arc<Counters>,
    compression: service::Compression,
    codec: JsonCodec,
}

/// The query, or a 400 that says what is wrong with it.
fn query(q: Result<Query<ItemsQuery>, QueryRejection>) -> Result<ItemsQuery, ApiError> {
    q.map(|Query(q)| q).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("{}; the query takes requestId, items, itemBytes, pageSize, pageToken", e.body_text()),
        )
    })
}

/// `GET /v1/items?requestId=…&items=…&pageSize=…[&pageToken=…]`: one page as JSON.
async fn page(State(s): State<RestItems>, q: Result<Query<ItemsQuery>, QueryRejection>) -> Result<Response, ApiError> {
    let q = query(q)?;
    let page_size = q.page_size.ok_or_else(|| ApiError::new(StatusCode::BAD_REQUEST, "pageSize is missing"))?;
    let req = PageRequest { stream: q.stream(), page_size, page_token: q.page_token.clone() };
    let (page, permit) = s.producer.page(req, &s.counters).await.map_err(|e| {
        let e = crate::rest::fetch_error(e);
        s.counters.record(e.outcome());
        e
    })?;
    s.counters.record("ok");
    let body = crate::rest::encode_json(s.codec, &page)?;
    s.counters.add_message_bytes(0, body.len() as u64);
    Ok(crate::rest::Encoding::Json.response(body, permit))
}

/// True when `Accept` asks for server-sent events.
fn wants_events(headers: &HeaderMap) -> bool {
    headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).any(|v| v.contains(EVENT_STREAM))
}

/// True when `Accept-Encoding` offers `coding` (and does not refuse it with `q=0`).
fn accepts(headers: &HeaderMap, coding: &str) -> bool {
    headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(
        |c| {
            let mut parts = c.split(';').map(str::trim);
            let named = parts.next().is_some_and(|name| name.eq_ignore_ascii_case(coding));
            let refused = parts.any(|p| p.strip_prefix("q=").and_then(|q| q.trim().parse::<f32>().ok()) == Some(0.0));
            named && !refused
        },
    )
}

/// `GET /v1/items/stream?requestId=…&items=…`: NDJSON, each item flushed as
/// it is made, or server-sent events (`Accept: text/event-stream`), one
/// event per item with its index as the event id. With the listener's
/// compression offered by the client, each item is compressed and flushed
/// on its own (`service::compression::StreamEncoder`).
async fn stream(
    State(s): State<RestItems>,
    headers: HeaderMap,
    q: Result<Query<ItemsQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    if q.page_size.is_some() || !q.page_token.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "a stream has no pages: pageSize and pageToken are for GET /v1/items",
        ));
    }
    let req = q.stream();
    let permit = s.producer.admit_stream(&req).map_err(|e| {
        let e = crate::rest::fetch_error(e);
        s.counters.record(e.outcome());
        e
    })?;
    let (counters, events, codec) = (s.counters.clone(), wants_events(&headers), s.codec);
    let mut outcome = Outcome::new(s.counters.clone(), req.items);
    let framed = s.producer.stream(req, s.counters.clone()).map(move |item| {
        // The whole guard, and the work permit, move into the closure, to
        // be dropped with the body.
        let (outcome, _held) = (&mut outcome, &permit);
        outcome.made = item.index + 1;
        // An item always encodes (plain strings and numbers); compact JSON
        // escapes any newline, so a line or an event's data is one line.
        let json = codec.encode(&item).unwrap_or_default();
        counters.add_message_bytes(0, json.len() as u64);
        let mut framed = Vec::with_capacity(json.len() + 32);
        if events {
            framed.extend_from_slice(format!("id: {}\ndata: ", item.index).as_bytes());
        }
        framed.extend_from_slice(&json);
        framed.extend_from_slice(if events { b"\n\n" } else { b"\n" });
        Bytes::from(framed)
    });
    let media = if events { EVENT_STREAM } else { NDJSON };
    let mut resp = Response::builder().header(header::CONTENT_TYPE, media).header(header::CACHE_CONTROL, "no-cache");
    let coding = s.compression.content_coding().filter(|c| accepts(&headers, c));
    let encoder = match coding {
        Some(_) => service::compression::StreamEncoder::new(s.compression)
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?,
        None => None,
    };
    let body = match (coding, encoder) {
        (Some(c), Some(encoder)) => {
            resp = resp.header(header::CONTENT_ENCODING, c);
            axum::body::Body::from_stream(compressed(framed, encoder))
        }
        _ => axum::body::Body::from_stream(framed.map(Ok::<_, std::io::Error>)),
    };
    resp.body(body).map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// `pieces`, each compressed and flushed by `encoder`, then the coding's end.
fn compressed(
    pieces: impl Stream<Item = Bytes> + Send + 'static,
    encoder: service::compression::StreamEncoder,
) -> impl Stream<Item = std::io::Result<Bytes>> + Send + 'static {
    futures::stream::unfold((Box::pin(pieces), Some(encoder)), |(mut pieces, encoder)| async move {
        let mut encoder = encoder?;
        match pieces.next().await {
            Some(piece) => {
                let out = encoder.piece(&piece).map(Bytes::from);
                Some((out, (pieces, Some(encoder))))
            }
            None => Some((encoder.finish().map(Bytes::from), (pieces, None))),
        }
    })
    .fuse()
}

/// The REST routes of the sequence, to merge into the REST listener's
/// router; streams compressed in `compression` for clients that offer it,
/// pages and items written by `codec`.
pub fn rest_routes(
    producer: Producer,
    counters: Arc<Counters>,
    compression: service::Compression,
    codec: JsonCodec,
) -> Router {
    Router::new().route(PAGES_PATH, get(page)).route(STREAM_PATH, get(stream)).with_state(RestItems {
        producer,
        counters,
        compression,
        codec,
    })
}
