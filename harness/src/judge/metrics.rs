//! The rows every report shows: each metric's label, unit, which direction is
//! better, and how it is read from a round. A table, not code: renderers
//! iterate it, nothing else decides what a row is.

use crate::result::{Resources, RoundResult, RunResult, StreamRound, TierName};

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
    /// The short name gates use (`p99`, `cpu_us_per_request.caller`).
    pub key: &'static str,
    pub label: &'static str,
    pub better: Better,
    pub decimals: usize,
    pub get: fn(&RoundResult) -> Option<f64>,
    /// A row about an optional tier (the proxy): shown only where some run has it.
    pub optional: bool,
}

impl Metric {
    /// For a row about one process's memory, the tier (`caller` of
    /// `rss_mib_mean.caller`): its rounds are independent samples only when
    /// each ran on a process of its own.
    pub fn process_tier(&self) -> Option<&'static str> {
        self.key.strip_prefix("rss_")?.split_once('.').map(|(_, tier)| tier)
    }

    /// True for rows that count things (errors, connections, streams cut):
    /// compared as counts, never as a percentage of a base that may be
    /// near zero (1 against 53 errors is 52 more, not +5200%).
    pub fn is_count(&self) -> bool {
        COUNT_KEYS.contains(&self.key)
    }

    /// True for latency rows, whose unit is milliseconds.
    pub fn is_latency(&self) -> bool {
        self.label.ends_with("(ms)")
    }

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
    ($key:expr, $label:expr, $better:ident, $dec:expr, |$r:ident| $body:expr) => {
        Metric {
            key: $key,
            label: $label,
            better: Better::$better,
            decimals: $dec,
            get: |$r: &RoundResult| $body,
            optional: false,
        }
    };
    (optional $key:expr, $label:expr, $better:ident, $dec:expr, |$r:ident| $body:expr) => {
        Metric { optional: true, ..row!($key, $label, $better, $dec, |$r| $body) }
    };
}

/// The row of replica `$i`'s share of the calls, shown where a run has it.
macro_rules! share {
    ($i:literal) => {
        row!(optional concat!("replica_share.", $i), concat!("downstream#", $i, " share of calls (%)"), Neither, 1, |r| r
            .replicas
            .as_ref()?
            .each
            .get($i)?
            .share
            .map(|s| s * 100.0))
    };
}

fn stream(r: &RoundResult) -> Option<&StreamRound> {
    r.stream.as_ref()
}

fn res(r: &RoundResult, tier: TierName) -> Option<&Resources> {
    r.resources.get(&tier)
}

/// The rows that count things per round (see [`Metric::is_count`]).
const COUNT_KEYS: &[&str] = &[
    "requests_sent",
    "errors",
    "dropped",
    "replica_shed",
    "streams_cut",
    "buffered_items_max",
    "internal.connections_opened",
    "internal.connections_open_at_end",
    "front.connections_opened",
];

/// The row with gate key `key`.
pub fn by_key(key: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.key == key)
}

/// The rows of a run table, in the order reviewers read them: memory first
/// (the published tables' first rows), then latency, throughput, errors, CPU,
/// bytes.
pub fn metrics() -> &'static [Metric] {
    METRICS
}

