//! The downstream against clients that hold on to what they are given: idle
//! HTTP/2 connections, request messages that never complete, more requests
//! than the tier should work on at once, malformed protobuf, HTTP/1.1 on the
//! gRPC port. Raw HTTP/2 frames come from the `h2` crate, so the test controls
//! exactly what is sent and when.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use downstream::{Config, Handle, start};
use payload::FetchRequest;
use prost::Message;
use telemetry::StatsSnapshot;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Far more than any timeout set here, far less than forever.
const WITHIN: Duration = Duration::from_secs(10);
const FETCH: &str = "/bench.v1.Downstream/Fetch";

async fn downstream(config: Config) -> Handle {
    start(config, CancellationToken::new()).await.expect("downstream starts")
}

async fn stats(admin: SocketAddr) -> StatsSnapshot {
    reqwest::get(format!("http://{admin}/stats")).await.unwrap().json().await.unwrap()
}

/// An HTTP/2 connection made by hand, and the task driving it (it ends when
/// the server closes the connection). The `h2` client answers PINGs itself.
async fn h2_connect(addr: SocketAddr) -> (h2::client::SendRequest<Bytes>, JoinHandle<Result<(), h2::Error>>) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (send, conn) = h2::client::handshake(tcp).await.unwrap();
    (send, tokio::spawn(conn))
}

fn grpc_head(addr: SocketAddr, path: &str) -> http::Request<()> {
    http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap()
}

/// One gRPC length-prefixed message (uncompressed).
fn framed(message: &[u8]) -> Bytes {
    let mut out = vec![0u8];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out.into()
}

fn fetch_message(id: &str, items: u32) -> Bytes {
    framed(
        &proto::FetchRequest::from(FetchRequest { request_id: id.into(), items, ..FetchRequest::default() })
            .encode_to_vec(),
    )
}

/// Sends one whole gRPC request on `send` and returns the status code the
/// server answered (from the headers of a trailers-only answer, or from the
/// trailers) and its message.
async fn grpc_call(send: &h2::client::SendRequest<Bytes>, addr: SocketAddr, path: &str, body: Bytes) -> (i32, String) {
    let mut send = send.clone().ready().await.unwrap();
    let (resp, mut stream) = send.send_request(grpc_head(addr, path), false).unwrap();
    stream.send_data(body, true).unwrap();
    let (parts, mut body) = tokio::time::timeout(WITHIN, resp).await.expect("an answer").unwrap().into_parts();
    if parts.headers.contains_key("grpc-status") {
        return status_of(&parts.headers);
    }
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        body.flow_control().release_capacity(chunk.len()).unwrap();
    }
    status_of(&body.trailers().await.unwrap().expect("trailers with the status"))
}

fn status_of(headers: &http::HeaderMap) -> (i32, String) {
    let code = headers["grpc-status"].to_str().unwrap().parse().unwrap();
    let message = headers.get("grpc-message").map_or(String::new(), |m| percent_decoded(m.as_bytes()));
    (code, message)
}

