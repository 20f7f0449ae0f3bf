//! The collector: the one owner of every request's record. Workers send
//! [`Shot`]s over a channel; one collector per segment (warm-up or round)
//! files them, so every round starts with fresh histograms. Nothing renders here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use crate::load::{Outcome, Shot};
use crate::measure::histogram::new_histogram;

/// How often the live p99 shown while a round runs is recomputed.
const LIVE_P99_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// One round's records.
#[derive(Debug, Clone)]
pub struct RoundRecord {
    /// From the intended send time.
    pub corrected: Histogram<u64>,
    /// From the actual send time.
    pub service: Histogram<u64>,
    pub send_lag: Histogram<u64>,
    pub downstream_hop: Histogram<u64>,
    pub caller_overhead: Histogram<u64>,
    /// A streaming arm's items, made at its first stream (a unary arm's
    /// round holds no histograms it will not fill).
    pub stream: Option<StreamRecord>,
    pub sent: u64,
    pub ok: u64,
    /// OK answers whose arrival is the kernel's receive stamp.
    pub kernel_stamped: u64,
    /// Error counts by class.
    pub errors: BTreeMap<String, u64>,
    /// Requests that failed after the run was cut short (a second signal):
    /// their tiers were being stopped under them, so they are left out of
    /// every count, as the README says.
    pub left_out: u64,
    /// Streams in flight at a second signal: sent, and their items (what
    /// was measured of them) kept, but neither ok nor an error; the
    /// round's rates leave them out, as they leave out `left_out`.
    pub cut_streams: u64,
}

impl Default for RoundRecord {
    fn default() -> Self {
        RoundRecord {
            corrected: new_histogram(),
            service: new_histogram(),
            send_lag: new_histogram(),
            downstream_hop: new_histogram(),
            caller_overhead: new_histogram(),
            stream: None,
            sent: 0,
            ok: 0,
            left_out: 0,
            cut_streams: 0,
            kernel_stamped: 0,
            errors: BTreeMap::new(),
        }
    }
}

/// A streaming arm's round, item by item.
#[derive(Debug, Clone)]
pub struct StreamRecord {
    /// From the intended start to the first item (µs).
    pub first_item: Histogram<u64>,
    /// Each item's arrival minus its due time (µs).
    pub item_delay: Histogram<u64>,
    /// Each item's production time minus its due time (µs).
    pub item_lateness: Histogram<u64>,
    /// Each item's arrival minus its production time (µs).
    pub item_transit: Histogram<u64>,
    /// The most items each stream had in transit at once (a count).
    pub buffered: Histogram<u64>,
    /// Items received whole and in order, cut streams' included.
    pub items: u64,
    /// Streams cut short, by the items they delivered before the cut.
    pub cut_after: BTreeMap<u64, u64>,
}

impl Default for StreamRecord {
    fn default() -> Self {
        StreamRecord {
            first_item: new_histogram(),
            item_delay: new_histogram(),
            item_lateness: new_histogram(),
            item_transit: new_histogram(),
            buffered: new_histogram(),
            items: 0,
            cut_after: BTreeMap::new(),
        }
    }
}

/// A [`StreamRecord`] with its histograms serialized.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompactStream {
    histograms: [Vec<u8>; 5],
    items: u64,
    cut_after: BTreeMap<u64, u64>,
}

/// A finished round's record as it waits for the run to end: its
/// histograms serialized (HdrHistogram V2: a few kilobytes each instead of
/// the 2.4 MiB counts array each one is made with), so the harness's memory
/// does not grow with every round it has measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompactRecord {
    histograms: [Vec<u8>; 5],
    stream: Option<CompactStream>,
    pub sent: u64,
    pub ok: u64,
    pub kernel_stamped: u64,
    pub errors: BTreeMap<String, u64>,
    pub left_out: u64,
    pub cut_streams: u64,
}

impl RoundRecord {
    /// The record in its compact form.
    pub fn compact(self) -> CompactRecord {
        let encode = |h: &Histogram<u64>| {
            let mut buf = Vec::new();
            // Into memory: the serializer cannot fail but on a histogram it cannot represent.
            let _ = V2Serializer::new().serialize(h, &mut buf);
            buf
        };
        CompactRecord {
            histograms: [
                encode(&self.corrected),
                encode(&self.service),
                encode(&self.send_lag),
                encode(&self.downstream_hop),
                encode(&self.caller_overhead),
            ],
            stream: self.stream.map(|st| CompactStream {
                histograms: [
                    encode(&st.first_item),
                    encode(&st.item_delay),
                    encode(&st.buffered),
                    encode(&st.item_lateness),
                    encode(&st.item_transit),
                ],
                items: st.items,
                cut_after: st.cut_after,
            }),
            sent: self.sent,
            ok: self.ok,
            kernel_stamped: self.kernel_stamped,
            errors: self.errors,
            left_out: self.left_out,
            cut_streams: self.cut_streams,
        }
    }
}

