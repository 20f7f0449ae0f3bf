//! Confidence intervals for the difference between two arms, and the verdict
//! each interval supports. Pure functions over numbers, unit tested on
//! synthetic data (A/A with noise, A/B with a known shift, too few rounds).
//!
//! One method for every row, at 95%: a round is the unit of replication, so
//! each round's figure (its CPU µs per request, its RSS, its p50 read from
//! its own histogram) is one observation, and the interval is Student's t
//! interval of the mean paired difference over rounds run as counterbalanced
//! pairs (round k of A beside round k of B), or Welch's interval when the
//! arms come from separate runs. The spread between rounds (a fresh process,
//! the machine's other work) and the request noise within a round both show
//! in the round figures, so both widen the interval. The t quantile (statrs)
//! is exact for the n − 1 degrees of freedom of a few pairs, where a normal
//! quantile would be far too narrow; under A/A each round difference is
//! symmetric about zero, where the t test keeps its level whether or not the
//! differences are normal (Efron 1969, "Student's t-test under symmetry
//! conditions"). `judge/aa_simulation.rs` checks every row type's A/A
//! false-call rate against the nominal 5%.
//!
//! Latency percentiles were once judged by a two-level bootstrap that
//! resampled the round pairs: with three pairs it can only draw ten distinct
//! sets of rounds, its interval was about the range of the three round
//! differences, and those have one sign one time in four, so it called a p50
//! row in 15–21% of A/A comparisons (issue 32).

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// The confidence level of every interval.
pub const CONFIDENCE: f64 = 0.95;
/// Fewest rounds per arm (pairs, in a counterbalanced run) to judge a row.
pub const MIN_ROUNDS: usize = 3;
/// The A/A calibration the reports state (`judge/aa_simulation.rs` checks
/// it): simulated comparisons of 3 counterbalanced rounds, ...
pub const AA_SIMULATED_COMPARISONS: usize = 10_000;
/// ... the round-to-round spread of a round's median in them, relative, ...
pub const AA_SIMULATED_P50_SPREAD_PERCENT: f64 = 3.0;
/// ... and the highest share of them any row type was called different in.
pub const AA_SIMULATED_WORST_PERCENT: f64 = 5.3;

/// A difference B − A and its confidence interval, in the metric's unit.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Interval {
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    /// True when the interval excludes zero: the difference is detectable.
    pub fn excludes_zero(&self) -> bool {
        self.lo > 0.0 || self.hi < 0.0
    }

    /// The interval relative to `base` (A's mean), in percent.
    pub fn relative_to(&self, base: f64) -> Option<Interval> {
        (base != 0.0 && base.is_finite()).then(|| Interval {
            estimate: self.estimate / base.abs() * 100.0,
            lo: self.lo / base.abs() * 100.0,
            hi: self.hi / base.abs() * 100.0,
        })
    }
}

/// The 95% t interval of the mean of `b[k] - a[k]`; `None` under two pairs.
pub fn paired_t(a: &[f64], b: &[f64]) -> Option<Interval> {
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| y - x).collect();
    let n = d.len();
    if n < 2 {
        return None;
    }
    let (m, var) = mean_var(&d);
    let half = t_quantile(0.5 + CONFIDENCE / 2.0, (n - 1) as f64) * (var / n as f64).sqrt();
    Some(Interval { estimate: m, lo: m - half, hi: m + half })
}

/// Welch's 95% interval of mean(b) − mean(a) for independent samples, with
/// the Welch–Satterthwaite degrees of freedom; `None` under two of either.
pub fn welch_t(a: &[f64], b: &[f64]) -> Option<Interval> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let ((ma, va), (mb, vb)) = (mean_var(a), mean_var(b));
    let (sa, sb) = (va / a.len() as f64, vb / b.len() as f64);
    let se2 = sa + sb;
    let m = mb - ma;
    if se2 == 0.0 {
        return Some(Interval { estimate: m, lo: m, hi: m });
    }
    let df = se2 * se2 / (sa * sa / (a.len() - 1) as f64 + sb * sb / (b.len() - 1) as f64);
    let half = t_quantile(0.5 + CONFIDENCE / 2.0, df) * se2.sqrt();
    Some(Interval { estimate: m, lo: m - half, hi: m + half })
}

fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    let var = if x.len() < 2 { 0.0 } else { x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0) };
    (m, var)
}

