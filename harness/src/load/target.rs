//! Where requests go and how one is sent: the caller's JSON front door over
//! an HTTP/1.1 client with every fairness setting explicit (`front.rs`), or the downstream
//! directly through the caller's own client for the transport (built by the
//! same factory the caller uses). Each answer is verified and classified.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use caller::clients::ClientSettings;
use caller::outbound::{CallError, Outbound};
use payload::{CallRequest, FetchRequest, FetchResponse, Shape};

use super::Outcome;
use super::answer::{Answer, classify, error_body_reason, no_answer_within};
use super::front::FrontClient;
use crate::config::{Config, TargetTier, TlsFiles};

/// Where requests go.
#[derive(Clone)]
pub enum Endpoint {
    /// The caller's JSON front door, over HTTP/1.1.
    Front(Arc<FrontClient>),
    /// The downstream itself, over the transport under test (the caller's own
    /// clients, so both paths use the same code).
    Direct(Arc<dyn Outbound>),
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Front(c) => write!(f, "Front({})", c.url()),
            Endpoint::Direct(c) => write!(f, "Direct({})", c.target()),
        }
    }
}

/// How an answer is checked end to end, after its last byte is stamped.
#[derive(Debug, Clone, Copy)]
pub struct Checks {
    /// A front answer, in its JSON bytes: the records of every fanned-out
    /// call, in order.
    pub front: fn(&CallRequest, u32, &[u8]) -> bool,
    /// A direct answer from the downstream.
    pub direct: fn(&FetchRequest, &FetchResponse) -> bool,
}

impl Default for Checks {
    fn default() -> Self {
        Checks {
            front: |call, fanout, body| payload::verify_call_json(call, fanout, body).is_ok(),
            direct: |req, resp| payload::verify(req, resp).is_ok(),
        }
    }
}

/// What the generator needs to send requests.
#[derive(Debug, Clone)]
pub struct Target {
    pub endpoint: Endpoint,
    pub items: u32,
    /// The kind of record asked for.
    pub shape: Shape,
    /// Bytes of body uploaded with each downstream call: the caller fills them
    /// in (the front request only says how many); a direct request carries them.
    pub request_bytes: u32,
    pub fanout: u32,
    pub timeout: Duration,
    /// wrk2-style connection bound: a request is sent once it holds a permit.
    pub connections: Option<Arc<tokio::sync::Semaphore>>,
    pub checks: Checks,
    /// Why this arm's requests failed, over the whole run (warm-up included).
    pub reasons: Arc<super::ErrorReasons>,
    /// A team's own contract (`--proto`): request `i` is call `i`, and its
    /// answers must be answer `i` mod their count.
    pub custom: Option<Arc<contract::Loaded>>,
    /// The streaming arms' streams (`--stream-items`, `--consumer-delay`):
    /// request `i` is stream `i`, read item by item.
    pub streams: Option<crate::config::Streams>,
    /// The load segment (warm-up or round, numbered from 1 across the run)
    /// this target sends for: a team's own contract's call `i` is numbered
    /// `segment·2^40 + i` ([`contract::SEGMENT_SHIFT`]), so the tiers count
    /// each call's bytes under its segment, however late it ends.
    pub segment: u64,
}

impl Target {
    /// The caller's front door through an HTTP/1.1 keep-alive client with every
    /// fairness setting explicit: one connection per in-flight request, no
    /// retries of a request that went out, no proxy, TCP_NODELAY (`front.rs`).
    pub fn front(url: String, items: u32, fanout: u32, timeout: Duration, connections: usize) -> anyhow::Result<Self> {
        let client = Arc::new(FrontClient::new(&url)?);
        Ok(Self::with(Endpoint::Front(client), items, 1.max(fanout), timeout, connections))
    }

