//! What an experiment's summary says of its cells: each arm's row as a mean
//! over its rounds with a 95% interval (for the charts), and each crossover
//! probe judged as a comparison of its two arms ([`super::difference`]).

use serde::Serialize;

use super::crossover::{Probe, Step, sign};
use super::difference::{Row, compare};
use super::inference::{Interval, t_quantile};
use super::metrics::Metric;
use super::stats::mean;
use crate::result::RunResult;

/// The mean of `metric` over `run`'s rounds and its 95% t interval (the
/// interval only from two rounds on).
pub fn arm_mean(run: &RunResult, metric: &Metric) -> Option<Interval> {
    let xs: Vec<f64> = run.rounds.iter().filter_map(|r| (metric.get)(r)).collect();
    let m = mean(xs.iter().copied())?;
    if xs.len() < 2 {
        return Some(Interval { estimate: m, lo: m, hi: m });
    }
    let n = xs.len() as f64;
    let sd = (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let half = t_quantile(0.975, n - 1.0) * sd / n.sqrt();
    Some(Interval { estimate: m, lo: m - half, hi: m + half })
}

/// A probe's comparison: B against A on `metric`, from a cell's runs in
/// compared order; `None` without two arms.
pub fn judge_probe(value: f64, runs: &[RunResult], metric: &Metric) -> Option<Probe> {
    let [a, b] = runs else { return None };
    let row: Row = compare(a, b).into_iter().find(|r| r.metric.key == metric.key)?;
    Some(Probe { value, row })
}

/// One probe as the summary and `experiment.json` show it.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeShown {
    pub value: f64,
    pub cell: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// B − A and its 95% interval.
    pub diff: Option<Interval>,
    pub rounds: usize,
    /// −1, 0 or 1: the sign of B − A where detectable.
    pub sign: i8,
}

impl ProbeShown {
    pub fn new(cell: &str, p: &Probe) -> ProbeShown {
        let r = &p.row;
        ProbeShown {
            value: p.value,
            cell: cell.to_owned(),
            a: r.a,
            b: r.b,
            diff: r.diff,
            rounds: r.rounds,
            sign: sign(r),
        }
    }
}

/// A crossover search's result: its row, its arms and every probe.
#[derive(Debug, Clone, Serialize)]
pub struct Crossover {
    pub flag: String,
    pub row: String,
    pub a: String,
    pub b: String,
    pub low: f64,
    pub high: f64,
    pub resolution: f64,
    pub outcome: Outcome,
    pub probes: Vec<ProbeShown>,
}

/// How a search ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Outcome {
    Bracket {
        below: f64,
        above: f64,
    },
    NoneInRange,
    OutOfProbes {
        below: f64,
        above: f64,
    },
    /// Stopped before an answer (interrupted, or a probe failed): why.
    Stopped {
        reason: String,
    },
}

impl From<Step> for Outcome {
    fn from(s: Step) -> Outcome {
        match s {
            Step::Bracket { below, above } => Outcome::Bracket { below, above },
            Step::NoneInRange => Outcome::NoneInRange,
            Step::OutOfProbes { below, above } => Outcome::OutOfProbes { below, above },
            Step::Probe(v) => Outcome::Stopped { reason: format!("the probe at {v} did not run") },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arm_mean_has_a_t_interval_over_its_rounds() {
        let run = crate::testing::run(caller::Transport::Grpc, 1.0);
        let metric = crate::judge::metrics::by_key("p50").unwrap();
        let i = arm_mean(&run, metric).unwrap();
        let xs: Vec<f64> = run.rounds.iter().filter_map(|r| (metric.get)(r)).collect();
        assert_eq!(i.estimate, mean(xs.iter().copied()).unwrap());
        assert!(i.lo <= i.estimate && i.estimate <= i.hi);
    }
}
