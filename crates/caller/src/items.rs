//! The streaming arms' clients: the items of one sequence
//! (`bench.v1.Items`) received over the internal hop as the arm delivers
//! them (one server-streaming RPC, pages over gRPC or REST, NDJSON,
//! server-sent events), each yielded as it arrives. The paging both
//! transports share and the REST side are here, the gRPC side in
//! `grpc.rs`. Message bytes are counted per item as the downstream counts
//! them: the protobuf message, the item's JSON (without the line's newline
//! or the event's framing), a page's whole body.

use std::sync::Arc;

use futures::TryStreamExt;
use payload::{JsonCodec, PageRequest, PageResponse, StreamItem, StreamRequest};
use telemetry::Counters;

use crate::outbound::{CallError, Delivery, ItemStream, MAX_ANSWER_BYTES};

/// Where a REST stream's items come from, and the codec that reads them.
#[derive(Debug)]
pub struct RestTarget {
    pub client: reqwest::Client,
    pub target: Arc<str>,
    pub counters: Arc<Counters>,
    pub codec: JsonCodec,
}

pub(crate) fn bad(target: &str, reason: impl std::fmt::Display) -> CallError {
    CallError::BadResponse { target: target.to_owned(), reason: reason.to_string() }
}

/// Pages of `page_size` from `fetch` (one page per token), flattened into
/// items; the next page is asked for when the previous one has arrived.
pub(crate) fn paged<F, Fut>(req: StreamRequest, page_size: u32, fetch: F) -> ItemStream
where
    F: Fn(PageRequest) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<PageResponse, CallError>> + Send + 'static,
{
    let fetch = Arc::new(fetch);
    let pages = futures::stream::unfold(Some(String::new()), move |token| {
        let (fetch, stream) = (fetch.clone(), req.clone());
        async move {
            let page_token = token?;
            match fetch(PageRequest { stream, page_size, page_token }).await {
                Ok(page) => {
                    let next = (!page.next_page_token.is_empty()).then_some(page.next_page_token);
                    Some((Ok(futures::stream::iter(page.items.into_iter().map(Ok))), next))
                }
                Err(e) => Some((Err(e), None)),
            }
        }
    });
    Box::pin(pages.try_flatten())
}

/// The query both REST routes take.
fn query(url: &mut reqwest::Url, req: &StreamRequest) {
    let mut q = url.query_pairs_mut();
    q.append_pair("requestId", &req.request_id).append_pair("items", &req.items.to_string());
    if req.item_bytes > 0 {
        q.append_pair("itemBytes", &req.item_bytes.to_string());
    }
}

/// The most of an error answer's body read for its reason.
const MAX_REASON_BYTES: usize = 64 * 1024;

/// Why a REST answer's body could not be read: too large, or the exchange failed.
pub(crate) enum Unread {
    TooLarge(usize),
    Failed(reqwest::Error),
}

impl Unread {
    pub(crate) fn into_call_error(self, target: &str, failed: impl FnOnce(reqwest::Error) -> CallError) -> CallError {
        match self {
            Unread::TooLarge(max) => {
                bad(target, format!("the answer's body is over the {max} bytes this client reads"))
            }
            Unread::Failed(e) => failed(e),
        }
    }
}

