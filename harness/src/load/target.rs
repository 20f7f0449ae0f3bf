//! Where requests go and how one is sent: the caller's JSON front door over
//! an HTTP/1.1 client with every fairness setting explicit, or the downstream
//! directly through the caller's own client for the transport (built by the
//! same factory the caller uses). Each answer is verified and classified.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use caller::outbound::{CallError, ClientSettings, Outbound};
use payload::{CallRequest, FetchResponse};

use super::Outcome;
use crate::config::{Config, TargetTier};

/// Where requests go.
#[derive(Clone)]
pub enum Endpoint {
    /// The caller's JSON front door, over HTTP/1.1.
    Front { client: reqwest::Client, url: String },
    /// The downstream itself, over the transport under test (the caller's own
    /// clients, so both paths use the same code).
    Direct(Arc<dyn Outbound>),
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

    /// An arm's load target: the caller's front door at `url`, or (with
    /// `--target downstream`) the downstream's listener at `url`.
    pub fn for_arm(config: &Config, url: &str) -> anyhow::Result<Target> {
        let c = config;
        if c.target == TargetTier::Caller {
            return Target::front(url.to_owned(), c.items, c.fanout, c.timeout, c.connections)
                .context("building the load client");
        }
        let settings = ClientSettings {
            transport: c.transport,
            target: url.to_owned(),
            grpc_connections: c.grpc_connections as usize,
            rest_http2: c.rest_http2,
        };
        // The harness's own client counters are not reported: the
        // downstream's listener counts the hop.
        let client = caller::outbound::build(&settings, Arc::new(c.transport.client_counters("harness")))?;
        Ok(Target::with(Endpoint::Direct(client), c.items, 1, c.timeout, if c.closed_loop { 0 } else { c.connections }))
    }

    pub fn with(endpoint: Endpoint, items: u32, fanout: u32, timeout: Duration, connections: usize) -> Self {
        let connections = (connections > 0).then(|| Arc::new(tokio::sync::Semaphore::new(connections)));
        Target { endpoint, items, fanout, timeout, connections }
    }
}

impl Target {
    /// Sends request `index` and classifies its answer; with the caller's
    /// `Server-Timing` downstream duration where it gave one.
    pub async fn send(&self, index: u64) -> (Outcome, Option<u64>) {
        match &self.endpoint {
            Endpoint::Front { client, url } => front_request(index, self, client, url).await,
            Endpoint::Direct(client) => (direct_request(index, self, client.as_ref()).await, None),
        }
    }
}

async fn direct_request(index: u64, target: &Target, client: &dyn Outbound) -> Outcome {
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
    fn server_timing_is_parsed_in_microseconds() {
        assert_eq!(parse_server_timing_us("downstream;dur=501.234"), Some(501_234));
        assert_eq!(parse_server_timing_us("db;dur=1, downstream;desc=\"x\";dur=2.5"), Some(2_500));
        assert_eq!(parse_server_timing_us("cache;dur=3"), None);
        assert_eq!(parse_server_timing_us("downstream"), None);
    }
}
