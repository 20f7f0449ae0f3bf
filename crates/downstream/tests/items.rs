//! `bench.v1.Items` over real sockets, in every delivery pattern: a stream
//! arrives whole and in order, never ahead of its schedule and item by item
//! (the first before the last is made); pages keep the stream's schedule;
//! a stream the client drops is counted as cut; a consumer that stops
//! reading holds the producer back instead of filling memory.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use downstream::{Config, Handle, start};
use payload::{PageRequest, PageResponse, StreamItem, StreamRequest, verify_item};
use proto::items_client::ItemsClient;
use telemetry::{StatsSnapshot, StreamSnapshot};
use tokio_util::sync::CancellationToken;

const DELAY: Duration = Duration::from_millis(20);
const INTERVAL: Duration = Duration::from_millis(20);
/// Far more than any answer here takes, far less than forever.
const WITHIN: Duration = Duration::from_secs(10);

async fn downstream(interval: Duration) -> Handle {
    let config = Config { delay: DELAY, stream_interval: interval, ..Config::default() };
    start(config, CancellationToken::new()).await.expect("downstream starts")
}

fn now_nanos() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64
}

fn stream_req(id: &str, items: u32, item_bytes: u32) -> StreamRequest {
    StreamRequest { request_id: id.into(), items, item_bytes }
}

async fn streams(admin: SocketAddr, listener: &str) -> StreamSnapshot {
    let s: StatsSnapshot = reqwest::get(format!("http://{admin}/stats")).await.unwrap().json().await.unwrap();
    s.listeners[listener].streams.clone().unwrap_or_default()
}

/// Items with the time each arrived (Unix nanoseconds), checked whole and in order.
fn check(req: &StreamRequest, got: &[(StreamItem, i64)], sent_at: i64, what: &str) {
    assert_eq!(got.len(), req.items as usize, "{what}: every item");
    for (i, (item, _)) in got.iter().enumerate() {
        assert_eq!(verify_item(req, item, i as u32), Ok(()), "{what}");
        // Never ahead of the schedule: item i is due delay + i intervals
        // after the request, which was sent at `sent_at` or later.
        let due = sent_at + (DELAY + INTERVAL * i as u32).as_nanos() as i64;
        assert!(item.produced_unix_nanos >= due, "{what}: item {i} made {} ns early", due - item.produced_unix_nanos);
        // It says when it was due on the downstream's schedule (which starts
        // when the request arrived), and it was not made before.
        assert!(item.due_unix_nanos >= due, "{what}: item {i} due {} ns early", due - item.due_unix_nanos);
        assert!(item.produced_unix_nanos >= item.due_unix_nanos, "{what}: item {i} made before it was due");
        let spacing = item.due_unix_nanos - got[0].0.due_unix_nanos;
        assert_eq!(spacing, (INTERVAL * i as u32).as_nanos() as i64, "{what}: item {i} due on the schedule");
    }
}

/// The first item arrived before the last was made: delivered item by
/// item, not gathered into one answer.
fn streamed(got: &[(StreamItem, i64)], what: &str) {
    let (first_arrival, last_made) = (got[0].1, got.last().unwrap().0.produced_unix_nanos);
    assert!(first_arrival < last_made, "{what}: the first item arrived after the last was made");
}

#[tokio::test]
async fn a_grpc_stream_arrives_whole_in_order_and_item_by_item() {
    let ds = downstream(INTERVAL).await;
    let req = stream_req("grpc-1", 12, 32);
    let mut client = ItemsClient::connect(format!("http://{}", ds.grpc_addr)).await.unwrap();
    let sent_at = now_nanos();
    let mut stream = client.stream(proto::StreamRequest::from(req.clone())).await.unwrap().into_inner();
    let mut got = Vec::new();
    while let Some(item) = stream.message().await.unwrap() {
        got.push((StreamItem::try_from(item).unwrap(), now_nanos()));
    }
    check(&req, &got, sent_at, "grpc-stream");
    streamed(&got, "grpc-stream");
    let s = streams(ds.admin_addr, "grpc").await;
    assert_eq!((s.started, s.finished, s.cut, s.items, s.open), (1, 1, 0, 12, 0), "{s:?}");
    ds.stop().await;
}

