//! Where each option wins across an experiment: every decision row of each
//! arm against the first, judged cell by cell exactly as a comparison
//! judges it ([`super::difference::compare`]: paired rounds, 95% interval),
//! and the cells along one axis grouped into stretches of one verdict. The
//! cells that share every other axis's values make one group. Pure: the
//! words are `export`'s.

use super::difference::{Row, Verdict, compare};
use crate::result::RunResult;

/// The rows an experiment's decision states conditions for: CPU per
/// request of each tier, latency p50 and p99, the internal hop's wire
/// bytes, memory. A tier a run does not have (proxy, balancer) is left out.
pub const DECISION_ROWS: &[&str] = &[
    "cpu_us_per_request.caller",
    "cpu_us_per_request.downstream",
    "cpu_us_per_request.proxy",
    "cpu_us_per_request.balancer",
    "p50",
    "p99",
    "internal.request_wire_bytes",
    "internal.response_wire_bytes",
    "rss_mib_mean.caller",
    "rss_mib_mean.downstream",
];

/// One cell as the judge sees it: its axis values and its runs in compared
/// order (none when it did not finish).
#[derive(Debug, Clone, Copy)]
pub struct CellRuns<'a> {
    pub values: &'a [(String, String)],
    pub runs: &'a [RunResult],
}

/// Which side a cell's row supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The first arm (the baseline) is better.
    A,
    /// The other arm is better.
    B,
    /// No detectable difference (or one under the printed resolution).
    Tie,
    /// The row could not be judged here: why.
    NotJudged(Verdict),
    /// The cell did not finish.
    NotRun,
}

impl Side {
    fn of(v: Verdict) -> Side {
        match v {
            Verdict::ABetter => Side::A,
            Verdict::BBetter => Side::B,
            Verdict::NoDifference | Verdict::BelowResolution | Verdict::BHigher | Verdict::BLower => Side::Tie,
            v @ (Verdict::NotJudged { .. } | Verdict::NotMeasured | Verdict::OneProcess) => Side::NotJudged(v),
        }
    }
}

/// One cell of a row: its value on the axis, the side, the judged row, and
/// whether both arms were valid measurements.
#[derive(Debug, Clone)]
pub struct Judged {
    pub value: String,
    pub side: Side,
    pub row: Option<Row>,
    pub valid: bool,
}

/// Neighbouring cells (indices into [`RowConditions::cells`], inclusive)
/// with one side and one validity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stretch {
    pub side: Side,
    pub from: usize,
    pub to: usize,
    pub valid: bool,
}

/// One row of arm `b` against the first, along the axis.
#[derive(Debug, Clone)]
pub struct RowConditions {
    pub key: &'static str,
    pub b: usize,
    pub cells: Vec<Judged>,
    pub stretches: Vec<Stretch>,
}

/// The cells that share the other axes' values (`fixed`), their rows.
#[derive(Debug, Clone)]
pub struct Group {
    pub fixed: Vec<(String, String)>,
    /// True when every value on the axis is a number (sorted as numbers).
    pub numeric: bool,
    pub rows: Vec<RowConditions>,
}

/// The conditions along `axis` (empty for a plan of one cell).
pub fn conditions(axis: &str, cells: &[CellRuns<'_>]) -> Vec<Group> {
    let fixed =
        |c: &CellRuns<'_>| -> Vec<(String, String)> { c.values.iter().filter(|(f, _)| f != axis).cloned().collect() };
    type Values = Vec<(String, String)>;
    let mut groups: Vec<(Values, Vec<CellRuns<'_>>)> = Vec::new();
    for c in cells {
        let f = fixed(c);
        match groups.iter_mut().find(|(g, _)| *g == f) {
            Some((_, members)) => members.push(*c),
            None => groups.push((f, vec![*c])),
        }
    }
    groups.into_iter().map(|(fixed, members)| group(axis, fixed, members)).collect()
}

fn value_on<'a>(c: &CellRuns<'a>, axis: &str) -> &'a str {
    c.values.iter().find(|(f, _)| f == axis).map_or("", |(_, v)| v.as_str())
}

