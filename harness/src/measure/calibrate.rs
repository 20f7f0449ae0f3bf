//! The instrument's own floor: before any load, the load client sends a few
//! hundred requests, one at a time, to an endpoint inside the harness that
//! answers at once with a body the size of a real answer. Their service time
//! is what the client, loopback and a minimal server add together: an upper
//! bound of what the instrument adds to every latency it reports.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use hdrhistogram::Histogram;

use crate::load::Target;
use crate::measure::histogram::new_histogram;

/// Requests the floor is measured over.
pub const FLOOR_REQUESTS: u32 = 200;
/// The calibration gives up after this long (a machine too busy to answer).
const FLOOR_LIMIT: Duration = Duration::from_secs(10);

/// The client's service time, in µs, against an endpoint that answers at
/// once with `fanout` calls' worth of `items` records of `shape`; `None` if it
/// could not be measured within a few seconds.
pub async fn client_floor(items: u32, shape: payload::Shape, fanout: u32) -> Option<Histogram<u64>> {
    tokio::time::timeout(FLOOR_LIMIT, floor(items, shape, fanout)).await.ok().flatten()
}

async fn floor(items: u32, shape: payload::Shape, fanout: u32) -> Option<Histogram<u64>> {
    let body = answer_body(items, shape, fanout)?;
    let listener = TcpListener::bind("127.0.0.1:0").await.ok()?;
    let url = format!("http://{}/v1/call", listener.local_addr().ok()?);
    let server = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(answer_at_once(tcp, body.clone()));
        }
    });
    let mut target = Target::front(url, items, fanout, Duration::from_secs(5), 0).ok()?;
    // Only the time counts here, not whether the canned records match.
    target.checks.front = |_, _, _| true;
    let mut h = new_histogram();
    for i in 0..FLOOR_REQUESTS {
        let sent = Instant::now();
        let answer = target.send(u64::from(i)).await;
        if answer.outcome == crate::load::Outcome::Ok {
            h.saturating_record(answer.done.saturating_duration_since(sent).as_micros() as u64);
        }
    }
    server.abort();
    Some(h)
}

/// A front answer of the real size: `fanout` calls' records (or points) as JSON.
fn answer_body(items: u32, shape: payload::Shape, fanout: u32) -> Option<std::sync::Arc<Vec<u8>>> {
    let one = payload::respond(&payload::FetchRequest { request_id: "0".into(), items, shape, body: Vec::new() });
    let mut answer = payload::FetchResponse { request_id: "0".into(), ..payload::FetchResponse::default() };
    for _ in 0..fanout {
        answer.records.extend(one.records.iter().cloned());
        answer.points.extend(one.points.iter().cloned());
    }
    let json = serde_json::to_vec(&answer).ok()?;
    let mut out =
        format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", json.len())
            .into_bytes();
    out.extend_from_slice(&json);
    Some(std::sync::Arc::new(out))
}

/// Answers each request on the connection as soon as its head and body are in.
async fn answer_at_once(mut tcp: TcpStream, answer: std::sync::Arc<Vec<u8>>) {
    let _ = tcp.set_nodelay(true);
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(len) = request_len(&buf) {
            buf.drain(..len);
            if tcp.write_all(&answer).await.is_err() {
                return;
            }
        }
        match tcp.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The length of the first complete request (head and body) in `buf`.
fn request_len(buf: &[u8]) -> Option<usize> {
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&buf[..head_end]).ok()?;
    let body: usize = head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-length")))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    (buf.len() >= head_end + body).then_some(head_end + body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_split_by_head_and_length() {
        let one = b"POST /v1/call HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
        assert_eq!(request_len(one), Some(one.len()));
        assert_eq!(request_len(&one[..one.len() - 1]), None);
        assert_eq!(request_len(b"GET / HTTP/1.1\r\n\r\nPOST"), Some(18));
    }

    #[tokio::test]
    async fn the_floor_is_measured_over_every_request() {
        let floor = client_floor(10, payload::Shape::Order, 1).await.expect("a floor");
        assert_eq!(floor.len(), u64::from(FLOOR_REQUESTS));
        assert!(floor.min() > 0 && floor.value_at_quantile(0.5) >= floor.min());
    }
}
