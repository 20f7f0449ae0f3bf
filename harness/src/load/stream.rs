//! The streaming arms' front exchange (`POST /v1/stream`): the caller's one
//! NDJSON answer read item by item. Each item is stamped twice: when the
//! kernel received the packet that completed it (`stamped.rs`; the clock
//! after the read where there is no stamp), and when the consumer took it.
//! With a consumer delay the consumer sleeps that long after each item
//! before it reads on, so the items it has not taken wait in the socket
//! buffers and the caller's, and the producer is held back as a slow
//! client would hold it: the two stamps then part.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::StatusCode;

use payload::{StreamItem, StreamRequest};

use super::answer::{Answer, classify, error_body_reason, no_answer_within};
use super::front::{FrontClient, FrontError, Held, MAX_ANSWER_BYTES, ReadAnswer, Sent};
use super::stamped::RxStamp;
use super::{Outcome, StreamFacts};
use crate::config::Streams;

/// One item as the front door relayed it.
#[derive(Debug, Clone)]
pub struct StreamedItem {
    /// Its JSON, without the line's newline; empty once checked (a
    /// stream's items are not kept: [`StreamedItem::checked`] is).
    pub json: Bytes,
    /// For a checked stream: the item's due and production times (ns since
    /// the Unix epoch, on the downstream's clock) if it is the item
    /// generated for its place, else why not.
    pub checked: Option<Result<Made, String>>,
    /// When the kernel received its last byte (or the clock after the read).
    pub arrived: Instant,
    /// Whether `arrived` is the kernel's stamp.
    pub kernel_stamped: bool,
    /// When the consumer took it: after `arrived`, and later by the
    /// consumer's own delay once it falls behind.
    pub taken: Instant,
}

/// Why a stream ended before its last item, as the caller's last line or
/// the body's end says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamCut {
    pub reason: String,
    /// Items received before the cut.
    pub after_items: u64,
}

/// One stream's answer: its status, the items in the order they came, and
/// how it was cut short, if it was. A status other than 200 carries no
/// items; its body is the refusal.
#[derive(Debug)]
pub struct StreamAnswer {
    pub status: StatusCode,
    pub items: Vec<StreamedItem>,
    pub cut: Option<StreamCut>,
    /// The body of a refusal (a status other than 200).
    pub refusal: Option<Bytes>,
}

impl FrontClient {
    /// POSTs `body` to a streaming front door and reads its NDJSON answer
    /// item by item, `consumer_delay` late each; pooled and retried as
    /// [`FrontClient::post_json`] is.
    pub async fn post_stream(&self, body: String, consumer_delay: Duration) -> Result<StreamAnswer, FrontError> {
        self.post_reading(body, Items { consumer_delay, check: None }).await
    }

    /// [`post_stream`](Self::post_stream) of `req`, each item checked as it
    /// is taken (after its arrival is stamped) and its JSON let go, so a
    /// stream of any length holds one item at a time.
    pub async fn post_stream_checked(
        &self,
        req: &StreamRequest,
        consumer_delay: Duration,
    ) -> Result<StreamAnswer, FrontError> {
        let body = serde_json::to_string(req).unwrap_or_default();
        self.post_reading(body, Items { consumer_delay, check: Some(req.clone()) }).await
    }
}

/// A stream's answer, item by item, each taken `consumer_delay` late and,
/// with `check`, checked against the one generated for its place.
struct Items {
    consumer_delay: Duration,
    check: Option<StreamRequest>,
}

/// When the downstream says an item was due and when it made it (ns since
/// the Unix epoch on its clock; `due_unix_nanos` 0: it did not say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Made {
    pub due_unix_nanos: i64,
    pub produced_unix_nanos: i64,
}

/// Item `index` of `req` in `json`: when it was due and made, or why it is not the item.
fn check_item(req: &StreamRequest, index: u32, json: &[u8]) -> Result<Made, String> {
    let item = serde_json::from_slice::<StreamItem>(json).map_err(|e| format!("item {index} is not an item: {e}"))?;
    payload::verify_item(req, &item, index).map_err(|e| e.to_string())?;
    Ok(Made { due_unix_nanos: item.due_unix_nanos, produced_unix_nanos: item.produced_unix_nanos })
}