fn group(axis: &str, fixed: Vec<(String, String)>, mut members: Vec<CellRuns<'_>>) -> Group {
    let number = |c: &CellRuns<'_>| value_on(c, axis).parse::<f64>().ok();
    let numeric = members.iter().all(|c| number(c).is_some());
    if numeric {
        members.sort_by(|x, y| number(x).unwrap_or(0.0).total_cmp(&number(y).unwrap_or(0.0)));
    }
    let arms = members.iter().map(|c| c.runs.len()).max().unwrap_or(0);
    // Each cell's rows of every other arm against the first, judged once.
    let judged: Vec<Vec<Vec<Row>>> =
        members.iter().map(|c| (1..c.runs.len()).map(|b| compare(&c.runs[0], &c.runs[b])).collect()).collect();
    let mut rows = Vec::new();
    for b in 1..arms {
        for key in DECISION_ROWS {
            let cells: Vec<Judged> = members
                .iter()
                .zip(&judged)
                .map(|(c, rows)| {
                    let row = rows.get(b - 1).and_then(|rows| rows.iter().find(|r| r.metric.key == *key));
                    let valid = c.runs.first().is_some_and(RunResult::is_valid)
                        && c.runs.get(b).is_some_and(RunResult::is_valid);
                    let side = row.map_or(Side::NotRun, |r| Side::of(r.verdict));
                    Judged { value: value_on(c, axis).to_owned(), side, row: row.cloned(), valid }
                })
                .collect();
            let measured = cells.iter().any(|j| j.row.as_ref().is_some_and(|r| r.a.is_some() || r.b.is_some()));
            if measured {
                rows.push(RowConditions { key, b, stretches: stretches(&cells), cells });
            }
        }
    }
    Group { fixed, numeric, rows }
}

/// Neighbouring cells of one side and one validity, in axis order.
pub fn stretches(cells: &[Judged]) -> Vec<Stretch> {
    let mut out: Vec<Stretch> = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        match out.last_mut() {
            Some(s) if s.side == c.side && s.valid == c.valid => s.to = i,
            _ => out.push(Stretch { side: c.side, from: i, to: i, valid: c.valid }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    /// A cell at `items`, REST's figures `rest_scale` times gRPC's.
    type Made = (Vec<(String, String)>, Vec<RunResult>);

    fn cell(items: &str, rest_scale: f64) -> Made {
        let (g, r) = testing::both(3, 1.0, rest_scale);
        (vec![("items".to_owned(), items.to_owned())], vec![g, r])
    }

    #[test]
    fn cells_along_the_axis_group_into_stretches_of_one_verdict() {
        // Out of order on purpose: the axis is sorted as numbers.
        let made = [cell("100", 1.3), cell("1", 0.7), cell("30", 1.0), cell("10", 0.7), cell("1000", 1.3)];
        let cells: Vec<CellRuns<'_>> = made.iter().map(|(v, r)| CellRuns { values: v, runs: r }).collect();
        let groups = conditions("items", &cells);
        assert_eq!(groups.len(), 1);
        assert!(groups[0].numeric);
        let cpu = groups[0].rows.iter().find(|r| r.key == "cpu_us_per_request.downstream").unwrap();
        let values: Vec<&str> = cpu.cells.iter().map(|c| c.value.as_str()).collect();
        assert_eq!(values, ["1", "10", "30", "100", "1000"]);
        let sides: Vec<(Side, usize, usize)> = cpu.stretches.iter().map(|s| (s.side, s.from, s.to)).collect();
        assert_eq!(sides, [(Side::B, 0, 1), (Side::Tie, 2, 2), (Side::A, 3, 4)]);
    }
}
