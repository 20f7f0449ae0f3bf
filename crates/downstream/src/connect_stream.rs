//! Connect server streaming (the `connect-stream` arm): `bench.v1.Items`'s
//! `Stream` on the REST listener at its gRPC path, as the Connect protocol
//! document has a streaming call (<https://connectrpc.com/docs/protocol>):
//! `Content-Type: application/connect+proto`, the request one enveloped
//! message, the answer `200` with one envelope per item, each flushed as it
//! is made, and an end-of-stream envelope whose JSON carries the error if
//! there is one. An envelope is a flag byte (`0x01` compressed, `0x02` end
//! of stream) and a big-endian 32-bit length before the message.
//! Compression is Connect's per message: with `--compression` the listener
//! compresses each item in that coding when the client offers it in
//! `Connect-Accept-Encoding`, and says so in `Connect-Content-Encoding`.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use prost::Message;
use service::Compression;
use service::api::{ApiError, BodyPolicy, media_type, read_body};
use telemetry::Counters;

use crate::items::Producer;

pub use proto::connect::{COMPRESSED, END_STREAM, MEDIA_TYPE, STREAM_PATH};
/// The headers of Connect's per-message compression.
pub const ACCEPT_ENCODING: &str = "connect-accept-encoding";
pub const CONTENT_ENCODING: &str = "connect-content-encoding";

/// One envelope ([`proto::connect::envelope`]), as a body frame.
pub fn envelope(flags: u8, message: &[u8]) -> Bytes {
    Bytes::from(proto::connect::envelope(flags, message))
}

/// The one message of a request's body: a single uncompressed envelope.
fn one_message(body: &[u8]) -> Result<&[u8], String> {
    let Some((head, rest)) = body.split_first_chunk::<5>() else {
        return Err(format!("a Connect request is one enveloped message; the body has {} bytes", body.len()));
    };
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if head[0] & COMPRESSED != 0 {
        return Err(
            "a compressed request message needs Connect-Content-Encoding, which this listener does not take".into()
        );
    }
    if head[0] != 0 || rest.len() != len {
        return Err(format!(
            "one envelope of {len} bytes expected, flags {:#04x}, {} bytes after it",
            head[0],
            rest.len()
        ));
    }
    Ok(rest)
}

#[derive(Debug, Clone)]
struct Shared {
    producer: Producer,
    counters: Arc<Counters>,
    body: BodyPolicy,
    compression: Compression,
}

/// The route, to merge into the REST listener's router.
pub fn routes(producer: Producer, counters: Arc<Counters>, body: BodyPolicy, compression: Compression) -> Router {
    Router::new().route(STREAM_PATH, post(serve)).with_state(Shared { producer, counters, body, compression })
}

/// The stream's end as Connect writes it: `{}`, or `{"error": {code, message}}`.
fn end_stream(error: Option<&ApiError>) -> Bytes {
    let json = match error {
        None => serde_json::json!({}),
        Some(e) => {
            serde_json::json!({"error": {"code": crate::connect::connect_code(e.status).0, "message": e.reason}})
        }
    };
    envelope(END_STREAM, json.to_string().as_bytes())
}

fn streaming(body: Body, coding: Option<&'static str>) -> Response {
    let mut resp = Response::new(body);
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
    // Connect compresses messages, not the body: the listener's body
    // compression leaves a response that names its coding alone.
    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("identity"));
    if let Some(c) = coding {
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static(c));
    }
    resp
}

/// True when the client offers `coding` in `Connect-Accept-Encoding`.
fn offered(headers: &HeaderMap, coding: &str) -> bool {
    headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|c| c.trim().eq_ignore_ascii_case(coding))
}

/// The whole request, not a `HeaderMap` (which axum extracts by cloning the
/// headers): its head is read and dropped before the body is awaited.
async fn serve(State(s): State<Shared>, req: Request) -> Response {
    let (head, body) = req.into_parts();
    if media_type(&head.headers).as_deref() != Some(MEDIA_TYPE) {
        s.counters.record("unsupported_media_type");
        let reason = format!("Content-Type must be {MEDIA_TYPE}");
        let mut resp = (StatusCode::UNSUPPORTED_MEDIA_TYPE, reason).into_response();
        resp.headers_mut().insert("accept-post", HeaderValue::from_static(MEDIA_TYPE));
        return resp;
    }
    let refused = |e: ApiError| {
        s.counters.record(e.outcome());
        streaming(Body::from(end_stream(Some(&e))), None)
    };
    let coding = s.compression.content_coding().filter(|c| offered(&head.headers, c));
    let read = read_body(&head.headers, body, &s.body);
    drop(head);
    let bytes = match read.await {
        Ok(b) => b,
        Err(e) => return refused(e),
    };
    let bad = |reason: String| ApiError::new(StatusCode::BAD_REQUEST, reason);
    let message = match one_message(&bytes) {
        Ok(m) => m,
        Err(reason) => return refused(bad(reason)),
    };
    s.counters.add_message_bytes(message.len() as u64, 0);
    let req = match proto::StreamRequest::decode(message) {
        Ok(r) => payload::StreamRequest::from(r),
        Err(e) => return refused(bad(format!("malformed protobuf request: {e}"))),
    };
    let permit = match s.producer.admit_stream(&req) {
        Ok(p) => p,
        Err(e) => return refused(crate::rest::fetch_error(e)),
    };
    let (compression, counters) =
        (if coding.is_some() { s.compression } else { Compression::None }, s.counters.clone());
    let mut outcome = crate::items::Outcome::new(s.counters.clone(), req.items);
    let items = s.producer.stream(req, s.counters.clone()).map(move |item| {
        // The guard and the work permit are dropped with the body.
        let (outcome, _held) = (&mut outcome, &permit);
        outcome.made = item.index + 1;
        let pb = proto::StreamItem::from(item).encode_to_vec();
        counters.add_message_bytes(0, pb.len() as u64);
        match compression {
            Compression::None => Ok(envelope(0, &pb)),
            c => c.compress(&pb).map(|z| envelope(COMPRESSED, &z)),
        }
    });
    let ended = futures::stream::once(async { Ok::<_, std::io::Error>(end_stream(None)) });
    streaming(Body::from_stream(items.chain(ended)), coding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_exactly_one_uncompressed_envelope() {
        let msg = b"hello";
        assert_eq!(one_message(&envelope(0, msg)), Ok(&msg[..]));
        assert!(one_message(b"\0\0\0").unwrap_err().contains("3 bytes"));
        assert!(one_message(&envelope(COMPRESSED, msg)).unwrap_err().contains("Connect-Content-Encoding"));
        let mut two = envelope(0, msg).to_vec();
        two.extend_from_slice(&envelope(0, msg));
        assert!(one_message(&two).unwrap_err().contains("15 bytes after it"));
        assert_eq!(&envelope(END_STREAM, b"{}")[..], b"\x02\0\0\0\x02{}");
    }
}
