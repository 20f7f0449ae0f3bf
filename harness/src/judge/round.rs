//! The per-round arithmetic: what one measured round's records, samples and
//! counter differences amount to (rates, latency summaries, CPU per request,
//! bytes per request). Pure functions of their inputs, unit tested on
//! synthetic data; a figure whose inputs are missing stays `None`.

use std::collections::BTreeMap;

use telemetry::{CallTally, CountersSnapshot};

use super::input::{RoundInput, load_in_window, span};
use crate::config::Config;
use crate::judge::stats::{mean, mean_peak, summarize};
use crate::measure::histogram::encode_histogram;
use crate::measure::record::{RoundRecord, StreamRecord};
use crate::measure::tier_stats::{Deltas, ReplicaDelta};
use crate::result::{
    HopBytes, Hops, Latency, PerRequestBasis, ReplicaRound, ReplicaSet, Requests, ResourceSample, Resources,
    RoundResult, Throughput, TierName,
};

/// Whether a round of `config` can be bounded to its own calls ([`Deltas::own`]):
/// not a streaming arm (its figures are per item, over the window), and not
/// one of several generators (the others' calls cross the same tiers).
pub fn own_calls_apply(config: &Config) -> bool {
    config.streams.is_none() && config.generators.segment.is_none_or(|s| s.count == 1)
}

/// One round's result.
pub fn assemble(input: &RoundInput<'_>) -> RoundResult {
    let rec = input.record;
    let window = (input.to_seconds - input.from_seconds).max(1e-9);
    let in_window: Vec<&ResourceSample> =
        input.samples.iter().filter(|s| s.t_seconds >= input.from_seconds && s.t_seconds <= input.to_seconds).collect();
    let resources = all_resources(input.deltas, &in_window, window, rec, served(input));
    let own = input.deltas.own.as_deref();
    let listener = input.config.transport.listener();
    let calls = rec.ok * u64::from(input.config.work.fanout);
    let counted = |d: Option<&CountersSnapshot>| d.map(|d| with_calls(d, calls));
    RoundResult {
        stream: super::streams::stream_round(input, &resources),
        index: input.round + 1,
        complete: input.complete,
        started_seconds: input.from_seconds,
        window_seconds: window,
        requests: Requests { scheduled: input.scheduled, sent: rec.sent, ok: rec.ok, errors: rec.errors.clone() },
        // Streams a second signal cut were sent, but had no chance to end:
        // the rates are over the requests that could.
        throughput: throughput(
            input.config,
            rec.sent.saturating_sub(rec.cut_streams),
            rec.ok,
            input.scheduled.saturating_sub(rec.cut_streams),
            window,
        ),
        latency: latency(rec, input.config.deploy.target == crate::config::TargetTier::Caller),
        histograms: histograms(rec, input.config.streams.is_some()),
        resources,
        bytes: match own {
            Some(o) => relayed(
                hop_bytes("front", o.front.as_ref(), None),
                hop_bytes(listener, counted(o.internal.as_ref()).as_ref(), None),
                counted(o.relay.as_ref()),
            ),
            None => relayed(
                hop_bytes("front", input.deltas.front.as_ref(), input.deltas.front_calls.as_ref()),
                hop_bytes(
                    listener,
                    counted(input.deltas.internal.as_ref()).as_ref(),
                    input.deltas.internal_calls.as_ref(),
                ),
                counted(input.deltas.relay.as_ref()),
            ),
        },
        per_request_basis: Some(if own.is_some() { PerRequestBasis::OwnCalls } else { PerRequestBasis::Window }),
        other_cores: mean(load_in_window(input).filter_map(|s| s.other_cores)),
        steal_percent: input.deltas.steal_percent,
        // Which processes these were is known to the run, not to the figures.
        pids: BTreeMap::new(),
        // Over the span the replicas' rows cover, so the tier's periods are
        // their sum: the window's end read comes before the last calls end.
        cpu_throttling: own.map_or(&input.deltas.throttling, |o| &o.throttling).clone(),
        replicas: replica_set(own.map_or(&input.deltas.replicas, |o| &o.replicas)),
    }
}

/// The round's hops; between two foreign tiers the internal hop is the
/// relay's count.
fn relayed(front: HopBytes, internal: HopBytes, relay: Option<CountersSnapshot>) -> Hops {
    match relay {
        Some(r) => {
            Hops { front, internal: bytes_only(internal), relay: Some(bytes_only(hop_bytes("relay", Some(&r), None))) }
        }
        None => Hops { front, internal, relay: None },
    }
}

/// A hop counted by the pass-through relay: it forwards bytes and reads no
/// message, so the message figures were not measured (not zero).
fn bytes_only(h: HopBytes) -> HopBytes {
    HopBytes {
        request_message_bytes: None,
        response_message_bytes: None,
        request_message_bytes_per_request: None,
        response_message_bytes_per_request: None,
        ..h
    }
}