/// `grpc-message` is percent-encoded on the wire.
fn percent_decoded(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = raw.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (raw[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

// ---- 1. idle HTTP/2 connections ----

#[tokio::test]
async fn an_idle_http2_connection_is_closed_even_though_it_answers_pings() {
    let idle = Duration::from_millis(300);
    let ds = downstream(Config {
        delay: Duration::from_millis(1),
        idle_timeout: idle,
        // PINGs every 50 ms while idle: the h2 client answers each one, and
        // must be closed all the same.
        http2_keep_alive_interval: Some(Duration::from_millis(50)),
        ..Config::default()
    })
    .await;
    for addr in [ds.grpc_addr, ds.rest_addr] {
        let (send, driver) = h2_connect(addr).await;
        if addr == ds.grpc_addr {
            assert_eq!(grpc_call(&send, addr, FETCH, fetch_message("idle-1", 2)).await.0, 0);
        } else {
            let mut send = send.clone().ready().await.unwrap();
            let head = http::Request::post(format!("http://{addr}/v1/fetch"))
                .header("content-type", "application/json")
                .body(())
                .unwrap();
            let (resp, mut stream) = send.send_request(head, false).unwrap();
            stream.send_data(Bytes::from_static(br#"{"requestId":"idle-2","items":2}"#), true).unwrap();
            assert_eq!(resp.await.unwrap().status(), 200);
        }
        let idle_from = Instant::now();
        let closed = tokio::time::timeout(WITHIN, driver).await;
        assert!(closed.is_ok(), "{addr}: an HTTP/2 connection idle for {WITHIN:?} was still open");
        // The server's clock starts when it finished the answer, a little
        // before the client saw the end of it.
        assert!(idle_from.elapsed() >= idle / 2, "{addr}: closed after {:?}", idle_from.elapsed());
    }
    let s = stats(ds.admin_addr).await;
    assert_eq!(s.settings["grpc_server"]["idle_timeout"], 300);
    assert_eq!(s.settings["rest_server"]["http2_keep_alive_interval"], 50);
    assert_eq!(s.settings["grpc_server"]["http2_keep_alive_timeout"], 20_000);
    ds.stop().await;
}

#[tokio::test]
async fn a_request_that_outlasts_the_idle_timeout_is_not_cut() {
    let delay = Duration::from_millis(800);
    let ds = downstream(Config {
        delay,
        idle_timeout: Duration::from_millis(200),
        http2_keep_alive_interval: Some(Duration::from_millis(50)),
        ..Config::default()
    })
    .await;
    let (send, _driver) = h2_connect(ds.grpc_addr).await;
    let started = Instant::now();
    let (code, message) = grpc_call(&send, ds.grpc_addr, FETCH, fetch_message("long-1", 3)).await;
    assert_eq!(code, 0, "{message}");
    assert!(started.elapsed() >= delay);
    ds.stop().await;
}

// ---- 2. request messages that never complete ----

#[tokio::test]
async fn a_grpc_message_that_never_completes_is_answered_deadline_exceeded() {
    let deadline = Duration::from_millis(300);
    let ds = downstream(Config { delay: Duration::from_millis(1), header_read_timeout: deadline, ..Config::default() })
        .await;
    let (send, _driver) = h2_connect(ds.grpc_addr).await;
    let mut ready = send.clone().ready().await.unwrap();
    let (resp, mut stream) = ready.send_request(grpc_head(ds.grpc_addr, FETCH), false).unwrap();
    // A message header declaring 100 bytes, then 2 of them, and the stream left open.
    stream.send_data(Bytes::from_static(&[0, 0, 0, 0, 100, 0x0a, 0x01]), false).unwrap();
    let started = Instant::now();
    let resp = tokio::time::timeout(WITHIN, resp).await;
    let resp = resp.expect("a stalled request message was never answered").unwrap();
    let (code, message) = status_of(resp.headers());
    assert_eq!(code, tonic::Code::DeadlineExceeded as i32, "{message}");
    assert!(message.contains("did not arrive within"), "{message}");
    assert!(started.elapsed() >= deadline / 2, "answered after {:?}", started.elapsed());
    // The connection, and the service, still serve.
    assert_eq!(grpc_call(&send, ds.grpc_addr, FETCH, fetch_message("after-stall", 1)).await.0, 0);
    let counted = &stats(ds.admin_addr).await.listeners["grpc"].requests;
    assert_eq!(counted["deadline_exceeded"], 1, "{counted:?}");
    let settings = stats(ds.admin_addr).await.settings;
    assert_eq!(settings["request_body_timeout_ms"], 300);
    assert!(settings["grpc_max_reserved_bytes_per_connection"].as_u64().unwrap() > 0);
    ds.stop().await;
}

// ---- 3. more requests than the tier should work on at once ----

#[tokio::test]
async fn requests_over_the_in_flight_limit_are_shed_and_counted() {
    // Two at a time, each held for a second: of six sent at once, the first
    // two are worked on and at least one of the others finds the tier full.
    let ds = downstream(Config { delay: Duration::from_secs(1), max_in_flight: Some(2), ..Config::default() }).await;
    let http = reqwest::Client::new();
    let rest = ds.rest_addr;
    let answers = futures::future::join_all((0..6).map(|i| {
        let http = http.clone();
        async move {
            let resp = http
                .post(format!("http://{rest}/v1/fetch"))
                .json(&serde_json::json!({"requestId": format!("burst-{i}"), "items": 1}))
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            (status, resp.text().await.unwrap())
        }
    }))
    .await;
    let shed: Vec<_> = answers.iter().filter(|(s, _)| *s == 503).collect();
    let ok = answers.iter().filter(|(s, _)| *s == 200).count();
    assert!(!shed.is_empty(), "nothing was shed: {answers:?}");
    assert!(ok >= 2, "requests under the limit must succeed: {answers:?}");
    assert_eq!(ok + shed.len(), answers.len(), "{answers:?}");
    assert!(shed[0].1.contains("limit of 2 requests in flight"), "{}", shed[0].1);

    let client = proto::downstream_client::DownstreamClient::connect(format!("http://{}", ds.grpc_addr)).await.unwrap();
    let answers = futures::future::join_all((0..6).map(|i| {
        let mut client = client.clone();
        async move {
            client
                .fetch(proto::FetchRequest::from(FetchRequest {
                    request_id: format!("g-{i}"),
                    items: 1,
                    ..FetchRequest::default()
                }))
                .await
        }
    }))
    .await;
    let grpc_shed: Vec<_> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
    assert!(!grpc_shed.is_empty(), "nothing was shed over gRPC");
    for status in &grpc_shed {
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
        assert!(status.message().contains("limit of 2 requests in flight"), "{status:?}");
    }
    assert!(answers.iter().filter(|a| a.is_ok()).count() >= 2);

    let s = stats(ds.admin_addr).await;
    assert_eq!(s.listeners["rest"].requests["shed"], shed.len() as u64);
    assert_eq!(s.listeners["grpc"].requests["shed"], grpc_shed.len() as u64);
    assert_eq!(s.settings["max_in_flight"], 2);
    // Under the limit again: served.
    let again =
        http.post(format!("http://{rest}/v1/fetch")).json(&serde_json::json!({"requestId": "later", "items": 1}));
    assert_eq!(again.send().await.unwrap().status(), 200);
    ds.stop().await;
}

/// A call the client resets while it is worked on is counted `cancelled`,
/// and its place under the in-flight limit is free again at once, not when
/// its work would have ended.
#[tokio::test]
async fn a_grpc_call_the_client_resets_is_counted_cancelled_and_frees_its_place() {
    const DELAY: Duration = Duration::from_secs(3);
    let ds = downstream(Config { delay: DELAY, max_in_flight: Some(1), ..Config::default() }).await;
    let addr = ds.grpc_addr;
    let (send, _driver) = h2_connect(addr).await;
    let sent = Instant::now();
    let mut first = send.clone().ready().await.unwrap();
    let (_first_answer, mut first_stream) = first.send_request(grpc_head(addr, FETCH), false).unwrap();
    first_stream.send_data(fetch_message("held", 1), true).unwrap();
    // Streams of one connection reach the service in order: the second
    // finds the first holding the only place.
    let (code, message) = grpc_call(&send, addr, FETCH, fetch_message("second", 1)).await;
    assert_eq!(code, tonic::Code::ResourceExhausted as i32, "{message}");
    first_stream.send_reset(h2::Reason::CANCEL);
    // Admitted once the reset has reached the server (shed until then).
    let mut shed = 1;
    let answered = loop {
        let (code, message) = grpc_call(&send, addr, FETCH, fetch_message("third", 1)).await;
        if code == 0 {
            break Instant::now();
        }
        assert_eq!(code, tonic::Code::ResourceExhausted as i32, "{message}");
        assert!(sent.elapsed() < WITHIN, "the reset call's place was never freed");
        shed += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Its answer came DELAY after it was admitted, at the earliest.
    assert!(answered - DELAY < sent + DELAY, "admitted only once the reset call's work would have ended");
    let counted = stats(ds.admin_addr).await.listeners["grpc"].requests.clone();
    let expected = [("cancelled", 1), ("shed", shed), ("ok", 1)];
    for (label, n) in expected {
        assert_eq!(counted.get(label), Some(&n), "{label}: {counted:?}");
    }
    assert_eq!(counted.values().sum::<u64>(), shed + 2, "{counted:?}");
    ds.stop().await;
}

#[tokio::test]
async fn the_default_in_flight_limit_is_derived_and_reported() {
    let ds = downstream(Config::default()).await;
    let s = stats(ds.admin_addr).await;
    assert!(s.settings["max_in_flight"].as_u64().unwrap() >= service::MIN_DEFAULT_MAX_IN_FLIGHT as u64);
    assert!(s.settings["max_in_flight_source"].as_str().unwrap().starts_with("default"), "{}", s.settings);
    ds.stop().await;
}

// ---- 4. malformed protobuf, and every gRPC status counted ----

#[tokio::test]
async fn malformed_protobuf_is_invalid_argument_and_every_grpc_status_is_counted() {
    let ds = downstream(Config { delay: Duration::from_millis(1), ..Config::default() }).await;
    let addr = ds.grpc_addr;
    let (send, _driver) = h2_connect(addr).await;
    // Field 1 (request_id) as a length-delimited string running past the end.
    let (code, message) = grpc_call(&send, addr, FETCH, framed(&[0x0a, 0x7f, b'x'])).await;
    assert_eq!(code, tonic::Code::InvalidArgument as i32, "{message}");
    assert!(message.contains("malformed protobuf"), "{message}");
    // An empty request id: refused by validation.
    assert_eq!(grpc_call(&send, addr, FETCH, fetch_message("", 1)).await.0, tonic::Code::InvalidArgument as i32);
    // Protocol-level answers tonic gives without calling the service.
    let unknown_method = grpc_call(&send, addr, "/bench.v1.Downstream/Nope", fetch_message("x", 1)).await;
    assert_eq!(unknown_method.0, tonic::Code::Unimplemented as i32);
    let unknown_service = grpc_call(&send, addr, "/bench.v9.Elsewhere/Fetch", fetch_message("x", 1)).await;
    assert_eq!(unknown_service.0, tonic::Code::Unimplemented as i32);
    // A message header declaring far more than any valid request.
    let too_long = Bytes::from_static(&[0, 0x7f, 0xff, 0xff, 0xff]);
    assert_eq!(grpc_call(&send, addr, FETCH, too_long).await.0, tonic::Code::OutOfRange as i32);
    assert_eq!(grpc_call(&send, addr, FETCH, fetch_message("fine", 1)).await.0, 0);

    let counted = stats(ds.admin_addr).await.listeners["grpc"].requests.clone();
    let expected = [("ok", 1), ("invalid_argument", 2), ("unimplemented", 2), ("out_of_range", 1), ("other", 0)];
    for (label, n) in expected {
        assert_eq!(counted.get(label), Some(&n), "{label}: {counted:?}");
    }
    assert_eq!(counted.values().sum::<u64>(), 6, "{counted:?}");
    ds.stop().await;
}

// ---- 5. HTTP/1.1 on the gRPC port ----

#[tokio::test]
async fn http1_on_the_grpc_port_gets_no_http1_answer() {
    let ds = downstream(Config { delay: Duration::from_millis(1), ..Config::default() }).await;
    let body = fetch_message("h1", 1);
    let head = format!(
        "POST {FETCH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/grpc\r\nTE: trailers\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut tcp = TcpStream::connect(ds.grpc_addr).await.unwrap();
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(&body).await.unwrap();
    let mut reply = Vec::new();
    let read = tokio::time::timeout(WITHIN, tcp.read_to_end(&mut reply)).await;
    assert!(read.is_ok(), "the gRPC port kept an HTTP/1.1 connection open");
    assert!(
        !reply.starts_with(b"HTTP/1"),
        "the HTTP/2-only port answered HTTP/1.1: {}",
        String::from_utf8_lossy(&reply)
    );
    let http1 = reqwest::Client::builder().http1_only().build().unwrap();
    assert!(http1.get(format!("http://{}/", ds.grpc_addr)).send().await.is_err());
    let s = stats(ds.admin_addr).await;
    assert_eq!(s.settings["grpc_server"]["protocols"], "http2_only");
    assert_eq!(s.listeners["grpc"].requests_total(), 0, "{:?}", s.listeners["grpc"].requests);
    ds.stop().await;
}

// ---- 6. work in flight: records and uploads, not only requests ----

#[tokio::test]
async fn work_over_the_budget_is_shed_while_small_requests_are_served() {
    // 8 MiB of work: a request for 10,000 records weighs 2.56 MB, so two fit
    // under the seven eighths large requests may use, and a third does not.
    let budget = 8 * 1024 * 1024;
    let ds = downstream(Config { delay: Duration::from_secs(1), max_work_bytes: budget, ..Config::default() }).await;
    let http = reqwest::Client::new();
    let rest = ds.rest_addr;
    let post = |id: String, items: u32| {
        let req =
            http.post(format!("http://{rest}/v1/fetch")).json(&serde_json::json!({"requestId": id, "items": items}));
        async move {
            let resp = req.send().await.unwrap();
            (resp.status().as_u16(), resp.text().await.unwrap())
        }
    };
    let big = futures::future::join_all((0..6).map(|i| post(format!("big-{i}"), 10_000)));
    let small = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        post("small".into(), 10).await
    };
    let (big, small) = tokio::join!(big, small);
    let shed: Vec<_> = big.iter().filter(|(s, _)| *s == 503).collect();
    let ok = big.iter().filter(|(s, _)| *s == 200).count();
    assert!(ok >= 2 && !shed.is_empty() && ok + shed.len() == 6, "{:?}", big.iter().map(|b| b.0).collect::<Vec<_>>());
    assert!(shed[0].1.contains("bytes of work in flight"), "{}", shed[0].1);
    assert_eq!(small.0, 200, "a small request is served while large ones fill the budget: {}", small.1);

    let client = proto::downstream_client::DownstreamClient::connect(format!("http://{}", ds.grpc_addr)).await.unwrap();
    let answers = futures::future::join_all((0..6).map(|i| {
        let mut client = client.clone();
        async move {
            let req = FetchRequest { request_id: format!("g-{i}"), items: 10_000, ..FetchRequest::default() };
            client.fetch(proto::FetchRequest::from(req)).await.map(|_| ())
        }
    }))
    .await;
    let grpc_shed: Vec<_> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
    assert!(!grpc_shed.is_empty() && answers.len() - grpc_shed.len() >= 2, "{answers:?}");
    assert!(grpc_shed.iter().all(|s| s.code() == tonic::Code::ResourceExhausted), "{grpc_shed:?}");
    // The edge counts a handler's shed answer by a mark it takes off: the
    // client never sees it.
    assert!(grpc_shed.iter().all(|s| s.metadata().get("x-shed-by-handler").is_none()), "{grpc_shed:?}");

    let s = stats(ds.admin_addr).await;
    assert_eq!(s.listeners["rest"].requests["shed"], shed.len() as u64);
    assert_eq!(s.listeners["grpc"].requests["shed"], grpc_shed.len() as u64, "{:?}", s.listeners["grpc"].requests);
    assert_eq!(s.settings["max_work_bytes"], budget);
    ds.stop().await;
}

// ---- 7. request bodies one connection holds ----

#[tokio::test]
async fn a_connection_holding_too_many_body_bytes_fails_the_request_past_it() {
    let ds = downstream(Config {
        delay: Duration::from_millis(1),
        max_connection_body_bytes: 1024 * 1024,
        header_read_timeout: Duration::from_secs(3),
        ..Config::default()
    })
    .await;
    let (send, _driver) = h2_connect(ds.grpc_addr).await;
    // Three messages declaring 600 kB each, 400 kB of each sent and the
    // streams left open: the third passes the connection's 1 MiB.
    let mut header = vec![0u8];
    header.extend_from_slice(&600_000u32.to_be_bytes());
    let mut streams = Vec::new();
    for _ in 0..3 {
        let mut ready = send.clone().ready().await.unwrap();
        let (resp, mut stream) = ready.send_request(grpc_head(ds.grpc_addr, FETCH), false).unwrap();
        stream.send_data(Bytes::from(header.clone()), false).unwrap();
        stream.send_data(Bytes::from(vec![0u8; 400_000]), false).unwrap();
        streams.push((resp, stream));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (third, _open) = streams.pop().unwrap();
    let third = tokio::time::timeout(Duration::from_secs(2), third).await;
    let third = third.expect("the stream past the limit is answered before its body deadline").unwrap();
    let (code, message) = status_of(third.headers());
    assert_eq!(code, tonic::Code::ResourceExhausted as i32, "{message}");
    assert!(message.contains("bytes one connection may hold"), "{message}");
    // The others end (their bodies time out); the connection serves again.
    drop(streams);
    assert_eq!(grpc_call(&send, ds.grpc_addr, FETCH, fetch_message("after", 1)).await.0, 0);
    let s = stats(ds.admin_addr).await;
    assert_eq!(s.settings["grpc_server"]["max_connection_body_bytes"], 1024 * 1024);
    ds.stop().await;
}

// ---- 8. every refusal in the documented shape, counted ----

#[tokio::test]
async fn every_http_refusal_carries_the_json_error_and_is_counted() {
    let ds = downstream(Config {
        delay: Duration::from_millis(1),
        compression: service::Compression::Gzip,
        ..Config::default()
    })
    .await;
    let http = reqwest::Client::new();
    let url = format!("http://{}/v1/fetch", ds.rest_addr);
    let json_error = |resp: reqwest::Response| async move {
        let status = resp.status().as_u16();
        let is_json = resp.headers().get("content-type").is_some_and(|v| v == "application/json");
        let body: serde_json::Value = resp.json().await.unwrap_or_default();
        assert!(is_json && body["error"].is_string(), "{status}: {body}");
        (status, body["error"].as_str().unwrap().to_owned())
    };
    let br = http.post(&url).header("content-type", "application/json").header("content-encoding", "br");
    let (status, reason) = json_error(br.body("{}").send().await.unwrap()).await;
    assert_eq!((status, reason.contains("\"br\"")), (415, true), "{reason}");
    let get = http.get(&url).send().await.unwrap();
    assert_eq!(get.headers()["allow"], "POST");
    let (status, reason) = json_error(get).await;
    assert_eq!((status, reason.contains("GET is not allowed")), (405, true), "{reason}");
    let big_header = http.post(&url).header("x-padding", "p".repeat(40 * 1024)).json(&serde_json::json!({}));
    assert_eq!(json_error(big_header.send().await.unwrap()).await.0, 431);
    let array = http.post(&url).header("content-type", "application/json").body(r#"["a", 1]"#);
    let (status, reason) = json_error(array.send().await.unwrap()).await;
    assert_eq!((status, reason.contains("must be a JSON object")), (400, true), "{reason}");
    // More fields than hyper parses: its own bare 431, counted all the same.
    let mut many = http.post(&url);
    for i in 0..150 {
        many = many.header(format!("x-field-{i}"), "v");
    }
    assert_eq!(many.send().await.unwrap().status(), 431);

    let admin = format!("http://{}", ds.admin_addr);
    assert_eq!(json_error(http.get(format!("{admin}/nope")).send().await.unwrap()).await.0, 404);
    assert_eq!(json_error(http.post(format!("{admin}/stats")).send().await.unwrap()).await.0, 405);

    let s = stats(ds.admin_addr).await;
    let rest = &s.listeners["rest"].requests;
    assert_eq!(
        (rest["unsupported_media_type"], rest["method_not_allowed"], rest["headers_too_large"], rest["bad_request"]),
        (1, 1, 2, 1),
        "{rest:?}"
    );
    let admin_counted = s.admin.expect("the admin listener's answers are counted").requests;
    assert_eq!((admin_counted["not_found"], admin_counted["method_not_allowed"]), (1, 1), "{admin_counted:?}");
    ds.stop().await;
}

/// Without --compression the REST listener decodes no coding: a body said
/// to be in one (`br`) is a counted 415 naming it, as with compression on,
/// never read as if it were plain; `identity` is no coding.
#[tokio::test]
async fn a_listener_without_compression_refuses_a_coded_body_with_415() {
    let ds = downstream(Config { delay: Duration::from_millis(1), ..Config::default() }).await;
    let http = reqwest::Client::new();
    let url = format!("http://{}/v1/fetch", ds.rest_addr);
    let body = r#"{"requestId":"br","items":1}"#;
    let br = http.post(&url).header("content-type", "application/json").header("content-encoding", "br");
    let resp = br.body(body).send().await.unwrap();
    assert_eq!(resp.status(), 415);
    let reason: serde_json::Value = resp.json().await.unwrap();
    assert!(reason["error"].as_str().unwrap().contains("\"br\""), "{reason}");
    let identity = http.post(&url).header("content-type", "application/json").header("content-encoding", "identity");
    assert_eq!(identity.body(body).send().await.unwrap().status(), 200);
    let s = stats(ds.admin_addr).await;
    assert_eq!(s.listeners["rest"].requests["unsupported_media_type"], 1, "{:?}", s.listeners["rest"].requests);
    ds.stop().await;
}

/// Metadata over the listener's header limit (32 KiB, as REST's 431) is
/// answered with a status a gRPC client reads, RESOURCE_EXHAUSTED in a
/// `grpc-status`, counted; h2's own bare 431 (16 KiB by default) no longer
/// answers first.
#[tokio::test]
async fn metadata_over_the_header_limit_gets_a_grpc_status() {
    let ds = downstream(Config { delay: Duration::from_millis(1), ..Config::default() }).await;
    let (send, _driver) = h2_connect(ds.grpc_addr).await;
    let mut head = grpc_head(ds.grpc_addr, FETCH);
    head.headers_mut().insert("x-padding", http::HeaderValue::from_str(&"p".repeat(40 * 1024)).unwrap());
    let mut ready = send.clone().ready().await.unwrap();
    let (resp, mut stream) = ready.send_request(head, false).unwrap();
    stream.send_data(fetch_message("big-head", 1), true).unwrap();
    let resp = tokio::time::timeout(WITHIN, resp).await.expect("an answer").unwrap();
    assert_eq!(resp.status(), 200, "a gRPC answer, not a bare HTTP refusal");
    let (code, message) = status_of(resp.headers());
    assert_eq!(code, tonic::Code::ResourceExhausted as i32, "{message}");
    assert!(message.contains("metadata"), "{message}");
    // The connection serves on.
    assert_eq!(grpc_call(&send, ds.grpc_addr, FETCH, fetch_message("after", 1)).await.0, 0);
    let s = stats(ds.admin_addr).await;
    assert_eq!(s.listeners["grpc"].requests["resource_exhausted"], 1, "{:?}", s.listeners["grpc"].requests);
    ds.stop().await;
}
