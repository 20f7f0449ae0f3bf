//! Pure statistics over recorded data (criterion's `stats/` habit): unit
//! tested with known inputs, no I/O.

use hdrhistogram::Histogram;

use crate::result::Summary;

/// Percentile summary in milliseconds of a µs histogram; `None` when empty.
pub fn summarize(h: &Histogram<u64>) -> Option<Summary> {
    if h.is_empty() {
        return None;
    }
    let ms = |us: u64| us as f64 / 1000.0;
    Some(Summary {
        count: h.len(),
        min_ms: ms(h.min()),
        mean_ms: h.mean() / 1000.0,
        p50_ms: ms(h.value_at_quantile(0.50)),
        p90_ms: ms(h.value_at_quantile(0.90)),
        p95_ms: ms(h.value_at_quantile(0.95)),
        p99_ms: ms(h.value_at_quantile(0.99)),
        p999_ms: ms(h.value_at_quantile(0.999)),
        max_ms: ms(h.max()),
        stdev_ms: h.stdev() / 1000.0,
    })
}

/// Mean and peak of the values present.
pub fn mean_peak(values: impl IntoIterator<Item = f64>) -> (Option<f64>, Option<f64>) {
    let (mut n, mut sum, mut peak) = (0u32, 0.0, f64::MIN);
    for v in values {
        n += 1;
        sum += v;
        peak = peak.max(v);
    }
    if n == 0 { (None, None) } else { (Some(sum / f64::from(n)), Some(peak)) }
}

/// Mean of the values present.
pub fn mean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    mean_peak(values).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::histogram::new_histogram;

    #[test]
    fn summary_of_known_values() {
        let mut h = new_histogram();
        for us in 1..=1000u64 {
            h.record(us * 1000).unwrap();
        }
        let s = summarize(&h).unwrap();
        assert_eq!(s.count, 1000);
        assert!((s.min_ms - 1.0).abs() < 0.01);
        assert!((s.p50_ms - 500.0).abs() < 1.0, "{}", s.p50_ms);
        assert!((s.p99_ms - 990.0).abs() < 1.0, "{}", s.p99_ms);
        assert!((s.max_ms - 1000.0).abs() < 1.0);
        assert!((s.mean_ms - 500.5).abs() < 0.5);
        assert!(summarize(&new_histogram()).is_none());
    }

    #[test]
    fn mean_and_peak() {
        assert_eq!(mean_peak([1.0, 3.0, 2.0]), (Some(2.0), Some(3.0)));
        assert_eq!(mean_peak(std::iter::empty()), (None, None));
    }
}