static METRICS: &[Metric] = &[
    row!("rss_mib_mean.caller", "caller memory mean (MiB)", Lower, 1, |r| res(r, TierName::Caller)?.rss_mib_mean),
    row!("rss_mib_peak.caller", "caller memory peak (MiB)", Lower, 1, |r| res(r, TierName::Caller)?.rss_mib_peak),
    row!("rss_mib_mean.downstream", "downstream memory mean (MiB)", Lower, 1, |r| res(r, TierName::Downstream)?
        .rss_mib_mean),
    row!("rss_mib_peak.downstream", "downstream memory peak (MiB)", Lower, 1, |r| res(r, TierName::Downstream)?
        .rss_mib_peak),
    row!("min", "latency min (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.min_ms)),
    row!("mean", "latency mean (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.mean_ms)),
    row!("p50", "latency p50 (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.p50_ms)),
    row!("p90", "latency p90 (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.p90_ms)),
    row!("p95", "latency p95 (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.p95_ms)),
    row!("p99", "latency p99 (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.p99_ms)),
    row!("p999", "latency p99.9 (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.p999_ms)),
    row!("max", "latency max (ms)", Lower, 2, |r| r.latency.corrected.as_ref().map(|s| s.max_ms)),
    row!("service_p50", "service time p50 (ms)", Lower, 2, |r| r.latency.service.as_ref().map(|s| s.p50_ms)),
    row!("service_p99", "service time p99 (ms)", Lower, 2, |r| r.latency.service.as_ref().map(|s| s.p99_ms)),
    row!("hop_p50", "downstream hop p50 (ms)", Lower, 2, |r| r.latency.downstream_hop.as_ref().map(|s| s.p50_ms)),
    row!("hop_p99", "downstream hop p99 (ms)", Lower, 2, |r| r.latency.downstream_hop.as_ref().map(|s| s.p99_ms)),
    row!("overhead_p50", "caller overhead p50 (ms)", Lower, 3, |r| r
        .latency
        .caller_overhead
        .as_ref()
        .map(|s| s.p50_ms)),
    row!("overhead_p99", "caller overhead p99 (ms)", Lower, 3, |r| r
        .latency
        .caller_overhead
        .as_ref()
        .map(|s| s.p99_ms)),
    row!("throughput", "throughput (ok/s)", Higher, 2, |r| Some(r.throughput.ok_per_second)),
    row!("target_rate", "target rate (req/s)", Neither, 2, |r| r.throughput.target_qps),
    row!("send_rate", "send rate (req/s)", Neither, 2, |r| Some(r.throughput.send_rate)),
    row!("achieved_percent", "achieved (% of target)", Higher, 2, |r| r.throughput.achieved_ratio.map(|a| a * 100.0)),
    row!("requests_sent", "requests sent", Neither, 0, |r| Some(r.requests.sent as f64)),
    row!("errors", "errors (all classes)", Lower, 0, |r| Some(r.requests.error_total() as f64)),
    row!("dropped", "dropped", Lower, 0, |r| Some(r.requests.errors.get("dropped").copied().unwrap_or(0) as f64)),
    row!("send_lag_p99", "send lag p99 (ms)", Lower, 3, |r| r.latency.send_lag.as_ref().map(|s| s.p99_ms)),
    row!("cpu_seconds.caller", "caller CPU (s)", Lower, 2, |r| res(r, TierName::Caller)?.cpu_seconds),
    row!("cpu_percent_mean.caller", "caller CPU mean (% of a core)", Lower, 1, |r| res(r, TierName::Caller)?
        .cpu_percent_mean),
    row!("cpu_percent_peak.caller", "caller CPU peak (% of a core)", Lower, 1, |r| res(r, TierName::Caller)?
        .cpu_percent_peak),
    row!("cpu_us_per_request.caller", "caller CPU per request (µs)", Lower, 1, |r| res(r, TierName::Caller)?
        .cpu_us_per_request),
    row!("cpu_seconds.downstream", "downstream CPU (s)", Lower, 2, |r| res(r, TierName::Downstream)?.cpu_seconds),
    row!("cpu_percent_mean.downstream", "downstream CPU mean (% of a core)", Lower, 1, |r| res(
        r,
        TierName::Downstream
    )?
    .cpu_percent_mean),
    row!("cpu_percent_peak.downstream", "downstream CPU peak (% of a core)", Lower, 1, |r| res(
        r,
        TierName::Downstream
    )?
    .cpu_percent_peak),
    row!("cpu_us_per_request.downstream", "downstream CPU per request (µs)", Lower, 1, |r| res(
        r,
        TierName::Downstream
    )?
    .cpu_us_per_request),
    row!(optional "rss_mib_mean.proxy", "proxy memory mean (MiB)", Lower, 1, |r| res(r, TierName::Proxy)?.rss_mib_mean),
    row!(optional "rss_mib_peak.proxy", "proxy memory peak (MiB)", Lower, 1, |r| res(r, TierName::Proxy)?.rss_mib_peak),
    row!(optional "cpu_seconds.proxy", "proxy CPU (s)", Lower, 2, |r| res(r, TierName::Proxy)?.cpu_seconds),
    row!(optional "cpu_percent_mean.proxy", "proxy CPU mean (% of a core)", Lower, 1, |r| res(r, TierName::Proxy)?.cpu_percent_mean),
    row!(optional "cpu_us_per_request.proxy", "proxy CPU per request (µs)", Lower, 1, |r| res(r, TierName::Proxy)?.cpu_us_per_request),
    row!(optional "rss_mib_mean.balancer", "balancer memory mean (MiB)", Lower, 1, |r| res(r, TierName::Balancer)?.rss_mib_mean),
    row!(optional "rss_mib_peak.balancer", "balancer memory peak (MiB)", Lower, 1, |r| res(r, TierName::Balancer)?.rss_mib_peak),
    row!(optional "cpu_seconds.balancer", "balancer CPU (s)", Lower, 2, |r| res(r, TierName::Balancer)?.cpu_seconds),
    row!(optional "cpu_percent_mean.balancer", "balancer CPU mean (% of a core)", Lower, 1, |r| res(r, TierName::Balancer)?.cpu_percent_mean),
    row!(optional "cpu_us_per_request.balancer", "balancer CPU per request (µs)", Lower, 1, |r| res(r, TierName::Balancer)?.cpu_us_per_request),
    row!(optional "imbalance", "replica imbalance (× fair share)", Lower, 2, |r| r.replicas.as_ref()?.imbalance),
    row!(optional "replica_shed", "calls shed by the replicas", Lower, 0, |r| Some(
        r.replicas.as_ref()?.each.iter().map(|e| e.share.map(|_| e.requests.get("shed").copied().unwrap_or(0))).sum::<Option<u64>>()? as f64
    )),
    share!(0),
    share!(1),
    share!(2),
    share!(3),
    share!(4),
    share!(5),
    share!(6),
    share!(7),
    share!(8),
    share!(9),
    share!(10),
    share!(11),
    share!(12),
    share!(13),
    share!(14),
    share!(15),
    row!(optional "first_item_p50", "time to first item p50 (ms)", Lower, 2, |r| stream(r)?.first_item.as_ref().map(|s| s.p50_ms)),
    row!(optional "first_item_p99", "time to first item p99 (ms)", Lower, 2, |r| stream(r)?.first_item.as_ref().map(|s| s.p99_ms)),
    row!(optional "last_item_p50", "time to last item p50 (ms)", Lower, 2, |r| stream(r)?.last_item.as_ref().map(|s| s.p50_ms)),
    row!(optional "last_item_p99", "time to last item p99 (ms)", Lower, 2, |r| stream(r)?.last_item.as_ref().map(|s| s.p99_ms)),
    row!(optional "item_delay_p50", "per-item delay p50 (ms)", Lower, 3, |r| stream(r)?.item_delay.as_ref().map(|s| s.p50_ms)),
    row!(optional "item_delay_p99", "per-item delay p99 (ms)", Lower, 3, |r| stream(r)?.item_delay.as_ref().map(|s| s.p99_ms)),
    row!(optional "item_lateness_p50", "per-item production lateness p50 (ms)", Lower, 3, |r| stream(r)?.item_lateness.as_ref().map(|s| s.p50_ms)),
    row!(optional "item_lateness_p99", "per-item production lateness p99 (ms)", Lower, 3, |r| stream(r)?.item_lateness.as_ref().map(|s| s.p99_ms)),
    row!(optional "item_transit_p50", "per-item transit p50 (ms)", Lower, 3, |r| stream(r)?.item_transit.as_ref().map(|s| s.p50_ms)),
    row!(optional "item_transit_p99", "per-item transit p99 (ms)", Lower, 3, |r| stream(r)?.item_transit.as_ref().map(|s| s.p99_ms)),
    row!(optional "items_per_second", "items per second", Higher, 1, |r| Some(stream(r)?.items_per_second)),
    row!(optional "streams_cut", "streams cut", Lower, 0, |r| stream(r).map(|_| r.requests.errors.get("stream_cut").copied().unwrap_or(0) as f64)),
    row!(optional "cpu_us_per_item.caller", "caller CPU per item (µs)", Lower, 2, |r| stream(r)?.cpu_us_per_item.get(&TierName::Caller).copied()),
    row!(optional "cpu_us_per_item.downstream", "downstream CPU per item (µs)", Lower, 2, |r| stream(r)?.cpu_us_per_item.get(&TierName::Downstream).copied()),
    row!(optional "cpu_us_per_item.proxy", "proxy CPU per item (µs)", Lower, 2, |r| stream(r)?.cpu_us_per_item.get(&TierName::Proxy).copied()),
    row!(optional "internal.request_wire_bytes_per_item", "internal hop wire bytes per item, caller → downstream", Lower, 1, |r| stream(r)?.internal.request_wire_bytes_per_item),
    row!(optional "internal.response_wire_bytes_per_item", "internal hop wire bytes per item, downstream → caller", Lower, 1, |r| stream(r)?.internal.response_wire_bytes_per_item),
    row!(optional "internal.request_message_bytes_per_item", "internal hop message bytes per item, caller → downstream", Lower, 1, |r| stream(r)?.internal.request_message_bytes_per_item),
    row!(optional "internal.response_message_bytes_per_item", "internal hop message bytes per item, downstream → caller", Lower, 1, |r| stream(r)?.internal.response_message_bytes_per_item),
    row!(optional "front.response_wire_bytes_per_item", "front hop wire bytes per item, caller → harness", Neither, 1, |r| stream(r)?.front.response_wire_bytes_per_item),
    row!(optional "open_streams", "open streams, mean", Neither, 1, |r| stream(r)?.open_streams_mean),
    row!(optional "rss_mib_per_1000_streams.caller", "caller memory per 1,000 open streams (MiB)", Lower, 1, |r| stream(r)?.rss_mib_per_1000_open_streams.get(&TierName::Caller).copied()),
    row!(optional "rss_mib_per_1000_streams.downstream", "downstream memory per 1,000 open streams (MiB)", Lower, 1, |r| stream(r)?.rss_mib_per_1000_open_streams.get(&TierName::Downstream).copied()),
    row!(optional "buffered_items_max", "items in transit per stream, max", Neither, 0, |r| stream(r)?.buffered_items.as_ref().map(|b| b.max)),
    row!(optional "items_held_back_percent", "items the producer made late (% of items)", Neither, 1, |r| {
        let d = stream(r)?.downstream.as_ref()?;
        (d.items > 0).then(|| d.items_late as f64 * 100.0 / d.items as f64)
    }),
    row!("cpu_seconds.harness", "harness CPU (s)", Neither, 2, |r| res(r, TierName::Harness)?.cpu_seconds),
    row!("cpu_percent_peak.harness", "harness CPU peak (% of a core)", Neither, 1, |r| res(r, TierName::Harness)?
        .cpu_percent_peak),
    row!("rss_mib_mean.harness", "harness memory mean (MiB)", Neither, 1, |r| res(r, TierName::Harness)?.rss_mib_mean),
    row!("rss_mib_peak.harness", "harness memory peak (MiB)", Neither, 1, |r| res(r, TierName::Harness)?.rss_mib_peak),
    row!("internal.request_wire_bytes", "internal hop wire bytes per request, caller → downstream", Lower, 0, |r| r
        .bytes
        .internal
        .request_wire_bytes_per_request),
    row!("internal.response_wire_bytes", "internal hop wire bytes per request, downstream → caller", Lower, 0, |r| r
        .bytes
        .internal
        .response_wire_bytes_per_request),
    row!(
        "internal.request_message_bytes",
        "internal hop message bytes per request, caller → downstream",
        Lower,
        0,
        |r| r.bytes.internal.request_message_bytes_per_request
    ),
    row!(
        "internal.response_message_bytes",
        "internal hop message bytes per request, downstream → caller",
        Lower,
        0,
        |r| r.bytes.internal.response_message_bytes_per_request
    ),
    row!("internal.connections_opened", "internal hop connections opened", Neither, 0, |r| r
        .bytes
        .internal
        .connections_opened
        .map(|c| c as f64)),
    row!("internal.connections_open_at_end", "internal hop connections open at end", Neither, 0, |r| r
        .bytes
        .internal
        .connections_open_at_end
        .map(|c| c as f64)),
    row!("front.request_wire_bytes", "front hop wire bytes per request, harness → caller", Neither, 0, |r| r
        .bytes
        .front
        .request_wire_bytes_per_request),
    row!("front.response_wire_bytes", "front hop wire bytes per request, caller → harness", Neither, 0, |r| r
        .bytes
        .front
        .response_wire_bytes_per_request),
    row!("front.connections_opened", "front hop connections opened", Neither, 0, |r| r
        .bytes
        .front
        .connections_opened
        .map(|c| c as f64)),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique() {
        let mut keys: Vec<&str> = METRICS.iter().map(|m| m.key).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), METRICS.len());
        assert!(by_key("p99").unwrap().is_latency() && !by_key("throughput").unwrap().is_latency());
        // Every count key names a row, and a count row has no decimals.
        for key in COUNT_KEYS {
            let m = by_key(key).unwrap_or_else(|| panic!("{key} names no row"));
            assert!(m.is_count() && m.decimals == 0, "{key}");
        }
        assert!(!by_key("internal.request_wire_bytes").unwrap().is_count());
        // A share row for every replica a run may have.
        let last = format!("replica_share.{}", crate::config::MAX_REPLICAS - 1);
        assert!(by_key(&last).is_some() && by_key(&format!("replica_share.{}", crate::config::MAX_REPLICAS)).is_none());
    }
}
