//! Confidence intervals for the difference between two arms, and the verdict
//! each interval supports. Pure functions over numbers, unit tested on
//! synthetic data (A/A with noise, A/B with a known shift, too few rounds).
//!
//! Two methods, both at 95%:
//!
//! * **Per-round figures** (CPU µs/request, RSS, bytes, throughput, …): the
//!   Student t interval of the mean paired difference over rounds run as
//!   counterbalanced pairs (round k of A beside round k of B), or Welch's
//!   interval when the arms come from separate runs. The t quantile (statrs)
//!   is exact for two, three or four pairs, where a normal quantile would be
//!   far too narrow.
//! * **Latency percentiles**: a two-level bootstrap (Davison & Hinkley 1997,
//!   §3.8): resample the round pairs with replacement, then the requests
//!   within each chosen round from its stored histogram. Resampling a round's
//!   requests and taking the k-th smallest is drawing `U ~ Beta(k, n+1-k)` and
//!   reading the round's quantile at `U` (the k-th order statistic of n
//!   uniforms, mapped through the empirical distribution), so one draw per
//!   round replaces n. The interval is the expanded percentile interval
//!   (Hesterberg 2015), which widens the percentiles for the small number of
//!   rounds the bootstrap can resample. Resampling at both levels counts a
//!   round's sampling noise twice (Davison & Hinkley discuss this for
//!   two-stage data), so the interval is conservative: synthetic A/A tests
//!   call fewer than the nominal 5% of latency rows different. A latency
//!   difference it calls is there; one it misses may show with more rounds.

use hdrhistogram::Histogram;
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// The confidence level of every interval.
pub const CONFIDENCE: f64 = 0.95;
/// Fewest rounds per arm (pairs, in a counterbalanced run) to judge a row.
pub const MIN_ROUNDS: usize = 3;
/// Bootstrap resamples per latency row.
pub const RESAMPLES: usize = 1000;
/// The bootstrap's fixed seed: the same run.json gives the same report.
pub const SEED: u64 = 0x5eed_2026_0014;

/// A difference B − A and its confidence interval, in the metric's unit.
#[derive(Debug, Clone, Copy, PartialEq)]
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

/// One round's latencies as a compact distribution: the recorded values in
/// ascending order and the running count up to each.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    values: Vec<f64>,
    cumulative: Vec<u64>,
}

impl Distribution {
    /// From `(value, count)` pairs in ascending order of value.
    pub fn from_counts(pairs: impl IntoIterator<Item = (f64, u64)>) -> Option<Distribution> {
        let (mut values, mut cumulative, mut total) = (Vec::new(), Vec::new(), 0u64);
        for (v, c) in pairs.into_iter().filter(|(_, c)| *c > 0) {
            total += c;
            values.push(v);
            cumulative.push(total);
        }
        (total > 0).then_some(Distribution { values, cumulative })
    }

    /// A µs histogram's buckets, in milliseconds (the reports' unit).
    pub fn from_histogram(h: &Histogram<u64>) -> Option<Distribution> {
        Distribution::from_counts(
            h.iter_recorded()
                .map(|v| (h.highest_equivalent(v.value_iterated_to()) as f64 / 1000.0, v.count_at_value())),
        )
    }

    pub fn count(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }

    /// The smallest value with at least `u` of the requests at or below it.
    pub fn at_fraction(&self, u: f64) -> f64 {
        let rank = ((u * self.count() as f64).ceil() as u64).clamp(1, self.count());
        let i = self.cumulative.partition_point(|c| *c < rank);
        self.values[i.min(self.values.len() - 1)]
    }

    /// Quantile `q` of one resample of this round's requests.
    fn resampled_quantile(&self, q: f64, rng: &mut Rng) -> f64 {
        let n = self.count() as f64;
        let k = (q * n).ceil().clamp(1.0, n);
        self.at_fraction(rng.beta(k, n + 1.0 - k))
    }
}

/// Rounds of the two arms for the bootstrap; `paired` when round k of A and
/// round k of B ran side by side (resampled together).
#[derive(Debug, Clone, Copy)]
pub struct Rounds<'a> {
    pub a: &'a [Distribution],
    pub b: &'a [Distribution],
    pub paired: bool,
}

/// The expanded-percentile bootstrap interval of mean-over-rounds quantile
/// `q` of B minus that of A; `estimate` is the difference of the rounds'
/// own quantiles. `None` under two rounds on either side.
pub fn bootstrap_quantile(r: Rounds<'_>, q: f64, resamples: usize, seed: u64) -> Option<Interval> {
    let n = r.a.len().min(r.b.len());
    if n < 2 {
        return None;
    }
    let own = |d: &[Distribution]| d.iter().map(|x| x.at_fraction(q)).sum::<f64>() / d.len() as f64;
    let (a, b) = if r.paired { (&r.a[..n], &r.b[..n]) } else { (r.a, r.b) };
    let estimate = own(b) - own(a);
    let mut rng = Rng::new(seed);
    let mut diffs = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let diff = if r.paired {
            (0..n)
                .map(|_| {
                    let k = rng.below(n);
                    b[k].resampled_quantile(q, &mut rng) - a[k].resampled_quantile(q, &mut rng)
                })
                .sum::<f64>()
                / n as f64
        } else {
            resampled_mean(b, q, &mut rng) - resampled_mean(a, q, &mut rng)
        };
        diffs.push(diff);
    }
    diffs.sort_by(f64::total_cmp);
    let tail = expanded_tail(n);
    let at = |p: f64| diffs[((p * resamples as f64).floor() as usize).min(resamples - 1)];
    Some(Interval { estimate, lo: at(tail), hi: at(1.0 - tail) })
}

