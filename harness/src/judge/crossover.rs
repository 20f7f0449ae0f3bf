//! Where a verdict flips along one numeric axis: a log-scale bisection
//! over probes, each probe a comparison of two arms judged like any other
//! ([`super::difference`]: the same paired rounds, the same 95% interval).
//! Pure: given the bounds, the resolution and the probes judged so far, it
//! says which value to probe next, or what was found.
//!
//! A probe's sign is the sign of B − A where its interval excludes zero,
//! and zero where it does not (no detectable difference). The search needs
//! opposite signs at the two bounds; between them it narrows two gaps: from
//! the last probe with the low bound's sign to the probe after it, and from
//! the probe before the first with the high bound's sign to that probe,
//! until each gap is within the resolution (a ratio: 0.25 stops when the
//! upper value is at most 1.25 times the lower) or holds no whole number
//! more for a whole-number axis. The bracket is then [the last probe with
//! the low bound's sign, the first with the high bound's]; probes between
//! them, if any, found no detectable difference.

use serde::{Deserialize, Serialize};

use super::difference::Row;

/// What is searched: the bounds of the axis, the resolution, and whether
/// the axis takes whole numbers only.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Search {
    pub low: f64,
    pub high: f64,
    pub resolution: f64,
    pub whole: bool,
    /// The most probes the search may run.
    pub max_probes: usize,
}

/// One judged probe: the axis value and the row of B against A there.
#[derive(Debug, Clone)]
pub struct Probe {
    pub value: f64,
    pub row: Row,
}

/// What the search says next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Run a probe at this value.
    Probe(f64),
    /// The verdict changes sign between `below` and `above`.
    Bracket { below: f64, above: f64 },
    /// The bounds do not have opposite signs: no crossover in the range.
    NoneInRange,
    /// The probes allowed were spent before the bracket was narrow enough;
    /// the best bracket so far.
    OutOfProbes { below: f64, above: f64 },
}

/// The sign of B − A a row's verdict supports: 0 where no difference was
/// detected (or the row was not judged).
pub fn sign(row: &Row) -> i8 {
    match (row.verdict.is_detectable(), row.diff) {
        (true, Some(d)) if d.lo > 0.0 => 1,
        (true, Some(d)) if d.hi < 0.0 => -1,
        _ => 0,
    }
}

/// The next step of `search` after `probes` (in any order).
pub fn next(search: &Search, probes: &[Probe]) -> Step {
    let at = |v: f64| probes.iter().find(|p| p.value == v).map(|p| sign(&p.row));
    let (Some(s_low), Some(s_high)) = (at(search.low), at(search.high)) else {
        let missing = if at(search.low).is_none() { search.low } else { search.high };
        return Step::Probe(missing);
    };
    if s_low == 0 || s_high == 0 || s_low == s_high {
        return Step::NoneInRange;
    }
    let mut sorted: Vec<(f64, i8)> = probes
        .iter()
        .filter(|p| p.value >= search.low && p.value <= search.high)
        .map(|p| (p.value, sign(&p.row)))
        .collect();
    sorted.sort_by(|x, y| x.0.total_cmp(&y.0));
    // The first probe with the high bound's sign, and the last one below it
    // with the low bound's sign.
    let first_high = sorted.iter().position(|p| p.1 == s_high).unwrap_or(sorted.len() - 1);
    let last_low = sorted[..first_high].iter().rposition(|p| p.1 == s_low).unwrap_or(0);
    let (below, above) = (sorted[last_low].0, sorted[first_high].0);
    let gaps = [(sorted[last_low].0, sorted[last_low + 1].0), (sorted[first_high - 1].0, sorted[first_high].0)];
    for (lo, hi) in gaps {
        if let Some(mid) = midpoint(search, lo, hi) {
            if probes.len() >= search.max_probes {
                return Step::OutOfProbes { below, above };
            }
            return Step::Probe(mid);
        }
    }
    Step::Bracket { below, above }
}

