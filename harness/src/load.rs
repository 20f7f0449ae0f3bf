//! The open-loop, fixed-rate load generator.
//!
//! Request *i* is due at `t0 + i/qps`. The dispatcher wakes on a timer, sends
//! every request now due (so the 1 ms timer granularity never caps the rate),
//! and never waits for a response: each request runs in its own task and sends
//! one [`Shot`] to the collector when it ends (oha's one-record-per-request
//! habit). Latency is measured from the due time, which corrects for
//! coordinated omission the way wrk2 does (Gil Tene, "How NOT to measure
//! latency"); the time from the actual send is kept as service time. A request
//! due while `max_in_flight` are outstanding is counted as dropped, never
//! delayed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use payload::{CallRequest, FetchResponse};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// The connection to the caller could not be made.
    Connect,
    /// No answer within `--timeout`.
    Timeout,
    /// The caller answered with a non-200 status.
    Status(u16),
    /// The downstream, called directly, answered with an error status (HTTP or gRPC).
    DownstreamStatus,
    /// An answer that did not parse or was not the one asked for.
    BadResponse,
    /// Not sent: `--max-in-flight` requests were outstanding when it was due.
    Dropped,
}

/// One request's record.
#[derive(Debug, Clone, Copy)]
pub struct Shot {
    pub index: u64,
    pub due: Instant,
    /// When the request task actually started sending; `None` if dropped.
    pub sent: Option<Instant>,
    pub done: Instant,
    pub outcome: Outcome,
    /// The caller's `Server-Timing: downstream;dur=` in microseconds.
    pub downstream_us: Option<u64>,
}

/// When each request is due.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub t0: Instant,
    pub qps: f64,
}

impl Schedule {
    pub fn due(&self, i: u64) -> Instant {
        self.t0 + Duration::from_secs_f64(i as f64 / self.qps)
    }
}

/// Live counters the progress display and the sampler read.
#[derive(Debug, Default)]
pub struct Live {
    pub sent: AtomicU64,
    pub ok: AtomicU64,
    pub errors: AtomicU64,
    pub dropped: AtomicU64,
    pub in_flight: AtomicUsize,
}

/// Where requests go.
#[derive(Clone)]
pub enum Endpoint {
    /// The caller's JSON front door, over HTTP/1.1.
    Front { client: reqwest::Client, url: String },
    /// The downstream itself, over the transport under test (the caller's own
    /// clients, so both paths use the same code).
    Direct(Arc<dyn caller::outbound::Outbound>),
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Front { url, .. } => write!(f, "Front({url})"),
            Endpoint::Direct(c) => write!(f, "Direct({})", c.target()),
        }
    }
}

/// What the generator needs to send requests.
#[derive(Debug, Clone)]
pub struct Target {
    pub endpoint: Endpoint,
    pub items: u32,
    pub fanout: u32,
    pub timeout: Duration,
    /// wrk2-style connection bound: a request is sent once it holds a permit.
    pub connections: Option<Arc<tokio::sync::Semaphore>>,
}

impl Target {
    /// The caller's front door through an HTTP/1.1 keep-alive client with every
    /// fairness setting explicit: one connection per in-flight request, no
    /// retries, no proxy, TCP_NODELAY.
    pub fn front(url: String, items: u32, fanout: u32, timeout: Duration, connections: usize) -> reqwest::Result<Self> {
        let client = reqwest::Client::builder()
            .http1_only()
            .no_proxy()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(usize::MAX)
            .pool_idle_timeout(Duration::from_secs(90))
            .retry(reqwest::retry::never())
            .timeout(timeout)
            .build()?;
        Ok(Self::with(Endpoint::Front { client, url }, items, 1.max(fanout), timeout, connections))
    }

    pub fn with(endpoint: Endpoint, items: u32, fanout: u32, timeout: Duration, connections: usize) -> Self {
        let connections = (connections > 0).then(|| Arc::new(tokio::sync::Semaphore::new(connections)));
        Target { endpoint, items, fanout, timeout, connections }
    }
}