impl CompactRecord {
    /// The record again, its histograms made whole (one round at a time).
    pub fn expand(&self) -> RoundRecord {
        let decode =
            |b: &Vec<u8>| Deserializer::new().deserialize(&mut b.as_slice()).unwrap_or_else(|_| new_histogram());
        let [corrected, service, send_lag, downstream_hop, caller_overhead] = &self.histograms;
        RoundRecord {
            corrected: decode(corrected),
            service: decode(service),
            send_lag: decode(send_lag),
            downstream_hop: decode(downstream_hop),
            caller_overhead: decode(caller_overhead),
            stream: self.stream.as_ref().map(|st| {
                let [first_item, item_delay, buffered, item_lateness, item_transit] = &st.histograms;
                StreamRecord {
                    first_item: decode(first_item),
                    item_delay: decode(item_delay),
                    item_lateness: decode(item_lateness),
                    item_transit: decode(item_transit),
                    buffered: decode(buffered),
                    items: st.items,
                    cut_after: st.cut_after.clone(),
                }
            }),
            sent: self.sent,
            ok: self.ok,
            kernel_stamped: self.kernel_stamped,
            errors: self.errors.clone(),
            left_out: self.left_out,
            cut_streams: self.cut_streams,
        }
    }

    /// Bytes its histograms take.
    pub fn histogram_bytes(&self) -> usize {
        self.histograms.iter().map(Vec::len).sum()
    }
}

impl RoundRecord {
    /// A stream the second signal cut: sent, its items and their delays
    /// kept, neither ok nor an error.
    pub fn add_cut_stream(&mut self, f: &crate::load::StreamFacts, due: std::time::Instant) {
        self.sent += 1;
        self.cut_streams += 1;
        let st = self.stream.get_or_insert_with(StreamRecord::default);
        st.items += f.items;
        if let Some(first) = f.first {
            let first_us = first.saturating_duration_since(due).as_micros().min(u128::from(u64::MAX)) as u64;
            st.first_item.saturating_record(first_us);
        }
        for d in &f.delays_us {
            st.item_delay.saturating_record(*d);
        }
    }

    pub fn add(&mut self, shot: &Shot) {
        let us = |d: std::time::Duration| d.as_micros().min(u128::from(u64::MAX)) as u64;
        if let Some(class) = shot.outcome.error_class() {
            *self.errors.entry(class).or_default() += 1;
        }
        let Some(sent) = shot.sent else { return };
        self.sent += 1;
        if let Some(f) = &shot.stream {
            let st = self.stream.get_or_insert_with(StreamRecord::default);
            st.items += f.items;
            if let Some(k) = f.cut_after {
                *st.cut_after.entry(k).or_default() += 1;
            }
        }
        if shot.outcome != Outcome::Ok {
            return;
        }
        if let Some(f) = &shot.stream {
            let st = self.stream.get_or_insert_with(StreamRecord::default);
            if let Some(first) = f.first {
                st.first_item.saturating_record(us(first.saturating_duration_since(shot.due)));
            }
            for (h, values) in [
                (&mut st.item_delay, &f.delays_us),
                (&mut st.item_lateness, &f.lateness_us),
                (&mut st.item_transit, &f.transit_us),
            ] {
                for v in values {
                    h.saturating_record(*v);
                }
            }
            st.buffered.saturating_record(f.buffered_peak);
        }
        self.ok += 1;
        self.kernel_stamped += u64::from(shot.kernel_stamped);
        // Latency percentiles describe successful calls; errors are counted by
        // class above, so a fast failure cannot flatter the percentiles.
        let service_us = us(shot.done.saturating_duration_since(sent));
        self.corrected.saturating_record(us(shot.done.saturating_duration_since(shot.due)));
        self.service.saturating_record(service_us);
        self.send_lag.saturating_record(us(sent.saturating_duration_since(shot.due)));
        if let Some(hop) = shot.downstream_us {
            self.downstream_hop.saturating_record(hop);
            self.caller_overhead.saturating_record(service_us.saturating_sub(hop));
        }
    }
}

