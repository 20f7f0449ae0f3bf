//! An experiment's `decision.md`: the conditions under which each option
//! wins, one sentence per decision row ([`crate::judge::conditions`]), a
//! crossover's bracket as its row's condition; and the summary's section on
//! the plan's claims ([`crate::judge::claims`]). Only bytes.

use std::fmt::Write as _;

use super::findings::name_and_unit;
use crate::judge::claims::{Agreement, Checked, Fit};
use crate::judge::conditions::{CellRuns, Group, RowConditions, Side, Stretch, conditions};
use crate::judge::difference::Verdict;
use crate::judge::experiment::{Crossover, Outcome};
use crate::judge::metrics::{Better, by_key};

/// The mark of a condition drawn from a run that was not a valid measurement.
const NOT_VALID: &str = "not a valid measurement";

/// `a`, `a and b`, `a, b and c`.
fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [head @ .., last] => format!("{} and {last}", head.join(", ")),
    }
}

/// What decision.md is drawn from.
#[derive(Debug)]
pub struct Context<'a> {
    pub plan_file: &'a str,
    /// The axis the cells are walked along (`None`: a plan of one cell).
    pub axis: Option<&'a str>,
    pub cells: &'a [CellRuns<'a>],
    /// The arms' names, in compared order.
    pub names: &'a [String],
    pub crossover: Option<&'a Crossover>,
}

/// `decision.md` of an experiment.
pub fn decision(c: &Context<'_>) -> String {
    let mut out = format!("# Where each option wins: {}\n\n", c.plan_file);
    let _ = writeln!(
        out,
        "Each row's verdict at every cell, judged as `harness compare` judges two arms (B − A with its 95% \
         interval over the cell's paired rounds), and the cells of one verdict named together. A condition \
         names the cells tried: between two of them the verdict is not known. The choice stays with people: \
         weigh the rows your team pays for.\n"
    );
    let axis = c.axis.unwrap_or("");
    let groups = conditions(axis, c.cells);
    if groups.iter().all(|g| g.rows.is_empty()) {
        let _ = writeln!(out, "No cell finished with two arms to compare.");
        return out;
    }
    let invalid = groups.iter().flat_map(|g| &g.rows).flat_map(|r| &r.cells).any(|j| !j.valid && j.row.is_some());
    if invalid {
        let _ = writeln!(
            out,
            "A condition marked **{NOT_VALID}** rests on a cell whose run was not a fair measurement (its \
             report.md says why): it is no basis for a choice there.\n"
        );
    }
    for g in &groups {
        if !g.fixed.is_empty() {
            let fixed: Vec<String> = g.fixed.iter().map(|(f, v)| format!("{f} {v}")).collect();
            let _ = writeln!(out, "## At {}\n", fixed.join(", "));
        }
        let mut last_b = 0;
        for r in &g.rows {
            if c.names.len() > 2 && r.b != last_b {
                let _ = writeln!(
                    out,
                    "{}### {} against {}\n",
                    if last_b > 0 { "\n" } else { "" },
                    name(c, r.b),
                    name(c, 0)
                );
            }
            last_b = r.b;
            let _ = writeln!(out, "- {}", row_sentence(c, g, r));
        }
        let _ = writeln!(out);
    }
    out
}

fn name<'n>(c: &'n Context<'_>, i: usize) -> &'n str {
    c.names.get(i).map_or("?", String::as_str)
}

/// One row's conditions: `**downstream CPU per request (µs)**: REST's is
/// lower at items ≤ 10, gRPC's at items ≥ 100; no detectable difference at
/// items 30 (95% intervals).`
fn row_sentence(c: &Context<'_>, g: &Group, r: &RowConditions) -> String {
    let Some(metric) = by_key(r.key) else { return String::new() };
    let (label, _) = name_and_unit(metric.label);
    let way = if metric.better == Better::Higher { "higher" } else { "lower" };
    if let Some(bracket) = c.crossover.filter(|x| x.row == r.key && r.b == 1).and_then(|x| bracket(c, x, way)) {
        return format!("**{label}**: {bracket}");
    }
    let conds = |want: &dyn Fn(Side) -> bool| -> Vec<String> {
        r.stretches.iter().filter(|s| want(s.side)).map(|s| span(c, g, r, s)).collect()
    };
    // The winners in axis order: whoever wins at the lowest cell first.
    let first = |side: Side| r.stretches.iter().find(|s| s.side == side).map_or(usize::MAX, |s| s.from);
    let mut winners = [(first(Side::A), name(c, 0), Side::A), (first(Side::B), name(c, r.b), Side::B)];
    winners.sort_by_key(|w| w.0);
    let mut said = Vec::new();
    for (_, who, side) in winners {
        let at = conds(&|s| s == side);
        if !at.is_empty() {
            let is = if said.is_empty() { format!(" is {way}") } else { String::new() };
            said.push(format!("{who}'s{is} at {}", list(&at)));
        }
    }
    let mut parts = Vec::new();
    if !said.is_empty() {
        parts.push(said.join(", "));
    }
    let tie = conds(&|s| s == Side::Tie);
    if !tie.is_empty() {
        parts.push(format!("no detectable difference at {}", list(&tie)));
    }
    for why in [Verdict::NotJudged { rounds: 0 }, Verdict::NotMeasured, Verdict::OneProcess] {
        let at =
            conds(&|s| matches!(s, Side::NotJudged(v) if std::mem::discriminant(&v) == std::mem::discriminant(&why)));
        if !at.is_empty() {
            parts.push(format!("not judged at {} ({})", list(&at), not_judged(r, why)));
        }
    }
    let not_run = conds(&|s| s == Side::NotRun);
    if !not_run.is_empty() {
        parts.push(format!("not run at {}", list(&not_run)));
    }
    format!("**{label}**: {} (95% intervals).", parts.join("; "))
}