/// A REST answer's body, read whole up to `max` bytes: one declared or
/// sent beyond it is refused, not held. A body that comes as one chunk (a
/// unary answer, most often) is that chunk, not a copy: reqwest's own
/// `bytes()`, which the plain twin uses, copies nothing either; several are
/// gathered into one buffer sized once by the declared length.
pub(crate) async fn read_bounded(mut resp: reqwest::Response, max: usize) -> Result<bytes::Bytes, Unread> {
    let declared = resp.content_length();
    if declared.is_some_and(|n| n > max as u64) {
        return Err(Unread::TooLarge(max));
    }
    let Some(first) = resp.chunk().await.map_err(Unread::Failed)? else { return Ok(bytes::Bytes::new()) };
    if first.len() > max {
        return Err(Unread::TooLarge(max));
    }
    let Some(second) = resp.chunk().await.map_err(Unread::Failed)? else { return Ok(first) };
    let sized = declared.map_or(0, |n| n as usize).max(first.len() + second.len()).min(max);
    let mut body = bytes::BytesMut::with_capacity(sized);
    let mut next = Some(second);
    body.extend_from_slice(&first);
    while let Some(chunk) = next {
        if body.len() + chunk.len() > max {
            return Err(Unread::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
        next = resp.chunk().await.map_err(Unread::Failed)?;
    }
    Ok(body.freeze())
}

/// A non-success answer as an error with its body's reason.
async fn success(target: &str, resp: reqwest::Response) -> Result<reqwest::Response, CallError> {
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let body = read_bounded(resp, MAX_REASON_BYTES).await.unwrap_or_default();
    let body = String::from_utf8_lossy(&body);
    Err(CallError::Status { target: target.to_owned(), status: format!("HTTP {}: {body}", status.as_u16()) })
}

fn connect_error(target: &str, e: reqwest::Error) -> CallError {
    CallError::Connect { target: target.to_owned(), reason: e.to_string() }
}

/// The items of `req` over REST: pages from `GET /v1/items`, or one
/// response of NDJSON or server-sent events from `GET /v1/items/stream`.
pub fn rest(to: RestTarget, req: StreamRequest, delivery: Delivery, page_size: u32) -> ItemStream {
    let RestTarget { client, target, counters, codec } = to;
    if delivery == Delivery::Pages {
        return paged(req, page_size, move |page| {
            let (client, target, counters) = (client.clone(), target.clone(), counters.clone());
            async move {
                let mut url = reqwest::Url::parse(&format!("{target}/v1/items")).map_err(|e| bad(&target, e))?;
                query(&mut url, &page.stream);
                url.query_pairs_mut().append_pair("pageSize", &page.page_size.to_string());
                if !page.page_token.is_empty() {
                    url.query_pairs_mut().append_pair("pageToken", &page.page_token);
                }
                let resp = client.get(url).header(reqwest::header::ACCEPT, "application/json").send().await;
                let resp = success(&target, resp.map_err(|e| connect_error(&target, e))?).await?;
                let body = read_bounded(resp, MAX_ANSWER_BYTES)
                    .await
                    .map_err(|e| e.into_call_error(&target, |e| bad(&target, e)))?;
                counters.add_message_bytes(0, body.len() as u64);
                codec.decode(&body).map_err(|e| bad(&target, e))
            }
        });
    }
    let (events, accept) = match delivery {
        Delivery::Ndjson => (false, "application/x-ndjson"),
        Delivery::Sse => (true, "text/event-stream"),
        other => {
            let status = format!("REST delivers pages, NDJSON or events, not {other:?}");
            let target = target.to_string();
            return Box::pin(futures::stream::once(async move { Err(CallError::Status { target, status }) }));
        }
    };
    let opened = async move {
        let mut url = reqwest::Url::parse(&format!("{target}/v1/items/stream")).map_err(|e| bad(&target, e))?;
        query(&mut url, &req);
        let resp = client.get(url).header(reqwest::header::ACCEPT, accept).send().await;
        let resp = success(&target, resp.map_err(|e| connect_error(&target, e))?).await?;
        Ok(lines(resp, target, counters, codec, events))
    };
    Box::pin(futures::stream::once(opened).try_flatten())
}

/// The items of a streamed response body: one per NDJSON line, or one per
/// event's `data:` (events end with a blank line).
fn lines(
    resp: reqwest::Response,
    target: Arc<str>,
    counters: Arc<Counters>,
    codec: JsonCodec,
    events: bool,
) -> ItemStream {
    let end: &'static [u8] = if events { b"\n\n" } else { b"\n" };
    let state = (resp, Vec::<u8>::new(), false);
    let items = futures::stream::unfold(state, move |(mut resp, mut buf, mut done)| {
        let (target, counters) = (target.clone(), counters.clone());
        async move {
            loop {
                if let Some(at) = buf.windows(end.len()).position(|w| w == end) {
                    let record: Vec<u8> = buf.drain(..at + end.len()).collect();
                    let item = parse(&record[..at], events).and_then(|json| {
                        counters.add_message_bytes(0, json.len() as u64);
                        codec.decode::<StreamItem>(json).map_err(|e| e.to_string())
                    });
                    return Some((item.map_err(|e| bad(&target, e)), (resp, buf, done)));
                }
                if done {
                    let rest = (!buf.is_empty()).then(|| Err(bad(&target, "the body ended inside an item")));
                    return rest.map(|e| (e, (resp, Vec::new(), true)));
                }
                match resp.chunk().await {
                    // One item's line (or event) is bounded as a whole answer is.
                    Ok(Some(chunk)) if buf.len() + chunk.len() > MAX_ANSWER_BYTES => {
                        let reason = format!("an item is over the {MAX_ANSWER_BYTES} bytes this client reads");
                        return Some((Err(bad(&target, reason)), (resp, Vec::new(), true)));
                    }
                    Ok(Some(chunk)) => buf.extend_from_slice(&chunk),
                    Ok(None) => done = true,
                    Err(e) => return Some((Err(bad(&target, e)), (resp, Vec::new(), true))),
                }
            }
        }
    });
    Box::pin(items)
}

/// The JSON of one record: the line itself, or an event's `data:` field.
fn parse(record: &[u8], events: bool) -> Result<&[u8], String> {
    if !events {
        return Ok(record);
    }
    record
        .split(|b| *b == b'\n')
        .find_map(|line| line.strip_prefix(b"data:"))
        .map(|d| d.strip_prefix(b" ").unwrap_or(d))
        .ok_or_else(|| "an event without data".to_owned())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// An answer of `head` then each of `pieces`, a pause between them so
    /// that each arrives as a chunk of its own, to one request on a server
    /// of its own; the body as `read_bounded` reads it with `max`.
    async fn read(head: &str, pieces: &[&str], max: usize) -> Result<bytes::Bytes, Unread> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (head, pieces) = (head.to_owned(), pieces.iter().map(|p| p.to_string()).collect::<Vec<_>>());
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let _ = tcp.read(&mut [0u8; 4096]).await;
            tcp.write_all(format!("HTTP/1.1 200 OK\r\n{head}\r\n\r\n").as_bytes()).await.unwrap();
            for piece in pieces {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let _ = tcp.write_all(piece.as_bytes()).await;
            }
        });
        let resp = reqwest::get(format!("http://{addr}/")).await.unwrap();
        read_bounded(resp, max).await
    }

    fn chunked(parts: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = parts.iter().map(|p| format!("{:x}\r\n{p}\r\n", p.len())).collect();
        out.push("0\r\n\r\n".into());
        out
    }

    #[tokio::test]
    async fn a_body_is_read_whole_in_one_chunk_or_several_and_refused_past_the_cap() {
        let whole = read("content-length: 5", &["hello"], 10).await;
        assert_eq!(whole.ok().as_deref(), Some(&b"hello"[..]));
        let parts = chunked(&["ab", "cd", "ef"]);
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        let gathered = read("transfer-encoding: chunked", &parts, 10).await;
        assert_eq!(gathered.ok().as_deref(), Some(&b"abcdef"[..]));
        let empty = read("content-length: 0", &[], 10).await;
        assert_eq!(empty.ok().as_deref(), Some(&b""[..]));
        // Past the cap: declared, in one chunk, and only once gathered.
        assert!(matches!(read("content-length: 11", &["hello world"], 10).await, Err(Unread::TooLarge(10))));
        let one = chunked(&["hello world"]);
        assert!(matches!(read("transfer-encoding: chunked", &[&one[0]], 10).await, Err(Unread::TooLarge(10))));
        let three = chunked(&["abcd", "efgh", "ijkl"]);
        let three: Vec<&str> = three.iter().map(String::as_str).collect();
        assert!(matches!(read("transfer-encoding: chunked", &three, 10).await, Err(Unread::TooLarge(10))));
    }
}
