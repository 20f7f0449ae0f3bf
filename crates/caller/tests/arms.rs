//! The arms that split encoding from transport, over real sockets: protobuf
//! over the REST listener (`rest-pb`) and JSON over the gRPC listener
//! (`grpc-json`) return the same logical records as gRPC and REST, carry the
//! very message bytes of their encoding's twin (the gRPC arm's protobuf, the
//! REST arm's JSON), and are counted on the downstream listener they reach;
//! so do Connect (`connect`, `connect-pb`) and gRPC-Web (`grpc-web`).

use std::sync::Arc;
use std::time::Duration;

use caller::clients::{ClientSettings, build};
use caller::hop::HopOptions;
use caller::{Config as CallerConfig, Transport};
use downstream::{Config as DsConfig, Handle as DsHandle};
use payload::{CallRequest, FetchRequest, FetchResponse, Shape};
use prost::Message;
use telemetry::CountersSnapshot;
use tokio_util::sync::CancellationToken;

async fn downstream() -> DsHandle {
    let config = DsConfig { delay: Duration::from_millis(2), ..DsConfig::default() };
    downstream::start(config, CancellationToken::new()).await.unwrap()
}

fn listener(ds: &DsHandle, name: &str) -> CountersSnapshot {
    ds.registry.snapshot().listeners[name].clone()
}

fn settings(ds: &DsHandle, transport: Transport) -> ClientSettings {
    let addr = if transport.is_grpc() { ds.grpc_addr } else { ds.rest_addr };
    ClientSettings {
        transport,
        target: format!("http://{addr}"),
        grpc_connections: 1,
        rest_http2: false,
        hop: HopOptions::default(),
    }
}

/// Per arm: the counters' growth on its listener over three fetches (both
/// shapes, one with an upload), every answer verified record by record.
#[tokio::test]
async fn every_arm_returns_the_same_records_and_is_counted_on_its_listener() {
    let ds = downstream().await;
    let requests = [
        FetchRequest { request_id: "arms-1".into(), items: 12, ..FetchRequest::default() },
        FetchRequest { request_id: "arms-2".into(), items: 7, shape: Shape::Timeseries, ..FetchRequest::default() },
        FetchRequest {
            request_id: "arms-3".into(),
            items: 3,
            body: payload::upload_body("arms-3", 5000),
            ..FetchRequest::default()
        },
    ];
    let mut counted = Vec::new();
    let mut answers: Vec<Vec<FetchResponse>> = Vec::new();
    for transport in Transport::ALL {
        let client_counters = Arc::new(transport.client_counters("test"));
        let client = build(&settings(&ds, transport), client_counters.clone()).unwrap();
        let (mine, other) = if transport.is_grpc() { ("grpc", "rest") } else { ("rest", "grpc") };
        assert_eq!(transport.listener(), mine);
        let (before, other_before) = (listener(&ds, mine), listener(&ds, other));
        let mut got = Vec::new();
        for req in &requests {
            let resp = client.fetch(req.clone()).await.unwrap_or_else(|e| panic!("{transport}: {e}"));
            assert_eq!(payload::verify(req, &resp), Ok(()), "{transport}");
            got.push(resp);
        }
        let d = listener(&ds, mine).since(&before);
        assert_eq!(d.requests["ok"], 3, "{transport}: {d:?}");
        assert_eq!(listener(&ds, other).since(&other_before).requests_total(), 0, "{transport}: the other listener");
        assert!(d.message_bytes_in >= 5000 && d.bytes_in.unwrap() > d.message_bytes_in, "{transport}: {d:?}");
        assert!(d.bytes_out.unwrap() > d.message_bytes_out, "{transport}: {d:?}");
        // The client counts the messages it sent and read as the server
        // counted them, byte for byte, each side in its own codec.
        let mine = client_counters.snapshot();
        assert_eq!(
            (mine.message_bytes_in, mine.message_bytes_out),
            (d.message_bytes_in, d.message_bytes_out),
            "{transport}: the client's (sent, read) against the server's (read, sent)"
        );
        counted.push((transport, d.message_bytes_in, d.message_bytes_out));
        answers.push(got);
    }
    // The same logical records whatever the arm.
    assert!(answers.iter().all(|a| a == &answers[0]));
    // Encoding decides the message bytes, not the transport: rest-pb carries
    // gRPC's protobuf byte for byte, grpc-json REST's JSON.
    let bytes = |t: Transport| counted.iter().find(|c| c.0 == t).map(|c| (c.1, c.2)).unwrap();
    assert_eq!(bytes(Transport::RestPb), bytes(Transport::Grpc), "{counted:?}");
    assert_eq!(bytes(Transport::GrpcJson), bytes(Transport::Rest), "{counted:?}");
    // Connect carries the message as the body, gRPC-Web in gRPC's frames:
    // the message bytes are their encoding's, byte for byte.
    assert_eq!(bytes(Transport::ConnectPb), bytes(Transport::Grpc), "{counted:?}");
    assert_eq!(bytes(Transport::GrpcWeb), bytes(Transport::Grpc), "{counted:?}");
    assert_eq!(bytes(Transport::Connect), bytes(Transport::Rest), "{counted:?}");
    assert!(bytes(Transport::Rest).1 > bytes(Transport::Grpc).1, "{counted:?}");
    // And protobuf's are the encodings of the calls, computed here apart
    // from either tier's code path.
    let protobuf = |f: fn(&FetchRequest, &FetchResponse) -> usize| -> u64 {
        requests.iter().zip(&answers[0]).map(|(q, a)| f(q, a) as u64).sum()
    };
    let sent = protobuf(|q, _| proto::FetchRequest::from(q.clone()).encoded_len());
    let read = protobuf(|_, a| proto::FetchResponse::from(a.clone()).encoded_len());
    assert_eq!(bytes(Transport::Grpc), (sent, read), "{counted:?}");
    ds.stop().await;
}

