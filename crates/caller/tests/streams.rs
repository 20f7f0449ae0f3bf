//! The streaming arms through the caller, over real sockets: for every arm
//! the front door's one NDJSON response relays a stream whole and in order,
//! item by item (the first arrives before the last is made), with the same
//! items whatever the arm; the internal hop's message bytes are counted
//! the same on both ends; a stream cut by the downstream's timeout ends
//! with an error line that says after how many items; a unary arm refuses
//! the stream route, and a streaming arm the unary one.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use caller::{Config as CallerConfig, Transport};
use downstream::{Config as DsConfig, Handle as DsHandle};
use payload::{StreamItem, StreamRequest, verify_item};
use tokio_util::sync::CancellationToken;

const INTERVAL: Duration = Duration::from_millis(15);

async fn downstream() -> DsHandle {
    let config = DsConfig { delay: Duration::from_millis(10), stream_interval: INTERVAL, ..DsConfig::default() };
    downstream::start(config, CancellationToken::new()).await.unwrap()
}

async fn caller(ds: &DsHandle, transport: Transport, timeout: Duration) -> caller::Handle {
    let config = CallerConfig {
        transport,
        downstream_grpc: Some(format!("http://{}", ds.grpc_addr)),
        downstream_rest: Some(format!("http://{}", ds.rest_addr)),
        page_size: 4,
        downstream_timeout: timeout,
        ..CallerConfig::default()
    };
    caller::start(config, CancellationToken::new()).await.unwrap()
}

fn now_nanos() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64
}

/// The lines of the front door's answer to `body` on `route`, each with
/// the time it arrived; and the status.
async fn front(c: &caller::Handle, route: &str, body: &str) -> (u16, Vec<(String, i64)>) {
    let mut resp = reqwest::Client::new()
        .post(format!("http://{}{route}", c.front_addr))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let (mut text, mut lines) = (String::new(), Vec::new());
    while let Some(chunk) = resp.chunk().await.unwrap() {
        let arrived = now_nanos();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
        while let Some(at) = text.find('\n') {
            lines.push((text.drain(..=at).collect::<String>().trim_end().to_owned(), arrived));
        }
    }
    if !text.is_empty() {
        lines.push((text, now_nanos()));
    }
    (status, lines)
}

#[tokio::test]
async fn every_streaming_arm_relays_the_stream_whole_in_order_and_item_by_item() {
    let ds = downstream().await;
    let req = StreamRequest { request_id: "relay-1".into(), items: 10, item_bytes: 24 };
    let body = serde_json::to_string(&req).unwrap();
    let mut seen: Vec<Vec<StreamItem>> = Vec::new();
    for transport in Transport::STREAMING {
        let listener = transport.listener();
        let before = ds.registry.snapshot().listeners[listener].clone();
        let c = caller(&ds, transport, Duration::from_secs(10)).await;
        let (status, lines) = front(&c, "/v1/stream", &body).await;
        assert_eq!(status, 200, "{transport}");
        assert_eq!(lines.len(), 10, "{transport}: {lines:?}");
        let items: Vec<StreamItem> = lines.iter().map(|(l, _)| serde_json::from_str(l).unwrap()).collect();
        for (i, item) in items.iter().enumerate() {
            assert_eq!(verify_item(&req, item, i as u32), Ok(()), "{transport}");
        }
        // Relayed item by item: the first line arrived before the last item
        // was made, except where a page holds items back (the last page's
        // items are made before it is sent).
        let (first_arrival, last_made) = (lines[0].1, items[9].produced_unix_nanos);
        if transport.delivery() != Some(caller::outbound::Delivery::Pages) {
            assert!(first_arrival < last_made, "{transport}: the first item arrived after the last was made");
        } else {
            // Pages of 4: the first page arrives once item 3 is made, before item 4 is.
            assert!(first_arrival < items[4].produced_unix_nanos, "{transport}: the first page waited for more");
        }
        // Both ends of the hop count the same message bytes.
        let client = c.registry.snapshot().clients[transport.as_str()].clone();
        let server = ds.registry.snapshot().listeners[listener].since(&before);
        assert_eq!(
            (client.message_bytes_in, client.message_bytes_out),
            (server.message_bytes_in, server.message_bytes_out),
            "{transport}: the hop's message bytes, caller and downstream"
        );
        assert!(server.message_bytes_out > 10 * 24, "{transport}: {server:?}");
        assert_eq!(client.requests.get("ok"), Some(&1), "{transport}: {:?}", client.requests);
        let front = c.registry.snapshot().listeners["front"].clone();
        let relayed: u64 = lines.iter().map(|(l, _)| l.len() as u64).sum();
        assert_eq!(front.message_bytes_out, relayed, "{transport}: the front hop's item bytes");
        seen.push(items);
        c.stop().await;
    }
    // The same items whatever the arm (but when each was made).
    for items in &seen[1..] {
        let strip =
            |v: &[StreamItem]| v.iter().map(|i| (i.index, i.record.clone(), i.filler.clone())).collect::<Vec<_>>();
        assert_eq!(strip(items), strip(&seen[0]));
    }
    ds.stop().await;
}

#[tokio::test]
async fn a_stream_that_stalls_ends_with_a_line_that_says_after_how_many_items() {
    let ds = downstream().await;
    // The next item waits an interval (15 ms), longer than the caller waits
    // for one: the stream is cut after its first items, however many
    // arrived in time.
    let c = caller(&ds, Transport::GrpcStream, Duration::from_millis(5)).await;
    let body = r#"{"requestId":"stall-1","items":50}"#;
    let (status, lines) = front(&c, "/v1/stream", body).await;
    assert_eq!(status, 200, "the status went out with the first byte");
    let (last, _) = lines.last().unwrap();
    let error: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(error["afterItems"].as_u64(), Some(lines.len() as u64 - 1), "{lines:?}");
    assert!(error["error"].as_str().unwrap().contains("did not answer within 5 ms"), "{error}");
    assert!(lines.len() < 51);
    let client = c.registry.snapshot().clients["grpc-stream"].clone();
    assert_eq!(client.requests.get("timeout"), Some(&1), "{:?}", client.requests);
    c.stop().await;
    ds.stop().await;
}

#[tokio::test]
async fn unary_and_streaming_arms_refuse_each_others_route() {
    let ds = downstream().await;
    let unary = caller(&ds, Transport::Grpc, Duration::from_secs(5)).await;
    let (status, lines) = front(&unary, "/v1/stream", r#"{"requestId":"x","items":3}"#).await;
    assert_eq!(status, 404);
    assert!(lines[0].0.contains("POST /v1/call"), "{lines:?}");
    let streaming = caller(&ds, Transport::RestSse, Duration::from_secs(5)).await;
    let (status, lines) = front(&streaming, "/v1/call", r#"{"requestId":"x","items":3}"#).await;
    assert_eq!(status, 404);
    assert!(lines[0].0.contains("POST /v1/stream"), "{lines:?}");
    let (status, _) = front(&streaming, "/v1/stream", r#"{"requestId":"x","items":3,"colour":1}"#).await;
    assert_eq!(status, 400, "an unknown field is refused");
    unary.stop().await;
    streaming.stop().await;
    ds.stop().await;
}