#[tokio::test]
async fn pages_over_grpc_and_rest_keep_the_streams_schedule() {
    let ds = downstream(INTERVAL).await;
    let req = stream_req("pages-1", 10, 0);
    let mut client = ItemsClient::connect(format!("http://{}", ds.grpc_addr)).await.unwrap();
    let http = reqwest::Client::new();
    for arm in ["grpc", "rest"] {
        let (mut token, mut pages, mut got) = (String::new(), 0, Vec::new());
        let sent_at = now_nanos();
        loop {
            let page_req = PageRequest { stream: req.clone(), page_size: 4, page_token: token.clone() };
            let page: PageResponse = if arm == "grpc" {
                let pb = client.page(proto::PageRequest::from(page_req)).await.unwrap().into_inner();
                PageResponse::try_from(pb).unwrap()
            } else {
                let mut url =
                    format!("http://{}/v1/items?requestId={}&items=10&pageSize=4", ds.rest_addr, req.request_id);
                if !token.is_empty() {
                    url.push_str(&format!("&pageToken={token}"));
                }
                let resp = http.get(url).send().await.unwrap();
                assert_eq!(resp.status(), 200);
                resp.json().await.unwrap()
            };
            pages += 1;
            let arrived = now_nanos();
            got.extend(page.items.into_iter().map(|i| (i, arrived)));
            if page.next_page_token.is_empty() {
                break;
            }
            token = page.next_page_token;
        }
        assert_eq!(pages, 3, "{arm}: 4 + 4 + 2 items");
        check(&req, &got, sent_at, arm);
        // A page's items are due on the stream's schedule, exactly, and
        // made then, their page having been asked for before.
        let first = got[0].0.due_unix_nanos;
        for (i, (item, _)) in got.iter().enumerate() {
            assert_eq!(item.due_unix_nanos - first, (INTERVAL * i as u32).as_nanos() as i64, "{arm}: item {i}");
        }
        assert_eq!(got[0].0.produced_unix_nanos, got[0].0.due_unix_nanos, "{arm}: the first page was asked first");
        // A page comes once its last item is made: none before.
        for (item, arrived) in &got {
            assert!(*arrived >= item.produced_unix_nanos, "{arm}: item {} arrived before it was made", item.index);
        }
        let s = streams(ds.admin_addr, arm).await;
        assert_eq!((s.started, s.finished, s.items), (1, 1, 10), "{arm}: {s:?}");
    }
    let bad = http
        .get(format!("http://{}/v1/items?requestId=x&items=3&pageSize=2&pageToken=nonsense", ds.rest_addr))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("page_token"));
    let unknown =
        http.get(format!("http://{}/v1/items?requestId=x&items=3&colour=red", ds.rest_addr)).send().await.unwrap();
    assert_eq!(unknown.status(), 400);
    assert!(unknown.text().await.unwrap().contains("colour"), "the unknown parameter is named");
    ds.stop().await;
}

/// The items of a REST stream, NDJSON lines or server-sent events, with
/// the time each arrived.
async fn rest_stream(addr: SocketAddr, req: &StreamRequest, events: bool) -> Vec<(StreamItem, i64)> {
    let url = format!(
        "http://{addr}/v1/items/stream?requestId={}&items={}&itemBytes={}",
        req.request_id, req.items, req.item_bytes
    );
    let accept = if events { "text/event-stream" } else { "application/x-ndjson" };
    let mut resp = reqwest::Client::new().get(url).header("accept", accept).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(content_type.starts_with(accept), "{content_type}");
    let (mut text, mut got) = (String::new(), Vec::new());
    while let Some(chunk) = resp.chunk().await.unwrap() {
        let arrived = now_nanos();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
        let end = if events { "\n\n" } else { "\n" };
        while let Some(at) = text.find(end) {
            let record: String = text.drain(..at + end.len()).collect();
            let json = if events {
                let id = record.lines().find_map(|l| l.strip_prefix("id:")).unwrap().trim().to_owned();
                let data = record.lines().find_map(|l| l.strip_prefix("data:")).unwrap().trim().to_owned();
                assert_eq!(id, got.len().to_string(), "the event id is the item's index");
                data
            } else {
                record
            };
            got.push((serde_json::from_str(json.trim()).unwrap(), arrived));
        }
    }
    assert!(text.is_empty(), "nothing left over: {text:?}");
    got
}

#[tokio::test]
async fn ndjson_and_server_sent_events_arrive_whole_in_order_and_item_by_item() {
    let ds = downstream(INTERVAL).await;
    for (events, what) in [(false, "rest-ndjson"), (true, "rest-sse")] {
        let req = stream_req(what, 12, 16);
        let sent_at = now_nanos();
        let got = rest_stream(ds.rest_addr, &req, events).await;
        check(&req, &got, sent_at, what);
        streamed(&got, what);
    }
    let s = streams(ds.admin_addr, "rest").await;
    assert_eq!((s.started, s.finished, s.cut, s.items), (2, 2, 0, 24), "{s:?}");
    ds.stop().await;
}

