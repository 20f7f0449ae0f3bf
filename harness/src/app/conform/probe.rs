//! `harness conform`'s requests: each check's request sent, its answer read
//! within a deadline and a body limit, and handed to `checks.rs` to judge.
//! REST through reqwest (HTTP/1.1); gRPC as raw HTTP/2 (hyper), so the
//! check sees where `grpc-status` came and how the body is framed, which a
//! gRPC library hides.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use payload::{CallRequest, FetchRequest, Limits, Shape};
use prost::Message;

use super::checks::{self, Check, GrpcSeen, HttpSeen, Seen};

/// How long each check may take, and how much of an answer is read.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub timeout: Duration,
    pub body_limit_bytes: usize,
}

/// The request ids of the checks: fixed, so two runs send the same requests.
const ORDER_ID: &str = "conform-order-1";
const SERIES_ID: &str = "conform-series-1";

pub struct Probe {
    http: reqwest::Client,
    h2: Client<HttpConnector, Full<Bytes>>,
    bounds: Bounds,
    /// Records each answer check asks for.
    items: u32,
}

impl Probe {
    pub fn new(bounds: Bounds, items: u32) -> anyhow::Result<Probe> {
        let http = reqwest::Client::builder().http1_only().timeout(bounds.timeout).build()?;
        let h2 = Client::builder(TokioExecutor::new()).http2_only(true).build_http();
        Ok(Probe { http, h2, bounds, items })
    }

    fn fetch(&self, id: &str, shape: Shape) -> FetchRequest {
        FetchRequest { request_id: id.into(), items: self.items, shape, body: Vec::new() }
    }

    /// An HTTP request, its answer read within the bounds.
    pub(super) async fn http(
        &self,
        method: reqwest::Method,
        url: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Seen<HttpSeen> {
        let send = async {
            let resp = self
                .http
                .request(method, url)
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(body)
                .send()
                .await
                .map_err(|e| format!("{e:#}"))?;
            let header = |name| {
                resp.headers().get(name).and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok()).map(str::to_owned)
            };
            let mut seen = HttpSeen {
                status: resp.status().as_u16(),
                content_type: header(reqwest::header::CONTENT_TYPE),
                server_timing: header(reqwest::header::HeaderName::from_static("server-timing")),
                body: Vec::new(),
            };
            let mut resp = resp;
            while let Some(chunk) = resp.chunk().await.map_err(|e| format!("reading the answer: {e:#}"))? {
                if seen.body.len() + chunk.len() > self.bounds.body_limit_bytes {
                    return Err(format!("the answer is over {} bytes", self.bounds.body_limit_bytes));
                }
                seen.body.extend_from_slice(&chunk);
            }
            Ok(seen)
        };
        tokio::time::timeout(self.bounds.timeout, send)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {:?}", self.bounds.timeout)))
    }

    async fn post_json(&self, url: &str, body: impl serde::Serialize) -> Seen<HttpSeen> {
        let body = serde_json::to_vec(&body).unwrap_or_default();
        self.http(reqwest::Method::POST, url, "application/json", body).await
    }

