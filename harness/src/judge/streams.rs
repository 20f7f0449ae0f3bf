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
    let produced = internal.and_then(|d| d.streams.as_ref()).map(|s| s.items);
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
        item_delay_clocks: if remote { "may_differ" } else { "same_host" }.to_owned(),
        buffered_items: spread(&st.buffered),
        cut_after_items: st.cut_after.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
        internal: item_bytes(internal, produced),
        front: item_bytes(input.deltas.front.as_ref(), received),
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