    /// An arm's load target: the caller's front door at `url`, or (with
    /// `--target downstream`) the downstream's listener at `url`, over TLS
    /// with the run's certificate files when the hop uses it.
    /// `custom`: a team's own contract, loaded beside the configuration.
    pub fn for_arm(
        config: &Config,
        url: &str,
        tls: Option<&TlsFiles>,
        custom: Option<Arc<contract::Loaded>>,
    ) -> anyhow::Result<Target> {
        let c = config;
        let shaped = |t: Target| Target {
            shape: c.work.shape,
            request_bytes: c.work.request_bytes,
            custom: custom.clone(),
            streams: c.streams.clone(),
            ..t
        };
        if c.deploy.target == TargetTier::Caller {
            let front = Target::front(url.to_owned(), c.work.items, c.work.fanout, c.load.timeout, c.load.connections);
            let mut target = front.map(shaped).context("building the load client")?;
            // A stream's items are stamped line by line (`stamped.rs`);
            // open loop, other answers are read when the dispatcher next
            // sends (`deferred.rs`).
            if let Endpoint::Front(client) = &mut target.endpoint {
                if c.streams.is_some() {
                    *client = Arc::new(FrontClient::new(client.url())?.stamping_lines());
                } else if !c.load.closed_loop {
                    *client = Arc::new(FrontClient::new(client.url())?.hearing_answers_at_sends()?);
                }
            }
            return Ok(target);
        }
        let settings = ClientSettings {
            transport: c.transport,
            target: url.to_owned(),
            grpc_connections: c.hop.grpc_connections as usize,
            rest_http2: c.hop.rest_http2,
            hop: caller::hop::HopOptions {
                tls: tls.map(TlsFiles::client_tls),
                compression: c.hop.compression,
                json_codec: c.hop.json_codec,
            },
        };
        // The harness's own client counters are not reported: the
        // downstream's listener counts the hop.
        let client = caller::clients::build(&settings, Arc::new(c.transport.client_counters("harness")))?;
        let connections = if c.load.closed_loop { 0 } else { c.load.connections };
        Ok(shaped(Target::with(Endpoint::Direct(client), c.work.items, 1, c.load.timeout, connections)))
    }

    pub fn with(endpoint: Endpoint, items: u32, fanout: u32, timeout: Duration, connections: usize) -> Self {
        let connections = (connections > 0).then(|| Arc::new(tokio::sync::Semaphore::new(connections)));
        Target {
            endpoint,
            items,
            shape: Shape::Order,
            request_bytes: 0,
            fanout,
            timeout,
            connections,
            checks: Checks::default(),
            reasons: Arc::default(),
            custom: None,
            streams: None,
            segment: 0,
        }
    }

    /// The number request `index` carries as a team's own contract's call:
    /// its place in its segment, with the segment above
    /// [`contract::SEGMENT_SHIFT`] (a closed loop's indices carry it already).
    pub fn call_number(&self, index: u64) -> u64 {
        (self.segment << contract::SEGMENT_SHIFT) | index
    }

    /// Closes the front client's idle connections (see
    /// [`FrontClient::release_idle`]); returns how many. A direct target's
    /// client (reqwest's or tonic's pool) keeps its own until it is dropped,
    /// when the arm's next round replaces the target.
    pub fn release_idle(&self) -> usize {
        match &self.endpoint {
            Endpoint::Front(client) => client.release_idle(),
            Endpoint::Direct(_) => 0,
        }
    }

    /// Sends request `index`, stamps the arrival of its answer's last byte,
    /// then checks and classifies the answer.
    pub async fn send(&self, index: u64) -> Answer {
        let exchanged = self.exchange(index, &mut || {}).await;
        self.judge(exchanged)
    }

    /// Sends request `index` and stamps the arrival of its answer's last
    /// byte; a whole front answer's end-to-end check is left to
    /// [`judge`](Self::judge). `sent` runs once a front request is written,
    /// before its answer is waited on (see
    /// [`FrontClient::post_json_then`]): a closed loop checks its last
    /// answer there (`dispatch.rs`).
    pub async fn exchange(&self, index: u64, sent: &mut (dyn FnMut() + Send)) -> Exchanged {
        Exchanged(match &self.endpoint {
            Endpoint::Front(client) => match &self.streams {
                Some(streams) => {
                    Held::Judged(super::stream::stream_request(index, self.timeout, client, streams).await)
                }
                None => front_exchange(index, self, client, sent).await,
            },
            Endpoint::Direct(client) => Held::Judged(direct_request(index, self, client.as_ref()).await),
        })
    }

    /// Checks and classifies an exchanged answer.
    pub fn judge(&self, exchanged: Exchanged) -> Answer {
        match exchanged.0 {
            Held::Judged(answer) => answer,
            Held::Front { number, call, resp } => judge_front(self, number, &call, resp),
        }
    }
}

/// An answer as it arrived, its check not yet made ([`Target::judge`]).
pub struct Exchanged(Held);

impl Exchanged {
    /// The bytes of body it holds until it is judged.
    pub fn held_bytes(&self) -> usize {
        match &self.0 {
            Held::Judged(_) => 0,
            Held::Front { resp, .. } => resp.body.len(),
        }
    }
}

