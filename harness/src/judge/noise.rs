//! How far a figure moves between two measurements of one arm on this
//! machine: the A/A noise a finding is set against. Pure.
//!
//! A run with several rounds per arm measures each arm several times on
//! fresh tier processes, beside whatever else the machine ran: two rounds of
//! one arm are an A/A pair measured here and now. The noise of a row type
//! (CPU, latency percentiles, memory, …) is √2 × the pooled relative
//! standard deviation of its headline rows' round figures within each arm
//! (the standard deviation of the difference between two rounds of one arm,
//! in percent of the arm's mean), pooled over the arms and rows of the type
//! by their degrees of freedom. It is not a calibration of other runs: a
//! machine whose other work moves between runs can show more between two
//! whole runs (`bench/README.md`, "A/A calibration").

use super::metrics::by_key;
use super::stats::mean;
use crate::result::RunResult;

/// The row types findings are grouped by (as the A/A calibration counts
/// them): every row key belongs to one.
pub fn row_type(key: &str) -> &'static str {
    match key {
        "p50" | "p90" | "p95" | "p99" | "p999" => "latency percentile",
        k if k.starts_with("first_item_") || k.starts_with("last_item_") || k.starts_with("item_delay_") => {
            "latency percentile"
        }
        k if k.starts_with("service_") || k.starts_with("hop_") || k.starts_with("overhead_") => "latency percentile",
        "min" | "mean" | "max" => "latency min/mean/max",
        "throughput" | "achieved_percent" | "items_per_second" => "throughput",
        "errors" | "dropped" | "streams_cut" => "errors",
        k if k.starts_with("cpu_") => "CPU",
        k if k.starts_with("rss_") => "memory",
        k if k.contains("bytes") => "bytes",
        _ => "other",
    }
}

/// The A/A noise of the row type of `key` over `runs`' own rounds, in
/// percent of the mean, from the rows in `keys` of that type; `None` where
/// no arm has two rounds of such a row with a nonzero mean.
pub fn aa_noise_percent(runs: &[&RunResult], keys: &[&str], key: &str) -> Option<f64> {
    let kind = row_type(key);
    let (mut weighted, mut df) = (0.0, 0.0);
    for m in keys.iter().filter(|k| row_type(k) == kind).filter_map(|k| by_key(k)) {
        for run in runs {
            let x: Vec<f64> = run.rounds.iter().filter_map(|r| (m.get)(r)).collect();
            let Some(mu) = mean(x.iter().copied()).filter(|mu| *mu != 0.0 && mu.is_finite()) else { continue };
            if x.len() < 2 {
                continue;
            }
            let n = x.len() as f64;
            let var = x.iter().map(|v| (v - mu).powi(2)).sum::<f64>() / (n - 1.0);
            weighted += (n - 1.0) * var / (mu * mu);
            df += n - 1.0;
        }
    }
    (df > 0.0).then(|| (2.0 * weighted / df).sqrt() * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::TierName;
    use crate::testing;
    use caller::Transport;

    fn with_cpu(per_round: &[f64]) -> RunResult {
        let mut run = testing::run(Transport::Grpc, 1.0);
        run.rounds = (1..=per_round.len() as u32).map(|k| testing::round(k, 500.0, 1.0)).collect();
        for (r, cpu) in run.rounds.iter_mut().zip(per_round) {
            for tier in [TierName::Caller, TierName::Downstream] {
                r.resources.get_mut(&tier).unwrap().cpu_us_per_request = Some(*cpu);
            }
        }
        run
    }

    #[test]
    fn the_noise_is_the_spread_of_two_rounds_of_one_arm() {
        // Rounds 90, 100, 110: standard deviation 10, 10% of the mean; two
        // rounds differ by √2 × that.
        let (a, b) = (with_cpu(&[90.0, 100.0, 110.0]), with_cpu(&[180.0, 200.0, 220.0]));
        let keys = ["cpu_us_per_request.caller", "cpu_us_per_request.downstream", "p50"];
        let noise = aa_noise_percent(&[&a, &b], &keys, "cpu_us_per_request.caller").unwrap();
        assert!((noise - 10.0 * 2f64.sqrt()).abs() < 1e-9, "{noise}");
        // The same rounds every time: no noise at all, and a row type no run measured has none.
        let flat = with_cpu(&[100.0, 100.0, 100.0]);
        assert_eq!(aa_noise_percent(&[&flat], &keys, "cpu_us_per_request.caller"), Some(0.0));
        assert_eq!(aa_noise_percent(&[&flat], &keys, "rss_mib_mean.caller"), None);
        assert_eq!(aa_noise_percent(&[&with_cpu(&[100.0])], &keys, "cpu_us_per_request.caller"), None);
    }

    #[test]
    fn every_finding_key_has_a_row_type() {
        for key in super::super::difference::FINDING_KEYS {
            assert!(by_key(key).is_some(), "{key}");
        }
        assert_eq!(row_type("item_delay_p99"), "latency percentile");
        assert_eq!(row_type("cpu_us_per_item.caller"), "CPU");
        assert_eq!(row_type("internal.response_wire_bytes_per_item"), "bytes");
    }
}
