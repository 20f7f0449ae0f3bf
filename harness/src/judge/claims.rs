//! Whether an experiment agrees with the claims its plan reproduces
//! (`config::claims`): at every cell a claim covers, the option it names
//! better is judged against the one it beat, as a comparison judges two
//! arms ([`super::difference::compare`]), in direction and roughly in ratio
//! (absolute numbers differ between machines; the direction should not).

use super::conditions::CellRuns;
use super::difference::{Row, Verdict, compare};
use super::metrics::{Better, by_key};
use crate::config::claims::Claim;
use crate::result::RunResult;

/// How far outside its stated range a ratio still agrees "roughly": within
/// this factor of either end.
pub const ROUGHLY_FACTOR: f64 = 2.0;

/// One comparison a claim rests on.
#[derive(Debug, Clone)]
pub struct Evidence {
    /// Where: the cell's axis values, and the arm when the claim compares
    /// values of an axis.
    pub at: String,
    /// The row of the claim's better option (B) against what it beat (A).
    pub row: Row,
    /// The worse side's value over the better side's (higher-is-better rows
    /// inverted), from the arms' means.
    pub ratio: Option<f64>,
    /// Both runs were valid measurements.
    pub valid: bool,
}

impl Evidence {
    /// The direction this comparison shows: `Some(true)` the claim's,
    /// `Some(false)` the opposite, `None` no detectable difference or not judged.
    pub fn direction(&self) -> Option<bool> {
        match self.row.verdict {
            Verdict::BBetter => Some(true),
            Verdict::ABetter => Some(false),
            _ => None,
        }
    }

    /// Whether the ratio is in the stated range, roughly in it, or outside.
    pub fn fit(&self, stated: Option<(f64, f64)>) -> Fit {
        match (self.ratio, stated) {
            (_, None) => Fit::NotStated,
            (None, Some(_)) => Fit::Unknown,
            (Some(r), Some((lo, hi))) if r >= lo && r <= hi => Fit::Within,
            (Some(r), Some((lo, hi))) if r >= lo / ROUGHLY_FACTOR && r <= hi * ROUGHLY_FACTOR => Fit::Roughly,
            (Some(_), Some(_)) => Fit::Outside,
        }
    }
}

/// A ratio against the claim's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    Within,
    Roughly,
    Outside,
    Unknown,
    NotStated,
}

/// What the run says of a claim, everything considered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agreement {
    /// Every comparison shows the claim's direction and a ratio within (or
    /// roughly within) the stated range.
    Agrees,
    /// The direction everywhere, but a ratio further than a factor 2 off.
    DirectionOnly,
    /// No comparison against it, but some found no detectable difference.
    NotShown,
    /// Some comparison shows the opposite direction.
    Disagrees,
    /// Nothing to judge: no finished cell it covers, or too few rounds.
    NotChecked,
}

/// A claim and the comparisons it was checked against.
#[derive(Debug, Clone)]
pub struct Checked<'c> {
    pub claim: &'c Claim,
    pub evidence: Vec<Evidence>,
    pub agreement: Agreement,
}

/// The claim checked against the experiment's cells.
pub fn check<'c>(claim: &'c Claim, cells: &[CellRuns<'_>]) -> Checked<'c> {
    let evidence: Vec<Evidence> = match &claim.across {
        None => cells.iter().filter(|c| claim.covers(c.values)).filter_map(|c| between_arms(claim, c)).collect(),
        Some(axis) => across(claim, axis, cells),
    };
    let judged: Vec<&Evidence> = evidence.iter().filter(|e| judged(e.row.verdict)).collect();
    let agreement = if judged.is_empty() {
        Agreement::NotChecked
    } else if judged.iter().any(|e| e.direction() == Some(false)) {
        Agreement::Disagrees
    } else if judged.iter().any(|e| e.direction().is_none()) {
        Agreement::NotShown
    } else if judged.iter().any(|e| matches!(e.fit(claim.ratio), Fit::Outside | Fit::Unknown)) {
        Agreement::DirectionOnly
    } else {
        Agreement::Agrees
    };
    Checked { claim, evidence, agreement }
}

fn judged(v: Verdict) -> bool {
    !matches!(v, Verdict::NotJudged { .. } | Verdict::NotMeasured | Verdict::OneProcess)
}

/// `items 100`, the cell's axis values in words.
fn cell_text(values: &[(String, String)]) -> String {
    let parts: Vec<String> = values.iter().map(|(f, v)| format!("{f} {v}")).collect();
    if parts.is_empty() { "the one cell".to_owned() } else { parts.join(", ") }
}

fn evidence(claim: &Claim, at: String, worse: &RunResult, better: &RunResult) -> Option<Evidence> {
    let metric = by_key(&claim.row)?;
    let row = compare(worse, better).into_iter().find(|r| r.metric.key == metric.key)?;
    let ratio = match (row.a, row.b, metric.better) {
        (Some(a), Some(b), Better::Higher) if a > 0.0 => Some(b / a),
        (Some(a), Some(b), _) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let valid = worse.is_valid() && better.is_valid();
    Some(Evidence { at, row, ratio, valid })
}

/// The arm `name` (`grpc`, `rest-pb`) among a cell's runs.
fn arm<'r>(runs: &'r [RunResult], name: &str) -> Option<&'r RunResult> {
    runs.iter().find(|r| r.config.transport.as_str() == name)
}