/// Files the shots of one segment (a warm-up or a round) until every sender
/// is gone or `finish` fires (then it files what is already queued and
/// returns). `live_p99_us`, when a progress display shows it, is kept up
/// to date with the corrected p99 (a walk of the histogram's counts, about
/// 240k instructions each time: callgrind, bench/README.md).
///
/// A shot that failed at or after `cut_at` (once it is set) is left out.
pub async fn collect(
    mut shots: UnboundedReceiver<Shot>,
    live_p99_us: Option<Arc<AtomicU64>>,
    finish: CancellationToken,
    cut_at: Arc<std::sync::OnceLock<std::time::Instant>>,
) -> RoundRecord {
    let mut round = RoundRecord::default();
    let mut n = 0u64;
    let mut shown = std::time::Instant::now();
    loop {
        let shot = tokio::select! {
            biased;
            shot = shots.recv() => match shot {
                Some(s) => s,
                None => break,
            },
            _ = finish.cancelled() => match shots.try_recv() {
                Ok(s) => s,
                Err(_) => break,
            },
        };
        if shot.outcome != Outcome::Ok && cut_at.get().is_some_and(|cut| shot.done >= *cut) {
            // A stream in flight at the cut was sent and delivered items:
            // those were measured and are kept. Any other request is left out.
            match &shot.stream {
                Some(facts) if shot.sent.is_some() => round.add_cut_stream(facts, shot.due),
                _ => round.left_out += 1,
            }
            continue;
        }
        round.add(&shot);
        n += 1;
        // A quantile walks the counts array: a few times a second is plenty
        // for the display, and cheap at any rate.
        if let Some(live) = &live_p99_us
            && n.is_multiple_of(64)
            && shown.elapsed() >= LIVE_P99_EVERY
        {
            live.store(round.corrected.value_at_quantile(0.99), Relaxed);
            shown = std::time::Instant::now();
        }
    }
    round
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn corrected_latency_carries_the_wait_service_time_does_not() {
        let t = Instant::now();
        let mut r = RoundRecord::default();
        // Due at t, sent 2 s late (a stalled dispatcher), answered 10 ms later.
        r.add(&Shot {
            index: 0,
            due: t,
            sent: Some(t + Duration::from_secs(2)),
            done: t + Duration::from_millis(2010),
            outcome: Outcome::Ok,
            downstream_us: Some(8_000),
            kernel_stamped: true,
            stream: None,
        });
        assert!(r.corrected.max() >= 2_009_000);
        assert!(r.service.max() <= 10_100);
        assert!(r.send_lag.min() >= 1_999_000);
        assert!(r.caller_overhead.max() <= 2_100);
        r.add(&Shot {
            index: 1,
            due: t,
            sent: None,
            done: t,
            outcome: Outcome::Dropped,
            downstream_us: None,
            kernel_stamped: false,
            stream: None,
        });
        r.add(&Shot {
            index: 2,
            due: t,
            sent: Some(t),
            done: t,
            outcome: Outcome::Status(502),
            downstream_us: None,
            kernel_stamped: false,
            stream: None,
        });
        assert_eq!((r.sent, r.ok, r.kernel_stamped), (2, 1, 1));
        assert_eq!(r.errors["dropped"], 1);
        assert_eq!(r.errors["http_502"], 1);
        assert_eq!(r.corrected.len(), 1, "errors must not enter the latency histogram");
    }

    #[tokio::test]
    async fn failures_after_the_cut_are_left_out_and_answers_still_count() {
        let t = Instant::now();
        let shot = |index: u64, done_ms: u64, outcome: Outcome| Shot {
            index,
            due: t,
            sent: Some(t),
            done: t + Duration::from_millis(done_ms),
            outcome,
            downstream_us: None,
            kernel_stamped: false,
            stream: None,
        };
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let cut = Arc::new(std::sync::OnceLock::new());
        cut.set(t + Duration::from_millis(100)).unwrap();
        // Before the cut a failure counts; after it, a failure is the tiers
        // being stopped and is left out, while an answer is still an answer.
        tx.send(shot(0, 50, Outcome::BadResponse)).unwrap();
        tx.send(shot(1, 150, Outcome::BadResponse)).unwrap();
        tx.send(shot(2, 160, Outcome::Connect)).unwrap();
        tx.send(shot(3, 170, Outcome::Ok)).unwrap();
        drop(tx);
        let r = collect(rx, None, CancellationToken::new(), cut).await;
        assert_eq!((r.sent, r.ok, r.left_out), (2, 1, 2));
        assert_eq!(r.errors.get("bad_response"), Some(&1));
        assert!(!r.errors.contains_key("connect"));
    }

    /// A second signal during streams: a stream in flight at the cut was
    /// sent and its items were measured; they are kept (not left out, not
    /// an error), and survive compaction.
    #[tokio::test]
    async fn streams_in_flight_at_the_cut_keep_their_items() {
        let t = Instant::now();
        let facts = crate::load::StreamFacts {
            first: Some(t + Duration::from_millis(20)),
            items: 3,
            delays_us: vec![1_000, 2_000, 3_000],
            cut_after: Some(3),
            ..Default::default()
        };
        let cut_stream = Shot {
            index: 0,
            due: t,
            sent: Some(t),
            done: t + Duration::from_millis(150),
            outcome: Outcome::StreamCut,
            downstream_us: None,
            kernel_stamped: false,
            stream: Some(Box::new(facts)),
        };
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let cut = Arc::new(std::sync::OnceLock::new());
        cut.set(t + Duration::from_millis(100)).unwrap();
        tx.send(cut_stream).unwrap();
        drop(tx);
        let r = collect(rx, None, CancellationToken::new(), cut).await.compact().expand();
        assert_eq!((r.sent, r.ok, r.left_out, r.cut_streams), (1, 0, 0, 1));
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        let st = r.stream.expect("the stream's items");
        assert_eq!((st.items, st.item_delay.len(), st.first_item.len()), (3, 3, 1));
        assert!(st.item_delay.max() >= 2_999);
    }

    #[test]
    fn a_streams_items_are_recorded_only_for_a_stream_and_survive_compaction() {
        let t = Instant::now();
        let shot = |stream: Option<crate::load::StreamFacts>, outcome| Shot {
            index: 0,
            due: t,
            sent: Some(t),
            done: t + Duration::from_millis(90),
            outcome,
            downstream_us: None,
            kernel_stamped: true,
            stream: stream.map(Box::new),
        };
        let mut r = RoundRecord::default();
        r.add(&shot(None, Outcome::Ok));
        assert!(r.stream.is_none(), "a unary round holds no stream histograms");
        let facts = crate::load::StreamFacts {
            first: Some(t + Duration::from_millis(20)),
            items: 3,
            delays_us: vec![100, 200, 300],
            lateness_us: vec![40, 50, 60],
            transit_us: vec![60, 150, 240],
            buffered_peak: 2,
            cut_after: None,
        };
        r.add(&shot(Some(facts.clone()), Outcome::Ok));
        r.add(&shot(Some(crate::load::StreamFacts { cut_after: Some(1), items: 1, ..facts }), Outcome::StreamCut));
        let st = r.clone().compact().expand().stream.expect("the stream record");
        assert_eq!((st.items, st.cut_after.get(&1)), (4, Some(&1)), "a cut stream's items count, and its k");
        assert_eq!((st.first_item.len(), st.item_delay.len(), st.buffered.len()), (1, 3, 1), "OK streams only");
        assert!(st.first_item.max() >= 19_900 && st.first_item.max() <= 20_100);
        // Lateness and transit survive compaction beside the delay.
        assert_eq!((st.item_lateness.len(), st.item_lateness.max()), (3, 60));
        assert_eq!((st.item_transit.len(), st.item_transit.min()), (3, 60));
        assert_eq!(r.errors.get("stream_cut"), Some(&1));
    }

    #[test]
    fn a_compact_record_is_the_record_in_a_fraction_of_the_memory() {
        let t = Instant::now();
        let mut r = RoundRecord::default();
        for i in 0..20_000u64 {
            let sent = t + Duration::from_micros(i * 100 + i % 7);
            r.add(&Shot {
                index: i,
                due: t + Duration::from_micros(i * 100),
                sent: Some(sent),
                done: sent + Duration::from_micros(500_000 + (i * 7919) % 40_000),
                outcome: if i % 97 == 0 { Outcome::Timeout } else { Outcome::Ok },
                downstream_us: Some(499_000 + (i * 31) % 30_000),
                kernel_stamped: i % 2 == 0,
                stream: None,
            });
        }
        r.left_out = 3;
        let compact = r.clone().compact();
        let back = compact.expand();
        assert_eq!((back.sent, back.ok, back.kernel_stamped, back.left_out), (r.sent, r.ok, r.kernel_stamped, 3));
        assert_eq!(back.errors, r.errors);
        for (a, b) in [
            (&back.corrected, &r.corrected),
            (&back.service, &r.service),
            (&back.send_lag, &r.send_lag),
            (&back.downstream_hop, &r.downstream_hop),
            (&back.caller_overhead, &r.caller_overhead),
        ] {
            assert_eq!(a, b);
        }
        // Five histograms made whole hold five counts arrays; compact, a small part of one.
        let whole: usize = [&r.corrected, &r.service, &r.send_lag, &r.downstream_hop, &r.caller_overhead]
            .iter()
            .map(|h| h.distinct_values() * std::mem::size_of::<u64>())
            .sum();
        assert!(compact.histogram_bytes() * 20 < whole, "{} vs {whole}", compact.histogram_bytes());
    }
}