/// The caller's front door answers the same JSON whatever the internal arm.
#[tokio::test]
async fn the_front_answer_is_identical_over_every_arm() {
    let ds = downstream().await;
    let mut bodies = Vec::new();
    for transport in Transport::ALL {
        let config = CallerConfig {
            transport,
            downstream_grpc: Some(format!("http://{}", ds.grpc_addr)),
            downstream_rest: Some(format!("http://{}", ds.rest_addr)),
            fanout: 2,
            ..CallerConfig::default()
        };
        let c = caller::start(config, CancellationToken::new()).await.unwrap();
        let resp = reqwest::Client::new()
            .post(format!("http://{}/v1/call", c.front_addr))
            .header("content-type", "application/json")
            .body(r#"{"requestId":"front","items":9}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{transport}");
        let body = resp.bytes().await.unwrap().to_vec();
        let call = CallRequest { request_id: "front".into(), items: 9, ..CallRequest::default() };
        let answer: FetchResponse = serde_json::from_slice(&body).unwrap();
        assert_eq!(payload::verify_call(&call, 2, &answer), Ok(()), "{transport}");
        let stats = c.registry.snapshot();
        assert_eq!(stats.settings["transport"], transport.as_str());
        assert_eq!(stats.settings["client"]["transport"], transport.as_str());
        bodies.push(body);
        c.stop().await;
    }
    assert!(bodies.iter().all(|b| b == &bodies[0]));
    ds.stop().await;
}

/// One REST listener, two encodings: Content-Type picks the decoder, Accept
/// the answer's encoding; a malformed protobuf body is a 400 with a reason,
/// an unknown media type a 415.
#[tokio::test]
async fn the_rest_listener_negotiates_its_encoding() {
    use prost::Message;
    let ds = downstream().await;
    let url = format!("http://{}/v1/fetch", ds.rest_addr);
    let http = reqwest::Client::new();
    let req = FetchRequest { request_id: "neg".into(), items: 4, ..FetchRequest::default() };
    let pb = proto::FetchRequest::from(req.clone()).encode_to_vec();
    // Protobuf in, JSON out (Accept).
    let resp = http
        .post(&url)
        .header("content-type", "application/x-protobuf")
        .header("accept", "application/json")
        .body(pb.clone())
        .send()
        .await
        .unwrap();
    assert_eq!((resp.status().as_u16(), resp.headers()["content-type"].to_str().unwrap()), (200, "application/json"));
    let answer: FetchResponse = resp.json().await.unwrap();
    assert_eq!(payload::verify(&req, &answer), Ok(()));
    // Protobuf in, protobuf out (no Accept: the request's encoding).
    let resp = http.post(&url).header("content-type", "application/x-protobuf").body(pb).send().await.unwrap();
    assert_eq!(resp.headers()["content-type"], "application/x-protobuf");
    let answer = proto::FetchResponse::decode(resp.bytes().await.unwrap()).unwrap();
    assert_eq!(payload::verify(&req, &FetchResponse::try_from(answer).unwrap()), Ok(()));
    // Garbage protobuf: 400 naming the encoding.
    let resp =
        http.post(&url).header("content-type", "application/x-protobuf").body(vec![0xff; 7]).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    let reason: serde_json::Value = resp.json().await.unwrap();
    assert!(reason["error"].as_str().unwrap().contains("malformed protobuf"), "{reason}");
    let resp = http.post(&url).header("content-type", "text/plain").body("x").send().await.unwrap();
    assert_eq!(resp.status(), 415);
    ds.stop().await;
}
