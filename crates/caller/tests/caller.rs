//! The caller over real sockets, in front of a real downstream: both transports
//! (and the REST HTTP/2 arm), fan-out, hop timing, error mapping, admin stats.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use caller::{Config as CallerConfig, Handle as CallerHandle, Transport};
use downstream::{Config as DsConfig, Handle as DsHandle};
use payload::{CallRequest, FetchResponse, Limits};
use service::{Protocols, ServerSettings};
use telemetry::StatsSnapshot;
use tokio_util::sync::CancellationToken;

async fn downstream(delay_ms: u64) -> DsHandle {
    let config = DsConfig { delay: Duration::from_millis(delay_ms), ..DsConfig::default() };
    downstream::start(config, CancellationToken::new()).await.unwrap()
}

#[derive(Clone, Copy, Debug)]
enum Arm {
    Grpc,
    Rest,
    RestHttp2,
}

const ARMS: [Arm; 3] = [Arm::Grpc, Arm::Rest, Arm::RestHttp2];

fn caller_config(arm: Arm, grpc: SocketAddr, rest: SocketAddr) -> CallerConfig {
    CallerConfig {
        transport: match arm {
            Arm::Grpc => Transport::Grpc,
            Arm::Rest | Arm::RestHttp2 => Transport::Rest,
        },
        rest_http2: matches!(arm, Arm::RestHttp2),
        downstream_grpc: Some(format!("http://{grpc}")),
        downstream_rest: Some(format!("http://{rest}")),
        ..CallerConfig::default()
    }
}

async fn caller(config: CallerConfig) -> CallerHandle {
    caller::start(config, CancellationToken::new()).await.unwrap()
}

struct Answer {
    status: u16,
    server_timing: Option<String>,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
    fn error(&self) -> String {
        self.json()["error"].as_str().unwrap().to_owned()
    }
    fn downstream_ms(&self) -> f64 {
        let t = self.server_timing.as_deref().expect("Server-Timing header");
        t.strip_prefix("downstream;dur=").expect(t).parse().unwrap()
    }
}

async fn post(front: SocketAddr, body: &str, content_type: &str) -> Answer {
    let resp = reqwest::Client::new()
        .post(format!("http://{front}/v1/call"))
        .header("content-type", content_type)
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let server_timing = resp.headers().get("server-timing").map(|v| v.to_str().unwrap().to_owned());
    Answer { status, server_timing, body: resp.bytes().await.unwrap().to_vec() }
}

