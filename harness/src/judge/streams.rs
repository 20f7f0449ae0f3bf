//! A streaming arm's round, item by item: time to the first and the last
//! item, each item's delay from its production, items per second, bytes
//! and CPU per item, memory per 1,000 open streams, and the downstream's own
//! count of the items it made and how late. Pure arithmetic on the round's
//! record, counter differences and samples.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use telemetry::CountersSnapshot;

use super::input::{RoundInput, load_in_window, span};
use super::stats::{mean, summarize};
use crate::measure::record::StreamRecord;
use crate::result::{ItemBytes, Resources, Spread, StreamRound, TierName};

/// The round's stream figures; `None` for a unary arm.
pub fn stream_round(input: &RoundInput<'_>, resources: &BTreeMap<TierName, Resources>) -> Option<StreamRound> {
    let streams = input.config.streams.as_ref()?;
    let rec = input.record;
    let none;
    let st = match &rec.stream {
        Some(st) => st,
        None => {
            none = StreamRecord::default();
            &none
        }
    };
    let span = span(input.config, input.scheduled, input.to_seconds - input.from_seconds);
    let internal = input.deltas.internal.as_ref();
    // The downstream's items flow over the same window as its bytes and
    // CPU; the harness's count is of the streams that ended in the round.
    // Each hop's bytes divide by the items its own counters saw in the same
    // window: the downstream's made, the caller's front door's relayed (a
    // front door that does not count them leaves the figure unmeasured).
    let produced = internal.and_then(|d| d.streams.as_ref()).map(|s| s.items);
    let relayed = input.deltas.front.as_ref().and_then(|d| d.streams.as_ref()).map(|s| s.items);
    let received = Some(st.items);
    let per_item = |tier: TierName, items: Option<u64>| {
        let cpu = resources.get(&tier)?.cpu_seconds?;
        let n = items.filter(|n| *n > 0)?;
        Some((tier, cpu * 1e6 / n as f64))
    };
    let open = mean(load_in_window(input).map(|s| s.in_flight as f64));
    let rss_per_1000 = |tier: TierName| {
        let rss = resources.get(&tier)?.rss_mib_mean?;
        let open = open.filter(|o| *o > 0.0)?;
        Some((tier, rss / open * 1000.0))
    };
    let remote = input.config.deploy.downstream_url.is_some() || input.config.remote_caller().is_some();
    Some(StreamRound {
        items_per_stream: streams.items,
        streams_ok: rec.ok,
        items: st.items,
        items_per_second: st.items as f64 / span,
        first_item: summarize(&st.first_item),
        last_item: summarize(&rec.corrected),
        item_delay: summarize(&st.item_delay),
        item_lateness: summarize(&st.item_lateness),
        item_transit: summarize(&st.item_transit),
        item_delay_clocks: if remote { "may_differ" } else { "same_host" }.to_owned(),
        buffered_items: spread(&st.buffered),
        cut_after_items: st.cut_after.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
        internal: item_bytes(internal, produced),
        front: item_bytes(input.deltas.front.as_ref(), relayed),
        cpu_us_per_item: [
            per_item(TierName::Caller, produced.or(received)),
            per_item(TierName::Downstream, produced.or(received)),
            per_item(TierName::Proxy, produced.or(received)),
            per_item(TierName::Harness, received),
        ]
        .into_iter()
        .flatten()
        .collect(),
        open_streams_mean: open,
        rss_mib_per_1000_open_streams: [TierName::Caller, TierName::Downstream, TierName::Proxy]
            .into_iter()
            .filter_map(rss_per_1000)
            .collect(),
        downstream: internal.and_then(|d| d.streams.clone()),
    })
}

/// A count histogram's median, 99th percentile and maximum.
fn spread(h: &Histogram<u64>) -> Option<Spread> {
    (!h.is_empty()).then(|| Spread {
        p50: h.value_at_quantile(0.5) as f64,
        p99: h.value_at_quantile(0.99) as f64,
        max: h.max() as f64,
    })
}

/// A listener's bytes over the round, per item of `items`.
fn item_bytes(delta: Option<&CountersSnapshot>, items: Option<u64>) -> ItemBytes {
    let n = items.filter(|n| *n > 0);
    let per = |v: Option<u64>| Some(v? as f64 / n? as f64);
    let Some(d) = delta else { return ItemBytes { items, ..ItemBytes::default() } };
    ItemBytes {
        items,
        request_wire_bytes_per_item: per(d.bytes_in),
        response_wire_bytes_per_item: per(d.bytes_out),
        request_message_bytes_per_item: per(Some(d.message_bytes_in)),
        response_message_bytes_per_item: per(Some(d.message_bytes_out)),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use telemetry::StreamSnapshot;

    use super::*;
    use caller::Transport;

    use crate::config::Streams;
    use crate::measure::record::RoundRecord;
    use crate::measure::tier_stats::Deltas;

    /// A listener's bytes over a window and the items it counted in it.
    fn counted(bytes_in: u64, bytes_out: u64, items: Option<u64>) -> CountersSnapshot {
        CountersSnapshot {
            bytes_in: Some(bytes_in),
            bytes_out: Some(bytes_out),
            streams: items.map(|items| StreamSnapshot { items, ..StreamSnapshot::default() }),
            ..CountersSnapshot::default()
        }
    }

    fn round_of(deltas: &Deltas) -> StreamRound {
        let mut cfg = crate::testing::config(Transport::GrpcStream);
        cfg.load.qps = 10.0;
        cfg.streams = Some(Streams {
            items: 100,
            item_bytes: 0,
            interval: Duration::from_millis(10),
            page_size: 10,
            consumer_delay: Duration::ZERO,
        });
        // The harness filed 1,000 items: those of the streams that ended in
        // the round, not those that crossed either hop in the window.
        let rec = RoundRecord {
            stream: Some(StreamRecord { items: 1_000, ..StreamRecord::default() }),
            ..RoundRecord::default()
        };
        let input = RoundInput {
            config: &cfg,
            round: 0,
            complete: true,
            scheduled: 10,
            from_seconds: 1.0,
            to_seconds: 2.0,
            record: &rec,
            deltas,
            samples: &[],
            load: &[],
        };
        stream_round(&input, &BTreeMap::new()).expect("a streaming arm")
    }

    /// Each hop's bytes per item are its window's bytes over the items its
    /// own counters saw in that window: the front door's relayed items for
    /// the front hop, never the harness's count of the round's streams.
    #[test]
    fn each_hops_bytes_per_item_divide_by_the_items_its_own_window_counted() {
        let deltas = Deltas {
            front: Some(counted(1_980, 99_000, Some(990))),
            internal: Some(counted(495, 49_500, Some(990))),
            ..Deltas::default()
        };
        let s = round_of(&deltas);
        assert_eq!(s.front.items, Some(990));
        assert_eq!(s.front.response_wire_bytes_per_item, Some(100.0));
        assert_eq!(s.front.request_wire_bytes_per_item, Some(2.0));
        assert_eq!((s.internal.items, s.internal.response_wire_bytes_per_item), (Some(990), Some(50.0)));
        // A front door that does not count its items: the figure is not
        // measured, not divided by another window's count.
        let deltas = Deltas { front: Some(counted(1_980, 99_000, None)), ..deltas };
        let s = round_of(&deltas);
        assert_eq!((s.front.items, s.front.response_wire_bytes_per_item), (None, None));
    }
}
