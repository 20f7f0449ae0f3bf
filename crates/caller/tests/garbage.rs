//! Both services fed garbage over real sockets: random bytes, truncated HTTP/2
//! frames, a huge Content-Length, a connection that never finishes its
//! headers. Each gets an error status or a closed connection within the
//! header-read timeout; the service keeps serving others and its memory stays
//! bounded.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

const HEADER_TIMEOUT: Duration = Duration::from_millis(500);
/// Far more than the header timeout, far less than forever.
const WITHIN: Duration = Duration::from_secs(10);

struct Services {
    ds: downstream::Handle,
    caller: caller::Handle,
}

async fn services() -> Services {
    services_with(
        downstream::Config {
            delay: Duration::from_millis(5),
            header_read_timeout: HEADER_TIMEOUT,
            ..downstream::Config::default()
        },
        caller::Config { header_read_timeout: HEADER_TIMEOUT, ..caller::Config::default() },
    )
    .await
}

/// A downstream and a gRPC caller pointed at it.
async fn services_with(ds: downstream::Config, caller: caller::Config) -> Services {
    let ds = downstream::start(ds, CancellationToken::new()).await.unwrap();
    let caller = caller::Config { downstream_grpc: Some(format!("http://{}", ds.grpc_addr)), ..caller };
    let caller = caller::start(caller, CancellationToken::new()).await.unwrap();
    Services { ds, caller }
}