/// `d`, and where it counted no requests (the pass-through relay between
/// two foreign tiers sees bytes, not calls), the round's OK calls as its
/// divisor.
fn with_calls(d: &CountersSnapshot, calls: u64) -> CountersSnapshot {
    let mut d = d.clone();
    if d.requests_total() == 0 && d.bytes_in.is_some() {
        d.requests.insert("ok".into(), calls);
        d.requests_started = calls;
    }
    d
}

/// The replicas' round: each one's calls, share, CPU and memory, and the
/// imbalance. `None` for one replica reached directly.
pub fn replica_set(deltas: &[ReplicaDelta]) -> Option<ReplicaSet> {
    if deltas.is_empty() {
        return None;
    }
    let answered = |d: &ReplicaDelta| d.internal.as_ref().map(CountersSnapshot::requests_total);
    let total: Option<u64> = deltas.iter().map(answered).sum();
    let each: Vec<ReplicaRound> = deltas
        .iter()
        .map(|d| {
            let c = d.internal.as_ref();
            let ok = c.map(|c| c.requests.get("ok").copied().unwrap_or(0));
            ReplicaRound {
                index: d.index,
                pid: d.pid,
                requests: c
                    .map(|c| c.requests.iter().filter(|(_, n)| **n > 0).map(|(k, n)| (k.clone(), *n)).collect())
                    .unwrap_or_default(),
                share: answered(d).zip(total.filter(|t| *t > 0)).map(|(n, t)| n as f64 / t as f64),
                cpu_seconds: d.cpu_seconds,
                cpu_us_per_request: d.cpu_seconds.zip(ok.filter(|n| *n > 0)).map(|(s, n)| s * 1e6 / n as f64),
                rss_bytes: d.rss_bytes,
                connections: c.map(|c| c.connections),
                connections_open: c.and_then(|c| c.connections_open),
                connections_aged: c.map(|c| c.connections_aged),
                in_flight_peak: c.map(|c| c.in_flight_peak),
                throttling: d.throttling.clone(),
            }
        })
        .collect();
    let largest =
        each.iter().map(|r| r.share).collect::<Option<Vec<f64>>>().and_then(|s| s.into_iter().reduce(f64::max));
    Some(ReplicaSet { imbalance: largest.map(|l| imbalance(l, each.len())), each, scaling: Vec::new() })
}

/// The largest share ÷ the fair share of `replicas`.
pub fn imbalance(largest_share: f64, replicas: usize) -> f64 {
    largest_share * replicas as f64
}

/// Rates over the round. An open loop's round is its schedule: the
/// requests due in it (sent or dropped) at the target rate span
/// `scheduled / qps` seconds, and its rates are over that span, so that the
/// harness waking late to read the counters at the round's end (a loaded
/// machine) cannot show a round whose every request was answered as short of
/// its target. A closed loop has no schedule and no target: its rates are over
/// the window the counters were read across.
///
/// One of several generators (`--segment I/N`) targets its share, 1/N of
/// the rate.
pub fn throughput(config: &Config, sent: u64, ok: u64, scheduled: u64, window_seconds: f64) -> Throughput {
    let qps = config.generators.share_of(config.load.qps);
    let span = span(config, scheduled, window_seconds);
    Throughput {
        target_qps: (!config.load.closed_loop).then_some(qps),
        send_rate: sent as f64 / span,
        ok_per_second: ok as f64 / span,
        // Nothing due (a round cut before its first due time, or whose every
        // request the cut caught): no rate to reach, not 0% of one.
        achieved_ratio: (!config.load.closed_loop && scheduled > 0).then(|| ok as f64 / span / qps),
    }
}

fn latency(rec: &RoundRecord, front: bool) -> Latency {
    Latency {
        corrected: summarize(&rec.corrected),
        service: summarize(&rec.service),
        send_lag: summarize(&rec.send_lag),
        downstream_hop: summarize(&rec.downstream_hop),
        caller_overhead: summarize(&rec.caller_overhead),
        kernel_stamped: front.then_some(rec.kernel_stamped),
    }
}

/// The round's histograms by name; a streaming arm's also its first item,
/// item delay, lateness and transit, and items in transit.
fn histograms(rec: &RoundRecord, streaming: bool) -> BTreeMap<String, String> {
    let none = StreamRecord::default;
    let st = match &rec.stream {
        Some(st) => std::borrow::Cow::Borrowed(st),
        None if streaming => std::borrow::Cow::Owned(none()),
        None => return plain_histograms(rec),
    };
    let streams = [
        ("first_item", &st.first_item),
        ("item_delay", &st.item_delay),
        ("item_lateness", &st.item_lateness),
        ("item_transit", &st.item_transit),
        ("buffered_items", &st.buffered),
    ];
    let mut all = plain_histograms(rec);
    all.extend(streams.into_iter().map(|(k, h)| (k.to_owned(), encode_histogram(h))));
    all
}

