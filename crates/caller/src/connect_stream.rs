//! The `connect-stream` arm's client: `bench.v1.Items/Stream` as one
//! Connect server-streaming call (<https://connectrpc.com/docs/protocol>)
//! over the REST arm's reqwest client: `POST /bench.v1.Items/Stream`,
//! `Content-Type: application/connect+proto`, the request one enveloped
//! message; the answer's envelopes read as they arrive, each item yielded
//! when its envelope is whole, the call's outcome in the end-of-stream
//! envelope (flag `0x02`, JSON). An envelope is a flag byte and a
//! big-endian 32-bit length before the message; compression is Connect's
//! per message (`Connect-Accept-Encoding`, flag `0x01`). Message bytes are
//! counted per item as the downstream counts them: the protobuf message,
//! uncompressed, without its envelope.

use std::sync::Arc;

use futures::TryStreamExt;
use payload::{StreamItem, StreamRequest};
use prost::Message;
use telemetry::Counters;

use crate::items::{RestTarget, bad};
use crate::outbound::{CallError, ItemStream, MAX_ANSWER_BYTES};

pub use proto::connect::{COMPRESSED, END_STREAM, MEDIA_TYPE, STREAM_PATH, envelope};

/// What one whole envelope at the front of a buffer holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// An item's message (decoded from the coding when flagged compressed).
    Message(Vec<u8>),
    /// The end of the stream, with the error it carries, if any.
    End(Option<String>),
}

/// Takes the first whole envelope off `buf`, `None` while it is not whole.
/// An envelope declared over `MAX_ANSWER_BYTES` is refused before its
/// message is read; a compressed one needs the coding the answer named.
pub fn take(buf: &mut Vec<u8>, coding: Option<service::Compression>) -> Result<Option<Frame>, String> {
    let Some(head) = buf.first_chunk::<5>() else { return Ok(None) };
    let (flags, len) = (head[0], u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize);
    if len > MAX_ANSWER_BYTES {
        return Err(format!("an envelope of {len} bytes is over the {MAX_ANSWER_BYTES} this client reads"));
    }
    if buf.len() < 5 + len {
        return Ok(None);
    }
    let message: Vec<u8> = buf.drain(..5 + len).skip(5).collect();
    let message = if flags & COMPRESSED != 0 {
        let coding = coding.ok_or("a compressed message without Connect-Content-Encoding")?;
        coding.decompress(&message, MAX_ANSWER_BYTES).map_err(|e| e.to_string())?
    } else {
        message
    };
    if flags & END_STREAM == 0 {
        return Ok(Some(Frame::Message(message)));
    }
    let end: serde_json::Value =
        serde_json::from_slice(&message).map_err(|e| format!("the end-of-stream message is not JSON: {e}"))?;
    Ok(Some(Frame::End(end.get("error").map(|e| {
        let text = |k: &str| e.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_owned();
        format!("connect {}: {}", text("code"), text("message"))
    }))))
}

/// The items of `req` as one Connect server-streaming call.
pub fn items(to: RestTarget, req: StreamRequest, compression: service::Compression) -> ItemStream {
    let RestTarget { client, target, counters, .. } = to;
    let opened = async move {
        let url = format!("{target}{STREAM_PATH}");
        let body = envelope(0, &proto::StreamRequest::from(req).encode_to_vec());
        counters.add_message_bytes(body.len() as u64 - 5, 0);
        let mut request = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, MEDIA_TYPE)
            // Connect compresses messages, not the body.
            .header(reqwest::header::ACCEPT_ENCODING, "identity")
            .body(body);
        if let Some(c) = compression.content_coding() {
            request = request.header("connect-accept-encoding", c);
        }
        let resp = request
            .send()
            .await
            .map_err(|e| CallError::Connect { target: target.to_string(), reason: e.to_string() })?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            let body: String = body.chars().take(1024).collect();
            return Err(CallError::Status {
                target: target.to_string(),
                status: format!("HTTP {}: {body}", status.as_u16()),
            });
        }
        let named = resp.headers().get("connect-content-encoding").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let coding = match named.as_deref().map(service::Compression::from_coding) {
            None => None,
            Some(Some(c)) => Some(c),
            Some(None) => return Err(bad(&target, format!("an unknown Connect-Content-Encoding {named:?}"))),
        };
        Ok(envelopes(resp, target, counters, coding))
    };
    Box::pin(futures::stream::once(opened).try_flatten())
}