/// Sends requests `0..total` on `schedule` until done or `stop` fires; returns
/// how many were dispatched (sent or dropped).
pub async fn dispatch(
    schedule: Schedule,
    total: u64,
    max_in_flight: usize,
    target: Target,
    live: Arc<Live>,
    shots: UnboundedSender<Shot>,
    stop: CancellationToken,
) -> u64 {
    // The dispatcher runs on its own OS thread: tokio's timer wheel has 1 ms
    // ticks (every wake-up would be up to a millisecond late), while a
    // thread's sleep is a high-resolution kernel timer (~50 µs slack). The
    // requests themselves still run as tasks on the runtime.
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        dispatch_on_thread(runtime, schedule, total, max_in_flight, target, live, shots, stop)
    })
    .await
    .unwrap_or(0)
}

/// Longest single sleep, so a stop is noticed promptly.
const MAX_SLEEP: Duration = Duration::from_millis(5);

#[allow(clippy::too_many_arguments)]
fn dispatch_on_thread(
    runtime: tokio::runtime::Handle,
    schedule: Schedule,
    total: u64,
    max_in_flight: usize,
    target: Target,
    live: Arc<Live>,
    shots: UnboundedSender<Shot>,
    stop: CancellationToken,
) -> u64 {
    let target = Arc::new(target);
    let mut i = 0;
    while i < total && !stop.is_cancelled() {
        let next = schedule.due(i);
        let now = Instant::now();
        if next > now {
            std::thread::sleep((next - now).min(MAX_SLEEP));
            continue;
        }
        // Everything due by now goes out now, each stamped with its own due time.
        while i < total && schedule.due(i) <= now {
            let due = schedule.due(i);
            if live.in_flight.load(Relaxed) >= max_in_flight {
                live.dropped.fetch_add(1, Relaxed);
                let _ = shots.send(Shot {
                    index: i,
                    due,
                    sent: None,
                    done: now,
                    outcome: Outcome::Dropped,
                    downstream_us: None,
                });
            } else {
                live.in_flight.fetch_add(1, Relaxed);
                runtime.spawn(send_one(i, due, target.clone(), live.clone(), shots.clone()));
            }
            i += 1;
        }
    }
    i
}

