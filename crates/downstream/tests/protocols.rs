//! Connect and gRPC-Web on the downstream's REST listener, called as their
//! protocol documents say, with a plain HTTP client (reqwest) and frames made
//! by hand here, never with the code under test:
//! Connect: <https://connectrpc.com/docs/protocol> (unary: the message is
//! the body; errors are `{"code", "message"}` with the code's HTTP status);
//! gRPC-Web: <https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-WEB.md>
//! (5-byte frames: a flag byte, 0x80 for the trailers, and a big-endian length).

use std::net::SocketAddr;
use std::time::Duration;

use downstream::{Config, Handle, start};
use payload::{FetchRequest, FetchResponse, Limits};
use prost::Message;
use telemetry::StatsSnapshot;
use tokio_util::sync::CancellationToken;

async fn start_with(limits: Limits) -> Handle {
    let config = Config { delay: Duration::from_millis(2), limits, ..Config::default() };
    start(config, CancellationToken::new()).await.expect("downstream starts")
}

fn req(id: &str, items: u32) -> FetchRequest {
    FetchRequest { request_id: id.into(), items, ..FetchRequest::default() }
}

async fn stats(admin: SocketAddr) -> StatsSnapshot {
    reqwest::get(format!("http://{admin}/stats")).await.unwrap().json().await.unwrap()
}

async fn connect_post(addr: SocketAddr, content_type: &str, body: Vec<u8>) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("http://{addr}/bench.v1.Downstream/Fetch"))
        .header("content-type", content_type)
        .header("connect-protocol-version", "1")
        .body(body)
        .send()
        .await
        .expect("connect request")
}

#[tokio::test]
async fn a_connect_unary_call_is_a_plain_post_in_either_codec() {
    let ds = start_with(Limits::default()).await;
    let before = stats(ds.admin_addr).await.listeners["rest"].clone();
    let r = req("connect-1", 9);
    let json = serde_json::to_vec(&r).unwrap();
    let resp = connect_post(ds.rest_addr, "application/json", json.clone()).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let answer = resp.bytes().await.unwrap();
    let decoded: FetchResponse = serde_json::from_slice(&answer).unwrap();
    assert_eq!(payload::verify(&r, &decoded), Ok(()));

    let pb = proto::FetchRequest::from(req("connect-2", 4)).encode_to_vec();
    let resp = connect_post(ds.rest_addr, "application/proto", pb.clone()).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/proto");
    let answer_pb = resp.bytes().await.unwrap();
    let decoded = FetchResponse::try_from(proto::FetchResponse::decode(answer_pb.as_ref()).unwrap()).unwrap();
    assert_eq!(payload::verify(&req("connect-2", 4), &decoded), Ok(()));

    // No length prefix, no envelope: the message bytes are the bodies.
    let d = stats(ds.admin_addr).await.listeners["rest"].since(&before);
    assert_eq!(d.requests["ok"], 2);
    assert_eq!(d.message_bytes_in, (json.len() + pb.len()) as u64);
    assert_eq!(d.message_bytes_out, (answer.len() + answer_pb.len()) as u64);
    ds.stop().await;
}

