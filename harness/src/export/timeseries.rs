//! `timeseries.csv`: one row per sample and process. This module only makes
//! the rows; `files::TimeseriesFile` appends them while the run measures.

use std::fmt::Write;

use crate::result::ResourceSample;

pub const HEADER: &str = "t_seconds,arm,tier,cpu_percent,rss_bytes,in_flight,achieved_rate";

/// One row; `arm` is the arm's transport (`-` for the harness, which serves
/// every arm); `achieved_rate` is OK responses per second since the previous
/// sample. Unknown figures are empty cells, never zeros.
pub fn row(s: &ResourceSample, arm: &str, in_flight: u64, achieved_rate: Option<f64>) -> String {
    let opt = |v: Option<String>| v.unwrap_or_default();
    let mut line = String::new();
    let _ = writeln!(
        line,
        "{:.3},{arm},{},{},{},{in_flight},{}",
        s.t_seconds,
        s.tier,
        opt(s.cpu_percent.map(|c| format!("{c:.2}"))),
        opt(s.rss_bytes.map(|b| b.to_string())),
        opt(achieved_rate.map(|r| format!("{r:.2}"))),
    );
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::TierName;

    #[test]
    fn unknowns_are_empty_cells() {
        let s = ResourceSample {
            t_seconds: 1.5,
            tier: TierName::Caller,
            cpu_percent: Some(12.345),
            cpu_window_seconds: None,
            rss_bytes: None,
            cpu_seconds: None,
        };
        assert_eq!(row(&s, "grpc", 50, Some(99.5)), "1.500,grpc,caller,12.35,,50,99.50\n");
        assert_eq!(row(&s, "-", 51, None), "1.500,-,caller,12.35,,51,\n");
    }
}