/// The log-scale midpoint of a gap still wider than the resolution, `None`
/// once it is narrow enough (or holds no other whole number).
fn midpoint(search: &Search, lo: f64, hi: f64) -> Option<f64> {
    if hi <= lo * (1.0 + search.resolution) {
        return None;
    }
    let mid = (lo * hi).sqrt();
    let mid = if search.whole { mid.round() } else { mid };
    (mid > lo && mid < hi).then_some(mid)
}

/// The most probes a search over `search` can take: its two bounds, and
/// each of two gaps halved (in log scale) until within the resolution.
pub fn most_probes(search: &Search) -> usize {
    let halvings = ((search.high / search.low).ln() / (1.0 + search.resolution).ln()).log2().ceil().max(0.0);
    (2 + 2 * halvings as usize).min(search.max_probes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::difference::Method;
    use crate::judge::inference::Interval;
    use crate::judge::metrics::by_key;

    /// A judged row of B − A = `diff` ± 1 µs of downstream CPU per request.
    fn judged(diff: f64) -> Row {
        let interval = Interval { estimate: diff, lo: diff - 1.0, hi: diff + 1.0 };
        let metric = by_key("cpu_us_per_request.downstream").unwrap();
        let verdict = crate::judge::difference::verdict(metric.better, Some(interval), 3);
        Row {
            metric,
            a: Some(100.0),
            b: Some(100.0 + diff),
            diff: Some(interval),
            method: Method::PairedT,
            rounds: 3,
            verdict,
            noise_percent: None,
        }
    }

    /// Runs the search to its end against `world`, the row at each value.
    fn search(s: &Search, world: impl Fn(f64) -> Row) -> (Step, Vec<f64>) {
        let mut probes = Vec::new();
        loop {
            match next(s, &probes) {
                Step::Probe(v) => {
                    assert!(!probes.iter().any(|p: &Probe| p.value == v), "probed {v} twice");
                    probes.push(Probe { value: v, row: world(v) });
                }
                done => return (done, probes.iter().map(|p| p.value).collect()),
            }
        }
    }

    const ITEMS: Search = Search { low: 1.0, high: 10_000.0, resolution: 0.25, whole: true, max_probes: 24 };

    #[test]
    fn a_known_crossing_is_bracketed_within_one_step() {
        // REST's CPU per request is lower below 40 items and higher from 40 on.
        let world = |v: f64| judged(if v < 40.0 { -5.0 } else { 5.0 });
        let (step, probed) = search(&ITEMS, world);
        let Step::Bracket { below, above } = step else { panic!("{step:?} after {probed:?}") };
        assert!(below < 40.0 && above >= 40.0, "{below}..{above}");
        assert!(above <= below * 1.25 || above - below <= 1.0, "{below}..{above} wider than one step");
        assert!(probed.len() <= most_probes(&ITEMS), "{probed:?}");
    }

    #[test]
    fn a_tie_zone_between_the_signs_is_kept_inside_the_bracket() {
        let world = |v: f64| {
            judged(if v < 30.0 {
                -5.0
            } else if v <= 300.0 {
                0.0
            } else {
                5.0
            })
        };
        let (step, probed) = search(&ITEMS, world);
        let Step::Bracket { below, above } = step else { panic!("{step:?} after {probed:?}") };
        assert!(below < 30.0 && below * 1.25 >= 30.0 - 1.0, "{below}");
        assert!(above > 300.0 && above <= 300.0 * 1.25 + 1.0, "{above}");
    }

    #[test]
    fn an_a_a_plan_finds_no_crossover() {
        // The same arm twice: every interval holds zero.
        let (step, probed) = search(&ITEMS, |_| judged(0.3));
        assert_eq!(step, Step::NoneInRange);
        assert_eq!(probed, [1.0, 10_000.0]);
        // One sign over the whole range: none either.
        assert_eq!(search(&ITEMS, |_| judged(-4.0)).0, Step::NoneInRange);
    }

    #[test]
    fn the_probes_are_bounded() {
        let tight = Search { max_probes: 4, resolution: 0.01, ..ITEMS };
        let (step, probed) = search(&tight, |v| judged(if v < 40.0 { -5.0 } else { 5.0 }));
        assert!(matches!(step, Step::OutOfProbes { below, above } if below < 40.0 && above >= 40.0), "{step:?}");
        assert_eq!(probed.len(), 4);
    }
}