    /// One gRPC call as raw HTTP/2: `message` framed, the answer's headers,
    /// messages and trailers read within the bounds.
    pub(super) async fn grpc(&self, base: &str, path: &str, message: Vec<u8>) -> Seen<GrpcSeen> {
        let mut framed = Vec::with_capacity(message.len() + 5);
        framed.push(0);
        framed.extend_from_slice(&u32::try_from(message.len()).unwrap_or(u32::MAX).to_be_bytes());
        framed.extend_from_slice(&message);
        let request = hyper::Request::post(format!("{base}{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Full::new(Bytes::from(framed)))
            .map_err(|e| e.to_string())?;
        let call = async {
            let resp = self.h2.request(request).await.map_err(|e| format!("{e:#}"))?;
            let (parts, body) = resp.into_parts();
            let collected = Limited::new(body, self.bounds.body_limit_bytes)
                .collect()
                .await
                .map_err(|e| format!("reading the answer: {e}"))?;
            let trailers = collected.trailers().cloned();
            let header = |map: Option<&hyper::HeaderMap>, name: &str| {
                map.and_then(|m| m.get(name)).and_then(|v| v.to_str().ok()).map(str::to_owned)
            };
            let status = |map: Option<&hyper::HeaderMap>| header(map, "grpc-status").and_then(|s| s.parse().ok());
            Ok(GrpcSeen {
                http_status: parts.status.as_u16(),
                content_type: header(Some(&parts.headers), "content-type"),
                header_status: status(Some(&parts.headers)),
                trailer_status: status(trailers.as_ref()),
                message: header(trailers.as_ref(), "grpc-message")
                    .or_else(|| header(Some(&parts.headers), "grpc-message")),
                messages: unframe(&collected.to_bytes()),
            })
        };
        tokio::time::timeout(self.bounds.timeout, call)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {:?}", self.bounds.timeout)))
    }

    /// The downstream's REST listener at `base` (http://host:port).
    pub async fn rest(&self, base: &str) -> Vec<Check> {
        let url = format!("{base}/v1/fetch");
        let mut out = Vec::new();
        for (name, id, shape) in
            [("rest.fetch.order", ORDER_ID, Shape::Order), ("rest.fetch.timeseries", SERIES_ID, Shape::Timeseries)]
        {
            let req = self.fetch(id, shape);
            let what = format!("POST /v1/fetch {} {shape} items", req.items);
            out.push(checks::rest_answer(name, &what, &self.post_json(&url, &req).await, &req));
        }
        let empty_id = self.fetch("", Shape::Order);
        let seen = self.post_json(&url, &empty_id).await;
        out.push(checks::http_refusal("rest.invalid-request", "an empty requestId", &seen, 400));
        let too_many = FetchRequest { items: Limits::DEFAULT_MAX_ITEMS + 1, ..self.fetch(ORDER_ID, Shape::Order) };
        let seen = self.post_json(&url, &too_many).await;
        out.push(checks::http_refusal("rest.too-many-items", "items over the contract's 10000", &seen, 400));
        out.extend(self.refusals(base, "/v1/fetch").await);
        out
    }

    /// The refusals every JSON API of the contract shares: malformed JSON,
    /// another media type, an unknown route, another method.
    pub(super) async fn refusals(&self, base: &str, route: &str) -> Vec<Check> {
        let url = format!("{base}{route}");
        let post = reqwest::Method::POST;
        let malformed = self.http(post.clone(), &url, "application/json", b"{\"requestId\":".to_vec()).await;
        let text = self.http(post.clone(), &url, "text/plain", b"hello".to_vec()).await;
        let unknown = self.http(post, &format!("{base}/v1/no-such-route"), "application/json", b"{}".to_vec()).await;
        let get = self.http(reqwest::Method::GET, &url, "application/json", Vec::new()).await;
        let prefix = if route == "/v1/call" { "caller" } else { "rest" };
        let names: [&'static str; 4] = if prefix == "caller" {
            ["caller.malformed-json", "caller.media-type", "caller.unknown-route", "caller.wrong-method"]
        } else {
            ["rest.malformed-json", "rest.media-type", "rest.unknown-route", "rest.wrong-method"]
        };
        vec![
            checks::http_refusal(names[0], "a body cut short", &malformed, 400),
            checks::http_refusal(names[1], "Content-Type text/plain", &text, 415),
            checks::http_refusal(names[2], "POST /v1/no-such-route", &unknown, 404),
            checks::http_refusal(names[3], &format!("GET {route}"), &get, 405),
        ]
    }

    /// The downstream's gRPC listener at `base` (http://host:port).
    pub async fn grpc_arm(&self, base: &str) -> Vec<Check> {
        const FETCH: &str = "/bench.v1.Downstream/Fetch";
        let mut out = Vec::new();
        for (name, id, shape) in
            [("grpc.fetch.order", ORDER_ID, Shape::Order), ("grpc.fetch.timeseries", SERIES_ID, Shape::Timeseries)]
        {
            let req = self.fetch(id, shape);
            let what = format!("Fetch {} {shape} items", req.items);
            let seen = self.grpc(base, FETCH, proto::FetchRequest::from(req.clone()).encode_to_vec()).await;
            out.push(checks::grpc_answer(name, &what, &seen, &req));
        }
        let empty_id = proto::FetchRequest::from(self.fetch("", Shape::Order)).encode_to_vec();
        let seen = self.grpc(base, FETCH, empty_id).await;
        out.push(checks::grpc_refusal(
            "grpc.invalid-request",
            "an empty request_id",
            &seen,
            checks::INVALID_ARGUMENT,
            "INVALID_ARGUMENT",
        ));
        let too_many = FetchRequest { items: Limits::DEFAULT_MAX_ITEMS + 1, ..self.fetch(ORDER_ID, Shape::Order) };
        let seen = self.grpc(base, FETCH, proto::FetchRequest::from(too_many).encode_to_vec()).await;
        out.push(checks::grpc_refusal(
            "grpc.too-many-items",
            "items over the contract's 10000",
            &seen,
            checks::INVALID_ARGUMENT,
            "INVALID_ARGUMENT",
        ));
        let seen = self.grpc(base, "/bench.v1.Downstream/NoSuchMethod", Vec::new()).await;
        out.push(checks::grpc_refusal(
            "grpc.unknown-method",
            "an unknown method",
            &seen,
            checks::UNIMPLEMENTED,
            "UNIMPLEMENTED",
        ));
        let health = tonic_health::pb::HealthCheckRequest { service: SERVICE.into() }.encode_to_vec();
        let seen = self.grpc(base, "/grpc.health.v1.Health/Check", health).await;
        out.push(checks::grpc_health("grpc.health", &format!("grpc.health.v1 Check {SERVICE:?}"), &seen));
        out.push(self.reflection(base).await);
        out
    }

    async fn reflection(&self, base: &str) -> Check {
        use tonic_reflection::pb::v1::{ServerReflectionRequest, server_reflection_request::MessageRequest};
        let list = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        // v1 and v1alpha messages are the same on the wire.
        let v1 =
            self.grpc(base, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", list.encode_to_vec()).await;
        let v1alpha = self
            .grpc(base, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", list.encode_to_vec())
            .await;
        checks::grpc_reflection("grpc.reflection", SERVICE, &v1, &v1alpha)
    }

    /// The caller's front door at `base` (http://host:port), whose fan-out is `fanout`.
    pub async fn caller(&self, base: &str, fanout: u32) -> Vec<Check> {
        let url = format!("{base}/v1/call");
        let mut out = Vec::new();
        for (name, id, shape) in
            [("caller.call.order", ORDER_ID, Shape::Order), ("caller.call.timeseries", SERIES_ID, Shape::Timeseries)]
        {
            let call = CallRequest { request_id: id.into(), items: self.items, shape, request_bytes: 0 };
            let what = format!("POST /v1/call {} {shape} items", call.items);
            out.push(checks::call_answer(name, &what, &self.post_json(&url, &call).await, &call, fanout));
        }
        let empty_id = CallRequest { request_id: String::new(), items: 1, ..CallRequest::default() };
        let seen = self.post_json(&url, &empty_id).await;
        out.push(checks::http_refusal("caller.invalid-request", "an empty requestId", &seen, 400));
        out.extend(self.refusals(base, "/v1/call").await);
        out
    }
}

/// The service the health and reflection checks ask about.
pub const SERVICE: &str = "bench.v1.Downstream";

/// The messages of a gRPC body: each a flag byte, a 4-byte big-endian
/// length and the message; a compressed one is refused (none was asked for).
pub fn unframe(body: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut rest = body;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let Some((head, tail)) = rest.split_first_chunk::<5>() else {
            return Err(format!("a message frame cut short ({} bytes)", rest.len()));
        };
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if head[0] != 0 {
            return Err("a compressed message, though no grpc-accept-encoding was sent".into());
        }
        if tail.len() < len {
            return Err(format!("a message of {len} bytes with {} left", tail.len()));
        }
        out.push(tail[..len].to_vec());
        rest = &tail[len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_read_and_a_cut_one_is_named() {
        assert_eq!(unframe(&[0, 0, 0, 0, 2, 7, 8, 0, 0, 0, 0, 0]), Ok(vec![vec![7, 8], vec![]]));
        assert!(unframe(&[0, 0, 0, 0, 3, 1]).unwrap_err().contains("3 bytes with 1 left"));
        assert!(unframe(&[0, 0]).unwrap_err().contains("cut short"));
        assert!(unframe(&[1, 0, 0, 0, 0]).unwrap_err().contains("compressed"));
    }
}