/// The items of a Connect stream's body, each when its envelope is whole;
/// an error in the end-of-stream envelope, or a body that ends without it,
/// fails the stream.
fn envelopes(
    resp: reqwest::Response,
    target: Arc<str>,
    counters: Arc<Counters>,
    coding: Option<service::Compression>,
) -> ItemStream {
    let items = futures::stream::unfold((resp, Vec::<u8>::new(), false), move |(mut resp, mut buf, ended)| {
        let (target, counters) = (target.clone(), counters.clone());
        async move {
            if ended {
                return None;
            }
            loop {
                match take(&mut buf, coding) {
                    Err(reason) => return Some((Err(bad(&target, reason)), (resp, Vec::new(), true))),
                    Ok(Some(Frame::Message(m))) => {
                        counters.add_message_bytes(0, m.len() as u64);
                        let item = proto::StreamItem::decode(m.as_slice())
                            .map_err(|e| e.to_string())
                            .and_then(|i| StreamItem::try_from(i).map_err(|e| e.to_string()));
                        return Some((item.map_err(|e| bad(&target, e)), (resp, buf, false)));
                    }
                    Ok(Some(Frame::End(None))) if buf.is_empty() => return None,
                    Ok(Some(Frame::End(None))) => {
                        let reason = format!("{} bytes after the end-of-stream message", buf.len());
                        return Some((Err(bad(&target, reason)), (resp, Vec::new(), true)));
                    }
                    Ok(Some(Frame::End(Some(status)))) => {
                        let e = CallError::Status { target: target.to_string(), status };
                        return Some((Err(e), (resp, Vec::new(), true)));
                    }
                    Ok(None) => {}
                }
                match resp.chunk().await {
                    Ok(Some(chunk)) => buf.extend_from_slice(&chunk),
                    Ok(None) => {
                        let reason = if buf.is_empty() {
                            "the stream ended without Connect's end-of-stream message".to_owned()
                        } else {
                            "the body ended inside an envelope".to_owned()
                        };
                        return Some((Err(bad(&target, reason)), (resp, Vec::new(), true)));
                    }
                    Err(e) => return Some((Err(bad(&target, e)), (resp, Vec::new(), true))),
                }
            }
        }
    });
    Box::pin(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_are_taken_whole_and_the_end_carries_the_error() {
        let mut buf = envelope(0, b"abc");
        buf.extend_from_slice(&envelope(END_STREAM, br#"{"error":{"code":"unavailable","message":"busy"}}"#));
        let whole = buf.clone();
        let mut part = whole[..6].to_vec();
        assert_eq!(take(&mut part, None), Ok(None));
        assert_eq!(part.len(), 6, "a partial envelope is left in place");
        assert_eq!(take(&mut buf, None), Ok(Some(Frame::Message(b"abc".to_vec()))));
        assert_eq!(take(&mut buf, None), Ok(Some(Frame::End(Some("connect unavailable: busy".into())))));
        assert!(buf.is_empty());

        let mut ok = envelope(END_STREAM, b"{}");
        assert_eq!(take(&mut ok, None), Ok(Some(Frame::End(None))));

        let z = service::Compression::Gzip.compress(b"hello").unwrap();
        let mut zipped = envelope(COMPRESSED, &z);
        assert!(take(&mut zipped.clone(), None).unwrap_err().contains("Connect-Content-Encoding"));
        assert_eq!(take(&mut zipped, Some(service::Compression::Gzip)), Ok(Some(Frame::Message(b"hello".to_vec()))));

        let mut huge = vec![0, 0xff, 0xff, 0xff, 0xff];
        assert!(take(&mut huge, None).unwrap_err().contains("over the"));
    }
}