enum Held {
    /// A failure, a stream or a direct call: checked as it was read.
    Judged(Answer),
    /// A front answer read whole: call `number`'s.
    Front { number: u64, call: CallRequest, resp: super::front::FrontAnswer },
}

async fn direct_request(index: u64, target: &Target, client: &dyn Outbound) -> Answer {
    let request_id = index.to_string();
    let req = FetchRequest {
        body: payload::upload_body(&request_id, target.request_bytes as usize),
        request_id,
        items: target.items,
        shape: target.shape,
    };
    let answer = tokio::time::timeout(target.timeout, client.fetch(req.clone())).await;
    // The client hands back a decoded response: its last byte has arrived.
    let done = Instant::now();
    let (outcome, reason) = match answer {
        Err(_) => (Outcome::Timeout, Some(no_answer_within(target.timeout))),
        Ok(Ok(resp)) if (target.checks.direct)(&req, &resp) => (Outcome::Ok, None),
        Ok(Ok(_)) => (Outcome::BadResponse, Some(FAILED_CHECK.to_owned())),
        Ok(Err(e)) => {
            let outcome = match e {
                CallError::BadResponse { .. } => Outcome::BadResponse,
                CallError::Connect { .. } => Outcome::Connect,
                CallError::Timeout { .. } => Outcome::Timeout,
                CallError::Status { .. } => Outcome::DownstreamStatus,
            };
            (outcome, Some(e.to_string()))
        }
    };
    Answer { done, outcome, downstream_us: None, kernel_stamped: false, reason, stream: None }
}

/// Whether `body` is the JSON array of `fanout` answers call `n` must get:
/// compared as messages, not as text (field order and number spelling may
/// differ from the data's).
fn custom_answer_ok(loaded: &contract::Loaded, n: u64, fanout: u32, body: &[u8]) -> bool {
    let Ok(answers) = serde_json::from_slice::<Vec<&serde_json::value::RawValue>>(body) else { return false };
    let expected = loaded.answers.get(n);
    answers.len() == fanout as usize
        && answers.iter().all(|a| {
            contract::from_json(loaded.contract.output(), a.get().as_bytes())
                .is_ok_and(|m| contract::canonical(&m) == *expected)
        })
}

