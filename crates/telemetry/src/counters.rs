//! Shared counters of one listener or one outbound client.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::{Deserialize, Serialize};

use crate::calls::{CallTally, SegmentTallies};
use crate::handshakes::{TlsSnapshot, TlsTally};
use crate::streams::{StreamSnapshot, StreamTally};

/// Counters of one endpoint: a listener (bytes in = read from peers) or an
/// outbound client (bytes in = read from the server it calls).
///
/// All fields are monotonic except `connections_open`, so a reader takes two
/// snapshots and subtracts.
#[derive(Debug)]
pub struct Counters {
    name: &'static str,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    message_bytes_in: AtomicU64,
    message_bytes_out: AtomicU64,
    connections: AtomicU64,
    connections_closed: AtomicU64,
    /// Requests whose head has arrived (counted as they start, where
    /// `outcomes` count them as they end).
    requests_started: AtomicU64,
    /// Requests counted by outcome (every label together).
    requests_ended: AtomicU64,
    /// The most requests started and not yet ended at once, since start.
    in_flight_peak: AtomicU64,
    /// Connections this end closed because they reached their age limit.
    connections_aged: AtomicU64,
    /// False for clients whose sockets we cannot wrap (reqwest): their wire
    /// bytes and open connections are reported as unknown, never as zero.
    sees_sockets: bool,
    outcomes: Vec<(&'static str, AtomicU64)>,
    /// What TLS handshakes negotiated, once the listener serves TLS.
    tls: OnceLock<TlsTally>,
    /// What streamed answers did, once the listener streams one.
    streams: OnceLock<StreamTally>,
    /// Calls and their message bytes by the load segment their id names.
    segments: SegmentTallies,
}

impl Counters {
    /// Counters named `name` that count requests by the given outcome labels.
    pub fn new(name: &'static str, outcomes: &[&'static str]) -> Self {
        Counters {
            name,
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            message_bytes_in: AtomicU64::new(0),
            message_bytes_out: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            connections_closed: AtomicU64::new(0),
            requests_started: AtomicU64::new(0),
            requests_ended: AtomicU64::new(0),
            in_flight_peak: AtomicU64::new(0),
            connections_aged: AtomicU64::new(0),
            sees_sockets: true,
            outcomes: outcomes.iter().map(|o| (*o, AtomicU64::new(0))).collect(),
            tls: OnceLock::new(),
            streams: OnceLock::new(),
            segments: SegmentTallies::default(),
        }
    }

    /// Counters for an endpoint that only learns when a connection opens, not
    /// its bytes or when it closes.
    pub fn connections_only(name: &'static str, outcomes: &[&'static str]) -> Self {
        Counters { sees_sockets: false, ..Self::new(name, outcomes) }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn add_bytes_in(&self, n: u64) {
        self.bytes_in.fetch_add(n, Relaxed);
    }

    pub fn add_bytes_out(&self, n: u64) {
        self.bytes_out.fetch_add(n, Relaxed);
    }

    /// Encoded message bytes (the body as the transport carried it, without
    /// HTTP or gRPC framing) of one request and its response.
    pub fn add_message_bytes(&self, request: u64, response: u64) {
        self.message_bytes_in.fetch_add(request, Relaxed);
        self.message_bytes_out.fetch_add(response, Relaxed);
    }

    /// Counts one call of load segment `segment` (the one its request id
    /// names) with its message bytes, beside [`Counters::add_message_bytes`]:
    /// a segment's calls are then counted whenever each ended.
    pub fn add_call(&self, segment: u64, request: u64, response: u64) {
        self.segments.add(segment, request, response);
    }

    pub fn connection_opened(&self) {
        self.connections.fetch_add(1, Relaxed);
    }

    pub fn connection_closed(&self) {
        self.connections_closed.fetch_add(1, Relaxed);
    }

    /// Counts one request whose head has arrived.
    pub fn request_started(&self) {
        let started = self.requests_started.fetch_add(1, Relaxed) + 1;
        let open = started.saturating_sub(self.requests_ended.load(Relaxed));
        self.in_flight_peak.fetch_max(open, Relaxed);
    }

    /// Counts one connection this end closed at its age limit.
    pub fn connection_aged(&self) {
        self.connections_aged.fetch_add(1, Relaxed);
    }

    /// Counts one request with outcome `label`. A label that was not declared
    /// counts as `other`, so a typo shows up in the stats instead of vanishing.
    pub fn record(&self, label: &str) {
        self.requests_ended.fetch_add(1, Relaxed);
        match self.outcomes.iter().find(|(l, _)| *l == label) {
            Some((_, c)) => c.fetch_add(1, Relaxed),
            None => self.outcomes.iter().find(|(l, _)| *l == "other").map_or(0, |(_, c)| c.fetch_add(1, Relaxed)),
        };
    }

    /// The TLS handshake tally of a listener that serves TLS (made on first use,
    /// so a plaintext listener reports no `tls` at all).
    pub fn tls(&self) -> &TlsTally {
        self.tls.get_or_init(TlsTally::default)
    }

    /// The tally of streamed answers (made on first use, so a listener that
    /// never streamed reports no `streams`).
    pub fn streams(&self) -> &StreamTally {
        self.streams.get_or_init(StreamTally::default)
    }

    pub fn snapshot(&self) -> CountersSnapshot {
        let connections = self.connections.load(Relaxed);
        let seen = |v: u64| self.sees_sockets.then_some(v);
        CountersSnapshot {
            bytes_in: seen(self.bytes_in.load(Relaxed)),
            bytes_out: seen(self.bytes_out.load(Relaxed)),
            message_bytes_in: self.message_bytes_in.load(Relaxed),
            message_bytes_out: self.message_bytes_out.load(Relaxed),
            connections,
            connections_open: seen(connections.saturating_sub(self.connections_closed.load(Relaxed))),
            requests_started: self.requests_started.load(Relaxed),
            in_flight_peak: self.in_flight_peak.load(Relaxed),
            connections_aged: self.connections_aged.load(Relaxed),
            requests: self.outcomes.iter().map(|(l, c)| ((*l).to_owned(), c.load(Relaxed))).collect(),
            tls: self.tls.get().map(TlsTally::snapshot),
            streams: self.streams.get().map(StreamTally::snapshot),
            segments: self.segments.snapshot(),
        }
    }
}

