//! HdrHistogram's percentile distribution text (`.hgrm`), as Java's
//! `Histogram.outputPercentileDistribution` writes it, values in milliseconds,
//! so existing plotters (HdrHistogram's own plotFiles.html) read it.

use std::fmt::Write;

use hdrhistogram::Histogram;

/// Renders a µs histogram as `.hgrm` text in milliseconds, 5 ticks per half distance.
pub fn render(h: &Histogram<u64>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:>12} {:>14} {:>10} {:>14}\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)");
    let mut total = 0u64;
    if !h.is_empty() {
        for v in h.iter_quantiles(5) {
            total += v.count_since_last_iteration();
            let value = v.value_iterated_to() as f64 / 1000.0;
            let q = v.quantile_iterated_to();
            if q < 1.0 {
                let _ = writeln!(out, "{value:12.3} {q:2.12} {total:10} {:14.2}", 1.0 / (1.0 - q));
            } else {
                let _ = writeln!(out, "{value:12.3} {q:2.12} {total:10}");
            }
        }
    }
    let sub_buckets = 2u64.pow((2.0 * 10f64.powi(i32::from(h.sigfig()))).log2().ceil() as u32);
    let _ = writeln!(out, "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]", h.mean() / 1000.0, h.stdev() / 1000.0);
    let _ = writeln!(out, "#[Max     = {:12.3}, Total count    = {:12}]", h.max() as f64 / 1000.0, h.len());
    let _ = writeln!(out, "#[Buckets = {:12}, SubBuckets     = {:12}]", h.buckets(), sub_buckets);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::histogram::new_histogram;

    #[test]
    fn renders_the_hdrhistogram_layout_exactly() {
        let mut h = new_histogram();
        h.record(1000).unwrap();
        h.record(2000).unwrap();
        let text = render(&h);
        let expected = "       Value     Percentile TotalCount 1/(1-Percentile)

\x20      1.000 0.000000000000          1           1.00
       1.000 0.100000000000          1           1.11
       1.000 0.200000000000          1           1.25
       1.000 0.300000000000          1           1.43
       1.000 0.400000000000          1           1.67
       1.000 0.500000000000          1           2.00
       2.000 0.550000000000          2           2.22
       2.000 1.000000000000          2
#[Mean    =        1.500, StdDeviation   =        0.500]
#[Max     =        2.000, Total count    =            2]
#[Buckets =           18, SubBuckets     =        32768]
";
        assert_eq!(text, expected);
    }
}