/// Writes `bytes`, then reads until the server closes; returns what it sent
/// back, or panics if it kept the connection open past `WITHIN`.
async fn send_and_wait_for_close(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let _ = tcp.write_all(bytes).await;
    let mut got = Vec::new();
    let started = Instant::now();
    let read = tokio::time::timeout(WITHIN, async {
        let mut buf = [0u8; 4096];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "{addr} kept a garbage connection open for {:?}", started.elapsed());
    got
}

async fn still_serves(s: &Services) {
    let http = reqwest::Client::new();
    let ok = http
        .post(format!("http://{}/v1/call", s.caller.front_addr))
        .json(&serde_json::json!({"requestId": "after-garbage", "items": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let ok = http
        .post(format!("http://{}/v1/fetch", s.ds.rest_addr))
        .json(&serde_json::json!({"requestId": "after-garbage", "items": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
}

fn rss_bytes() -> u64 {
    telemetry::ProcessStats::current().snapshot().rss_bytes.unwrap()
}

/// Deterministic pseudo-random bytes (SplitMix64), so a failure reproduces.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            (z ^ (z >> 27)) as u8
        })
        .collect()
}

#[tokio::test]
async fn random_bytes_get_an_error_or_a_close_on_every_listener() {
    let s = services().await;
    let http1 = [s.ds.rest_addr, s.caller.front_addr, s.ds.admin_addr];
    for (i, addr) in http1.iter().chain([&s.ds.grpc_addr]).enumerate() {
        for seed in 0..5u64 {
            let reply = send_and_wait_for_close(*addr, &noise(seed * 31 + i as u64, 2048)).await;
            if !reply.is_empty() && http1.contains(addr) {
                assert!(reply.starts_with(b"HTTP/1.1 4"), "{addr}: {}", String::from_utf8_lossy(&reply));
            }
        }
    }
    still_serves(&s).await;
}

#[tokio::test]
async fn truncated_http2_frames_are_closed_within_the_header_timeout() {
    let s = services().await;
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    // A SETTINGS frame header announcing 60 bytes of payload, then only 3 of them.
    let mut truncated = preface.to_vec();
    truncated.extend_from_slice(&[0, 0, 60, 0x4, 0, 0, 0, 0, 0, 0, 1, 0]);
    for addr in [s.ds.grpc_addr, s.ds.rest_addr, s.caller.front_addr] {
        let started = Instant::now();
        send_and_wait_for_close(addr, &truncated).await;
        send_and_wait_for_close(addr, &preface[..10]).await;
        assert!(started.elapsed() >= HEADER_TIMEOUT, "{addr} closed before the timeout: was it even waiting?");
    }
    still_serves(&s).await;
}

#[tokio::test]
async fn a_huge_content_length_is_refused_without_reading_it() {
    let s = services().await;
    for (addr, path) in [(s.ds.rest_addr, "/v1/fetch"), (s.caller.front_addr, "/v1/call")] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n{{\"requestId\":"
        );
        let reply = send_and_wait_for_close(addr, head.as_bytes()).await;
        assert!(reply.starts_with(b"HTTP/1.1 413"), "{addr}: {}", String::from_utf8_lossy(&reply));
    }
    still_serves(&s).await;
}

#[tokio::test]
async fn a_body_that_never_completes_is_refused_with_408() {
    let s = services().await;
    for (addr, path) in [(s.ds.rest_addr, "/v1/fetch"), (s.caller.front_addr, "/v1/call")] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{{\"req"
        );
        let reply = send_and_wait_for_close(addr, head.as_bytes()).await;
        assert!(reply.starts_with(b"HTTP/1.1 408"), "{addr}: {}", String::from_utf8_lossy(&reply));
    }
    still_serves(&s).await;
}

#[tokio::test]
async fn a_connection_holding_its_headers_open_is_closed() {
    let s = services().await;
    for addr in [s.ds.rest_addr, s.caller.front_addr, s.ds.admin_addr] {
        let started = Instant::now();
        send_and_wait_for_close(addr, b"POST /v1/fetch HTTP/1.1\r\nHost: x\r\nContent-Type: app").await;
        assert!(started.elapsed() >= HEADER_TIMEOUT / 2, "{addr}");
        // Connected but silent.
        send_and_wait_for_close(addr, b"").await;
    }
    still_serves(&s).await;
}

/// The bound holds for every head on a kept-alive HTTP/1.1 connection, not
/// only its first: after an answer, a next head that never completes is
/// closed like a first one (the idle timeout, 30 s, is far past `WITHIN`),
/// and gets no answer of its own.
#[tokio::test]
async fn a_later_head_held_open_is_closed() {
    let s = services().await;
    for addr in [s.ds.rest_addr, s.caller.front_addr, s.ds.admin_addr] {
        let started = Instant::now();
        let reply = send_and_wait_for_close(
            addr,
            b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\nPOST /v1/fetch HTTP/1.1\r\nHost: x\r\nContent-Type: app",
        )
        .await;
        assert!(started.elapsed() >= HEADER_TIMEOUT / 2, "{addr}");
        let reply = String::from_utf8_lossy(&reply);
        assert!(reply.starts_with("HTTP/1.1 404"), "{addr}: {reply}");
        assert_eq!(reply.matches("HTTP/1.1 ").count(), 1, "{addr}: {reply}");
    }
    still_serves(&s).await;
}

#[tokio::test]
async fn memory_stays_bounded_under_many_garbage_connections() {
    let s = services().await;
    still_serves(&s).await;
    let before = rss_bytes();
    let addrs = [s.ds.rest_addr, s.ds.grpc_addr, s.caller.front_addr];
    let tasks = (0..300u64).map(|i| {
        let addr = addrs[i as usize % addrs.len()];
        tokio::spawn(async move { send_and_wait_for_close(addr, &noise(i, 64 * 1024)).await })
    });
    for t in futures::future::join_all(tasks).await {
        t.unwrap();
    }
    still_serves(&s).await;
    let grown = rss_bytes().saturating_sub(before);
    // 300 connections of 64 KiB garbage each would be ~19 MiB if buffered and
    // kept; the services must not hold on to them.
    assert!(grown < 64 * 1024 * 1024, "RSS grew by {} MiB", grown / (1024 * 1024));
}

#[tokio::test]
async fn front_and_admin_refusals_carry_the_json_error_and_are_counted() {
    let s = services().await;
    let http = reqwest::Client::new();
    let front = format!("http://{}/v1/call", s.caller.front_addr);
    let json_error = |resp: reqwest::Response| async move {
        let status = resp.status().as_u16();
        let body: serde_json::Value = resp.json().await.unwrap_or_default();
        assert!(body["error"].is_string(), "{status}: {body}");
        (status, body["error"].as_str().unwrap().to_owned())
    };
    let (status, reason) = json_error(http.get(&front).send().await.unwrap()).await;
    assert_eq!((status, reason.contains("the API is POST /v1/call")), (405, true), "{reason}");
    let array = http.post(&front).header("content-type", "application/json").body(r#"["id", 2]"#);
    let (status, reason) = json_error(array.send().await.unwrap()).await;
    assert_eq!((status, reason.contains("must be a JSON object")), (400, true), "{reason}");
    // The front door decodes no coding: a body said to be compressed is a
    // 415 naming the coding, not read as if it were plain.
    let br = http.post(&front).header("content-type", "application/json").header("content-encoding", "br");
    let (status, reason) = json_error(br.body(r#"{"requestId":"br","items":1}"#).send().await.unwrap()).await;
    assert_eq!((status, reason.contains("\"br\"")), (415, true), "{reason}");
    let identity = http.post(&front).header("content-encoding", "identity");
    let plain = identity.json(&serde_json::json!({"requestId": "id", "items": 1})).send().await.unwrap();
    assert_eq!(plain.status(), 200, "identity is no coding");
    let admin = format!("http://{}", s.caller.admin_addr);
    assert_eq!(json_error(http.get(format!("{admin}/metricz")).send().await.unwrap()).await.0, 404);
    let stats: telemetry::StatsSnapshot =
        http.get(format!("{admin}/stats")).send().await.unwrap().json().await.unwrap();
    let counted = &stats.listeners["front"].requests;
    assert_eq!(
        (counted["method_not_allowed"], counted["bad_request"], counted["unsupported_media_type"]),
        (1, 1, 1),
        "{counted:?}"
    );
    assert_eq!(stats.admin.expect("admin answers are counted").requests["not_found"], 1);
    still_serves(&s).await;
}

#[tokio::test]
async fn a_caller_sheds_front_requests_over_its_work_budget() {
    // Fan-out 2 × 10,000 records at 512 bytes weighs 10.24 MB: one fits in
    // 16 MiB of work (seven eighths of it for large requests), a second not.
    let Services { ds, caller } = services_with(
        downstream::Config { delay: Duration::from_secs(1), ..downstream::Config::default() },
        caller::Config { fanout: 2, max_work_bytes: 16 * 1024 * 1024, ..caller::Config::default() },
    )
    .await;
    let http = reqwest::Client::new();
    let front = format!("http://{}/v1/call", caller.front_addr);
    let call = |id: String, items: u32| {
        let req = http.post(&front).json(&serde_json::json!({"requestId": id, "items": items}));
        async move { req.send().await.unwrap().status().as_u16() }
    };
    let big = futures::future::join_all((0..4).map(|i| call(format!("big-{i}"), 10_000)));
    let small = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        call("small".into(), 5).await
    };
    let (big, small) = tokio::join!(big, small);
    let shed = big.iter().filter(|s| **s == 503).count();
    assert!(shed >= 1 && big.iter().filter(|s| **s == 200).count() + shed == 4, "{big:?}");
    assert_eq!(small, 200, "a small request is served while a large one holds the budget");
    let stats = caller.registry.snapshot();
    assert_eq!(stats.listeners["front"].requests["shed"], shed as u64);
    assert_eq!(stats.settings["max_work_bytes"], 16 * 1024 * 1024);
    assert_eq!(stats.settings["work_bytes_per_record"], 512);
    caller.stop().await;
    ds.stop().await;
}

/// A downstream that answers every request with a chunked body of `total`
/// bytes of JSON-looking filler and then holds the connection open.
async fn endless_downstream(total: usize) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = tcp.read(&mut buf).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                if tcp.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let piece = vec![b' '; 1 << 20];
                let chunk = [format!("{:x}\r\n", piece.len()).into_bytes(), piece, b"\r\n".to_vec()].concat();
                for _ in 0..total / (1 << 20) {
                    if tcp.write_all(&chunk).await.is_err() {
                        return;
                    }
                }
                tokio::time::sleep(WITHIN).await;
            });
        }
    });
    addr
}