async fn call(front: SocketAddr, id: &str, items: u32) -> Answer {
    post(front, &format!(r#"{{"requestId":"{id}","items":{items}}}"#), "application/json").await
}

async fn stats(admin: SocketAddr) -> StatsSnapshot {
    reqwest::get(format!("http://{admin}/stats")).await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn every_arm_returns_exactly_the_generated_records_and_identical_json() {
    let ds = downstream(5).await;
    let mut bodies = Vec::new();
    for arm in ARMS {
        let c = caller(caller_config(arm, ds.grpc_addr, ds.rest_addr)).await;
        let a = call(c.front_addr, "same-json", 12).await;
        assert_eq!(a.status, 200, "{arm:?}: {}", String::from_utf8_lossy(&a.body));
        let resp: FetchResponse = serde_json::from_slice(&a.body).unwrap();
        let req = CallRequest { request_id: "same-json".into(), items: 12, ..CallRequest::default() };
        assert_eq!(payload::verify_call(&req, 1, &resp), Ok(()), "{arm:?}");
        bodies.push(a.body);
        c.stop().await;
    }
    assert_eq!(bodies[0], bodies[1], "gRPC and REST front bodies differ");
    assert_eq!(bodies[0], bodies[2], "gRPC and REST-over-HTTP/2 front bodies differ");
    ds.stop().await;
}

/// `requestBytes` makes the caller upload that many body bytes on each
/// downstream call: the downstream's own byte counters grow by at least that
/// much per call, over every arm; and a time-series call comes back as the
/// generated points.
#[tokio::test]
async fn request_bytes_reach_the_downstream_and_every_shape_comes_back() {
    const UPLOAD: u64 = 20_000;
    let ds = downstream(1).await;
    for arm in ARMS {
        let c = caller(CallerConfig { fanout: 2, ..caller_config(arm, ds.grpc_addr, ds.rest_addr) }).await;
        let listener = if matches!(arm, Arm::Grpc) { "grpc" } else { "rest" };
        let mut seen = Vec::new();
        for request_bytes in [0, UPLOAD as u32] {
            let before = stats(ds.admin_addr).await.listeners[listener].clone();
            let body = format!(r#"{{"requestId":"up","items":2,"requestBytes":{request_bytes}}}"#);
            let a = post(c.front_addr, &body, "application/json").await;
            assert_eq!(a.status, 200, "{arm:?}: {}", String::from_utf8_lossy(&a.body));
            let d = stats(ds.admin_addr).await.listeners[listener].since(&before);
            assert_eq!(d.requests["ok"], 2, "{arm:?}");
            seen.push((d.message_bytes_in, d.bytes_in.unwrap()));
        }
        let ((small_msg, small_wire), (big_msg, big_wire)) = (seen[0], seen[1]);
        // Two calls, each with its upload (base64 in JSON: 4/3 as many bytes).
        assert!(big_msg >= small_msg + 2 * UPLOAD, "{arm:?}: message bytes {small_msg} → {big_msg}");
        // (The first call's wire bytes also carry the connection's set-up.)
        assert!(big_wire >= 2 * UPLOAD && big_wire > small_wire, "{arm:?}: wire bytes {small_wire} → {big_wire}");

        let a = post(c.front_addr, r#"{"requestId":"ts","items":5,"shape":"timeseries"}"#, "application/json").await;
        assert_eq!(a.status, 200, "{arm:?}: {}", String::from_utf8_lossy(&a.body));
        let resp: FetchResponse = serde_json::from_slice(&a.body).unwrap();
        let req = CallRequest {
            request_id: "ts".into(),
            items: 5,
            shape: payload::Shape::Timeseries,
            ..CallRequest::default()
        };
        assert_eq!((resp.points.len(), resp.records.len()), (10, 0), "{arm:?}");
        assert_eq!(payload::verify_call(&req, 2, &resp), Ok(()), "{arm:?}");
        c.stop().await;
    }
    ds.stop().await;
}

#[tokio::test]
async fn fanout_makes_overlapping_calls_counted_by_the_downstream() {
    let delay = Duration::from_millis(300);
    let ds = downstream(300).await;
    for arm in [Arm::Grpc, Arm::Rest] {
        let c = caller(CallerConfig { fanout: 5, ..caller_config(arm, ds.grpc_addr, ds.rest_addr) }).await;
        let before = stats(ds.admin_addr).await;
        let started = Instant::now();
        let a = call(c.front_addr, "fan", 3).await;
        let elapsed = started.elapsed();
        assert_eq!(a.status, 200, "{arm:?}");
        let resp: FetchResponse = serde_json::from_slice(&a.body).unwrap();
        let req = CallRequest { request_id: "fan".into(), items: 3, ..CallRequest::default() };
        assert_eq!(payload::verify_call(&req, 5, &resp), Ok(()));
        let after = stats(ds.admin_addr).await;
        let listener = if matches!(arm, Arm::Grpc) { "grpc" } else { "rest" };
        let d = after.listeners[listener].since(&before.listeners[listener]);
        assert_eq!(d.requests["ok"], 5, "{arm:?}: the downstream saw {:?}", d.requests);
        // Five serial calls take 5 x delay; concurrent ones about one delay.
        assert!(elapsed < 3 * delay, "{arm:?}: fan-out of 5 took {elapsed:?}, the calls did not overlap");
        assert!(a.downstream_ms() >= delay.as_secs_f64() * 1e3);
        c.stop().await;
    }
    ds.stop().await;
}

#[tokio::test]
async fn server_timing_is_present_and_at_least_the_delay() {
    let ds = downstream(40).await;
    for arm in ARMS {
        let c = caller(caller_config(arm, ds.grpc_addr, ds.rest_addr)).await;
        let a = call(c.front_addr, "timing", 2).await;
        assert_eq!(a.status, 200);
        assert!(a.downstream_ms() >= 40.0, "{arm:?}: {:?}", a.server_timing);
        c.stop().await;
    }
    ds.stop().await;
}

#[tokio::test]
async fn unreachable_downstream_is_502_naming_it() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    for arm in ARMS {
        let c = caller(caller_config(arm, closed, closed)).await;
        let a = call(c.front_addr, "down", 1).await;
        assert_eq!(a.status, 502, "{arm:?}: {}", String::from_utf8_lossy(&a.body));
        assert!(a.error().contains("unreachable") && a.error().contains(&closed.to_string()), "{arm:?}: {}", a.error());
        let s = stats(c.admin_addr).await;
        assert_eq!(s.clients.values().next().unwrap().requests["connect"], 1, "{arm:?}");
        c.stop().await;
    }
}

#[tokio::test]
async fn slow_downstream_is_504() {
    let ds = downstream(1000).await;
    for arm in ARMS {
        let config = CallerConfig {
            downstream_timeout: Duration::from_millis(50),
            ..caller_config(arm, ds.grpc_addr, ds.rest_addr)
        };
        let c = caller(config).await;
        let a = call(c.front_addr, "slow", 1).await;
        assert_eq!(a.status, 504, "{arm:?}");
        assert!(a.error().contains("did not answer within 50 ms"), "{}", a.error());
        assert_eq!(stats(c.admin_addr).await.clients.values().next().unwrap().requests["timeout"], 1);
        c.stop().await;
    }
    ds.stop().await;
}

#[tokio::test]
async fn downstream_error_is_502_carrying_its_status() {
    let config = DsConfig {
        delay: Duration::from_millis(1),
        limits: Limits { max_items: 5, ..Limits::default() },
        ..DsConfig::default()
    };
    let ds = downstream::start(config, CancellationToken::new()).await.unwrap();
    for (arm, expected) in [(Arm::Grpc, "InvalidArgument"), (Arm::Rest, "HTTP 400"), (Arm::RestHttp2, "HTTP 400")] {
        let c = caller(caller_config(arm, ds.grpc_addr, ds.rest_addr)).await;
        let a = call(c.front_addr, "too-many", 6).await;
        assert_eq!(a.status, 502, "{arm:?}");
        assert!(a.error().contains(expected) && a.error().contains("limit is 5"), "{arm:?}: {}", a.error());
        assert_eq!(stats(c.admin_addr).await.clients.values().next().unwrap().requests["status"], 1);
        c.stop().await;
    }
    ds.stop().await;
}

/// A downstream that lies according to the request id: `lie-id…` echoes
/// another id, `lie-count…` drops a record, anything else answers the right id
/// and count with another request's records.
mod liar {
    use super::*;
    use axum::Json;
    use payload::FetchRequest;

    fn wrong(req: FetchRequest) -> FetchResponse {
        let other = FetchRequest { request_id: format!("{}-other", req.request_id), ..req.clone() };
        let mut records = payload::generate(&other);
        if req.request_id.starts_with("lie-count") {
            records.pop();
        }
        let request_id = if req.request_id.starts_with("lie-id") { other.request_id } else { req.request_id };
        FetchResponse { request_id, records, points: vec![] }
    }

    struct Liar;

    #[tonic::async_trait]
    impl proto::downstream_server::Downstream for Liar {
        async fn fetch(
            &self,
            request: tonic::Request<proto::FetchRequest>,
        ) -> Result<tonic::Response<proto::FetchResponse>, tonic::Status> {
            Ok(tonic::Response::new(
                wrong(request.into_inner().try_into().map_err(|_| tonic::Status::invalid_argument("shape"))?).into(),
            ))
        }
    }

    pub async fn start(shutdown: CancellationToken) -> (SocketAddr, SocketAddr) {
        let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let rest = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addrs = (grpc.local_addr().unwrap(), rest.local_addr().unwrap());
        let grpc_app =
            tonic::service::Routes::new(proto::downstream_server::DownstreamServer::new(Liar)).into_axum_router();
        let rest_app = axum::Router::new()
            .route("/v1/fetch", axum::routing::post(|Json(r): Json<FetchRequest>| async move { Json(wrong(r)) }));
        tokio::spawn(service::serve(grpc, grpc_app, None, ServerSettings::new(Protocols::Http2Only), shutdown.clone()));
        tokio::spawn(service::serve(rest, rest_app, None, ServerSettings::new(Protocols::Auto), shutdown));
        addrs
    }
}

#[tokio::test]
async fn an_answer_of_the_wrong_shape_is_502_bad_downstream_response() {
    let shutdown = CancellationToken::new();
    let (grpc, rest) = liar::start(shutdown.clone()).await;
    for arm in ARMS {
        let c = caller(caller_config(arm, grpc, rest)).await;
        for (id, what) in [("lie-id", "echoes request id"), ("lie-count", "carries 2 records, expected 3")] {
            let a = call(c.front_addr, id, 3).await;
            assert_eq!(a.status, 502, "{arm:?} {id}");
            assert!(
                a.error().starts_with("bad downstream response") && a.error().contains(what),
                "{arm:?}: {}",
                a.error()
            );
        }
        assert_eq!(stats(c.admin_addr).await.clients.values().next().unwrap().requests["bad_response"], 2);
        c.stop().await;
    }
    shutdown.cancel();
}

#[tokio::test]
async fn the_caller_does_not_recompute_the_records_it_passes_on() {
    // A real caller does not regenerate its downstream's answer: content is
    // verified end to end by the harness (harness/src/load/target.rs).
    let shutdown = CancellationToken::new();
    let (grpc, rest) = liar::start(shutdown.clone()).await;
    for arm in ARMS {
        let c = caller(caller_config(arm, grpc, rest)).await;
        let a = call(c.front_addr, "lie-content", 3).await;
        assert_eq!(a.status, 200, "{arm:?}");
        let resp: FetchResponse = serde_json::from_slice(&a.body).unwrap();
        let req = CallRequest { request_id: "lie-content".into(), items: 3, ..CallRequest::default() };
        assert!(payload::verify_call(&req, 1, &resp).is_err(), "the liar's records passed end-to-end verification");
        let s = stats(c.admin_addr).await;
        assert!(s.settings["per_request"].as_str().unwrap().contains("not recomputed"), "{}", s.settings);
        c.stop().await;
    }
    shutdown.cancel();
}

#[tokio::test]
async fn bad_front_input_is_rejected_before_any_downstream_call() {
    let ds = downstream(1).await;
    let c = caller(caller_config(Arm::Grpc, ds.grpc_addr, ds.rest_addr)).await;
    let a = post(c.front_addr, "{\"requestId\":", "application/json").await;
    assert_eq!(a.status, 400);
    assert!(a.error().contains("malformed JSON"));
    let a = post(c.front_addr, r#"{"requestId":"x","items":1}"#, "text/plain").await;
    assert_eq!(a.status, 415);
    let a = post(c.front_addr, r#"{"requestId":"","items":1}"#, "application/json").await;
    assert_eq!(a.status, 400);
    let a = post(c.front_addr, r#"{"requestId":"x","items":1000000}"#, "application/json").await;
    assert_eq!(a.status, 400);
    let resp = reqwest::get(format!("http://{}/elsewhere", c.front_addr)).await.unwrap();
    assert_eq!(resp.status(), 404);
    let s = stats(ds.admin_addr).await;
    assert_eq!(s.listeners["grpc"].requests_total(), 0, "bad front input reached the downstream");
    c.stop().await;
    ds.stop().await;
}

#[tokio::test]
async fn admin_stats_show_front_bytes_outbound_outcomes_connections_and_settings() {
    let ds = downstream(1).await;
    for (arm, name) in [(Arm::Grpc, "grpc"), (Arm::Rest, "rest")] {
        let config = CallerConfig { grpc_connections: 2, ..caller_config(arm, ds.grpc_addr, ds.rest_addr) };
        let c = caller(config).await;
        for i in 0..4 {
            assert_eq!(call(c.front_addr, &format!("adm-{i}"), 2).await.status, 200);
        }
        let s = stats(c.admin_addr).await;
        assert_eq!(s.service, "caller");
        assert_eq!(s.listeners["front"].requests["ok"], 4);
        assert!(s.listeners["front"].bytes_in.unwrap() > 0);
        let client = &s.clients[name];
        assert_eq!(client.requests["ok"], 4);
        assert!(client.connections >= 1, "{arm:?}: no outbound connection counted");
        assert!(client.message_bytes_in > 0);
        assert_eq!(s.settings["transport"], name);
        assert_eq!(s.settings["client"]["retries"], "none");
        if name == "grpc" {
            assert_eq!(client.connections, 2, "round-robin over 2 connections should open both");
            assert!(client.bytes_in.unwrap() > 0);
        } else {
            assert_eq!(client.bytes_in, None, "reqwest's sockets are not counted: unknown, not zero");
        }
        let metrics = reqwest::get(format!("http://{}/metrics", c.admin_addr)).await.unwrap().text().await.unwrap();
        assert!(metrics.contains(&format!("role=\"client\",endpoint=\"{name}\",outcome=\"ok\"}} 4")), "{metrics}");
        c.stop().await;
    }
    ds.stop().await;
}

/// Internal-hop wire bytes per request, read from the downstream's counters.
/// Run with `cargo test -p caller --test integration internal_hop -- --nocapture`.
#[tokio::test]
async fn internal_hop_wire_bytes_per_request() {
    let ds = downstream(1).await;
    let n = 50u64;
    println!("| items | transport | wire in/req | wire out/req | message in/req | message out/req | connections |");
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for items in [10u32, 100] {
        for (arm, name) in [(Arm::Grpc, "grpc"), (Arm::Rest, "rest"), (Arm::RestHttp2, "rest")] {
            let c = caller(caller_config(arm, ds.grpc_addr, ds.rest_addr)).await;
            // Warm the connection first so setup bytes do not skew the figure.
            assert_eq!(call(c.front_addr, "warm", items).await.status, 200);
            let before = stats(ds.admin_addr).await.listeners[name].clone();
            let calls = (0..n).map(|i| {
                let front = c.front_addr;
                async move { call(front, &format!("hop-{items}-{i}"), items).await.status }
            });
            for status in futures::future::join_all(calls).await {
                assert_eq!(status, 200);
            }
            let d = stats(ds.admin_addr).await.listeners[name].since(&before);
            assert_eq!(d.requests["ok"], n);
            let (wire_in, wire_out) = (d.bytes_in.unwrap(), d.bytes_out.unwrap());
            // Framing and headers come on top of the encoded message, never below it.
            assert!(wire_in >= d.message_bytes_in && wire_out >= d.message_bytes_out, "{arm:?}: {d:?}");
            println!(
                "| {items} | {arm:?} | {:.0} | {:.0} | {:.0} | {:.0} | {} |",
                wire_in as f64 / n as f64,
                wire_out as f64 / n as f64,
                d.message_bytes_in as f64 / n as f64,
                d.message_bytes_out as f64 / n as f64,
                d.connections
            );
            c.stop().await;
        }
    }
    ds.stop().await;
}

#[test]
fn caller_binary_serves_in_front_of_a_downstream_and_exits_cleanly() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let rt = tokio::runtime::Runtime::new().unwrap();
    let ds = rt.block_on(downstream(10));
    let mut child = Command::new(env!("CARGO_BIN_EXE_caller"))
        .args(["--transport", "rest", "--downstream-rest", &format!("http://{}", ds.rest_addr)])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let ready: service::ReadyLine = serde_json::from_str(&line).unwrap();
    assert_eq!(ready.service, "caller");
    let a = rt.block_on(call(ready.listeners["front"], "bin", 2));
    assert_eq!(a.status, 200);
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    assert_eq!(child.wait().unwrap().code(), Some(0));

    let out = Command::new(env!("CARGO_BIN_EXE_caller")).args(["--transport", "soap"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(env!("CARGO_BIN_EXE_caller")).args(["--transport", "grpc"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--downstream-grpc is required"));
    rt.block_on(ds.stop());
}

#[tokio::test]
async fn front_requests_over_the_in_flight_limit_are_shed_with_503_and_counted() {
    // Two at a time, each held a second by the downstream: of six sent at
    // once, the first two are served and at least one other is shed.
    let ds = downstream(1000).await;
    let config = CallerConfig { max_in_flight: Some(2), ..caller_config(Arm::Grpc, ds.grpc_addr, ds.rest_addr) };
    let c = caller(config).await;
    let front = c.front_addr;
    let answers =
        futures::future::join_all((0..6).map(|i| async move { call(front, &format!("burst-{i}"), 1).await })).await;
    let shed: Vec<_> = answers.iter().filter(|a| a.status == 503).collect();
    let ok = answers.iter().filter(|a| a.status == 200).count();
    assert!(!shed.is_empty(), "nothing was shed: {:?}", answers.iter().map(|a| a.status).collect::<Vec<_>>());
    assert!(ok >= 2, "requests under the limit must succeed");
    assert_eq!(ok + shed.len(), answers.len());
    assert!(shed[0].error().contains("limit of 2 requests in flight"), "{}", shed[0].error());
    let s = stats(c.admin_addr).await;
    assert_eq!(s.listeners["front"].requests["shed"], shed.len() as u64);
    assert_eq!(s.clients["grpc"].requests_total(), ok as u64, "a shed request reached the downstream");
    assert_eq!(s.settings["max_in_flight"], 2);
    assert_eq!(call(c.front_addr, "later", 1).await.status, 200, "under the limit again");
    c.stop().await;
    ds.stop().await;
}

#[tokio::test]
async fn items_times_fanout_over_the_bound_is_400_with_the_reason() {
    let ds = downstream(1).await;
    let config = CallerConfig { fanout: 3, max_records: 10, ..caller_config(Arm::Grpc, ds.grpc_addr, ds.rest_addr) };
    let c = caller(config).await;
    let a = call(c.front_addr, "too-many-records", 4).await;
    assert_eq!(a.status, 400);
    assert!(
        a.error().contains("4 items × fan-out 3 = 12 records") && a.error().contains("limit of 10"),
        "{}",
        a.error()
    );
    assert_eq!(call(c.front_addr, "just-enough", 3).await.status, 200);
    let s = stats(c.admin_addr).await;
    assert_eq!(s.listeners["front"].requests["bad_request"], 1);
    assert_eq!(s.clients["grpc"].requests_total(), 3, "only the request within the bound was fanned out");
    assert_eq!(s.settings["max_records_per_request"], 10);
    c.stop().await;
    ds.stop().await;
}

#[tokio::test]
async fn the_front_reports_its_idle_keep_alive_and_in_flight_settings() {
    let ds = downstream(1).await;
    let c = caller(caller_config(Arm::Grpc, ds.grpc_addr, ds.rest_addr)).await;
    let s = stats(c.admin_addr).await;
    assert_eq!(s.settings["front_server"]["idle_timeout"], 30_000);
    assert_eq!(s.settings["front_server"]["http2_keep_alive_interval"], 20_000);
    assert!(s.settings["max_in_flight"].as_u64().unwrap() >= service::MIN_DEFAULT_MAX_IN_FLIGHT as u64);
    assert_eq!(s.settings["max_records_per_request"], caller::front::DEFAULT_MAX_RECORDS);
    c.stop().await;
    ds.stop().await;
}

#[test]
fn zero_limits_are_refused_naming_the_flag() {
    for bad in [["--max-records", "0"], ["--max-in-flight", "0"], ["--idle-timeout", "0ms"], ["--idle-timeout", "soon"]]
    {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_caller")).args(bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(bad[0]), "{bad:?}");
    }
}

#[tokio::test]
async fn several_downstream_addresses_get_the_calls_in_turn_on_every_arm() {
    let replicas = [downstream(5).await, downstream(5).await, downstream(5).await];
    for arm in ARMS {
        let list = |addr: fn(&DsHandle) -> SocketAddr| {
            replicas.iter().map(|d| format!("http://{}", addr(d))).collect::<Vec<_>>().join(",")
        };
        let config = CallerConfig {
            downstream_grpc: Some(list(|d| d.grpc_addr)),
            downstream_rest: Some(list(|d| d.rest_addr)),
            ..caller_config(arm, replicas[0].grpc_addr, replicas[0].rest_addr)
        };
        let before: Vec<StatsSnapshot> = futures::future::join_all(replicas.iter().map(|d| stats(d.admin_addr))).await;
        let c = caller(config).await;
        for i in 0..12 {
            assert_eq!(call(c.front_addr, &format!("rr-{i}"), 2).await.status, 200, "{arm:?}");
        }
        let listener = if matches!(arm, Arm::Grpc) { "grpc" } else { "rest" };
        for (d, before) in replicas.iter().zip(before) {
            let after = stats(d.admin_addr).await;
            let served = after.listeners[listener].since(&before.listeners[listener]).requests["ok"];
            assert_eq!(served, 4, "{arm:?}: each of 3 replicas serves a third of 12 calls");
        }
        let settings = stats(c.admin_addr).await.settings;
        assert_eq!(settings["client"]["addresses"].as_array().map(Vec::len), Some(3), "{arm:?}: {settings}");
        c.stop().await;
    }
    for d in replicas {
        d.stop().await;
    }
}