/// Above this many degrees of freedom Student's t is the normal to the
/// precision any interval here is printed at (the t quantile at 10⁴ df is
/// within 2e-4 of the normal one); statrs's t needs a finite count.
const NORMAL_DF: f64 = 1e4;

/// Quantile `p` (0 < p < 1) of Student's t with `df` degrees of freedom
/// (the normal quantile beyond [`NORMAL_DF`]).
pub fn t_quantile(p: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) if df <= NORMAL_DF => t.inverse_cdf(p),
        _ => Normal::standard().inverse_cdf(p),
    }
}

/// A small deterministic generator (SplitMix64) for the synthetic A/A and
/// A/B checks: a seed gives the same rounds on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.uniform() * n as f64) as usize % n.max(1)
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        (-2.0 * self.uniform().ln()).sqrt() * (2.0 * std::f64::consts::PI * self.uniform()).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_tables() {
        for (df, want) in [(1.0, 12.706_205), (2.0, 4.302_653), (4.0, 2.776_445), (9.0, 2.262_157), (30.0, 2.042_272)] {
            let got = t_quantile(0.975, df);
            assert!((got - want).abs() < 1e-4, "t(0.975, {df}) = {got}, want {want}");
        }
        assert!((t_quantile(0.975, 1e6) - 1.959_964).abs() < 1e-6);
    }

    #[test]
    fn a_constant_shift_is_exact_and_detectable() {
        let i = paired_t(&[10.0, 11.0, 12.0], &[11.0, 12.0, 13.0]).unwrap();
        assert_eq!(i, Interval { estimate: 1.0, lo: 1.0, hi: 1.0 });
        assert!(i.excludes_zero());
        assert!(paired_t(&[1.0], &[2.0]).is_none());
    }

    /// Many synthetic A/A comparisons of five counterbalanced rounds with
    /// round-to-round drift shared by the pair and noise of each arm's own:
    /// the paired t interval calls about 5% of them different.
    #[test]
    fn a_and_a_with_noise_is_called_different_about_five_percent_of_the_time() {
        let mut rng = Rng::new(1);
        let trials = 4000;
        let mut called = 0;
        for _ in 0..trials {
            let drift: Vec<f64> = (0..5).map(|_| 3.0 * rng.normal()).collect();
            let a: Vec<f64> = drift.iter().map(|d| 100.0 + d + rng.normal()).collect();
            let b: Vec<f64> = drift.iter().map(|d| 100.0 + d + rng.normal()).collect();
            called += usize::from(paired_t(&a, &b).unwrap().excludes_zero());
        }
        let share = called as f64 / trials as f64;
        eprintln!(
            "paired t, {trials} synthetic A/A comparisons of 5 round pairs: {called} called ({:.1}%)",
            share * 100.0
        );
        assert!((0.035..=0.065).contains(&share), "A/A false-call share {share}");
    }

    #[test]
    fn welch_calls_a_and_a_about_five_percent_of_the_time() {
        let mut rng = Rng::new(2);
        let trials = 4000;
        let called = (0..trials)
            .filter(|_| {
                let a: Vec<f64> = (0..5).map(|_| 50.0 + rng.normal()).collect();
                let b: Vec<f64> = (0..5).map(|_| 50.0 + rng.normal()).collect();
                welch_t(&a, &b).unwrap().excludes_zero()
            })
            .count();
        let share = called as f64 / trials as f64;
        eprintln!(
            "Welch t, {trials} synthetic A/A comparisons of 5 rounds each: {called} called ({:.1}%)",
            share * 100.0
        );
        // Welch's df approximation is slightly conservative at n = 5.
        assert!((0.02..=0.065).contains(&share), "A/A false-call share {share}");
    }

    #[test]
    fn a_ten_percent_shift_is_called_the_right_way_round() {
        let mut rng = Rng::new(3);
        let a: Vec<f64> = (0..5).map(|_| 100.0 + rng.normal()).collect();
        let b: Vec<f64> = (0..5).map(|_| 110.0 + rng.normal()).collect();
        let i = paired_t(&a, &b).unwrap();
        assert!(i.lo > 0.0, "{i:?}");
        let rel = i.relative_to(100.0).unwrap();
        assert!(rel.lo < 10.0 && rel.hi > 10.0, "{rel:?}");
    }
}