/// A point-in-time copy of [`Counters`], as served in `/stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountersSnapshot {
    /// Wire bytes read from the socket(s); `None` where the sockets are not ours to count.
    pub bytes_in: Option<u64>,
    /// Wire bytes written to the socket(s); `None` where the sockets are not ours to count.
    pub bytes_out: Option<u64>,
    /// Encoded request/response bodies read (server: requests; client: responses).
    pub message_bytes_in: u64,
    /// Encoded bodies written.
    pub message_bytes_out: u64,
    /// Connections accepted (listener) or opened (client) since start.
    pub connections: u64,
    /// Connections open now; `None` where closes are not seen.
    pub connections_open: Option<u64>,
    /// Requests by outcome, counted as they end.
    pub requests: BTreeMap<String, u64>,
    /// Requests counted as their head arrived (a listener only). Bytes that
    /// flow towards the server arrive while a request starts, so per-request
    /// figures in that direction divide by this, not by the requests ended.
    #[serde(default)]
    pub requests_started: u64,
    /// The most requests in flight at once since the process started (a
    /// high-water mark: not a difference between two reads).
    #[serde(default)]
    pub in_flight_peak: u64,
    /// Connections this end closed at their age limit (`--grpc-max-connection-age`).
    #[serde(default)]
    pub connections_aged: u64,
    /// TLS handshakes on a listener that serves TLS; absent on plaintext ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSnapshot>,
    /// Streamed answers (`bench.v1.Items`); absent where none was streamed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<StreamSnapshot>,
    /// Calls and their message bytes by the load segment their id names,
    /// since start (never a difference: a segment's own calls are read from
    /// a read after they all ended); absent where no call named one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub segments: BTreeMap<u64, CallTally>,
}

impl CountersSnapshot {
    /// Total requests counted, whatever the outcome.
    pub fn requests_total(&self) -> u64 {
        self.requests.values().sum()
    }

    /// `self - earlier` for every monotonic field; `connections_open` is kept
    /// as read at `self`.
    pub fn since(&self, earlier: &CountersSnapshot) -> CountersSnapshot {
        CountersSnapshot {
            bytes_in: delta(self.bytes_in, earlier.bytes_in),
            bytes_out: delta(self.bytes_out, earlier.bytes_out),
            message_bytes_in: self.message_bytes_in.saturating_sub(earlier.message_bytes_in),
            message_bytes_out: self.message_bytes_out.saturating_sub(earlier.message_bytes_out),
            connections: self.connections.saturating_sub(earlier.connections),
            connections_open: self.connections_open,
            requests_started: self.requests_started.saturating_sub(earlier.requests_started),
            in_flight_peak: self.in_flight_peak,
            connections_aged: self.connections_aged.saturating_sub(earlier.connections_aged),
            requests: self
                .requests
                .iter()
                .map(|(k, v)| (k.clone(), v.saturating_sub(earlier.requests.get(k).copied().unwrap_or(0))))
                .collect(),
            tls: match (&self.tls, &earlier.tls) {
                (Some(now), Some(then)) => Some(now.since(then)),
                (Some(now), None) => Some(now.clone()),
                (None, _) => None,
            },
            streams: match (&self.streams, &earlier.streams) {
                (Some(now), Some(then)) => Some(now.since(then)),
                (now, _) => now.clone(),
            },
            segments: self.segments.clone(),
        }
    }
}