/// Closed loop (throughput mode, as wrk or bombardier): `connections` workers
/// send back to back until `until` or `stop`. Each request is "due" when it is
/// sent, so latency here is not corrected for coordinated omission. Returns
/// how many requests were sent.
pub async fn closed_loop(
    connections: usize,
    until: Instant,
    target: Target,
    live: Arc<Live>,
    shots: UnboundedSender<Shot>,
    stop: CancellationToken,
    first_index: u64,
) -> u64 {
    let target = Arc::new(target);
    let next = Arc::new(AtomicU64::new(first_index));
    let workers: Vec<_> = (0..connections.max(1))
        .map(|_| {
            let (target, live, shots, stop, next) =
                (target.clone(), live.clone(), shots.clone(), stop.clone(), next.clone());
            tokio::spawn(async move {
                while Instant::now() < until && !stop.is_cancelled() {
                    let index = next.fetch_add(1, Relaxed);
                    live.in_flight.fetch_add(1, Relaxed);
                    send_one(index, Instant::now(), target.clone(), live.clone(), shots.clone()).await;
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.await;
    }
    next.load(Relaxed) - first_index
}

async fn send_one(index: u64, due: Instant, target: Arc<Target>, live: Arc<Live>, shots: UnboundedSender<Shot>) {
    // With a connection bound, the request is sent only once a connection is
    // free; the wait before that is in the corrected latency, not the service time.
    let _permit = match &target.connections {
        Some(s) => s.clone().acquire_owned().await.ok(),
        None => None,
    };
    let sent = Instant::now();
    live.sent.fetch_add(1, Relaxed);
    let (outcome, downstream_us) = request(index, &target).await;
    let done = Instant::now();
    live.in_flight.fetch_sub(1, Relaxed);
    if outcome == Outcome::Ok {
        live.ok.fetch_add(1, Relaxed);
    } else {
        live.errors.fetch_add(1, Relaxed);
    }
    let _ = shots.send(Shot { index, due, sent: Some(sent), done, outcome, downstream_us });
}

async fn request(index: u64, target: &Target) -> (Outcome, Option<u64>) {
    match &target.endpoint {
        Endpoint::Front { client, url } => front_request(index, target, client, url).await,
        Endpoint::Direct(client) => (direct_request(index, target, client.as_ref()).await, None),
    }
}

async fn direct_request(index: u64, target: &Target, client: &dyn caller::outbound::Outbound) -> Outcome {
    use caller::outbound::CallError;
    let req = payload::FetchRequest { request_id: index.to_string(), items: target.items, body: Vec::new() };
    match tokio::time::timeout(target.timeout, client.fetch(req.clone())).await {
        Err(_) => Outcome::Timeout,
        Ok(Ok(resp)) if payload::verify(&req, &resp).is_ok() => Outcome::Ok,
        Ok(Ok(_)) | Ok(Err(CallError::BadResponse { .. })) => Outcome::BadResponse,
        Ok(Err(CallError::Connect { .. })) => Outcome::Connect,
        Ok(Err(CallError::Timeout { .. })) => Outcome::Timeout,
        Ok(Err(CallError::Status { .. })) => Outcome::DownstreamStatus,
    }
}

async fn front_request(index: u64, target: &Target, client: &reqwest::Client, url: &str) -> (Outcome, Option<u64>) {
    let call = CallRequest { request_id: index.to_string(), items: target.items };
    let body = format!(r#"{{"requestId":"{}","items":{}}}"#, call.request_id, call.items);
    let resp = client.post(url).header(reqwest::header::CONTENT_TYPE, "application/json").body(body).send().await;
    let resp = match resp {
        Ok(r) => r,
        Err(e) => return (classify(&e), None),
    };
    let status = resp.status();
    let downstream_us =
        resp.headers().get("server-timing").and_then(|v| v.to_str().ok()).and_then(parse_server_timing_us);
    let bytes = match resp.bytes().await {
        Ok(b) => b,
        Err(e) => return (classify(&e), downstream_us),
    };
    if status != reqwest::StatusCode::OK {
        return (Outcome::Status(status.as_u16()), downstream_us);
    }
    let verified = serde_json::from_slice::<FetchResponse>(&bytes)
        .ok()
        .is_some_and(|r| payload::verify_call(&call, target.fanout, &r).is_ok());
    (if verified { Outcome::Ok } else { Outcome::BadResponse }, downstream_us)
}

fn classify(e: &reqwest::Error) -> Outcome {
    if e.is_timeout() {
        Outcome::Timeout
    } else if e.is_connect() {
        Outcome::Connect
    } else {
        Outcome::BadResponse
    }
}

/// Reads `downstream;dur=<ms>` from a `Server-Timing` value, in microseconds.
pub fn parse_server_timing_us(value: &str) -> Option<u64> {
    value.split(',').find_map(|metric| {
        let mut parts = metric.trim().split(';');
        if parts.next()?.trim() != caller::front::SERVER_TIMING_METRIC {
            return None;
        }
        parts.find_map(|p| p.trim().strip_prefix("dur=")?.parse::<f64>().ok()).map(|ms| (ms * 1000.0).round() as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_spaces_requests_evenly() {
        let s = Schedule { t0: Instant::now(), qps: 4.0 };
        assert_eq!(s.due(0), s.t0);
        assert_eq!(s.due(4) - s.t0, Duration::from_secs(1));
        assert_eq!(s.due(3) - s.due(2), Duration::from_millis(250));
    }

    #[test]
    fn server_timing_is_parsed_in_microseconds() {
        assert_eq!(parse_server_timing_us("downstream;dur=501.234"), Some(501_234));
        assert_eq!(parse_server_timing_us("db;dur=1, downstream;desc=\"x\";dur=2.5"), Some(2_500));
        assert_eq!(parse_server_timing_us("cache;dur=3"), None);
        assert_eq!(parse_server_timing_us("downstream"), None);
    }
}
