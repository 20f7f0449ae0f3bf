//! The rows every report shows: each metric's label, unit, which direction is
//! better, and how it is read from a round. A table, not code: renderers
//! iterate it, nothing else decides what a row is.

use crate::result::{Resources, RoundResult, RunResult, TierName};

/// Which direction of a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
    /// Informational (e.g. a count or a setting).
    Neither,
}

/// One row of a report table.
#[derive(Clone, Copy)]
pub struct Metric {
    pub label: &'static str,
    pub better: Better,
    pub decimals: usize,
    pub get: fn(&RoundResult) -> Option<f64>,
    /// A row about an optional tier (the proxy): shown only where some run has it.
    pub optional: bool,
}

impl Metric {
    /// Whether a table over `runs` shows this row.
    pub fn shown_for<'a>(&self, mut runs: impl Iterator<Item = &'a RunResult>) -> bool {
        !self.optional || runs.any(|run| run.rounds.iter().any(|r| (self.get)(r).is_some()))
    }
}

impl std::fmt::Debug for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label)
    }
}

macro_rules! row {
    ($label:expr, $better:ident, $dec:expr, |$r:ident| $body:expr) => {
        Metric {
            label: $label,
            better: Better::$better,
            decimals: $dec,
            get: |$r: &RoundResult| $body,
            optional: false,
        }
    };
    (optional $label:expr, $better:ident, $dec:expr, |$r:ident| $body:expr) => {
        Metric { label: $label, better: Better::$better, decimals: $dec, get: |$r: &RoundResult| $body, optional: true }
    };
}

fn res(r: &RoundResult, tier: TierName) -> Option<&Resources> {
    r.resources.get(&tier)
}

/// The rows of a run table, in the order reviewers read them: memory first
/// (the published tables' first rows), then latency, throughput, errors, CPU,
/// bytes.
pub fn metrics() -> &'static [Metric] {
    METRICS
}