impl std::ops::Add for &CountersSnapshot {
    type Output = CountersSnapshot;

    /// Two endpoints' counters as one (the replicas of a tier): every count
    /// summed, a figure unknown in either unknown in the sum, the high-water
    /// marks summed (an upper bound on the sum's own).
    fn add(self, other: &CountersSnapshot) -> CountersSnapshot {
        let both = |a: Option<u64>, b: Option<u64>| Some(a? + b?);
        let mut requests = self.requests.clone();
        for (k, v) in &other.requests {
            *requests.entry(k.clone()).or_default() += v;
        }
        CountersSnapshot {
            bytes_in: both(self.bytes_in, other.bytes_in),
            bytes_out: both(self.bytes_out, other.bytes_out),
            message_bytes_in: self.message_bytes_in + other.message_bytes_in,
            message_bytes_out: self.message_bytes_out + other.message_bytes_out,
            connections: self.connections + other.connections,
            connections_open: both(self.connections_open, other.connections_open),
            requests,
            requests_started: self.requests_started + other.requests_started,
            in_flight_peak: self.in_flight_peak + other.in_flight_peak,
            connections_aged: self.connections_aged + other.connections_aged,
            tls: match (&self.tls, &other.tls) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.clone().or_else(|| b.clone()),
            },
            streams: match (&self.streams, &other.streams) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.clone().or_else(|| b.clone()),
            },
            segments: crate::calls::summed(&self.segments, &other.segments),
        }
    }
}

fn delta(now: Option<u64>, earlier: Option<u64>) -> Option<u64> {
    Some(now?.saturating_sub(earlier?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_differences() {
        let c = Counters::new("rest", &["ok", "bad_request", "other"]);
        let before = c.snapshot();
        c.add_bytes_in(10);
        c.add_bytes_out(20);
        c.add_message_bytes(3, 4);
        c.connection_opened();
        c.connection_opened();
        c.connection_closed();
        c.record("ok");
        c.record("ok");
        c.record("nonsense");
        let after = c.snapshot();
        assert_eq!(after.connections_open, Some(1));
        let d = after.since(&before);
        assert_eq!((d.bytes_in, d.bytes_out, d.message_bytes_in, d.message_bytes_out), (Some(10), Some(20), 3, 4));
        assert_eq!(d.connections, 2);
        assert_eq!(d.requests["ok"], 2);
        assert_eq!(d.requests["other"], 1);
        assert_eq!(d.requests_total(), 3);
        // Two replicas' counters add up; a figure one cannot see stays unknown.
        let sum = &d + &d;
        assert_eq!((sum.bytes_in, sum.connections, sum.requests["ok"], sum.message_bytes_out), (Some(20), 4, 4, 8));
        let blind = &d + &Counters::connections_only("rest", &["ok"]).snapshot();
        assert_eq!((blind.bytes_in, blind.connections), (None, 2));
    }

    #[test]
    fn the_in_flight_peak_is_the_most_requests_open_at_once() {
        let c = Counters::new("grpc", &["ok", "other"]);
        for _ in 0..3 {
            c.request_started();
        }
        c.record("ok");
        c.record("ok");
        c.request_started();
        c.record("ok");
        assert_eq!(c.snapshot().in_flight_peak, 3);
        for _ in 0..4 {
            c.request_started();
        }
        assert_eq!(c.snapshot().in_flight_peak, 5);
    }

    #[test]
    fn unseen_sockets_are_unknown_not_zero() {
        let c = Counters::connections_only("rest", &["ok"]);
        c.connection_opened();
        let s = c.snapshot();
        assert_eq!((s.bytes_in, s.bytes_out, s.connections_open), (None, None, None));
        assert_eq!(s.connections, 1);
        assert_eq!(s.since(&CountersSnapshot::default()).bytes_in, None);
    }
}