/// Every arm's histograms by name.
fn plain_histograms(rec: &RoundRecord) -> BTreeMap<String, String> {
    [
        ("corrected", &rec.corrected),
        ("service", &rec.service),
        ("send_lag", &rec.send_lag),
        ("downstream_hop", &rec.downstream_hop),
        ("caller_overhead", &rec.caller_overhead),
    ]
    .into_iter()
    .map(|(k, h)| (k.to_owned(), encode_histogram(h)))
    .collect()
}

/// The OK answers the tiers' CPU is divided by: this generator's, unless it
/// is one of several (`--segment`), when the tiers served every generator's
/// requests and their own count of OK answers (the listener the load
/// reaches) is the divisor; `None` if that count was not read.
fn served(input: &RoundInput<'_>) -> Option<u64> {
    if input.config.generators.segment.is_none_or(|s| s.count == 1) {
        return Some(input.record.ok);
    }
    let listener = match input.config.deploy.target {
        crate::config::TargetTier::Caller => input.deltas.front.as_ref(),
        crate::config::TargetTier::Downstream => input.deltas.internal.as_ref(),
    };
    listener.map(|d| d.requests.get("ok").copied().unwrap_or(0))
}

/// Every tier's resources. The tiers' CPU per request is per OK answer they
/// served ([`served`]); the harness's per request it sent. The proxy has no `/stats` of its own: its CPU
/// time comes from the samples, and it appears only where it was sampled.
fn all_resources(
    deltas: &Deltas,
    in_window: &[&ResourceSample],
    window: f64,
    rec: &RoundRecord,
    served: Option<u64>,
) -> BTreeMap<TierName, Resources> {
    let mut all = BTreeMap::new();
    let served = served.unwrap_or(0);
    let own = deltas.own.as_deref();
    let tiers = [
        (TierName::Downstream, deltas.downstream_cpu_seconds, own.map(|o| o.downstream_cpu_seconds), served),
        (TierName::Caller, deltas.caller_cpu_seconds, own.map(|o| o.caller_cpu_seconds), served),
        (TierName::Harness, deltas.harness_cpu_seconds, own.map(|o| o.harness_cpu_seconds), rec.sent),
    ];
    for (tier, cpu, own_cpu, per) in tiers {
        let mut r = resources(tier, in_window, window, cpu, per);
        // The round's own calls' CPU, whenever each was spent, over those calls.
        if let Some(own_cpu) = own_cpu {
            r.cpu_us_per_request = own_cpu.filter(|_| per > 0).map(|c| c * 1e6 / per as f64);
        }
        all.insert(tier, r);
    }
    // The proxy, the balancer and the link emulators: sampled only, from /proc.
    for tier in [TierName::Proxy, TierName::Balancer, TierName::Link, TierName::LinkFront] {
        let cpu_seconds: Vec<f64> = in_window.iter().filter(|s| s.tier == tier).filter_map(|s| s.cpu_seconds).collect();
        if !cpu_seconds.is_empty() {
            let cpu = (cpu_seconds.len() > 1).then(|| cpu_seconds[cpu_seconds.len() - 1] - cpu_seconds[0]);
            all.insert(tier, resources(tier, in_window, window, cpu, served));
        }
    }
    all
}

/// The shortest window a CPU % peak is measured over. Shorter ones measure
/// the accounting, not the load: a CPU quota is spent in 100 ms periods (a
/// 250 ms window can hold three periods' worth of a 50% quota, 60%), and a
/// clock-tick reading moves in steps of 4 points a 250 ms window.
pub const CPU_PEAK_WINDOW_SECONDS: f64 = 1.0;