impl ReadAnswer for Items {
    type Output = StreamAnswer;
    fn read<'a>(
        &'a self,
        resp: hyper::Response<hyper::body::Incoming>,
        rx: &'a RxStamp,
        start: Instant,
        held: Held,
    ) -> impl Future<Output = Result<StreamAnswer, Sent>> + Send + 'a {
        read_items(resp, rx, start, self, held)
    }
}

/// Sends stream `index` through the streaming front door and reads it
/// item by item; `done` is its last item's arrival. Each item is checked
/// against the one generated for its place as it is taken, after its
/// arrival is stamped (so the check costs no latency), and what the stream
/// delivered goes in [`StreamFacts`].
pub(super) async fn stream_request(index: u64, timeout: Duration, client: &FrontClient, streams: &Streams) -> Answer {
    let req = StreamRequest { request_id: index.to_string(), items: streams.items, item_bytes: streams.item_bytes };
    // One reading of both clocks: the harness's stamps are monotonic, the
    // downstream's production times are on the system clock.
    let anchor = Clocks::now();
    let answer = match tokio::time::timeout(timeout, client.post_stream_checked(&req, streams.consumer_delay)).await {
        Err(_) => return Answer::clocked(Outcome::Timeout, no_answer_within(timeout)),
        Ok(Err(e)) => return Answer::clocked(classify(&e), e.to_string()),
        Ok(Ok(a)) => a,
    };
    if answer.status != StatusCode::OK {
        let reason = error_body_reason(answer.refusal.as_deref().unwrap_or_default());
        return Answer::clocked(Outcome::Status(answer.status.as_u16()), reason);
    }
    let (facts, failure) = stream_facts(&req, &answer, anchor);
    let (last, failed) = (answer.items.last(), failure.is_some());
    let (outcome, reason) = match failure {
        Some((outcome, reason)) => (outcome, Some(reason)),
        None => (Outcome::Ok, None),
    };
    Answer {
        // A whole stream is done at its last item's arrival; a failed one
        // when its failure was seen (a cut the user's second signal caused
        // is told apart by that time: `measure::record::collect`).
        done: last.filter(|_| !failed).map_or_else(Instant::now, |i| i.arrived),
        outcome,
        downstream_us: None,
        kernel_stamped: last.is_some_and(|i| i.kernel_stamped),
        reason,
        stream: Some(Box::new(facts)),
    }
}

/// The monotonic and the system clock read together.
#[derive(Debug, Clone, Copy)]
struct Clocks {
    instant: Instant,
    unix_nanos: i128,
}

impl Clocks {
    /// Both clocks read together as the kernel stamps are converted
    /// ([`super::stamped::clocks_now`]: the narrowest of a few brackets).
    fn now() -> Clocks {
        let (instant, wall) = super::stamped::clocks_now();
        let unix = wall.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Clocks { instant, unix_nanos: unix.as_nanos() as i128 }
    }

    /// `at` on the system clock, in nanoseconds since the Unix epoch.
    fn unix_nanos(&self, at: Instant) -> i128 {
        match at.checked_duration_since(self.instant) {
            Some(d) => self.unix_nanos + d.as_nanos() as i128,
            None => self.unix_nanos - self.instant.duration_since(at).as_nanos() as i128,
        }
    }
}

