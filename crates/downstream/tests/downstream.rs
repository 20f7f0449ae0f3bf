//! The downstream over real sockets: both transports, delay, concurrency,
//! byte counting, admin endpoints, bad input and shutdown.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use downstream::{Config, Handle, start};
use payload::{FetchRequest, FetchResponse, Limits};
use proto::downstream_client::DownstreamClient;
use telemetry::StatsSnapshot;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

async fn start_with(delay_ms: u64, limits: Limits) -> Handle {
    let config = Config { delay: Duration::from_millis(delay_ms), limits, ..Config::default() };
    start(config, CancellationToken::new()).await.expect("downstream starts")
}

async fn grpc(addr: SocketAddr) -> DownstreamClient<tonic::transport::Channel> {
    DownstreamClient::connect(format!("http://{addr}")).await.expect("grpc connects")
}

fn req(id: &str, items: u32) -> FetchRequest {
    FetchRequest { request_id: id.into(), items, ..FetchRequest::default() }
}

async fn rest_post(addr: SocketAddr, body: impl Into<reqwest::Body>, content_type: &str) -> (u16, serde_json::Value) {
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/v1/fetch"))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("rest request");
    let status = resp.status().as_u16();
    (status, resp.json().await.expect("json body"))
}

async fn stats(admin: SocketAddr) -> StatsSnapshot {
    reqwest::get(format!("http://{admin}/stats")).await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn same_request_same_records_over_both_transports() {
    let ds = start_with(5, Limits::default()).await;
    let r = req("same-1", 17);
    let over_grpc = grpc(ds.grpc_addr).await.fetch(proto::FetchRequest::from(r.clone())).await.unwrap().into_inner();
    let over_grpc = FetchResponse::try_from(over_grpc).unwrap();
    let (status, json) = rest_post(ds.rest_addr, serde_json::to_vec(&r).unwrap(), "application/json").await;
    assert_eq!(status, 200);
    let over_rest: FetchResponse = serde_json::from_value(json).unwrap();
    assert_eq!(over_grpc, over_rest);
    assert_eq!(payload::verify(&r, &over_rest), Ok(()));
    ds.stop().await;
}

#[tokio::test]
async fn delay_is_respected_and_requests_overlap() {
    let delay = Duration::from_millis(100);
    let ds = start_with(100, Limits::default()).await;
    let client = grpc(ds.grpc_addr).await;
    let http = reqwest::Client::new();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..200 {
        let (mut client, http, rest) = (client.clone(), http.clone(), ds.rest_addr);
        tasks.spawn(async move {
            let t0 = Instant::now();
            let r = req(&format!("overlap-{i}"), 3);
            if i % 2 == 0 {
                client.fetch(proto::FetchRequest::from(r)).await.unwrap();
            } else {
                let resp = http.post(format!("http://{rest}/v1/fetch")).json(&r).send().await.unwrap();
                assert_eq!(resp.status(), 200);
            }
            t0.elapsed()
        });
    }
    while let Some(each) = tasks.join_next().await {
        assert!(each.unwrap() >= delay, "a response came back before the delay");
    }
    let total = started.elapsed();
    // Serially this would take 200 x 100 ms = 20 s; overlapping requests take
    // about one delay. A quarter of the serial time leaves room for a busy machine.
    assert!(total < 200 * delay / 4, "200 requests took {total:?}: they did not overlap");
    ds.stop().await;
}

#[tokio::test]
async fn byte_counters_match_a_raw_http1_exchange_to_the_byte() {
    let ds = start_with(1, Limits::default()).await;
    let before = stats(ds.admin_addr).await.listeners["rest"].clone();
    let body = br#"{"requestId":"raw-1","items":4}"#;
    let request = format!(
        "POST /v1/fetch HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut tcp = TcpStream::connect(ds.rest_addr).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    tcp.write_all(body).await.unwrap();
    let mut response = Vec::new();
    tcp.read_to_end(&mut response).await.unwrap();
    assert!(response.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&response));

    let after = stats(ds.admin_addr).await.listeners["rest"].clone();
    let d = after.since(&before);
    assert_eq!(d.bytes_in, Some((request.len() + body.len()) as u64));
    assert_eq!(d.bytes_out, Some(response.len() as u64));
    assert_eq!(d.connections, 1);
    assert_eq!(d.message_bytes_in, body.len() as u64);
    let header_end = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert_eq!(d.message_bytes_out, (response.len() - header_end) as u64);
    assert_eq!(d.requests["ok"], 1);
    ds.stop().await;
}

/// gRPC's message bytes are the protobuf encodings of the request and of the
/// answer, each counted once per call (the answer's as the encoder writes it).
#[tokio::test]
async fn grpc_message_bytes_are_each_calls_protobuf_to_the_byte() {
    use prost::Message;
    let ds = start_with(1, Limits::default()).await;
    let mut client = grpc(ds.grpc_addr).await;
    let before = stats(ds.admin_addr).await.listeners["grpc"].clone();
    let (mut sent, mut answered) = (0u64, 0u64);
    for (i, items) in [1u32, 7, 40].into_iter().enumerate() {
        let request = proto::FetchRequest::from(req(&format!("bytes-{i}"), items));
        sent += request.encoded_len() as u64;
        let answer = client.fetch(request).await.expect("answered").into_inner();
        assert_eq!(answer.records.len(), items as usize);
        answered += answer.encode_to_vec().len() as u64;
    }
    let d = stats(ds.admin_addr).await.listeners["grpc"].since(&before);
    assert_eq!(d.requests["ok"], 3);
    assert_eq!(d.message_bytes_in, sent);
    assert_eq!(d.message_bytes_out, answered);
    ds.stop().await;
}

#[tokio::test]
async fn metrics_and_stats_show_counters_and_process_figures() {
    let ds = start_with(1, Limits::default()).await;
    grpc(ds.grpc_addr).await.fetch(proto::FetchRequest::from(req("m-1", 2))).await.unwrap();
    let s = stats(ds.admin_addr).await;
    assert_eq!(s.service, "downstream");
    assert_eq!(s.listeners["grpc"].requests["ok"], 1);
    assert!(s.listeners["grpc"].bytes_in.unwrap() > 0 && s.listeners["grpc"].bytes_out.unwrap() > 0);
    assert!(s.process.rss_bytes.unwrap() > 0);
    assert!(s.process.cpu_seconds.is_some());
    assert_eq!(s.settings["delay_ms"], 1.0);
    assert!(s.settings["service_time_wait"].as_str().unwrap().contains("sleep_until"), "{}", s.settings);
    assert_eq!(s.settings["service_time_resolution_ms"], 1.0);

    let text = reqwest::get(format!("http://{}/metrics", ds.admin_addr)).await.unwrap().text().await.unwrap();
    assert!(
        text.contains(
            "bench_requests_total{service=\"downstream\",role=\"listener\",endpoint=\"grpc\",outcome=\"ok\"} 1"
        )
    );
    assert!(text.contains("process_resident_memory_bytes{service=\"downstream\"}"));
    assert!(text.contains("process_cpu_seconds_total{service=\"downstream\"}"));
    // Admin traffic is not counted on any measured listener.
    let again = stats(ds.admin_addr).await;
    assert_eq!(again.listeners, s.listeners);
    let health = reqwest::get(format!("http://{}/healthz", ds.admin_addr)).await.unwrap();
    assert_eq!(health.status(), 200);
    ds.stop().await;
}

#[tokio::test]
async fn bad_rest_input_gets_the_right_status_and_a_reason() {
    let limits = Limits { max_items: 50, max_body_bytes: 1024, ..Limits::default() };
    let ds = start_with(1, limits).await;
    let (status, json) = rest_post(ds.rest_addr, "{\"requestId\": ", "application/json").await;
    assert_eq!(status, 400);
    assert!(json["error"].as_str().unwrap().contains("malformed JSON"), "{json}");

    let (status, json) = rest_post(ds.rest_addr, r#"{"requestId":"x","items":1}"#, "text/plain").await;
    assert_eq!(status, 415);
    assert!(json["error"].as_str().unwrap().contains("application/json"));

    let (status, json) = rest_post(ds.rest_addr, r#"{"requestId":"x","items":51}"#, "application/json").await;
    assert_eq!(status, 400);
    assert!(json["error"].as_str().unwrap().contains("limit is 50"), "{json}");

    // Over the decoded-body limit, but small enough to be read and decoded.
    let big = FetchRequest { request_id: "b".into(), items: 1, body: vec![7; 2000], ..FetchRequest::default() };
    let (status, json) = rest_post(ds.rest_addr, serde_json::to_vec(&big).unwrap(), "application/json").await;
    assert_eq!(status, 413, "{json}");
    // Far over any valid encoding: refused before it is decoded.
    let huge = FetchRequest { request_id: "h".into(), items: 1, body: vec![7; 200_000], ..FetchRequest::default() };
    let (status, _) = rest_post(ds.rest_addr, serde_json::to_vec(&huge).unwrap(), "application/json").await;
    assert_eq!(status, 413);

    let resp = reqwest::get(format!("http://{}/v2/else", ds.rest_addr)).await.unwrap();
    assert_eq!(resp.status(), 404);
    let json: serde_json::Value = resp.json().await.unwrap();
    assert!(json["error"].is_string());

    let counted = stats(ds.admin_addr).await.listeners["rest"].requests.clone();
    assert_eq!(counted["bad_request"], 2);
    assert_eq!(counted["too_large"], 2);
    assert_eq!(counted["unsupported_media_type"], 1);
    assert_eq!(counted["not_found"], 1);
    ds.stop().await;
}

#[tokio::test]
async fn bad_grpc_input_gets_the_right_code() {
    let limits = Limits { max_items: 50, max_body_bytes: 1024, ..Limits::default() };
    let ds = start_with(1, limits).await;
    let mut client = grpc(ds.grpc_addr).await;
    let err = client.fetch(proto::FetchRequest::from(req("x", 51))).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("limit is 50"));
    let big = FetchRequest { request_id: "b".into(), items: 1, body: vec![7; 2000], ..FetchRequest::default() };
    let err = client.fetch(proto::FetchRequest::from(big)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::ResourceExhausted);
    let huge = FetchRequest { request_id: "h".into(), items: 1, body: vec![7; 200_000], ..FetchRequest::default() };
    let err = client.fetch(proto::FetchRequest::from(huge)).await.unwrap_err();
    assert!(matches!(err.code(), tonic::Code::ResourceExhausted | tonic::Code::OutOfRange), "{err:?}");
    let err = client.fetch(proto::FetchRequest::from(req("", 1))).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    // The channel is still fine after the errors.
    client.fetch(proto::FetchRequest::from(req("ok", 1))).await.unwrap();
    ds.stop().await;
}

#[tokio::test]
async fn garbage_on_the_grpc_port_closes_that_connection_only() {
    let ds = start_with(1, Limits::default()).await;
    let mut tcp = TcpStream::connect(ds.grpc_addr).await.unwrap();
    tcp.write_all(b"\x16\x03\x01 this is not an HTTP/2 preface at all \x00\xff\xfe\r\n\r\n").await.unwrap();
    let mut sink = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut sink)).await;
    assert!(read.is_ok(), "the server kept a garbage connection open");
    grpc(ds.grpc_addr).await.fetch(proto::FetchRequest::from(req("after", 1))).await.unwrap();
    ds.stop().await;
}