fn between_arms(claim: &Claim, c: &CellRuns<'_>) -> Option<Evidence> {
    let better = arm(c.runs, &claim.better)?;
    let worse = match &claim.than {
        Some(t) => arm(c.runs, t)?,
        None => c.runs.iter().find(|r| r.config.transport.as_str() != claim.better)?,
    };
    evidence(claim, cell_text(c.values), worse, better)
}

/// A claim across an axis: each cell at the better value against the cell
/// at the value it beat with every other axis the same, arm by arm.
fn across(claim: &Claim, axis: &str, cells: &[CellRuns<'_>]) -> Vec<Evidence> {
    let Some(than) = &claim.than else { return Vec::new() };
    let at = |c: &CellRuns<'_>, v: &str| c.values.iter().any(|(f, x)| f == axis && x == v);
    let others =
        |c: &CellRuns<'_>| -> Vec<(String, String)> { c.values.iter().filter(|(f, _)| f != axis).cloned().collect() };
    let mut out = Vec::new();
    for good in cells.iter().filter(|c| at(c, &claim.better) && claim.covers(c.values)) {
        let Some(bad) = cells.iter().find(|c| at(c, than) && others(c) == others(good)) else { continue };
        for b in good.runs {
            let name = b.config.transport.as_str();
            let Some(w) = arm(bad.runs, name) else { continue };
            let mut where_ = others(good);
            where_.push(("arm".to_owned(), b.config.transport.title().to_owned()));
            out.extend(evidence(claim, cell_text(&where_), w, b));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::claims::{Test, Where};
    use crate::testing;

    fn claim(better: &str, ratio: (f64, f64)) -> Claim {
        Claim {
            line: 1,
            lines: Vec::new(),
            says: "gRPC spends less downstream CPU per call at hundreds of records".into(),
            source: "a benchmark".into(),
            row: "cpu_us_per_request.downstream".into(),
            better: better.into(),
            than: None,
            across: None,
            wheres: vec![Where { flag: "items".into(), test: Test::AtLeast(100.0), line: 2 }],
            ratio: Some(ratio),
        }
    }

    type Made = (Vec<(String, String)>, Vec<RunResult>);

    fn cells() -> Vec<Made> {
        // REST 0.9× gRPC's figures at 1 item, 1.3× at 100 and 1000.
        [("1", 0.9), ("100", 1.3), ("1000", 1.3)]
            .iter()
            .map(|(items, rest)| {
                let (g, r) = testing::both(3, 1.0, *rest);
                (vec![("items".to_owned(), (*items).to_owned())], vec![g, r])
            })
            .collect()
    }

    #[test]
    fn a_claim_that_holds_agrees_in_direction_and_ratio() {
        let made = cells();
        let cells: Vec<CellRuns<'_>> = made.iter().map(|(v, r)| CellRuns { values: v, runs: r }).collect();
        let c = claim("grpc", (1.2, 2.0));
        let checked = check(&c, &cells);
        // Only the cells at items ≥ 100.
        let at: Vec<&str> = checked.evidence.iter().map(|e| e.at.as_str()).collect();
        assert_eq!(at, ["items 100", "items 1000"]);
        assert_eq!(checked.agreement, Agreement::Agrees, "{checked:?}");
        let r = checked.evidence[0].ratio.unwrap();
        assert!((r - 1.3).abs() < 0.02, "{r}");
        // A ratio stated far from 1.3 keeps the direction only; within 2× of it, roughly.
        assert_eq!(check(&claim("grpc", (1.5, 10.0)), &cells).evidence[0].fit(Some((1.5, 10.0))), Fit::Roughly);
        assert_eq!(check(&claim("grpc", (5.0, 10.0)), &cells).agreement, Agreement::DirectionOnly);
    }

    #[test]
    fn a_claim_that_fails_disagrees() {
        let made = cells();
        let cells: Vec<CellRuns<'_>> = made.iter().map(|(v, r)| CellRuns { values: v, runs: r }).collect();
        let rest = claim("rest", (1.5, 10.0));
        let checked = check(&rest, &cells);
        assert_eq!(checked.agreement, Agreement::Disagrees, "{checked:?}");
        assert!(checked.evidence.iter().all(|e| e.direction() == Some(false)));
        // Covering no finished cell, nothing is checked.
        let mut none = claim("grpc", (1.5, 10.0));
        none.wheres[0].test = Test::AtLeast(1e6);
        assert_eq!(check(&none, &cells).agreement, Agreement::NotChecked);
    }
}