/// The mean over one resample of `rounds` (chosen with replacement) of each
/// chosen round's resampled quantile `q`.
fn resampled_mean(rounds: &[Distribution], q: f64, rng: &mut Rng) -> f64 {
    (0..rounds.len()).map(|_| rounds[rng.below(rounds.len())].resampled_quantile(q, rng)).sum::<f64>()
        / rounds.len() as f64
}

/// The tail probability of Hesterberg's expanded percentile interval: the
/// normal tail at `sqrt(n/(n-1)) * t(0.975, n-1)` instead of 2.5%.
pub fn expanded_tail(n: usize) -> f64 {
    let n = n as f64;
    let z = (n / (n - 1.0)).sqrt() * t_quantile(0.5 + CONFIDENCE / 2.0, n - 1.0);
    1.0 - normal_cdf(z)
}

/// Above this many degrees of freedom Student's t is the normal to the
/// precision any interval here is printed at (the t quantile at 10⁴ df is
/// within 2e-4 of the normal one); statrs's t needs a finite count.
const NORMAL_DF: f64 = 1e4;

/// The standard normal distribution function.
pub fn normal_cdf(x: f64) -> f64 {
    Normal::standard().cdf(x)
}

/// Quantile `p` (0 < p < 1) of Student's t with `df` degrees of freedom
/// (the normal quantile beyond [`NORMAL_DF`]).
pub fn t_quantile(p: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) if df <= NORMAL_DF => t.inverse_cdf(p),
        _ => Normal::standard().inverse_cdf(p),
    }
}

/// A small deterministic generator (SplitMix64) for the bootstrap: reports
/// must come out the same from the same run.json.
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

    /// Gamma(shape, 1) (Marsaglia & Tsang 2000; shape < 1 by boosting).
    pub fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            return self.gamma(shape + 1.0) * self.uniform().powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v > 0.0 && self.uniform().ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }

    /// Beta(a, b) as X / (X + Y) of two gamma draws.
    pub fn beta(&mut self, a: f64, b: f64) -> f64 {
        let x = self.gamma(a);
        let y = self.gamma(b);
        x / (x + y)
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
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
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

    /// A round of `n` latencies around `centre_ms`: a floor plus exponential noise.
    fn round(rng: &mut Rng, n: usize, centre_ms: f64) -> Distribution {
        let mut v: Vec<f64> = (0..n).map(|_| centre_ms - 1.0 * (1.0 - rng.uniform()).ln()).collect();
        v.sort_by(f64::total_cmp);
        Distribution::from_counts(v.into_iter().map(|x| (x, 1))).unwrap()
    }

    /// Synthetic A/A latency comparisons (five round pairs, drift between
    /// rounds): the bootstrap of p99 calls few of them different.
    #[test]
    fn the_latency_bootstrap_calls_few_a_and_a_rows() {
        let mut rng = Rng::new(4);
        let trials = 200;
        let mut called = 0;
        for t in 0..trials {
            let drift: Vec<f64> = (0..5).map(|_| 0.5 * rng.normal()).collect();
            let a: Vec<Distribution> = drift.iter().map(|d| round(&mut rng, 1000, 500.0 + d)).collect();
            let b: Vec<Distribution> = drift.iter().map(|d| round(&mut rng, 1000, 500.0 + d)).collect();
            let r = Rounds { a: &a, b: &b, paired: true };
            called += usize::from(bootstrap_quantile(r, 0.99, 400, t).unwrap().excludes_zero());
        }
        let share = called as f64 / f64::from(trials as u32);
        eprintln!(
            "latency bootstrap (p99), {trials} synthetic A/A comparisons of 5 round pairs: {called} called ({:.1}%)",
            share * 100.0
        );
        assert!(share <= 0.08, "A/A false-call share {share}");
    }

    #[test]
    fn the_latency_bootstrap_finds_a_ten_percent_shift_the_right_way_round() {
        let mut rng = Rng::new(5);
        let a: Vec<Distribution> = (0..5).map(|_| round(&mut rng, 1000, 50.0)).collect();
        let b: Vec<Distribution> = (0..5).map(|_| round(&mut rng, 1000, 55.0)).collect();
        let i = bootstrap_quantile(Rounds { a: &a, b: &b, paired: true }, 0.5, RESAMPLES, SEED).unwrap();
        assert!(i.lo > 0.0 && (i.estimate - 5.0).abs() < 0.5, "{i:?}");
        let back = bootstrap_quantile(Rounds { a: &b, b: &a, paired: false }, 0.5, RESAMPLES, SEED).unwrap();
        assert!(back.hi < 0.0, "{back:?}");
        // The same inputs and seed give the same interval.
        assert_eq!(i, bootstrap_quantile(Rounds { a: &a, b: &b, paired: true }, 0.5, RESAMPLES, SEED).unwrap());
        assert!(bootstrap_quantile(Rounds { a: &a[..1], b: &b[..1], paired: true }, 0.5, 10, 1).is_none());
    }

    #[test]
    fn a_distribution_reads_quantiles_like_the_histogram() {
        let mut h = crate::measure::histogram::new_histogram();
        for us in 1..=1000u64 {
            h.record(us * 1000).unwrap();
        }
        let d = Distribution::from_histogram(&h).unwrap();
        assert_eq!(d.count(), 1000);
        assert!((d.at_fraction(0.99) - h.value_at_quantile(0.99) as f64 / 1000.0).abs() < 0.01);
        let mut rng = Rng::new(6);
        let m: f64 = (0..2000).map(|_| rng.beta(3.0, 7.0)).sum::<f64>() / 2000.0;
        assert!((m - 0.3).abs() < 0.01, "Beta(3, 7) mean {m}");
    }
}