/// The services a reflection client of one protocol version lists.
macro_rules! reflected_services {
    ($version:ident, $channel:expr) => {{
        use tonic_reflection::pb::$version::ServerReflectionRequest;
        use tonic_reflection::pb::$version::server_reflection_client::ServerReflectionClient;
        use tonic_reflection::pb::$version::server_reflection_request::MessageRequest;
        use tonic_reflection::pb::$version::server_reflection_response::MessageResponse;
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut stream = ServerReflectionClient::new($channel)
            .server_reflection_info(tokio_stream::iter([request]))
            .await
            .unwrap_or_else(|e| panic!("{} reflection: {e}", stringify!($version)))
            .into_inner();
        let reply = stream.message().await.unwrap().unwrap();
        let Some(MessageResponse::ListServicesResponse(list)) = reply.message_response else { panic!("{reply:?}") };
        list.service.into_iter().map(|s| s.name).collect::<Vec<String>>()
    }};
}

#[tokio::test]
async fn stock_grpc_tools_find_health_and_reflection() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

    let ds = start_with(1, Limits::default()).await;
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", ds.grpc_addr)).unwrap().connect().await.unwrap();
    let health = HealthClient::new(channel.clone())
        .check(HealthCheckRequest { service: "bench.v1.Downstream".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(health.status, ServingStatus::Serving as i32);

    // grpc.reflection.v1 (current grpcurl) and v1alpha (grpcio-reflection,
    // older grpcurl and Postman) both list the service.
    let v1 = reflected_services!(v1, channel.clone());
    assert!(v1.iter().any(|n| n == "bench.v1.Downstream"), "{v1:?}");
    let v1alpha = reflected_services!(v1alpha, channel);
    assert!(v1alpha.iter().any(|n| n == "bench.v1.Downstream"), "{v1alpha:?}");
    ds.stop().await;
}

#[tokio::test]
async fn shutdown_drains_in_flight_requests() {
    let shutdown = CancellationToken::new();
    let config = Config { delay: Duration::from_millis(300), ..Config::default() };
    let ds = start(config, shutdown.clone()).await.unwrap();
    let mut client = grpc(ds.grpc_addr).await;
    let rest = ds.rest_addr;
    let in_flight_grpc = tokio::spawn(async move { client.fetch(proto::FetchRequest::from(req("drain-g", 1))).await });
    let in_flight_rest = tokio::spawn(async move {
        reqwest::Client::new().post(format!("http://{rest}/v1/fetch")).json(&req("drain-r", 1)).send().await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    shutdown.cancel();
    ds.wait().await;
    assert!(in_flight_grpc.await.unwrap().is_ok(), "in-flight gRPC request was cut off");
    assert_eq!(in_flight_rest.await.unwrap().unwrap().status(), 200, "in-flight REST request was cut off");
    assert!(TcpStream::connect(rest).await.is_err(), "listener still accepting after shutdown");
}

#[tokio::test]
async fn an_aged_grpc_connection_gets_a_goaway_and_no_call_it_took_is_lost() {
    // Calls of 20 ms overlap the age limit of 150 ms: the GOAWAY lets the
    // ones in flight finish, the client opens a new connection for the next.
    // A call tonic hands to the closing connection in the instant between
    // the GOAWAY and the close never reaches the server and fails with
    // Cancelled or Unavailable (tonic has no transparent retry, grpc-go
    // does); it is retried here, at most one per worker per GOAWAY.
    const WORKERS: u32 = 4;
    let age = Duration::from_millis(150);
    let config = Config { delay: Duration::from_millis(20), grpc_max_connection_age: Some(age), ..Config::default() };
    let ds = start(config, CancellationToken::new()).await.unwrap();
    let client = grpc(ds.grpc_addr).await;
    let until = Instant::now() + age * 8;
    let mut calls = tokio::task::JoinSet::new();
    for worker in 0..WORKERS {
        let mut client = client.clone();
        calls.spawn(async move {
            let (mut n, mut unsent) = (0u32, 0u32);
            while Instant::now() < until {
                let r = req(&format!("aged-{worker}-{n}"), 2);
                match client.fetch(proto::FetchRequest::from(r)).await {
                    Ok(_) => n += 1,
                    Err(s) if matches!(s.code(), tonic::Code::Cancelled | tonic::Code::Unavailable) => unsent += 1,
                    Err(s) => panic!("a call failed at a GOAWAY with {s:?}"),
                }
            }
            (n, unsent)
        });
    }
    let (mut made, mut unsent) = (0, 0);
    while let Some(done) = calls.join_next().await {
        let (n, u) = done.unwrap();
        (made, unsent) = (made + n, unsent + u);
    }
    let counted = stats(ds.admin_addr).await.listeners["grpc"].clone();
    // Every call the server took was answered: it counted exactly the
    // client's successes and nothing else, so the failed ones never left.
    assert_eq!(counted.requests_started, u64::from(made), "{counted:?}");
    assert!(unsent <= WORKERS * u32::try_from(counted.connections_aged).unwrap(), "{unsent} unsent, {counted:?}");
    // Eight ages of calls: the first connection and one after every ending
    // (±10% each), fewer only if the machine stalled the calls.
    assert!(counted.connections_aged >= 2, "{counted:?}");
    // One new connection per aged one (the last may have aged after the calls).
    assert!((counted.connections_aged..=counted.connections_aged + 1).contains(&counted.connections), "{counted:?}");
    assert_eq!(counted.requests["ok"], u64::from(made), "{counted:?}");
    ds.stop().await;

    // Without an age the same calls keep their one connection.
    let ds = start_with(20, Limits::default()).await;
    let mut client = grpc(ds.grpc_addr).await;
    for n in 0..10 {
        client.fetch(proto::FetchRequest::from(req(&format!("kept-{n}"), 2))).await.unwrap();
    }
    let counted = stats(ds.admin_addr).await.listeners["grpc"].clone();
    assert_eq!((counted.connections, counted.connections_aged), (1, 0), "{counted:?}");
    ds.stop().await;
}