/// What a stream delivered, and why it failed if it did: an item that is
/// not the one generated for its place, or fewer items than asked for.
fn stream_facts(
    req: &StreamRequest,
    answer: &StreamAnswer,
    clocks: Clocks,
) -> (StreamFacts, Option<(Outcome, String)>) {
    let mut facts = StreamFacts { first: answer.items.first().map(|i| i.arrived), ..StreamFacts::default() };
    let mut produced: Vec<i128> = Vec::with_capacity(answer.items.len());
    for (i, item) in answer.items.iter().enumerate() {
        let checked = match &item.checked {
            Some(c) => c.clone(),
            None => check_item(req, i as u32, &item.json),
        };
        let made = match checked {
            Ok(made) => made,
            Err(reason) => return (facts, Some((Outcome::BadResponse, reason))),
        };
        let (due, made) = (i128::from(made.due_unix_nanos), i128::from(made.produced_unix_nanos));
        let arrived = clocks.unix_nanos(item.arrived);
        let us = |ns: i128| (ns.max(0) / 1000) as u64;
        facts.transit_us.push(us(arrived - made));
        // From its due time, where the downstream says it.
        if due > 0 {
            facts.delays_us.push(us(arrived - due));
            facts.lateness_us.push(us(made - due));
        }
        produced.push(made);
        facts.items += 1;
    }
    // Items in transit when each was taken: those produced by then
    // (production times rise with the index), less those already taken.
    facts.buffered_peak = answer
        .items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let taken = clocks.unix_nanos(item.taken);
            produced.partition_point(|p| *p <= taken).saturating_sub(i) as u64
        })
        .max()
        .unwrap_or(0);
    let k = facts.items;
    let cut = match &answer.cut {
        Some(c) => Some(c.reason.clone()),
        None if k < u64::from(req.items) => Some("the stream ended early".to_owned()),
        None => None,
    };
    let failure = cut.map(|reason| {
        facts.cut_after = Some(k);
        (Outcome::StreamCut, format!("cut after {k} of {} items: {reason}", req.items))
    });
    (facts, failure)
}

/// The caller's last line when a stream failed: `{"error": …, "afterItems": k}`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ErrorLine {
    error: String,
    after_items: u64,
}