#[tokio::test]
async fn a_stream_the_client_drops_is_counted_as_cut() {
    let ds = downstream(INTERVAL).await;
    let mut client = ItemsClient::connect(format!("http://{}", ds.grpc_addr)).await.unwrap();
    let mut stream = client.stream(proto::StreamRequest::from(stream_req("cut-1", 50, 0))).await.unwrap().into_inner();
    for _ in 0..3 {
        stream.message().await.unwrap().unwrap();
    }
    drop(stream);
    // The server learns of the reset on its next write; poll its counters
    // (bounded) until it has.
    let mut s = streams(ds.admin_addr, "grpc").await;
    for _ in 0..100 {
        if s.cut == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        s = streams(ds.admin_addr, "grpc").await;
    }
    assert_eq!((s.started, s.cut, s.finished, s.open), (1, 1, 0, 0), "{s:?}");
    assert!(s.items >= 3 && s.items < 50, "{s:?}");
    ds.stop().await;
}

/// A consumer that stops reading: the producer is held back by flow
/// control (gRPC) or the socket buffers (NDJSON), so far fewer items are
/// made than the stream has, and the tally says it was held back.
#[tokio::test]
async fn a_consumer_that_stops_reading_holds_the_producer_back() {
    let ds = downstream(Duration::ZERO).await;
    let req = stream_req("slow-1", 400, 64 * 1024);
    let mut client = ItemsClient::connect(format!("http://{}", ds.grpc_addr)).await.unwrap();
    let mut grpc = client.stream(proto::StreamRequest::from(req.clone())).await.unwrap().into_inner();
    grpc.message().await.unwrap().unwrap();
    let url = format!("http://{}/v1/items/stream?requestId=slow-2&items=400&itemBytes={}", ds.rest_addr, 64 * 1024);
    let mut ndjson = reqwest::Client::new().get(url).send().await.unwrap();
    ndjson.chunk().await.unwrap().unwrap();
    // Both consumers now read nothing while the producer could make every
    // item at once (no interval).
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (listener, held) in
        [("grpc", streams(ds.admin_addr, "grpc").await), ("rest", streams(ds.admin_addr, "rest").await)]
    {
        assert!(held.items < 200, "{listener}: {} of 400 items made for a consumer that reads nothing", held.items);
        assert_eq!((held.open, held.finished), (1, 0), "{listener}: {held:?}");
    }
    // Reading again releases the producer, and every item arrives.
    let mut count = 1;
    while grpc.message().await.unwrap().is_some() {
        count += 1;
    }
    assert_eq!(count, 400);
    let s = streams(ds.admin_addr, "grpc").await;
    assert!(s.items_late > 0 && s.held_back_nanos > 0, "the producer was held back: {s:?}");
    drop(ndjson);
    ds.stop().await;
}

/// With --compression, each streamed item is compressed and flushed on its
/// own: streams still arrive item by item (tower-http's layer would hold a
/// streamed body to its end), whole, and fewer bytes cross the wire than
/// the items' messages.
#[tokio::test]
async fn compressed_streams_still_arrive_item_by_item() {
    for coding in [service::Compression::Gzip, service::Compression::Zstd] {
        let config = Config { delay: DELAY, stream_interval: INTERVAL, compression: coding, ..Config::default() };
        let ds = start(config, CancellationToken::new()).await.unwrap();
        for (events, what) in [(false, "rest-ndjson"), (true, "rest-sse")] {
            let req = stream_req(what, 12, 0);
            let sent_at = now_nanos();
            let got = rest_stream(ds.rest_addr, &req, events).await;
            check(&req, &got, sent_at, what);
            streamed(&got, what);
        }
        let encoding = coding.grpc_encoding().unwrap();
        let client = ItemsClient::connect(format!("http://{}", ds.grpc_addr)).await.unwrap();
        let mut client = client.accept_compressed(encoding).send_compressed(encoding);
        let req = stream_req("grpc-z", 12, 0);
        let sent_at = now_nanos();
        let resp = client.stream(proto::StreamRequest::from(req.clone())).await.unwrap();
        // gRPC compresses each message on its own: small items may not
        // shrink, but they are sent compressed.
        let said = resp.metadata().get("grpc-encoding").map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(said.as_deref(), coding.content_coding(), "{coding:?}");
        let mut stream = resp.into_inner();
        let mut got = Vec::new();
        while let Some(item) = stream.message().await.unwrap() {
            got.push((StreamItem::try_from(item).unwrap(), now_nanos()));
        }
        check(&req, &got, sent_at, "grpc-stream");
        streamed(&got, "grpc-stream");
        // One compressed stream per REST answer: its items share a window.
        let s: StatsSnapshot =
            reqwest::get(format!("http://{}/stats", ds.admin_addr)).await.unwrap().json().await.unwrap();
        let rest = &s.listeners["rest"];
        assert!(rest.bytes_out.unwrap() < rest.message_bytes_out, "{coding:?}: {rest:?}");
        ds.stop().await;
    }
}

