//! Message bytes by the load segment a call belongs to (the segment its
//! request id names), so a reader can divide a segment's own calls' bytes by
//! its own calls, whenever each of them started or ended: a round's window
//! of counters holds the tail of the segment before it and misses its own
//! tail, which with messages of different sizes is a different mix.
//!
//! Only a bounded number of segments is kept (the most recent by number):
//! the number comes from a request header, and a client must not be able
//! to grow this table.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The most segments whose tallies are kept; a newer one pushes out the
/// lowest-numbered. A run's segments are a warm-up and a round per round,
/// so this is hundreds of rounds on the same processes.
pub const MAX_SEGMENTS: usize = 1024;

/// What the calls of one segment carried, however each ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallTally {
    /// Calls counted (every outcome).
    pub calls: u64,
    /// Encoded request bodies read (server) or written (client).
    pub message_bytes_in: u64,
    /// Encoded answers written (server) or read (client); 0 for a call that failed.
    pub message_bytes_out: u64,
}

impl CallTally {
    fn add(&mut self, other: &CallTally) {
        self.calls += other.calls;
        self.message_bytes_in += other.message_bytes_in;
        self.message_bytes_out += other.message_bytes_out;
    }
}

/// The tallies of the most recent [`MAX_SEGMENTS`] segments.
#[derive(Debug, Default)]
pub struct SegmentTallies(Mutex<BTreeMap<u64, CallTally>>);

impl SegmentTallies {
    /// Counts one call of `segment` and its message bytes.
    pub fn add(&self, segment: u64, request_bytes: u64, response_bytes: u64) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let call = CallTally { calls: 1, message_bytes_in: request_bytes, message_bytes_out: response_bytes };
        map.entry(segment).or_default().add(&call);
        while map.len() > MAX_SEGMENTS {
            map.pop_first();
        }
    }

    pub fn snapshot(&self) -> BTreeMap<u64, CallTally> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Two endpoints' tallies as one (a tier's replicas), segment by segment.
pub fn summed(a: &BTreeMap<u64, CallTally>, b: &BTreeMap<u64, CallTally>) -> BTreeMap<u64, CallTally> {
    let mut sum = a.clone();
    for (k, v) in b {
        sum.entry(*k).or_default().add(v);
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_tallied_by_segment_and_old_segments_leave() {
        let t = SegmentTallies::default();
        t.add(3, 10, 100);
        t.add(3, 12, 0);
        t.add(4, 1, 2);
        let s = t.snapshot();
        assert_eq!(s[&3], CallTally { calls: 2, message_bytes_in: 22, message_bytes_out: 100 });
        assert_eq!(s[&4].calls, 1);
        // A client naming a new segment per call never grows the table past its bound.
        for seg in 10..10 + 3 * MAX_SEGMENTS as u64 {
            t.add(seg, 1, 1);
        }
        let s = t.snapshot();
        assert_eq!(s.len(), MAX_SEGMENTS);
        assert_eq!(s.keys().next(), Some(&(10 + 2 * MAX_SEGMENTS as u64)));
        assert_eq!(summed(&s, &s)[&(10 + 2 * MAX_SEGMENTS as u64)].calls, 2);
    }
}