async fn read_items(
    resp: hyper::Response<hyper::body::Incoming>,
    rx: &RxStamp,
    start: Instant,
    how: &Items,
    mut held: Held,
) -> Result<StreamAnswer, Sent> {
    let (parts, mut body) = resp.into_parts();
    let mut answer = StreamAnswer { status: parts.status, items: Vec::new(), cut: None, refusal: None };
    let mut buf = BytesMut::new();
    let mut last: Option<(u64, Instant)> = None;
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            // A connection that fails after items arrived cuts the stream:
            // the items it delivered were measured and are kept.
            Err(e) if answer.status == StatusCode::OK && !answer.items.is_empty() => {
                let after_items = answer.items.len() as u64;
                answer.cut = Some(StreamCut { reason: format!("the connection failed: {e}"), after_items });
                return Ok(answer);
            }
            other => other.map_err(Sent::Yes)?,
        };
        let Ok(data) = frame.into_data() else { continue };
        // The bound is on what is held: one item's line (or a refusal),
        // held against the harness's budget with every other answer's.
        if buf.len() + data.len() > MAX_ANSWER_BYTES {
            return Err(Sent::TooLarge);
        }
        held.resize(buf.len() + data.len()).map_err(Sent::Full)?;
        // The read's stamp, for a line whose own stamp is not known.
        let read_stamp = rx.raw();
        let clock = Instant::now();
        buf.extend_from_slice(&data);
        if answer.status != StatusCode::OK {
            continue;
        }
        while let Some(at) = buf.iter().position(|b| *b == b'\n') {
            // Each line its own stamp where the stream keeps them
            // (`StampedTcp::lines`), else the read's. A stamp from before
            // this exchange began cannot be this line's. Lines with one
            // stamp share its conversion (each conversion to the monotonic
            // clock moves by a few ns).
            let raw = rx.take_line().filter(|ns| *ns != 0).unwrap_or(read_stamp);
            let stamp = match last {
                Some((r, at)) if r == raw => Some(at),
                _ => RxStamp::instant_of(raw).filter(|at| *at >= start),
            };
            last = stamp.map(|at| (raw, at));
            let arrived = stamp.unwrap_or(clock);
            let json = buf.split_to(at + 1).freeze().slice(..at);
            if let Ok(e) = serde_json::from_slice::<ErrorLine>(&json) {
                answer.cut = Some(StreamCut { reason: e.error, after_items: e.after_items });
                continue;
            }
            let taken = Instant::now();
            let index = answer.items.len() as u32;
            let checked = how.check.as_ref().map(|req| check_item(req, index, &json));
            let json = if checked.is_some() { Bytes::new() } else { json };
            answer.items.push(StreamedItem { json, checked, arrived, kernel_stamped: stamp.is_some(), taken });
            // A checked item's line is let go; only what is left is held.
            held.resize(buf.len()).map_err(Sent::Full)?;
            if !how.consumer_delay.is_zero() {
                tokio::time::sleep(how.consumer_delay).await;
            }
        }
    }
    if answer.status != StatusCode::OK {
        answer.refusal = Some(buf.freeze());
    } else if !buf.is_empty() && answer.cut.is_none() {
        let after_items = answer.items.len() as u64;
        answer.cut = Some(StreamCut { reason: "the answer ended inside an item".into(), after_items });
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    /// Answers one request with a chunked body: each of `chunks` after
    /// `gap`, then the end.
    async fn server(chunks: Vec<&'static str>, gap: Duration) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let _ = tcp.read(&mut buf).await.unwrap();
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n";
            tcp.write_all(head.as_bytes()).await.unwrap();
            for c in chunks {
                tokio::time::sleep(gap).await;
                tcp.write_all(format!("{:x}\r\n{c}\r\n", c.len()).as_bytes()).await.unwrap();
            }
            tcp.write_all(b"0\r\n\r\n").await.unwrap();
            let _ = tcp.read(&mut buf).await;
        });
        format!("http://{addr}/v1/stream")
    }

    #[tokio::test]
    async fn items_are_stamped_as_they_arrive_and_a_cut_says_after_how_many() {
        let gap = Duration::from_millis(30);
        // The second item comes in two pieces; the error line ends it.
        let chunks =
            vec!["{\"index\":0}\n", "{\"ind", "ex\":1}\n{\"index\":2}\n", "{\"error\":\"stalled\",\"afterItems\":3}\n"];
        let client = FrontClient::new(&server(chunks, gap).await).unwrap();
        let a = client.post_stream("{}".into(), Duration::ZERO).await.unwrap();
        let json: Vec<&[u8]> = a.items.iter().map(|i| &i.json[..]).collect();
        assert_eq!(json, [&b"{\"index\":0}"[..], b"{\"index\":1}", b"{\"index\":2}"]);
        assert_eq!(a.cut, Some(StreamCut { reason: "stalled".into(), after_items: 3 }));
        // Item 0 came a gap before the read that completed items 1 and 2.
        assert!(a.items[1].arrived >= a.items[0].arrived + gap, "{:?}", a.items);
        assert_eq!(a.items[1].arrived, a.items[2].arrived, "one read completed both");
        for i in &a.items {
            assert!(i.taken >= i.arrived);
        }
    }

    /// A connection that fails mid-stream (the tiers stopped under it at a
    /// second Ctrl-C) cuts the stream; the items that arrived are kept.
    #[tokio::test]
    async fn a_connection_failing_mid_stream_keeps_the_items_that_arrived() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/stream", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let _ = tcp.read(&mut buf).await.unwrap();
            let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
            tcp.write_all(head.as_bytes()).await.unwrap();
            let items = "{\"index\":0}\n{\"index\":1}\n";
            tcp.write_all(format!("{:x}\r\n{items}\r\n", items.len()).as_bytes()).await.unwrap();
            // Gone without the chunked body's end.
            tokio::time::sleep(Duration::from_millis(30)).await;
            drop(tcp);
        });
        let client = FrontClient::new(&url).unwrap();
        let a = client.post_stream("{}".into(), Duration::ZERO).await.expect("the items that arrived");
        assert_eq!(a.items.len(), 2);
        let cut = a.cut.expect("cut");
        assert_eq!(cut.after_items, 2);
        assert!(cut.reason.starts_with("the connection failed"), "{}", cut.reason);
    }

    /// Every arm's item delay runs from the item's due time: production
    /// lateness (due → made) plus transit (made → arrival), each recorded
    /// apart; an item whose source does not say when it was due has a
    /// transit and no delay.
    #[test]
    fn an_items_delay_runs_from_its_due_time_split_into_lateness_and_transit() {
        let req = StreamRequest { request_id: "7".into(), items: 3, item_bytes: 0 };
        let clocks = Clocks::now();
        let at = |unix_nanos: i128| clocks.instant + Duration::from_nanos((unix_nanos - clocks.unix_nanos) as u64);
        let base = clocks.unix_nanos + 1_000_000_000;
        // (due, made, arrived) in ns after `base`: made 3 ms late, then on
        // time, then a source that says nothing of its due time.
        let plan = [(0, 3_000_000, 3_500_000), (10_000_000, 10_000_000, 10_200_000), (-1, 20_000_000, 20_400_000)];
        let items = plan
            .iter()
            .enumerate()
            .map(|(i, &(due, made, arrived))| StreamedItem {
                json: Bytes::new(),
                checked: Some(Ok(Made {
                    due_unix_nanos: if due < 0 { 0 } else { (base + due) as i64 },
                    produced_unix_nanos: (base + made) as i64,
                })),
                arrived: at(base + arrived),
                kernel_stamped: true,
                taken: at(base + arrived + 1_000) + Duration::from_nanos(i as u64),
            })
            .collect();
        let answer = StreamAnswer { status: StatusCode::OK, items, cut: None, refusal: None };
        let (facts, failure) = stream_facts(&req, &answer, clocks);
        assert!(failure.is_none(), "{failure:?}");
        assert_eq!(facts.delays_us, [3_500, 200], "from the due time");
        assert_eq!(facts.lateness_us, [3_000, 0], "the source's own lateness");
        assert_eq!(facts.transit_us, [500, 200, 400], "from production, every item");
    }

    /// A stamping socket, kept open so that the kernel keeps stamping
    /// packets (`stamped.rs` has the story), and its peer.
    async fn stamps_on() -> (TcpStream, crate::load::stamped::StampedTcp) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tcp = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (stream, _) = crate::load::stamped::StampedTcp::new(tcp).unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        (server, stream)
    }

    /// Items `gap` apart reach a harness that is busy (its one runtime
    /// thread blocked) while the later ones arrive: each keeps the stamp of
    /// the packet that completed it, not the stamp of the read that found
    /// them together (nor of the merged buffer the kernel makes of packets
    /// left unread).
    #[tokio::test]
    async fn items_that_arrive_while_the_harness_is_busy_keep_their_own_stamps() {
        let gap = Duration::from_millis(30);
        // The machine's first stamping socket turns stamps on through a
        // deferred work item: one held open (and a moment) first.
        let (_held, _stamping) = stamps_on().await;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // A server on a thread of its own, unaffected by the blocked runtime.
        std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut tcp, _) = listener.accept().unwrap();
            tcp.set_nodelay(true).unwrap();
            let _ = tcp.read(&mut [0u8; 4096]).unwrap();
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n";
            tcp.write_all(head.as_bytes()).unwrap();
            for i in 0..4 {
                let line = format!("{{\"index\":{i}}}\n");
                tcp.write_all(format!("{:x}\r\n{line}\r\n", line.len()).as_bytes()).unwrap();
                std::thread::sleep(gap);
            }
            tcp.write_all(b"0\r\n\r\n").unwrap();
            let _ = tcp.read(&mut [0u8; 16]);
        });
        let client = FrontClient::new(&format!("http://{addr}/v1/stream")).unwrap().stamping_lines();
        // Busy from just after the first item until well after the last.
        tokio::spawn(async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            std::thread::sleep(Duration::from_millis(200));
        });
        let a = client.post_stream("{}".into(), Duration::ZERO).await.unwrap();
        assert_eq!(a.items.len(), 4);
        for w in a.items.windows(2) {
            assert!(w[0].kernel_stamped && w[1].kernel_stamped, "{:?}", a.items);
            let apart = w[1].arrived.saturating_duration_since(w[0].arrived);
            assert!(apart >= gap / 2, "items {:?} apart, sent {gap:?} apart: {:?}", apart, a.items);
        }
    }

    #[tokio::test]
    async fn a_slow_consumer_takes_items_late_and_a_torn_end_is_a_cut() {
        let delay = Duration::from_millis(40);
        let chunks = vec!["{\"index\":0}\n{\"index\":1}\n{\"index\":2}\n{\"ind"];
        let client = FrontClient::new(&server(chunks, Duration::ZERO).await).unwrap();
        let a = client.post_stream("{}".into(), delay).await.unwrap();
        assert_eq!(a.items.len(), 3);
        for w in a.items.windows(2) {
            assert!(w[1].taken >= w[0].taken + delay, "taken a delay apart: {:?}", a.items);
            assert_eq!(w[1].arrived, w[0].arrived, "all three arrived in one read");
        }
        assert_eq!(a.cut.map(|c| c.after_items), Some(3));
    }
}