/// One tier's resources: CPU seconds from its counters, CPU per request over
/// `requests`, RSS mean and peak over its samples in the window. CPU % mean
/// is CPU seconds over the window's wall time (the mean of the samples where
/// the counters could not be read); the peak is the highest CPU % over any
/// [`CPU_PEAK_WINDOW_SECONDS`] of its samples' CPU clocks ([`cpu_peak`]).
pub fn resources(
    tier: TierName,
    in_window: &[&ResourceSample],
    window_seconds: f64,
    cpu_seconds: Option<f64>,
    requests: u64,
) -> Resources {
    let of_tier: Vec<&&ResourceSample> = in_window.iter().filter(|s| s.tier == tier).collect();
    let (sampled_mean, sample_peak) = mean_peak(of_tier.iter().filter_map(|s| s.cpu_percent));
    let cpu_peak = cpu_peak(&of_tier).or(sample_peak);
    let cpu_mean = match cpu_seconds {
        Some(c) if window_seconds > 0.0 => Some(c / window_seconds * 100.0),
        _ => sampled_mean,
    };
    let (rss_mean, rss_peak) =
        mean_peak(of_tier.iter().filter_map(|s| s.rss_bytes).map(|b| b as f64 / (1024.0 * 1024.0)));
    Resources {
        cpu_seconds,
        cpu_percent_mean: cpu_mean,
        cpu_percent_peak: cpu_peak,
        cpu_us_per_request: cpu_seconds.filter(|_| requests > 0).map(|c| c * 1e6 / requests as f64),
        rss_mib_mean: rss_mean,
        rss_mib_peak: rss_peak,
        samples: of_tier.len() as u32,
    }
}

/// The highest CPU % of one core over any window of at least
/// [`CPU_PEAK_WINDOW_SECONDS`] between two of `samples` (in time order), from
/// their cumulative CPU seconds; over the whole span when it is shorter.
/// `None` with fewer than two readings.
pub fn cpu_peak(samples: &[&&ResourceSample]) -> Option<f64> {
    let readings: Vec<(f64, f64)> = samples.iter().filter_map(|s| Some((s.t_seconds, s.cpu_seconds?))).collect();
    let (first, last) = (readings.first()?, readings.last()?);
    if last.0 - first.0 <= 0.0 {
        return None;
    }
    let rate = |(t0, c0): (f64, f64), (t1, c1): (f64, f64)| (c1 - c0).max(0.0) / (t1 - t0) * 100.0;
    if last.0 - first.0 < CPU_PEAK_WINDOW_SECONDS {
        return Some(rate(*first, *last));
    }
    let mut start = 0;
    let mut peak = f64::MIN;
    for (i, end) in readings.iter().enumerate() {
        // The latest reading at least a window before this one.
        while start + 1 < i && end.0 - readings[start + 1].0 >= CPU_PEAK_WINDOW_SECONDS {
            start += 1;
        }
        if end.0 - readings[start].0 >= CPU_PEAK_WINDOW_SECONDS {
            peak = peak.max(rate(readings[start], *end));
        }
    }
    Some(peak)
}

