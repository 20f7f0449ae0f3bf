//! The latency instrument: HdrHistogram in microseconds, and its V2
//! serialization (base64) as stored in `run.json`, loadable by any
//! HdrHistogram library.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};

/// The V2 serialization's header, before its counts.
const V2_HEADER_BYTES: usize = 40;

/// Highest trackable latency: one hour in microseconds.
pub const MAX_TRACKABLE_US: u64 = 3_600_000_000;

/// Significant digits every latency is recorded with: steps of 16 µs near
/// 500 ms, 1 µs below 16 ms (values are whole µs); report.md states the step
/// at each run's median. Five digits would step by 2 µs but HdrHistogram
/// fills its whole counts array when it is made (16 MiB per histogram, five
/// per round: the harness's RSS grew by 80 MiB); four cost 2.4 MiB each.
pub const SIGNIFICANT_DIGITS: u8 = 4;

/// A latency histogram: microseconds, [`SIGNIFICANT_DIGITS`].
pub fn new_histogram() -> Histogram<u64> {
    // Bounds are constants within HdrHistogram's valid range (low >= 1,
    // high >= 2 * low, sigfig <= 5), so construction cannot fail.
    #[allow(clippy::expect_used)]
    Histogram::new_with_bounds(1, MAX_TRACKABLE_US, SIGNIFICANT_DIGITS).expect("valid constant histogram bounds")
}

/// The width in µs of the bucket that holds `value_us`: the instrument's
/// resolution at that latency.
pub fn resolution_us(h: &Histogram<u64>, value_us: u64) -> u64 {
    h.equivalent_range(value_us)
}

/// HdrHistogram V2 serialization, base64: loadable by any HdrHistogram library.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    match V2Serializer::new().serialize(h, &mut buf) {
        Ok(_) => STANDARD.encode(buf),
        Err(_) => String::new(),
    }
}

/// A histogram from its text, or `None` if it is not one this harness
/// could have written. Its header is checked before anything is made: a
/// histogram's counts array is sized by its declared range and precision,
/// so a crafted header (a range of 2⁶² at 5 digits) would have a few bytes
/// of run.json allocate gigabytes.
pub fn decode_histogram(text: &str) -> Option<Histogram<u64>> {
    let bytes = STANDARD.decode(text).ok()?;
    check_header(&bytes).ok()?;
    Deserializer::new().deserialize(&mut bytes.as_slice()).ok()
}

/// Why a serialized histogram is refused before it is made, if it is: its
/// precision above [`SIGNIFICANT_DIGITS`], its range beyond 1 µs to
/// [`MAX_TRACKABLE_US`] (what every histogram here is made with; older runs
/// had 3 digits), or a payload length other than the bytes that follow the
/// header (the deserializer makes a buffer of the declared length before it
/// reads). Checks the V2 header: cookie, payload length, offset, digits (4
/// bytes each), lowest and highest value and the conversion ratio (8 bytes
/// each).
pub fn check_header(bytes: &[u8]) -> Result<(), String> {
    let int = |at: usize, n: usize| -> Option<u64> {
        let b = bytes.get(at..at + n)?;
        Some(b.iter().fold(0u64, |v, x| (v << 8) | u64::from(*x)))
    };
    let (Some(digits), Some(lowest), Some(highest)) = (int(12, 4), int(16, 8), int(24, 8)) else {
        return Err("is too short to be a histogram".into());
    };
    if !(1..=u64::from(SIGNIFICANT_DIGITS)).contains(&digits) {
        return Err(format!("declares {digits} significant digits (at most {SIGNIFICANT_DIGITS})"));
    }
    if lowest < 1 || highest > MAX_TRACKABLE_US || highest < 2 * lowest {
        return Err(format!("declares the range {lowest}..{highest} µs (within 1..{MAX_TRACKABLE_US})"));
    }
    let present = bytes.len().saturating_sub(V2_HEADER_BYTES) as u64;
    match int(4, 4) {
        Some(payload) if payload == present => Ok(()),
        Some(payload) => Err(format!("declares {payload} bytes of counts where {present} follow its header")),
        None => Err("is too short to be a histogram".into()),
    }
}

/// Why the histogram in `text` is refused, if it is. An empty text is a
/// histogram that could not be written: nothing to make, nothing to refuse.
pub fn refusal(text: &str) -> Option<String> {
    if text.is_empty() {
        return None;
    }
    let bytes = match STANDARD.decode(text) {
        Ok(b) => b,
        Err(e) => return Some(format!("is not base64 ({e})")),
    };
    check_header(&bytes).err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_near_half_a_second_are_told_apart_to_a_few_microseconds() {
        let mut h = new_histogram();
        h.record(500_000).unwrap();
        h.record(500_020).unwrap();
        // Two values 20 µs apart land in different buckets (at 3 significant
        // digits they shared a 256 µs one), and each is reported within 16 µs.
        assert_ne!(h.lowest_equivalent(500_000), h.lowest_equivalent(500_020));
        assert!(resolution_us(&h, 500_000) <= 16, "{}", resolution_us(&h, 500_000));
        assert!(h.value_at_quantile(0.5) - 500_000 < 16);
        assert!(h.value_at_quantile(1.0) - 500_020 < 16);
        assert_eq!(h.sigfig(), SIGNIFICANT_DIGITS);
    }

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

    #[test]
    fn a_crafted_header_is_refused_before_anything_is_made() {
        let mut h = new_histogram();
        h.record(500_000).unwrap();
        let good = STANDARD.decode(encode_histogram(&h)).unwrap();
        assert_eq!(check_header(&good), Ok(()));
        // The same histogram declaring a range of 2^62 µs at 5 digits: made
        // as declared it would be a counts array of gigabytes.
        let mut bad = good.clone();
        bad[12..16].copy_from_slice(&5u32.to_be_bytes());
        bad[24..32].copy_from_slice(&(1u64 << 62).to_be_bytes());
        let text = STANDARD.encode(&bad);
        assert!(decode_histogram(&text).is_none());
        assert!(refusal(&text).unwrap().contains("significant digits"), "{:?}", refusal(&text));
        let mut wide = good.clone();
        wide[24..32].copy_from_slice(&(1u64 << 62).to_be_bytes());
        assert!(refusal(&STANDARD.encode(&wide)).unwrap().contains("range"));
        assert!(refusal("AAAA").unwrap().contains("too short"));
        // A payload declared past the bytes present (4 GiB here): the
        // deserializer would make a buffer of that size first.
        let mut long = good.clone();
        long[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        let why = refusal(&STANDARD.encode(&long)).unwrap();
        assert!(why.contains("declares 4294967295 bytes of counts where"), "{why}");
        assert!(refusal(&STANDARD.encode(&good[..good.len() - 1])).unwrap().contains("bytes of counts"));
        assert_eq!(refusal(&encode_histogram(&h)), None);
    }
}