static METRICS: &[Metric] = &[
    row!("caller memory mean (MiB)", Lower, 1, |r| res(r, TierName::Caller)?.rss_mib_mean),
    row!("caller memory peak (MiB)", Lower, 1, |r| res(r, TierName::Caller)?.rss_mib_peak),
    row!("downstream memory mean (MiB)", Lower, 1, |r| res(r, TierName::Downstream)?.rss_mib_mean),
    row!("downstream memory peak (MiB)", Lower, 1, |r| res(r, TierName::Downstream)?.rss_mib_peak),
    row!("latency min (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.min_ms)),
    row!("latency mean (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.mean_ms)),
    row!("latency p50 (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.p50_ms)),
    row!("latency p90 (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.p90_ms)),
    row!("latency p95 (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.p95_ms)),
    row!("latency p99 (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.p99_ms)),
    row!("latency p99.9 (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.p999_ms)),
    row!("latency max (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.max_ms)),
    row!("service time p50 (ms)", Lower, 2, |r| r.latency.service.as_ref().map(|s| s.p50_ms)),
    row!("service time p99 (ms)", Lower, 2, |r| r.latency.service.as_ref().map(|s| s.p99_ms)),
    row!("downstream hop p50 (ms)", Lower, 2, |r| r.latency.downstream_hop.as_ref().map(|s| s.p50_ms)),
    row!("downstream hop p99 (ms)", Lower, 2, |r| r.latency.downstream_hop.as_ref().map(|s| s.p99_ms)),
    row!("caller overhead p50 (ms)", Lower, 3, |r| r.latency.caller_overhead.as_ref().map(|s| s.p50_ms)),
    row!("caller overhead p99 (ms)", Lower, 3, |r| r.latency.caller_overhead.as_ref().map(|s| s.p99_ms)),
    row!("throughput (ok/s)", Higher, 2, |r| Some(r.throughput.ok_per_second)),
    row!("target rate (req/s)", Neither, 2, |r| r.throughput.target_qps),
    row!("send rate (req/s)", Neither, 2, |r| Some(r.throughput.send_rate)),
    row!("achieved (% of target)", Higher, 2, |r| r.throughput.achieved_ratio.map(|a| a * 100.0)),
    row!("requests sent", Neither, 0, |r| Some(r.requests.sent as f64)),
    row!("errors (all classes)", Lower, 0, |r| Some(r.requests.error_total() as f64)),
    row!("dropped", Lower, 0, |r| Some(r.requests.errors.get("dropped").copied().unwrap_or(0) as f64)),
    row!("send lag p99 (ms)", Lower, 3, |r| r.latency.send_lag.as_ref().map(|s| s.p99_ms)),
    row!("caller CPU (s)", Lower, 2, |r| res(r, TierName::Caller)?.cpu_seconds),
    row!("caller CPU mean (% of a core)", Lower, 1, |r| res(r, TierName::Caller)?.cpu_percent_mean),
    row!("caller CPU peak (% of a core)", Lower, 1, |r| res(r, TierName::Caller)?.cpu_percent_peak),
    row!("caller CPU per request (µs)", Lower, 1, |r| res(r, TierName::Caller)?.cpu_us_per_request),
    row!("downstream CPU (s)", Lower, 2, |r| res(r, TierName::Downstream)?.cpu_seconds),
    row!("downstream CPU mean (% of a core)", Lower, 1, |r| res(r, TierName::Downstream)?.cpu_percent_mean),
    row!("downstream CPU peak (% of a core)", Lower, 1, |r| res(r, TierName::Downstream)?.cpu_percent_peak),
    row!("downstream CPU per request (µs)", Lower, 1, |r| res(r, TierName::Downstream)?.cpu_us_per_request),
    row!(optional "proxy memory mean (MiB)", Lower, 1, |r| res(r, TierName::Proxy)?.rss_mib_mean),
    row!(optional "proxy memory peak (MiB)", Lower, 1, |r| res(r, TierName::Proxy)?.rss_mib_peak),
    row!(optional "proxy CPU (s)", Lower, 2, |r| res(r, TierName::Proxy)?.cpu_seconds),
    row!(optional "proxy CPU mean (% of a core)", Lower, 1, |r| res(r, TierName::Proxy)?.cpu_percent_mean),
    row!(optional "proxy CPU per request (µs)", Lower, 1, |r| res(r, TierName::Proxy)?.cpu_us_per_request),
    row!("harness CPU (s)", Neither, 2, |r| res(r, TierName::Harness)?.cpu_seconds),
    row!("harness CPU peak (% of a core)", Neither, 1, |r| res(r, TierName::Harness)?.cpu_percent_peak),
    row!("harness memory mean (MiB)", Neither, 1, |r| res(r, TierName::Harness)?.rss_mib_mean),
    row!("harness memory peak (MiB)", Neither, 1, |r| res(r, TierName::Harness)?.rss_mib_peak),
    row!("internal hop wire bytes per request, caller → downstream", Lower, 0, |r| r
        .bytes
        .internal
        .request_wire_bytes_per_request),
    row!("internal hop wire bytes per request, downstream → caller", Lower, 0, |r| r
        .bytes
        .internal
        .response_wire_bytes_per_request),
    row!("internal hop message bytes per request, caller → downstream", Lower, 0, |r| r
        .bytes
        .internal
        .request_message_bytes_per_request),
    row!("internal hop message bytes per request, downstream → caller", Lower, 0, |r| r
        .bytes
        .internal
        .response_message_bytes_per_request),
    row!("internal hop connections opened", Neither, 0, |r| r.bytes.internal.connections_opened.map(|c| c as f64)),
    row!("internal hop connections open at end", Neither, 0, |r| r
        .bytes
        .internal
        .connections_open_at_end
        .map(|c| c as f64)),
    row!("front hop wire bytes per request, harness → caller", Neither, 0, |r| r
        .bytes
        .front
        .request_wire_bytes_per_request),
    row!("front hop wire bytes per request, caller → harness", Neither, 0, |r| r
        .bytes
        .front
        .response_wire_bytes_per_request),
    row!("front hop connections opened", Neither, 0, |r| r.bytes.front.connections_opened.map(|c| c as f64)),
];