/// Byte and connection figures of one listener over a round, from its counter
/// difference; figures that could not be read stay `None`.
///
/// Each per-request figure divides by the requests its bytes belong to: wire
/// bytes towards the server arrive as requests start, so they divide by the
/// requests started in the window; bytes back divide by the requests that
/// ended in it. A tier that does not count starts (an older build) falls
/// back to the requests ended. Message bytes per request are the round's own
/// calls' (`own`: every call its segment sent, whenever it ended), so
/// messages of different sizes give the round's own mean; without them
/// (the built-in call), the window's, over the requests that ended in it.
pub fn hop_bytes(listener: &str, delta: Option<&CountersSnapshot>, own: Option<&CallTally>) -> HopBytes {
    let Some(d) = delta else { return HopBytes { listener: listener.to_owned(), ..HopBytes::default() } };
    let n = d.requests_total();
    let started = if d.requests_started > 0 { d.requests_started } else { n };
    let per = |v: Option<u64>| v.filter(|_| n > 0).map(|v| v as f64 / n as f64);
    let own_per = |v: u64, window: Option<f64>| match own {
        Some(c) if c.calls > 0 => Some(v as f64 / c.calls as f64),
        _ => window,
    };
    let per_started = |v: Option<u64>| v.filter(|_| started > 0).map(|v| v as f64 / started as f64);
    HopBytes {
        listener: listener.to_owned(),
        requests: n,
        requests_started: Some(d.requests_started),
        request_wire_bytes: d.bytes_in,
        response_wire_bytes: d.bytes_out,
        request_message_bytes: Some(d.message_bytes_in),
        response_message_bytes: Some(d.message_bytes_out),
        request_wire_bytes_per_request: per_started(d.bytes_in),
        response_wire_bytes_per_request: per(d.bytes_out),
        request_message_bytes_per_request: own_per(
            own.map_or(0, |c| c.message_bytes_in),
            per(Some(d.message_bytes_in)),
        ),
        response_message_bytes_per_request: own_per(
            own.map_or(0, |c| c.message_bytes_out),
            per(Some(d.message_bytes_out)),
        ),
        connections_opened: Some(d.connections),
        connections_open_at_end: d.connections_open,
        tls: d.tls.clone(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use caller::Transport;

    use super::*;
    use crate::load::{Outcome, Shot};
    use crate::result::{CpuThrottling, LoadSample};

    #[test]
    fn replica_shares_and_the_imbalance_come_from_each_replicas_calls() {
        let replica = |ok: u64, cpu: f64| ReplicaDelta {
            index: 0,
            pid: Some(7),
            cpu_seconds: Some(cpu),
            rss_bytes: Some(1 << 20),
            internal: Some(counters(ok, Some(ok * 100), Some(ok * 1000))),
            throttling: None,
        };
        // Every call on one of three: the imbalance is 3, the others' shares 0.
        let pinned = replica_set(&[replica(300, 0.03), replica(0, 0.001), replica(0, 0.001)]).unwrap();
        assert_eq!(pinned.imbalance, Some(3.0));
        assert_eq!(pinned.each.iter().map(|r| r.share).collect::<Vec<_>>(), [Some(1.0), Some(0.0), Some(0.0)]);
        assert_eq!(pinned.each[0].cpu_us_per_request.map(|u| u.round()), Some(100.0));
        assert_eq!(pinned.each[1].cpu_us_per_request, None, "no call answered: no CPU per call");
        // Spread 100/100/100: even.
        let even = replica_set(&[replica(100, 0.01), replica(100, 0.01), replica(100, 0.01)]).unwrap();
        assert!(even.imbalance.is_some_and(|i| (i - 1.0).abs() < 1e-12), "{:?}", even.imbalance);
        // A replica whose counters could not be read leaves the shares unmeasured.
        let blind = ReplicaDelta { internal: None, ..replica(1, 0.0) };
        let unread = replica_set(&[replica(100, 0.01), blind]).unwrap();
        assert_eq!((unread.imbalance, unread.each[0].share), (None, None));
        assert_eq!(replica_set(&[]), None, "one replica reached directly has no replica figures");
    }

    fn counters(requests: u64, bytes_in: Option<u64>, bytes_out: Option<u64>) -> CountersSnapshot {
        CountersSnapshot {
            bytes_in,
            bytes_out,
            message_bytes_in: 7 * requests,
            message_bytes_out: 1057 * requests,
            connections: 2,
            connections_open: Some(1),
            requests: [("ok".to_owned(), requests)].into(),
            requests_started: requests,
            tls: None,
            ..CountersSnapshot::default()
        }
    }

    fn sample(t: f64, tier: TierName, cpu_percent: f64, rss_mib: u64, cpu_seconds: f64) -> ResourceSample {
        ResourceSample {
            t_seconds: t,
            tier,
            cpu_percent: Some(cpu_percent),
            cpu_window_seconds: None,
            rss_bytes: Some(rss_mib * 1024 * 1024),
            cpu_seconds: Some(cpu_seconds),
        }
    }

    #[test]
    fn bytes_per_request_divide_by_the_requests_the_listener_counted() {
        let hop = hop_bytes("grpc", Some(&counters(1000, Some(66_000), Some(1_094_000))), None);
        assert_eq!(hop.requests, 1000);
        assert_eq!(hop.request_wire_bytes_per_request, Some(66.0));
        assert_eq!(hop.response_wire_bytes_per_request, Some(1094.0));
        assert_eq!(hop.request_message_bytes_per_request, Some(7.0));
        assert_eq!(hop.response_message_bytes_per_request, Some(1057.0));
        assert_eq!((hop.connections_opened, hop.connections_open_at_end), (Some(2), Some(1)));
    }

    #[test]
    fn request_bytes_divide_by_the_requests_that_started_sending_them() {
        // A round that starts with nothing in flight: 1000 requests arrived
        // (66 B each), but only 900 ended inside the window.
        let mut d = counters(900, Some(66_000), Some(900 * 1094));
        d.requests_started = 1000;
        let hop = hop_bytes("front", Some(&d), None);
        assert_eq!(hop.request_wire_bytes_per_request, Some(66.0));
        assert_eq!(hop.response_wire_bytes_per_request, Some(1094.0));
        assert_eq!(hop.request_message_bytes_per_request, Some(7.0));
        assert_eq!((hop.requests, hop.requests_started), (900, Some(1000)));
        // A tier that does not count starts: the requests ended are the divisor.
        d.requests_started = 0;
        assert_eq!(hop_bytes("front", Some(&d), None).request_wire_bytes_per_request, Some(66_000.0 / 900.0));
    }

    #[test]
    fn unmeasured_bytes_stay_null_never_zero() {
        // A read that failed: every figure unmeasured.
        // The round's own calls, however late each ended, give the message
        // figures; the window's wire figures stay the window's.
        let own = CallTally { calls: 8, message_bytes_in: 80, message_bytes_out: 8_008 };
        let hop = hop_bytes("grpc", Some(&counters(1000, Some(66_000), Some(1_094_000))), Some(&own));
        assert_eq!(
            (hop.request_message_bytes_per_request, hop.response_message_bytes_per_request),
            (Some(10.0), Some(1001.0))
        );
        assert_eq!(hop.response_wire_bytes_per_request, Some(1094.0));
        let none = hop_bytes("rest", None, None);
        assert_eq!(none.listener, "rest");
        assert_eq!(none.request_wire_bytes_per_request, None);
        assert_eq!(none.connections_opened, None);
        // A client that does not own its sockets: wire bytes unknown, message bytes known.
        let no_wire = hop_bytes("rest", Some(&counters(10, None, None)), None);
        assert_eq!(no_wire.request_wire_bytes_per_request, None);
        assert_eq!(no_wire.response_message_bytes_per_request, Some(1057.0));
        // No request finished: nothing to divide by.
        let idle = hop_bytes("grpc", Some(&counters(0, Some(500), Some(500))), None);
        assert_eq!((idle.request_wire_bytes, idle.request_wire_bytes_per_request), (Some(500), None));
    }

    #[test]
    fn cpu_peak_is_over_windows_of_a_second() {
        // A tier at a 50% quota, sampled every 250 ms: its 100 ms periods put
        // 150 ms of CPU in some windows and 100 ms in others. Per window the
        // peak would read 60%; over a second it is the quota.
        let mut cpu = 0.0;
        let s: Vec<ResourceSample> = (0..=20)
            .map(|i| {
                if i > 0 {
                    cpu += if i % 2 == 0 { 0.150 } else { 0.100 };
                }
                let mut x = sample(f64::from(i) * 0.25, TierName::Caller, 0.0, 10, cpu);
                x.cpu_percent = (i > 0).then_some(if i % 2 == 0 { 60.0 } else { 40.0 });
                x
            })
            .collect();
        let refs: Vec<&ResourceSample> = s.iter().collect();
        let all: Vec<&&ResourceSample> = refs.iter().collect();
        let peak = cpu_peak(&all).unwrap();
        assert!((peak - 50.0).abs() < 1e-9, "{peak}");
        let r = resources(TierName::Caller, &refs, 5.0, Some(cpu), 100);
        assert_eq!(r.cpu_percent_peak, Some(peak), "the summary's peak is the windowed one");
        // A burst of one second inside a quiet round is its peak.
        let burst: Vec<ResourceSample> = [(0.0, 0.0), (1.0, 0.1), (2.0, 1.0), (3.0, 1.1)]
            .iter()
            .map(|&(t, c)| sample(t, TierName::Caller, 0.0, 10, c))
            .collect();
        let refs: Vec<&ResourceSample> = burst.iter().collect();
        let all: Vec<&&ResourceSample> = refs.iter().collect();
        assert!((cpu_peak(&all).unwrap() - 90.0).abs() < 1e-9);
        // Shorter than a window: the whole span; one reading: none.
        assert!((cpu_peak(&all[..2]).unwrap() - 10.0).abs() < 1e-9);
        assert_eq!(cpu_peak(&all[..1]), None);
    }

    #[test]
    fn cpu_per_request_and_resources_over_the_window() {
        let s = [
            sample(0.5, TierName::Caller, 10.0, 10, 1.0),
            sample(1.0, TierName::Caller, 20.0, 12, 1.1),
            sample(1.5, TierName::Caller, 30.0, 14, 1.2),
            sample(1.5, TierName::Downstream, 99.0, 99, 9.0),
        ];
        let window: Vec<&ResourceSample> = s.iter().filter(|x| x.t_seconds >= 1.0).collect();
        let r = resources(TierName::Caller, &window, 2.0, Some(0.5), 1000);
        assert_eq!(r.cpu_us_per_request, Some(500.0));
        // 0.5 CPU seconds over 2 s of wall time, whatever the samples averaged;
        // the peak from the CPU clocks (0.1 s in 0.5 s), not the highest sample.
        assert_eq!(r.cpu_percent_mean, Some(25.0));
        assert!((r.cpu_percent_peak.unwrap() - 20.0).abs() < 1e-9, "{:?}", r.cpu_percent_peak);
        let fast = resources(TierName::Caller, &window, 1.0, Some(0.5), 1000);
        assert_eq!(fast.cpu_percent_mean, Some(50.0));
        assert_eq!((r.rss_mib_mean, r.rss_mib_peak), (Some(13.0), Some(14.0)));
        assert_eq!(r.samples, 2);
        // Nothing answered, or no CPU reading: no per-request figure.
        assert_eq!(resources(TierName::Caller, &window, 2.0, Some(0.5), 0).cpu_us_per_request, None);
        // Counters unread: no CPU seconds or per-request figure; the % falls back on the samples.
        let unread = resources(TierName::Caller, &window, 2.0, None, 1000);
        assert_eq!((unread.cpu_seconds, unread.cpu_us_per_request), (None, None));
        assert_eq!(unread.cpu_percent_mean, Some(25.0));
        // A tier with no samples in the window: no CPU % or RSS, not zeros.
        let absent = resources(TierName::Proxy, &window, 2.0, None, 1000);
        assert_eq!((absent.cpu_percent_mean, absent.rss_mib_peak, absent.samples), (None, None, 0));
    }

    #[test]
    fn open_loop_rates_are_over_the_schedule_and_closed_loop_over_the_window() {
        let mut cfg = crate::testing::config(Transport::Grpc);
        cfg.load.qps = 100.0;
        // 1,000 due at 100 req/s span 10 s, whatever the counters' window.
        for window in [10.0, 10.4] {
            let t = throughput(&cfg, 1000, 990, 1000, window);
            assert_eq!((t.send_rate, t.ok_per_second, t.target_qps), (100.0, 99.0, Some(100.0)));
            assert!((t.achieved_ratio.unwrap() - 0.99).abs() < 1e-12);
        }
        // A round stopped early: only what fell due before the stop counts.
        let t = throughput(&cfg, 400, 400, 400, 4.2);
        assert_eq!((t.ok_per_second, t.achieved_ratio), (100.0, Some(1.0)));
        // Dropped requests were due: they count against the target.
        let t = throughput(&cfg, 900, 900, 1000, 10.0);
        assert_eq!((t.send_rate, t.achieved_ratio), (90.0, Some(0.9)));
        // Nothing due: the window is all there is, and no rate was there to reach.
        let t = throughput(&cfg, 0, 0, 0, 2.0);
        assert_eq!((t.ok_per_second, t.achieved_ratio), (0.0, None));
        // One of four generators targets a quarter of the rate: its 250 due span 10 s.
        cfg.generators.segment = Some(crate::config::Segment { index: 1, count: 4, sample_tiers: false });
        let t = throughput(&cfg, 250, 250, 250, 10.0);
        assert_eq!((t.send_rate, t.target_qps, t.achieved_ratio), (25.0, Some(25.0), Some(1.0)));
        cfg.generators.segment = None;
        cfg.load.closed_loop = true;
        let t = throughput(&cfg, 500, 500, 0, 2.0);
        assert_eq!((t.ok_per_second, t.target_qps, t.achieved_ratio), (250.0, None, None));
    }

    fn load(t_seconds: f64, other_cores: Option<f64>) -> LoadSample {
        LoadSample { t_seconds, in_flight: 0, sent: 0, ok: 0, errors: 0, dropped: 0, other_cores }
    }

    #[test]
    fn a_round_assembles_every_figure_from_its_inputs() {
        let mut cfg = crate::testing::config(Transport::Rest);
        // Five due at 2.5 req/s span the 2-s window.
        cfg.load.qps = 2.5;
        let rec = four_ok(Instant::now());
        let deltas = Deltas {
            caller_cpu_seconds: Some(0.004),
            downstream_cpu_seconds: None,
            harness_cpu_seconds: Some(0.002),
            front: Some(counters(4, Some(400), Some(4000))),
            internal: Some(counters(4, Some(600), Some(9000))),
            throttling: BTreeMap::new(),
            replicas: Vec::new(),
            steal_percent: Some(0.5),
            front_calls: None,
            internal_calls: None,
            own: None,
            relay: None,
        };
        let samples = [
            sample(10.5, TierName::Proxy, 5.0, 3, 2.0),
            sample(11.5, TierName::Proxy, 5.0, 3, 2.25),
            sample(30.0, TierName::Proxy, 5.0, 3, 9.0),
        ];
        let input = RoundInput {
            config: &cfg,
            round: 1,
            complete: true,
            scheduled: 5,
            from_seconds: 10.0,
            to_seconds: 12.0,
            record: &rec,
            deltas: &deltas,
            samples: &samples,
            load: &[
                load(9.5, Some(1.5)),
                load(11.0, Some(0.5)),
                load(11.5, None),
                load(12.0, Some(1.0)),
                load(30.0, Some(2.0)),
            ],
        };
        let r = assemble(&input);
        // Other load: the mean of the readings inside the window, unread ones left out.
        assert_eq!(r.other_cores, Some(0.75));
        // The machine's steal over the round is the deltas' reading.
        assert_eq!(r.steal_percent, Some(0.5));
        assert_eq!((r.index, r.window_seconds, r.started_seconds), (2, 2.0, 10.0));
        assert_eq!((r.requests.scheduled, r.requests.sent, r.requests.ok), (5, 4, 4));
        assert_eq!(r.throughput.ok_per_second, 2.0);
        assert_eq!(r.resources[&TierName::Caller].cpu_us_per_request, Some(1000.0));
        assert_eq!(r.resources[&TierName::Downstream].cpu_us_per_request, None);
        assert_eq!(r.resources[&TierName::Harness].cpu_us_per_request, Some(500.0));
        // The proxy's CPU: its first and last sample inside the window.
        assert_eq!(r.resources[&TierName::Proxy].cpu_seconds, Some(0.25));
        assert_eq!(r.bytes.internal.listener, "rest");
        assert_eq!(r.bytes.internal.request_wire_bytes_per_request, Some(150.0));
        assert_eq!(r.bytes.front.response_wire_bytes_per_request, Some(1000.0));
        assert!(r.latency.corrected.as_ref().is_some_and(|l| l.p50_ms >= 20.0 && l.p50_ms < 20.1));
        assert!(r.histograms.contains_key("corrected") && r.histograms.contains_key("caller_overhead"));
        assert_eq!(r.per_request_basis, Some(PerRequestBasis::Window));
    }

    /// Four calls answered OK, 20 ms each, from `now`.
    fn four_ok(now: Instant) -> RoundRecord {
        let mut rec = RoundRecord::default();
        for i in 0..4 {
            let sent = now + Duration::from_millis(i);
            rec.add(&Shot {
                index: i,
                due: sent,
                sent: Some(sent),
                done: sent + Duration::from_millis(20),
                outcome: Outcome::Ok,
                downstream_us: None,
                kernel_stamped: false,
                stream: None,
            });
        }
        rec
    }

    #[test]
    fn a_round_bounded_to_its_own_calls_takes_its_per_request_figures_from_them() {
        let mut cfg = crate::testing::config(Transport::Rest);
        cfg.load.qps = 2.5;
        let rec = four_ok(Instant::now());
        let window = Deltas {
            caller_cpu_seconds: Some(0.004),
            downstream_cpu_seconds: Some(0.004),
            harness_cpu_seconds: Some(0.002),
            front: Some(counters(4, Some(400), Some(4000))),
            internal: Some(counters(4, Some(600), Some(9000))),
            throttling: BTreeMap::from([(TierName::Downstream, throttled(0.6, 19))]),
            ..Deltas::default()
        };
        // Bounded to its own calls: per-request CPU and every hop's bytes
        // come from the own span; CPU % stays over the window.
        let own = Deltas {
            caller_cpu_seconds: Some(0.006),
            downstream_cpu_seconds: Some(0.008),
            harness_cpu_seconds: Some(0.004),
            front: Some(counters(4, Some(440), Some(4400))),
            internal: Some(counters(4, Some(640), Some(9600))),
            throttling: BTreeMap::from([(TierName::Downstream, throttled(0.6, 20))]),
            replicas: [20, 0, 0]
                .into_iter()
                .enumerate()
                .map(|(i, n)| ReplicaDelta {
                    index: i as u32,
                    pid: None,
                    cpu_seconds: None,
                    rss_bytes: None,
                    internal: None,
                    throttling: Some(throttled(0.2, n)),
                })
                .collect(),
            ..Deltas::default()
        };
        let bounded = Deltas { own: Some(Box::new(own)), ..window };
        let input = RoundInput {
            config: &cfg,
            round: 0,
            complete: true,
            scheduled: 5,
            from_seconds: 10.0,
            to_seconds: 12.0,
            record: &rec,
            deltas: &bounded,
            samples: &[],
            load: &[],
        };
        let r = assemble(&input);
        assert_eq!(r.per_request_basis, Some(PerRequestBasis::OwnCalls));
        let caller = &r.resources[&TierName::Caller];
        assert_eq!((caller.cpu_us_per_request, caller.cpu_seconds), (Some(1500.0), Some(0.004)));
        assert_eq!(caller.cpu_percent_mean, Some(0.2), "CPU % is the window's");
        assert_eq!(r.resources[&TierName::Downstream].cpu_us_per_request, Some(2000.0));
        assert_eq!(r.resources[&TierName::Harness].cpu_us_per_request, Some(1000.0));
        assert_eq!(r.bytes.internal.request_wire_bytes_per_request, Some(160.0));
        assert_eq!(r.bytes.front.response_wire_bytes_per_request, Some(1100.0));
        assert_eq!(r.bytes.front.requests, 4);
        // The CPU limit's periods are over the same span as the replicas'
        // rows: the tier's throttled periods are theirs summed.
        let each = r.replicas.as_ref().unwrap().each.iter();
        let summed: u64 = each.map(|r| r.throttling.as_ref().unwrap().throttled_periods).sum();
        assert_eq!((r.cpu_throttling[&TierName::Downstream].throttled_periods, summed), (20, 20));
    }

    fn throttled(cpus: f64, throttled_periods: u64) -> CpuThrottling {
        CpuThrottling { cpus, periods: 21, throttled_periods, throttled_seconds: 0.1 }
    }
}