/// The REST client reads an answer up to the gRPC client's cap (256 MiB),
/// not without end: a downstream answering 300 MiB and holding fails the
/// call at the cap, counted `bad_response`, long before the call's timeout.
#[tokio::test]
async fn an_answer_over_the_cap_fails_the_call_and_is_counted() {
    let ds = endless_downstream(300 << 20).await;
    let config = caller::Config {
        transport: caller::Transport::Rest,
        downstream_rest: Some(format!("http://{ds}")),
        downstream_timeout: WITHIN * 3,
        ..caller::Config::default()
    };
    let caller = caller::start(config, CancellationToken::new()).await.unwrap();
    let front = format!("http://{}/v1/call", caller.front_addr);
    let call = reqwest::Client::new().post(&front).json(&serde_json::json!({"requestId": "big", "items": 1}));
    let resp =
        tokio::time::timeout(WITHIN * 2, call.send()).await.expect("failed at the cap, not the timeout").unwrap();
    assert_eq!(resp.status(), 502);
    let reason: serde_json::Value = resp.json().await.unwrap();
    assert!(reason["error"].as_str().unwrap().contains("bytes this client reads"), "{reason}");
    let stats = caller.registry.snapshot();
    let client = stats.clients.values().next().expect("the REST client's counters");
    assert_eq!(client.requests["bad_response"], 1, "{:?}", client.requests);
    assert_eq!(stats.clients.len(), 1);
    caller.stop().await;
}