fn not_judged(r: &RowConditions, why: Verdict) -> String {
    match why {
        Verdict::NotJudged { .. } => {
            let rounds = r.cells.iter().filter_map(|j| j.row.as_ref()).map(|x| x.rounds).min().unwrap_or(0);
            format!("{rounds} round(s); an interval needs {}", crate::judge::inference::MIN_ROUNDS)
        }
        Verdict::OneProcess => "one process per arm: rerun without --reuse-tiers".into(),
        _ => "not measured".into(),
    }
}

/// The cells of a stretch in words: `items ≤ 10`, `items 30–100`, `items ≥
/// 1000`, `compression gzip, zstd`, marked where a run was not valid.
fn span(c: &Context<'_>, g: &Group, r: &RowConditions, s: &Stretch) -> String {
    let axis = c.axis.unwrap_or("");
    let values: Vec<&str> = r.cells[s.from..=s.to].iter().map(|j| j.value.as_str()).collect();
    let (first, last, n) = (values[0], values[values.len() - 1], r.cells.len());
    let text = match (c.axis, g.numeric) {
        (None, _) => "the one configuration run".to_owned(),
        (Some(_), false) => format!("{axis} {}", values.join(", ")),
        _ if s.from == 0 && s.to + 1 == n && n > 1 => format!("every {axis} value tried ({first}–{last})"),
        _ if s.from == s.to => format!("{axis} {first}"),
        _ if s.from == 0 => format!("{axis} ≤ {last}"),
        _ if s.to + 1 == n => format!("{axis} ≥ {first}"),
        _ => format!("{axis} {first}–{last}"),
    };
    if s.valid || s.side == Side::NotRun { text } else { format!("{text} (**{NOT_VALID}**)") }
}

/// A crossover's row: the bracket is the condition.
fn bracket(c: &Context<'_>, x: &Crossover, way: &str) -> Option<String> {
    let (Outcome::Bracket { below, above } | Outcome::OutOfProbes { below, above }) = x.outcome else {
        return None;
    };
    let probe = |v: f64| x.probes.iter().find(|p| p.value == v);
    // B − A below zero: B's figure is the lower one.
    let winner = |v: f64| {
        let lower_is_b = probe(v).map_or(0, |p| p.sign) < 0;
        let b_wins = if way == "lower" { lower_is_b } else { !lower_is_b };
        if b_wins { name(c, 1) } else { name(c, 0) }
    };
    let interval = |v: f64| {
        probe(v)
            .and_then(|p| p.diff)
            .map_or("n/a".to_owned(), |d| format!("{:+.2} [{:+.2}, {:+.2}]", d.estimate, d.lo, d.hi))
    };
    let ran_out = if matches!(x.outcome, Outcome::OutOfProbes { .. }) { "; the probes ran out first" } else { "" };
    Some(format!(
        "{}'s is {way} at {flag} ≤ {below}, {}'s at {flag} ≥ {above}: the verdict flips between the two \
         (the crossover bracket{ran_out}; B − A with its 95% interval {} at {below}, {} at {above}).",
        winner(below),
        winner(above),
        interval(below),
        interval(above),
        flag = x.flag,
    ))
}

