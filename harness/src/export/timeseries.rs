//! `timeseries.csv`: one row per sample and process, appended while the run
//! measures (and flushed every interval), so a crash loses at most one interval.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::result::ResourceSample;

pub const HEADER: &str = "t_seconds,arm,tier,cpu_percent,rss_bytes,in_flight,achieved_rate";

pub struct TimeseriesWriter {
    file: BufWriter<File>,
}

impl TimeseriesWriter {
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let mut file = BufWriter::new(File::create(path)?);
        writeln!(file, "{HEADER}")?;
        file.flush()?;
        Ok(TimeseriesWriter { file })
    }

    /// One row; `achieved_rate` is OK responses per second since the previous
    /// sample. Unknown figures are empty cells, never zeros.
    pub fn append(&mut self, s: &ResourceSample, arm: &str, tier: &str, in_flight: u64, achieved_rate: Option<f64>) {
        let opt = |v: Option<String>| v.unwrap_or_default();
        let _ = writeln!(
            self.file,
            "{:.3},{arm},{tier},{},{},{in_flight},{}",
            s.t_seconds,
            opt(s.cpu_percent.map(|c| format!("{c:.2}"))),
            opt(s.rss_bytes.map(|b| b.to_string())),
            opt(achieved_rate.map(|r| format!("{r:.2}"))),
        );
    }

    pub fn flush(&mut self) {
        let _ = self.file.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_flushed_and_unknowns_are_empty() {
        let path = std::env::temp_dir().join(format!("gvr-ts-{}.csv", std::process::id()));
        let mut w = TimeseriesWriter::create(&path).unwrap();
        let s = ResourceSample {
            t_seconds: 1.5,
            tier: "0/caller".into(),
            cpu_percent: Some(12.345),
            rss_bytes: None,
            cpu_seconds: None,
        };
        w.append(&s, "grpc", "caller", 50, Some(99.5));
        w.append(&s, "grpc", "caller", 51, None);
        w.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{HEADER}\n1.500,grpc,caller,12.35,,50,99.50\n1.500,grpc,caller,12.35,,51,\n"));
        std::fs::remove_file(path).unwrap();
    }
}
