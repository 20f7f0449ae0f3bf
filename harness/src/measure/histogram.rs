//! The latency instrument: HdrHistogram in microseconds, and its V2
//! serialization (base64) as stored in `run.json`, loadable by any
//! HdrHistogram library.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};

/// Highest trackable latency: one hour in microseconds.
pub const MAX_TRACKABLE_US: u64 = 3_600_000_000;

/// A latency histogram: microseconds, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    // Bounds are constants within HdrHistogram's valid range (low >= 1,
    // high >= 2 * low, sigfig <= 5), so construction cannot fail.
    #[allow(clippy::expect_used)]
    Histogram::new_with_bounds(1, MAX_TRACKABLE_US, 3).expect("valid constant histogram bounds")
}

/// HdrHistogram V2 serialization, base64: loadable by any HdrHistogram library.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    match V2Serializer::new().serialize(h, &mut buf) {
        Ok(_) => STANDARD.encode(buf),
        Err(_) => String::new(),
    }
}

pub fn decode_histogram(text: &str) -> Option<Histogram<u64>> {
    let bytes = STANDARD.decode(text).ok()?;
    Deserializer::new().deserialize(&mut bytes.as_slice()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_round_trip_through_text() {
        let mut h = new_histogram();
        for v in [5u64, 500, 5_000, 500_000] {
            h.record(v).unwrap();
        }
        let back = decode_histogram(&encode_histogram(&h)).unwrap();
        assert_eq!(back.len(), 4);
        assert_eq!(back.max(), h.max());
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
    }
}