#[tokio::test]
async fn a_connect_error_has_the_protocols_shape_and_status() {
    let ds = start_with(Limits { max_items: 50, ..Limits::default() }).await;
    let resp = connect_post(ds.rest_addr, "application/json", b"{\"requestId\": ".to_vec()).await;
    assert_eq!(resp.status(), 400);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let error: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(error["code"], "invalid_argument", "{error}");
    assert!(error["message"].as_str().unwrap().contains("malformed JSON"), "{error}");

    let over = serde_json::to_vec(&req("over", 51)).unwrap();
    let error: serde_json::Value = connect_post(ds.rest_addr, "application/json", over).await.json().await.unwrap();
    assert_eq!(error["code"], "invalid_argument", "{error}");
    assert!(error["message"].as_str().unwrap().contains("limit is 50"), "{error}");

    let resp = reqwest::Client::new()
        .post(format!("http://{}/bench.v1.Downstream/Fetch", ds.rest_addr))
        .header("content-type", "application/json")
        .header("connect-protocol-version", "2")
        .body(serde_json::to_vec(&req("v2", 1)).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(resp.json::<serde_json::Value>().await.unwrap()["code"], "invalid_argument");

    // Neither Connect's codecs nor gRPC-Web: 415, saying what is accepted.
    let resp = connect_post(ds.rest_addr, "text/plain", b"hello".to_vec()).await;
    assert_eq!(resp.status(), 415);
    assert!(resp.headers()["accept-post"].to_str().unwrap().contains("application/proto"));
    ds.stop().await;
}

/// The call as the Connect protocol's own documentation writes it with
/// curl alone (`curl --header "Content-Type: application/json" --data
/// '{...}' http://host/package.Service/Method`, with the protocol version
/// header), answered with the built-in method's records.
#[tokio::test]
async fn a_connect_call_made_with_curl_alone_gets_the_right_answer() {
    let ds = start_with(Limits::default()).await;
    let url = format!("http://{}/bench.v1.Downstream/Fetch", ds.rest_addr);
    let out = tokio::process::Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "10", "--write-out", "\n%{http_code} %{content_type}"])
        .args(["--header", "Content-Type: application/json", "--header", "Connect-Protocol-Version: 1"])
        .args(["--data", r#"{"requestId": "curl-1", "items": 3}"#, &url])
        .output()
        .await
        .expect("curl is installed (.ci/run installs it)");
    assert!(out.status.success(), "curl: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, status) = text.rsplit_once('\n').unwrap();
    assert_eq!(status, "200 application/json", "{text}");
    let answer: FetchResponse = serde_json::from_str(body).unwrap();
    assert_eq!(payload::verify(&req("curl-1", 3), &answer), Ok(()));
    assert_eq!(answer.records.len(), 3);

    // A wrong method name is Connect's not_found, not REST's empty 404.
    let out = tokio::process::Command::new("curl")
        .args(["--silent", "--max-time", "10", "--write-out", "\n%{http_code}"])
        .args(["--header", "Content-Type: application/json", "--header", "Connect-Protocol-Version: 1"])
        .args(["--data", "{}", &url.replace("/Fetch", "/Nope")])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.ends_with("\n404"), "{text}");
    ds.stop().await;
}

/// One gRPC-Web frame: flag, big-endian length, payload.
fn frame(flag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![flag];
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The frames of a gRPC-Web body, as (flag, payload).
fn frames(mut body: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while body.len() >= 5 {
        let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
        out.push((body[0], body[5..5 + len].to_vec()));
        body = &body[5 + len..];
    }
    assert!(body.is_empty(), "a partial frame is left: {body:?}");
    out
}

/// A gRPC-Web call over HTTP/1.1, as a browser's gRPC-Web client makes it.
async fn grpc_web_post(addr: SocketAddr, path: &str, body: Vec<u8>) -> reqwest::Response {
    reqwest::Client::builder()
        .http1_only()
        .build()
        .unwrap()
        .post(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc-web+proto")
        .header("x-grpc-web", "1")
        .body(body)
        .send()
        .await
        .expect("gRPC-Web request")
}

#[tokio::test]
async fn a_grpc_web_call_framed_by_hand_gets_its_answer_and_trailers() {
    let ds = start_with(Limits::default()).await;
    let before = stats(ds.admin_addr).await.listeners["rest"].clone();
    let r = req("web-1", 6);
    let message = proto::FetchRequest::from(r.clone()).encode_to_vec();
    let resp = grpc_web_post(ds.rest_addr, "/bench.v1.Downstream/Fetch", frame(0x00, &message)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.version(), reqwest::Version::HTTP_11);
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("application/grpc-web"));
    let body = resp.bytes().await.unwrap();
    let frames = frames(&body);
    assert_eq!(frames.len(), 2, "one message and the trailers: {frames:?}");
    assert_eq!(frames[0].0, 0x00);
    let answer = FetchResponse::try_from(proto::FetchResponse::decode(frames[0].1.as_slice()).unwrap()).unwrap();
    assert_eq!(payload::verify(&r, &answer), Ok(()));
    assert_eq!(frames[1].0, 0x80);
    let trailers = String::from_utf8(frames[1].1.clone()).unwrap().to_ascii_lowercase();
    assert!(trailers.contains("grpc-status:0"), "{trailers:?}");

    let d = stats(ds.admin_addr).await.listeners["rest"].since(&before);
    assert_eq!(d.requests["ok"], 1);
    assert_eq!(d.message_bytes_in, message.len() as u64);
    assert_eq!(d.message_bytes_out, frames[0].1.len() as u64);
    ds.stop().await;
}

/// gRPC-Web is told apart by its Content-Type before the REST routes, as a
/// Connect server tells its protocols apart: a call to a method not served
/// is answered in gRPC-Web (UNIMPLEMENTED, trailers-only), not with
/// the REST listener's 404, and a Connect call at the built-in method's path
/// still reaches Connect.
#[tokio::test]
async fn grpc_web_is_told_apart_before_the_rest_routes() {
    let ds = start_with(Limits::default()).await;
    let before = stats(ds.admin_addr).await.listeners["rest"].clone();
    let message = proto::FetchRequest::from(req("web-2", 1)).encode_to_vec();
    let resp = grpc_web_post(ds.rest_addr, "/bench.v1.Downstream/NotServed", frame(0x00, &message)).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("application/grpc-web"));
    // A trailers-only answer: the status in the headers, no frame.
    assert_eq!(resp.headers().get("grpc-status").map(|v| v.to_str().unwrap().to_owned()).as_deref(), Some("12"));
    assert!(resp.bytes().await.unwrap().is_empty());

    let r = req("connect-2", 3);
    let resp =
        connect_post(ds.rest_addr, "application/proto", proto::FetchRequest::from(r.clone()).encode_to_vec()).await;
    assert_eq!(resp.status(), 200);
    let answer = proto::FetchResponse::decode(resp.bytes().await.unwrap()).unwrap();
    assert_eq!(payload::verify(&r, &FetchResponse::try_from(answer).unwrap()), Ok(()));

    let d = stats(ds.admin_addr).await.listeners["rest"].since(&before);
    assert_eq!((d.requests["other"], d.requests["ok"], d.requests["not_found"]), (1, 1, 0), "{:?}", d.requests);
    ds.stop().await;
}

/// Connect server streaming as the protocol document has it, framed by
/// hand: the request one envelope (flag 0, big-endian length) of the
/// protobuf `StreamRequest`; the answer 200, one envelope per item, and an
/// end-of-stream envelope (flag 0x02) of JSON, `{}` or the error.
#[tokio::test]
async fn a_connect_stream_framed_by_hand_gets_every_item_and_the_end() {
    let ds = start_with(Limits { max_items: 50, ..Limits::default() }).await;
    let before = stats(ds.admin_addr).await.listeners["rest"].clone();
    let post = |body: Vec<u8>, media: &'static str| {
        reqwest::Client::new()
            .post(format!("http://{}/bench.v1.Items/Stream", ds.rest_addr))
            .header("content-type", media)
            .body(body)
            .send()
    };
    let r = payload::StreamRequest { request_id: "cs-1".into(), items: 4, item_bytes: 8 };
    let message = proto::StreamRequest::from(r.clone()).encode_to_vec();
    let resp = post(frame(0x00, &message), "application/connect+proto").await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/connect+proto");
    let body = resp.bytes().await.unwrap();
    let got = frames(&body);
    assert_eq!(got.len(), 5, "four items and the end: {got:?}");
    for (i, (flag, m)) in got[..4].iter().enumerate() {
        assert_eq!(*flag, 0x00);
        let item = payload::StreamItem::try_from(proto::StreamItem::decode(m.as_slice()).unwrap()).unwrap();
        assert_eq!(payload::verify_item(&r, &item, i as u32), Ok(()));
    }
    assert_eq!(got[4], (0x02, b"{}".to_vec()));
    let d = stats(ds.admin_addr).await.listeners["rest"].since(&before);
    assert_eq!(d.requests["ok"], 1);
    assert_eq!(d.message_bytes_in, message.len() as u64);
    assert_eq!(d.message_bytes_out, got[..4].iter().map(|f| f.1.len() as u64).sum::<u64>());

    // Over the item limit: still 200, the error in the end-of-stream message.
    let over = proto::StreamRequest::from(payload::StreamRequest { items: 51, ..r.clone() }).encode_to_vec();
    let body = post(frame(0x00, &over), "application/connect+proto").await.unwrap().bytes().await.unwrap();
    let got = frames(&body);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, 0x02);
    let end: serde_json::Value = serde_json::from_slice(&got[0].1).unwrap();
    assert_eq!(end["error"]["code"], "invalid_argument", "{end}");

    // A body that is not one envelope, and a media type that is not Connect's.
    let body = post(message.clone(), "application/connect+proto").await.unwrap().bytes().await.unwrap();
    let end: serde_json::Value = serde_json::from_slice(&frames(&body)[0].1).unwrap();
    assert_eq!(end["error"]["code"], "invalid_argument", "{end}");
    let resp = post(frame(0x00, &message), "application/grpc").await.unwrap();
    assert_eq!(resp.status(), 415);
    ds.stop().await;
}