async fn front_exchange(index: u64, target: &Target, client: &FrontClient, sent: &mut (dyn FnMut() + Send)) -> Held {
    // The built-in call's id stays the plain index: its messages carry it,
    // and their sizes must not change with the segment.
    let number = if target.custom.is_some() { target.call_number(index) } else { index };
    let call = CallRequest {
        request_id: number.to_string(),
        items: target.items,
        shape: target.shape,
        request_bytes: target.request_bytes,
    };
    // Pieces pushed, not formatted: `format!` cost about 1,500 instructions
    // a request here (callgrind, bench/README.md).
    let mut body = String::with_capacity(80);
    for piece in [r#"{"requestId":""#, &call.request_id, "\""] {
        body.push_str(piece);
    }
    if target.custom.is_none() {
        body.push_str(r#","items":"#);
        body.push_str(&call.items.to_string());
    }
    if !call.shape.is_order() {
        for piece in [r#","shape":""#, call.shape.as_str(), "\""] {
            body.push_str(piece);
        }
    }
    if call.request_bytes > 0 {
        body.push_str(r#","requestBytes":"#);
        body.push_str(&call.request_bytes.to_string());
    }
    body.push('}');
    let answer = tokio::time::timeout(target.timeout, client.post_json_then(body, sent)).await;
    // A whole answer says when its last byte arrived; a failure is stamped now.
    match answer {
        Err(_) => Held::Judged(Answer::clocked(Outcome::Timeout, no_answer_within(target.timeout))),
        Ok(Err(e)) => Held::Judged(Answer::clocked(classify(&e), e.to_string())),
        Ok(Ok(resp)) => Held::Front { number, call, resp },
    }
}

fn judge_front(target: &Target, number: u64, call: &CallRequest, resp: super::front::FrontAnswer) -> Answer {
    let (done, kernel_stamped) = (resp.arrived, resp.kernel_stamped);
    let downstream_us = resp.server_timing.as_ref().and_then(|v| v.to_str().ok()).and_then(parse_server_timing_us);
    let (outcome, reason) = if resp.status != hyper::StatusCode::OK {
        (Outcome::Status(resp.status.as_u16()), Some(error_body_reason(&resp.body)))
    } else if match &target.custom {
        Some(loaded) => custom_answer_ok(loaded, number, target.fanout, &resp.body),
        None => (target.checks.front)(call, target.fanout, &resp.body),
    } {
        (Outcome::Ok, None)
    } else {
        (Outcome::BadResponse, Some(FAILED_CHECK.to_owned()))
    };
    Answer { done, outcome, downstream_us, kernel_stamped, reason, stream: None }
}

/// The reason of an answer that failed the end-to-end check.
const FAILED_CHECK: &str = "the answer failed the end-to-end check of its records";

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
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Answers every request on one connection with `body` at once.
    async fn canned_server(body: &'static str) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = tcp.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                );
                let _ = tcp.write_all(head.as_bytes()).await;
                let _ = tcp.write_all(body.as_bytes()).await;
            }
        });
        format!("http://{addr}/v1/call")
    }

    #[tokio::test]
    async fn done_is_stamped_at_the_last_byte_before_the_answer_is_checked() {
        let url = canned_server(r#"{"requestId":"0","records":[]}"#).await;
        let mut target = Target::front(url, 0, 1, Duration::from_secs(10), 0).unwrap();
        // A check that takes 300 ms: it must not count in the latency.
        target.checks.front = |_, _, _| {
            std::thread::sleep(Duration::from_millis(300));
            true
        };
        let sent = Instant::now();
        let answer = target.send(0).await;
        let checked = Instant::now();
        assert_eq!(answer.outcome, Outcome::Ok);
        assert!(checked - sent >= Duration::from_millis(300));
        assert!(
            answer.done - sent < Duration::from_millis(300),
            "the answer's time includes the check: {:?}",
            answer.done - sent
        );
        // A failed check is a bad response, stamped the same way, and says so.
        target.checks.front = |_, _, _| false;
        let answer = target.send(1).await;
        assert_eq!(answer.outcome, Outcome::BadResponse);
        assert_eq!(answer.reason.as_deref(), Some(FAILED_CHECK));
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error_naming_its_cause() {
        // A port just freed: nothing listens there.
        let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let target = Target::front(format!("http://{addr}/v1/call"), 1, 1, Duration::from_secs(5), 0).unwrap();
        let answer = target.send(0).await;
        assert_eq!(answer.outcome, Outcome::Connect);
        assert!(answer.reason.as_deref().unwrap().contains("refused"), "{:?}", answer.reason);
    }

    /// A REST downstream that answers every request with `body`.
    async fn canned_downstream(body: String) -> String {
        let body: &'static str = Box::leak(body.into_boxed_str());
        let url = canned_server(body).await;
        url.trim_end_matches("/v1/call").to_owned()
    }

    #[tokio::test]
    async fn a_corrupted_downstream_answer_is_caught_end_to_end_through_a_real_caller() {
        // The caller only checks an answer's id and record count, as a real
        // caller does; records of the right shape but the wrong content must
        // still be a bad response in the harness's figures.
        let asked = FetchRequest { request_id: "0".into(), items: 2, body: Vec::new(), ..FetchRequest::default() };
        let other = FetchRequest { request_id: "not-0".into(), ..asked.clone() };
        for (records, expected) in
            [(payload::generate(&asked), Outcome::Ok), (payload::generate(&other), Outcome::BadResponse)]
        {
            let body =
                serde_json::to_string(&FetchResponse { request_id: "0".into(), records, points: vec![] }).unwrap();
            let downstream = canned_downstream(body).await;
            let config = caller::Config {
                transport: caller::Transport::Rest,
                downstream_rest: Some(downstream),
                ..caller::Config::default()
            };
            let c = caller::start(config, tokio_util::sync::CancellationToken::new()).await.unwrap();
            let target =
                Target::front(format!("http://{}/v1/call", c.front_addr), 2, 1, Duration::from_secs(10), 0).unwrap();
            assert_eq!(target.send(0).await.outcome, expected);
            c.stop().await;
        }
    }

    #[test]
    fn server_timing_is_parsed_in_microseconds() {
        assert_eq!(parse_server_timing_us("downstream;dur=501.234"), Some(501_234));
        assert_eq!(parse_server_timing_us("db;dur=1, downstream;desc=\"x\";dur=2.5"), Some(2_500));
        assert_eq!(parse_server_timing_us("cache;dur=3"), None);
        assert_eq!(parse_server_timing_us("downstream"), None);
    }
}