async fn listener_requests(admin: SocketAddr, listener: &str) -> std::collections::BTreeMap<String, u64> {
    let s: StatsSnapshot = reqwest::get(format!("http://{admin}/stats")).await.unwrap().json().await.unwrap();
    s.listeners[listener].requests.clone()
}

/// One ~100-byte request for a page of 10,000 items of 1 MiB each (10 GiB
/// made in memory) is refused before an item is made, over REST and gRPC,
/// by the same work budget as a unary call, and counted.
#[tokio::test]
async fn a_page_heavier_than_the_work_budget_is_refused_before_it_is_made() {
    let ds = downstream(Duration::ZERO).await;
    let url = format!("http://{}/v1/items?requestId=big&items=10000&itemBytes=1048576&pageSize=10000", ds.rest_addr);
    let resp = tokio::time::timeout(WITHIN, reqwest::get(url)).await.expect("refused at once").unwrap();
    assert_eq!(resp.status(), 413);
    let reason = resp.text().await.unwrap();
    assert!(reason.contains("bytes of work"), "{reason}");
    let mut client = ItemsClient::connect(format!("http://{}", ds.grpc_addr)).await.unwrap();
    let page = PageRequest { stream: stream_req("big", 10_000, 1 << 20), page_size: 10_000, page_token: String::new() };
    let status = tokio::time::timeout(WITHIN, client.page(proto::PageRequest::from(page)))
        .await
        .expect("refused at once")
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert_eq!(listener_requests(ds.admin_addr, "rest").await["too_large"], 1);
    assert_eq!(listener_requests(ds.admin_addr, "grpc").await["resource_exhausted"], 1);
    // A page of the usual size is still served.
    let ok = format!("http://{}/v1/items?requestId=ok&items=20&itemBytes=1024&pageSize=10", ds.rest_addr);
    assert_eq!(reqwest::get(ok).await.unwrap().status(), 200);
    ds.stop().await;
}

/// Open streams hold their item's weight until they end: with a budget of
/// 8 MiB and items of 1 MiB (4 MiB of work each while sent), a second
/// stream while the first is open is shed (503 / RESOURCE_EXHAUSTED,
/// counted `shed`), and once the first ends a new one is served.
#[tokio::test]
async fn open_streams_weigh_in_the_work_budget_until_they_end() {
    let config =
        Config { delay: DELAY, stream_interval: INTERVAL, max_work_bytes: 8 * 1024 * 1024, ..Config::default() };
    let ds = start(config, CancellationToken::new()).await.expect("downstream starts");
    let url = |id: &str| format!("http://{}/v1/items/stream?requestId={id}&items=5&itemBytes=1048576", ds.rest_addr);
    let mut first = reqwest::get(url("first")).await.unwrap();
    assert_eq!(first.status(), 200);
    first.chunk().await.unwrap().expect("the first item");
    let second = reqwest::get(url("second")).await.unwrap();
    assert_eq!(second.status(), 503, "{}", second.text().await.unwrap());
    let mut client = ItemsClient::connect(format!("http://{}", ds.grpc_addr)).await.unwrap();
    let status = client.stream(proto::StreamRequest::from(stream_req("g", 5, 1 << 20))).await.expect_err("shed");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    while first.chunk().await.unwrap().is_some() {}
    drop(first);
    let mut third = client.stream(proto::StreamRequest::from(stream_req("g2", 2, 1 << 20))).await.unwrap().into_inner();
    let mut items = 0;
    while third.message().await.unwrap().is_some() {
        items += 1;
    }
    assert_eq!(items, 2, "served once the first stream let its weight go");
    assert_eq!(listener_requests(ds.admin_addr, "rest").await["shed"], 1);
    assert_eq!(listener_requests(ds.admin_addr, "grpc").await["shed"], 1);
    ds.stop().await;
}

/// A page token whose stream starts an hour from now was not written by
/// this downstream; it is refused at once (400 / INVALID_ARGUMENT) rather
/// than held until then.
#[tokio::test]
async fn a_page_token_starting_in_the_future_is_refused_not_held() {
    let ds = downstream(INTERVAL).await;
    let token = format!("{}.0", now_nanos() + 3600 * 1_000_000_000);
    let url = format!("http://{}/v1/items?requestId=x&items=3&pageSize=2&pageToken={token}", ds.rest_addr);
    let resp = tokio::time::timeout(WITHIN, reqwest::get(url)).await.expect("answered at once").unwrap();
    assert_eq!(resp.status(), 400);
    assert!(resp.text().await.unwrap().contains("page_token"));
    let mut client = ItemsClient::connect(format!("http://{}", ds.grpc_addr)).await.unwrap();
    let page = PageRequest { stream: stream_req("x", 3, 0), page_size: 2, page_token: token };
    let status = tokio::time::timeout(WITHIN, client.page(proto::PageRequest::from(page)))
        .await
        .expect("answered at once")
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    ds.stop().await;
}
