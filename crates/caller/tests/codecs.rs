//! `--json-codec` over real sockets: each codec at both ends of every
//! JSON-bodied arm (rest, grpc-json, the REST streams) returns the records
//! the generator made, moves the same message bytes as serde_json where the
//! codecs write the same bytes, is reported by both tiers, and refuses bad
//! JSON and oversized bodies exactly as serde_json does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use caller::Transport;
use caller::clients::{ClientSettings, build};
use caller::hop::HopOptions;
use caller::outbound::Delivery;
use downstream::{Config as DsConfig, Handle as DsHandle};
use futures::StreamExt;
use payload::{FetchRequest, JsonCodec, Limits, Shape, StreamRequest};
use tokio_util::sync::CancellationToken;

async fn downstream(codec: JsonCodec) -> DsHandle {
    let limits = Limits { max_body_bytes: 1024, ..Limits::default() };
    let config = DsConfig { delay: Duration::from_millis(1), limits, json_codec: codec, ..DsConfig::default() };
    downstream::start(config, CancellationToken::new()).await.unwrap()
}

fn settings(ds: &DsHandle, transport: Transport, codec: JsonCodec) -> ClientSettings {
    let addr = if transport.is_grpc() { ds.grpc_addr } else { ds.rest_addr };
    ClientSettings {
        transport,
        target: format!("http://{addr}"),
        grpc_connections: 1,
        rest_http2: false,
        hop: HopOptions { json_codec: codec, ..HopOptions::default() },
    }
}

fn requests() -> [FetchRequest; 3] {
    [
        FetchRequest { request_id: "codec-\"1\"-é".into(), items: 1, ..FetchRequest::default() },
        FetchRequest { request_id: "codec-2".into(), items: 100, ..FetchRequest::default() },
        FetchRequest { request_id: "codec-3".into(), items: 20, shape: Shape::Timeseries, ..FetchRequest::default() },
    ]
}

/// (message bytes in, message bytes out) the downstream counted on
/// `listener` over the three requests, per JSON arm and codec.
async fn message_bytes(transport: Transport, codec: JsonCodec) -> (u64, u64) {
    let ds = downstream(codec).await;
    let counters = Arc::new(transport.client_counters("test"));
    let client = build(&settings(&ds, transport, codec), counters).unwrap();
    let reported = client.settings();
    assert_eq!(reported["json_codec"]["name"], codec.as_str(), "{transport}: {reported}");
    let served = ds.registry.snapshot().settings;
    assert_eq!(served["json_codec"]["name"], codec.as_str(), "{served}");
    let before = ds.registry.snapshot().listeners[transport.listener()].clone();
    for req in requests() {
        let resp = client.fetch(req.clone()).await.unwrap_or_else(|e| panic!("{transport} {codec}: {e}"));
        assert_eq!(payload::verify(&req, &resp), Ok(()), "{transport} {codec}");
    }
    let d = ds.registry.snapshot().listeners[transport.listener()].since(&before);
    assert_eq!(d.requests["ok"], 3, "{transport} {codec}: {d:?}");
    ds.stop().await;
    (d.message_bytes_in, d.message_bytes_out)
}

#[tokio::test]
async fn every_codec_serves_every_json_arm_with_serde_jsons_bytes() {
    for transport in [Transport::Rest, Transport::GrpcJson] {
        let reference = message_bytes(transport, JsonCodec::SerdeJson).await;
        // The answers' JSON as serde_json writes it, counted by the server.
        let expected_out: u64 =
            requests().iter().map(|r| serde_json::to_vec(&payload::respond(r)).unwrap().len() as u64).sum();
        assert_eq!(reference.1, expected_out, "{transport}");
        for codec in [JsonCodec::SonicRs, JsonCodec::SimdJson] {
            // The codecs write these messages byte for byte alike (the unit
            // tests of payload::json hold them to it), so the bytes agree.
            assert_eq!(message_bytes(transport, codec).await, reference, "{transport} {codec}");
        }
    }
}

#[tokio::test]
async fn every_codec_reads_every_rest_stream() {
    for codec in JsonCodec::ALL {
        let ds = downstream(codec).await;
        let client = build(&settings(&ds, Transport::Rest, codec), Arc::new(Transport::Rest.client_counters("t")));
        let client = client.unwrap();
        for delivery in [Delivery::Pages, Delivery::Ndjson, Delivery::Sse] {
            let req = StreamRequest { request_id: format!("s-{codec}"), items: 7, ..StreamRequest::default() };
            let items: Vec<_> = client.items(req.clone(), delivery, 3).collect().await;
            assert_eq!(items.len(), 7, "{codec} {delivery:?}");
            for (i, item) in items.into_iter().enumerate() {
                let item = item.unwrap_or_else(|e| panic!("{codec} {delivery:?}: {e}"));
                assert_eq!(payload::verify_item(&req, &item, i as u32), Ok(()), "{codec} {delivery:?}");
            }
        }
        ds.stop().await;
    }
}

async fn post(addr: SocketAddr, body: &[u8]) -> (u16, serde_json::Value) {
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/v1/fetch"))
        .header("content-type", "application/json")
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.expect("a refusal is a JSON body"))
}

#[tokio::test]
async fn every_codec_refuses_bad_json_and_big_bodies_as_serde_json_does() {
    let bad: [&[u8]; 5] = [
        b"{\"requestId\": ",
        b"{\"requestId\":\"a\",\"items\":1} and more",
        b"[\"a\", 1]",
        b"{\"requestId\":7,\"items\":1}",
        b"{\"requestId\":\"a\",\"items\":1,\"shape\":\"circle\"}",
    ];
    // Over the 1024 B body limit (and its encoded allowance): refused by
    // length before any codec reads it.
    let big = serde_json::to_vec(&FetchRequest {
        request_id: "big".into(),
        items: 1,
        body: vec![7; 200_000],
        ..FetchRequest::default()
    })
    .unwrap();
    for codec in JsonCodec::ALL {
        let ds = downstream(codec).await;
        for body in bad {
            let (status, json) = post(ds.rest_addr, body).await;
            assert_eq!(status, 400, "{codec} {:?}: {json}", String::from_utf8_lossy(body));
            let reason = json["error"].as_str().unwrap();
            assert!(reason.starts_with("malformed JSON request: "), "{codec}: {reason}");
        }
        let (status, json) = post(ds.rest_addr, &big).await;
        assert_eq!(status, 413, "{codec}: {json}");
        let counted = ds.registry.snapshot().listeners["rest"].requests.clone();
        assert_eq!((counted["bad_request"], counted["too_large"]), (5, 1), "{codec}");
        ds.stop().await;
    }
}
