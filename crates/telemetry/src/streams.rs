//! What one listener's streamed answers did (`bench.v1.Items`): streams
//! and items, and whether the producer was held back by a consumer slower
//! than its schedule. Items are produced when the transport asks for the
//! next one (the body is polled), so an item made after its due time is
//! one a full flow-control window or socket buffer held back, and the
//! items a tier holds are the ones it is sending, never a queue.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::{Deserialize, Serialize};

/// Counted as streams and their items go.
#[derive(Debug, Default)]
pub struct StreamTally {
    started: AtomicU64,
    finished: AtomicU64,
    /// Ended before their last item (the client went away, or a fault).
    cut: AtomicU64,
    open: AtomicU64,
    open_peak: AtomicU64,
    items: AtomicU64,
    /// Items produced later than their due time: the producer was held back.
    items_late: AtomicU64,
    /// How long, in all, items were produced after their due time.
    held_back_nanos: AtomicU64,
}

impl StreamTally {
    pub fn started(&self) {
        self.started.fetch_add(1, Relaxed);
        let open = self.open.fetch_add(1, Relaxed) + 1;
        self.open_peak.fetch_max(open, Relaxed);
    }

    /// A stream ended: `whole` when its last item was produced.
    pub fn ended(&self, whole: bool) {
        self.open.fetch_sub(1, Relaxed);
        if whole { &self.finished } else { &self.cut }.fetch_add(1, Relaxed);
    }

    /// An item produced `late_nanos` after its due time (0 on time).
    pub fn item(&self, late_nanos: u64) {
        self.items.fetch_add(1, Relaxed);
        if late_nanos > 0 {
            self.items_late.fetch_add(1, Relaxed);
            self.held_back_nanos.fetch_add(late_nanos, Relaxed);
        }
    }

    pub fn snapshot(&self) -> StreamSnapshot {
        StreamSnapshot {
            started: self.started.load(Relaxed),
            finished: self.finished.load(Relaxed),
            cut: self.cut.load(Relaxed),
            open: self.open.load(Relaxed),
            open_peak: self.open_peak.load(Relaxed),
            items: self.items.load(Relaxed),
            items_late: self.items_late.load(Relaxed),
            held_back_nanos: self.held_back_nanos.load(Relaxed),
        }
    }
}

/// A copy of [`StreamTally`], as `/stats` serves it (`streams` of a listener).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamSnapshot {
    pub started: u64,
    pub finished: u64,
    pub cut: u64,
    /// Streams open now (a gauge, kept as read in a difference).
    pub open: u64,
    /// The most open at once since start (a high-water mark).
    pub open_peak: u64,
    pub items: u64,
    pub items_late: u64,
    pub held_back_nanos: u64,
}

impl StreamSnapshot {
    /// `self - earlier`, the gauge and the high-water mark as read at `self`.
    pub fn since(&self, earlier: &StreamSnapshot) -> StreamSnapshot {
        StreamSnapshot {
            started: self.started.saturating_sub(earlier.started),
            finished: self.finished.saturating_sub(earlier.finished),
            cut: self.cut.saturating_sub(earlier.cut),
            items: self.items.saturating_sub(earlier.items),
            items_late: self.items_late.saturating_sub(earlier.items_late),
            held_back_nanos: self.held_back_nanos.saturating_sub(earlier.held_back_nanos),
            ..self.clone()
        }
    }
}

impl std::ops::Add for &StreamSnapshot {
    type Output = StreamSnapshot;

    fn add(self, o: &StreamSnapshot) -> StreamSnapshot {
        StreamSnapshot {
            started: self.started + o.started,
            finished: self.finished + o.finished,
            cut: self.cut + o.cut,
            open: self.open + o.open,
            open_peak: self.open_peak + o.open_peak,
            items: self.items + o.items,
            items_late: self.items_late + o.items_late,
            held_back_nanos: self.held_back_nanos + o.held_back_nanos,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_items_and_lateness_are_counted() {
        let t = StreamTally::default();
        t.started();
        t.started();
        t.item(0);
        t.item(2_000);
        t.item(500);
        t.ended(true);
        let first = t.snapshot();
        assert_eq!((first.open, first.open_peak, first.finished, first.cut), (1, 2, 1, 0));
        assert_eq!((first.items, first.items_late, first.held_back_nanos), (3, 2, 2_500));
        t.item(0);
        t.ended(false);
        let d = t.snapshot().since(&first);
        assert_eq!((d.started, d.items, d.cut, d.open, d.open_peak), (0, 1, 1, 0, 2));
        assert_eq!((&d + &first).items, 4);
    }
}