/// The summary's `## Claims checked`.
pub fn claims_section(checked: &[Checked<'_>]) -> String {
    if checked.is_empty() {
        return String::new();
    }
    let mut out = String::from("## Claims checked\n\n");
    out.push_str(
        "Each claim this plan reproduces, checked at every cell it covers as a comparison judges two arms (95% \
         intervals). Absolute numbers differ between machines: the check is the direction, and the ratio \
         roughly (within the stated range, or a factor 2 of it).\n\n",
    );
    for ch in checked {
        let cl = ch.claim;
        let label = by_key(&cl.row).map_or(cl.row.as_str(), |m| name_and_unit(m.label).0);
        let than = cl.than.as_deref().unwrap_or("the other arm");
        let across = cl.across.as_deref().map_or(String::new(), |a| format!(" ({a})"));
        let ratio = cl.ratio.map_or(String::new(), |(lo, hi)| format!(", by {lo}–{hi}×"));
        let verdict = match (ch.agreement, cl.ratio) {
            (Agreement::Agrees, Some(_)) => "Agrees in direction and roughly in ratio",
            (Agreement::Agrees, None) => "Agrees in direction",
            (Agreement::DirectionOnly, _) => "Agrees in direction, not in ratio",
            (Agreement::NotShown, _) => "Not shown: no detectable difference somewhere it claims one",
            (Agreement::Disagrees, _) => "Disagrees: the opposite direction",
            (Agreement::NotChecked, _) => "Not checked: no finished, judged cell it covers",
        };
        let _ = writeln!(
            out,
            "- **{verdict}**. Claim: {} ({}{across} better than {than} on {label}{}{ratio}). Source: {}.",
            cl.says,
            cl.better,
            cl.where_text(),
            cl.source
        );
        for e in &ch.evidence {
            let said = match (e.direction(), e.row.verdict) {
                (Some(true), _) => format!("{} better", cl.better),
                (Some(false), _) => format!("{than} better"),
                (None, Verdict::NoDifference | Verdict::BelowResolution) => "no detectable difference".to_owned(),
                (None, _) => "not judged".to_owned(),
            };
            let fit = match e.fit(cl.ratio) {
                Fit::Within => " (within the stated range)",
                Fit::Roughly => " (roughly: within a factor 2)",
                Fit::Outside => " (outside, by more than a factor 2)",
                Fit::Unknown | Fit::NotStated => "",
            };
            let ratio = e.ratio.map_or(String::new(), |r| format!(", ratio {r:.2}×{fit}"));
            let valid = if e.valid { "" } else { " **NOT a valid measurement**: no basis for agreeing." };
            let _ = writeln!(out, "  - {}: {said}{ratio}.{valid}", e.at);
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::RunResult;

    /// A cell at `items`, each arm's figures scaled (at most 1: both keep
    /// up, valid measurements), three paired rounds.
    fn cell(items: &str, grpc_scale: f64, rest_scale: f64) -> Made {
        let (g, r) = crate::testing::both(3, grpc_scale, rest_scale);
        (vec![("items".to_owned(), items.to_owned())], vec![g, r])
    }

    type Made = (Vec<(String, String)>, Vec<RunResult>);

    fn render(made: &[Made], crossover: Option<&Crossover>) -> String {
        let cells: Vec<CellRuns<'_>> = made.iter().map(|(v, r)| CellRuns { values: v, runs: r }).collect();
        let names = ["gRPC".to_owned(), "REST".to_owned()];
        decision(&Context { plan_file: "p.toml", axis: Some("items"), cells: &cells, names: &names, crossover })
    }

    #[test]
    fn decision_states_where_each_option_wins_row_by_row() {
        let made = [
            cell("1", 1.0, 0.8),
            cell("10", 1.0, 0.8),
            cell("30", 1.0, 1.0),
            cell("100", 0.8, 1.0),
            cell("1000", 0.8, 1.0),
        ];
        let md = render(&made, None);
        assert!(md.starts_with("# Where each option wins: p.toml\n"), "{md}");
        assert!(
            md.contains(
                "- **downstream CPU per request**: REST's is lower at items ≤ 10, gRPC's at items ≥ 100; no \
                 detectable difference at items 30 (95% intervals)."
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "- **latency p50**: no detectable difference at every items value tried (1–1000) (95% intervals)."
            ),
            "{md}"
        );
    }

    #[test]
    fn a_cell_that_is_not_a_valid_measurement_says_so_where_it_is_used() {
        let mut made = vec![cell("1", 1.0, 0.8), cell("10", 1.0, 0.8)];
        made[1].1[1].validity = vec!["the tiers could not keep up".to_owned()];
        let md = render(&made, None);
        assert!(md.contains("A condition marked **not a valid measurement** rests on a cell"), "{md}");
        assert!(
            md.contains(
                "- **downstream CPU per request**: REST's is lower at items 1 and items 10 (**not a valid \
                 measurement**) (95% intervals)."
            ),
            "{md}"
        );
    }

    #[test]
    fn with_a_crossover_search_the_bracket_is_the_condition() {
        use crate::testing::{bracket_32_40, probe};
        let x = bracket_32_40(vec![probe(1.0, "", -1), probe(32.0, "", -1), probe(40.0, "", 1), probe(1000.0, "", 1)]);
        let made = [cell("1", 1.0, 0.8), cell("1000", 0.8, 1.0)];
        let md = render(&made, Some(&x));
        assert!(
            md.contains(
                "- **downstream CPU per request**: REST's is lower at items ≤ 32, gRPC's at items ≥ 40: the verdict \
                 flips between the two (the crossover bracket; B − A with its 95% interval -10.00 [-12.00, -8.00] \
                 at 32, +10.00 [+8.00, +12.00] at 40)."
            ),
            "{md}"
        );
    }
}
