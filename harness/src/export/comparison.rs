//! `comparison.md` and the compact terminal table: validity first, then the
//! findings, the cost at the planned rate, and every row (metric | A | B |
//! difference with its 95% interval | verdict), each value the mean over its
//! rounds. A pure function of the runs it is given, so `harness compare` on
//! saved folders reproduces what a `--transport both` run wrote.

use std::fmt::Write;

use super::findings::{difference_cell, findings_list, method_note, projection_section, validity_mark, verdict_cell};
use super::setup;
use crate::export::markdown::{charts_section, environment_table};
use crate::export::numbers::num;
use crate::judge::attribution::{Split, Square, attribute};
use crate::judge::difference::{Row, Verdict, called_share, compare, paired};
use crate::judge::inference::CONFIDENCE;
use crate::judge::projection::project_all;
use crate::result::RunResult;
use caller::Transport;

/// One side of a comparison.
#[derive(Debug, Clone, Copy)]
pub struct Arm<'a> {
    pub name: &'a str,
    pub run: &'a RunResult,
}

/// Every other arm judged against the first, row by row.
pub fn judged(arms: &[Arm<'_>]) -> Vec<Vec<Row>> {
    arms.iter().skip(1).map(|b| compare(arms[0].run, b.run)).collect()
}

/// True when the arms are one transport measured twice in one run: an A/A check.
pub fn is_a_a(arms: &[Arm<'_>]) -> bool {
    arms.len() == 2 && arms[0].run.config.transport == arms[1].run.config.transport && paired(arms[0].run, arms[1].run)
}

/// Differences in configuration that make a comparison questionable.
pub fn config_warnings(arms: &[Arm<'_>]) -> Vec<String> {
    let Some(first) = arms.first() else { return Vec::new() };
    let mut warnings = Vec::new();
    let base = &first.run.config;
    for other in &arms[1..] {
        let c = &other.run.config;
        let mut check = |what: &str, x: String, y: String| {
            if x != y {
                warnings.push(format!("{what} differs: {} has {x}, {} has {y}", first.name, other.name));
            }
        };
        check("load", setup::load_text(base), setup::load_text(c));
        check("delay", format!("{:?}", base.work.delay), format!("{:?}", c.work.delay));
        check("items", base.work.items.to_string(), c.work.items.to_string());
        check("shape", base.work.shape.to_string(), c.work.shape.to_string());
        check("request bytes", base.work.request_bytes.to_string(), c.work.request_bytes.to_string());
        check("fan-out", base.work.fanout.to_string(), c.work.fanout.to_string());
        check("contract", setup::contract_identity(first.run), setup::contract_identity(other.run));
        check("duration", format!("{:?}", base.load.duration), format!("{:?}", c.load.duration));
        check("build profile", first.run.environment.build_text(), other.run.environment.build_text());
        check(
            "machine",
            format!("{:?} × {:?}", first.run.environment.cpu_model, first.run.environment.logical_cores),
            format!("{:?} × {:?}", other.run.environment.cpu_model, other.run.environment.logical_cores),
        );
    }
    warnings
}

/// `comparison.md` in its parts, each Markdown: the file is them in this
/// order; `report.html` shows the same parts in an order of its own, so the
/// two say the same thing character for character.
#[derive(Debug, Clone, Default)]
pub struct Parts {
    /// `# grpc-vs-rest comparison: …`
    pub title: String,
    /// The setup line and any warning that the configurations differ.
    pub setup: String,
    pub validity: String,
    pub findings: String,
    pub replicas: String,
    pub attribution: String,
    /// What each arm costs at the planned rate.
    pub cost: String,
    /// `## All rows`: the comparison table.
    pub table: String,
    /// How the rows were judged.
    pub method: String,
    pub configuration: String,
    pub environment: String,
}

impl Parts {
    /// The parts as `comparison.md` orders them.
    pub fn markdown(&self) -> String {
        [
            &self.title,
            &self.setup,
            &self.validity,
            &self.findings,
            &self.replicas,
            &self.attribution,
            &self.cost,
            &self.table,
            &self.method,
            &self.configuration,
            &self.environment,
        ]
        .into_iter()
        .map(String::as_str)
        .collect()
    }
}

/// The parts of `comparison.md`, from the rows judged once.
pub fn parts(arms: &[Arm<'_>]) -> Parts {
    let names: Vec<&str> = arms.iter().map(|a| a.name).collect();
    let mut setup = arms.first().map(|first| format!("{}\n\n", setup::setup(first.run))).unwrap_or_default();
    setup.push_str(&warnings_quote(arms));
    let rows = judged(arms);
    let named: Vec<(&str, &RunResult)> = arms.iter().map(|a| (a.name, a.run)).collect();
    let runs: Vec<&RunResult> = arms.iter().map(|a| a.run).collect();
    let rounds: Vec<String> = arms.iter().map(|a| format!("{} {}", a.name, a.run.rounds.len())).collect();
    let all_paired = arms.iter().skip(1).all(|b| paired(arms[0].run, b.run));
    let (configuration, environment) = configuration_section(arms);
    Parts {
        title: format!("# grpc-vs-rest comparison: {}\n\n", names.join(" vs ")),
        setup,
        validity: validity_section(arms).trim_start_matches('\n').to_owned(),
        findings: findings_section(arms, &rows),
        replicas: super::replicas::section(&named),
        attribution: attribution_section(&attribute(&runs)),
        cost: projection_section(&names, &project_all(&runs)),
        table: format!("\n## All rows\n\n{}", table(arms, &rows)),
        method: method_note(&rounds.join(", "), all_paired),
        configuration,
        environment,
    }
}

/// `comparison.md`: validity, findings, cost at the planned rate, then every
/// row. With `charts`, it links the charts written beside it.
pub fn render(arms: &[Arm<'_>], charts: bool) -> String {
    let mut out = parts(arms).markdown();
    if charts {
        out.push_str(&charts_section());
    }
    out
}

/// `## Findings`: per arm against the first, and the A/A share for an A/A run.
pub fn findings_section(arms: &[Arm<'_>], rows: &[Vec<Row>]) -> String {
    let mut out = String::from("\n## Findings\n\n");
    for (i, (b, r)) in arms.iter().skip(1).zip(rows).enumerate() {
        if arms.len() > 2 {
            // A blank line first: after a list, a line of text would be read
            // as the last item's continuation.
            let gap = if i > 0 { "\n" } else { "" };
            let _ = writeln!(out, "{gap}{} against {}:\n", b.name, arms[0].name);
        }
        out.push_str(&findings_list(r, arms[0].name, b.name, &validity_mark(&not_valid(&[arms[0], *b]))));
    }
    let named: Vec<(&str, &RunResult)> = arms.iter().map(|a| (a.name, a.run)).collect();
    out.push_str(&super::replicas::findings(&named));
    if is_a_a(arms)
        && let Some(r) = rows.first()
        && let (called, judged @ 1..) = called_share(r)
    {
        let _ = writeln!(
            out,
            "\n**A/A check**: both arms ran the same transport, so every difference called is a false call: \
             {called} of {judged} judged rows ({:.1}%) were called different, against a nominal {:.0}%.",
            called as f64 / judged as f64 * 100.0,
            (1.0 - CONFIDENCE) * 100.0
        );
    }
    out
}

/// The names of the arms among `arms` that were not valid measurements.
pub fn not_valid<'a>(arms: &[Arm<'a>]) -> Vec<&'a str> {
    arms.iter().filter(|a| !a.run.is_valid()).map(|a| a.name).collect()
}

/// `## Attribution`: where gRPC, REST, rest-pb and grpc-json all ran, how
/// much of REST − gRPC the encoding and the transport each explain; the same
/// for Connect − gRPC where connect and connect-pb ran with gRPC and
/// grpc-json (empty otherwise, so two-arm comparisons are unchanged).
pub fn attribution_section(splits: &[Split]) -> String {
    let mut out = String::new();
    let mut squares: Vec<Square> = splits.iter().map(|s| s.square).collect();
    squares.dedup();
    for square in squares {
        out.push_str(&square_section(square, splits.iter().filter(|s| s.square == square)));
    }
    out
}

fn square_section<'a>(square: Square, splits: impl Iterator<Item = &'a Split>) -> String {
    let (r, p, t) = (square.json.title(), square.protobuf.title(), square.transport);
    let heading = if square.json == Transport::Rest { String::new() } else { format!(" ({r})") };
    let mut out = format!("\n## Attribution: encoding or transport{heading}\n\n");
    let _ = writeln!(
        out,
        "The four arms cross encoding (JSON or protobuf) with transport ({t} or gRPC over HTTP/2). Of the \
         difference {r} − gRPC, the encoding's part is JSON instead of protobuf averaged over both transports, \
         (({r} − {p}) + (gRPC+JSON − gRPC)) / 2, and the transport's part is {t} instead of gRPC \
         averaged over both encodings, (({r} − gRPC+JSON) + ({p} − gRPC)) / 2; the two add up to the \
         difference exactly. Each is computed per round from the four arms' figures of that round and given with \
         the 95% t interval of its mean over the rounds; the interaction, ({r} − {p}) − (gRPC+JSON − \
         gRPC), says how far the encoding's effect depends on the transport.\n"
    );
    for s in splits {
        let d = s.decimals;
        let iv = |i: &crate::judge::inference::Interval| {
            format!("{} {} [{}, {}]", signed(i.estimate, d), s.unit, num(Some(i.lo), d), num(Some(i.hi), d))
        };
        let share = s
            .encoding_share()
            .map(|e| format!(" (encoding {e:.0}%, transport {:.0}% of the difference)", 100.0 - e))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "- **{}** (gRPC {} {}, {} rounds): {r} − gRPC {}; encoding {}; transport {}{share}; interaction {}.",
            s.label,
            num(Some(s.grpc_mean), d),
            s.unit,
            s.rounds,
            iv(&s.total),
            iv(&s.encoding),
            iv(&s.transport),
            iv(&s.interaction),
        );
    }
    out
}

fn signed(v: f64, decimals: usize) -> String {
    if v > 0.0 { format!("+{}", num(Some(v), decimals)) } else { num(Some(v), decimals) }
}

fn warnings_quote(arms: &[Arm<'_>]) -> String {
    let mut out = String::new();
    let warnings = config_warnings(arms);
    if !warnings.is_empty() {
        let _ = writeln!(out, "> **The configurations differ:**");
        for w in &warnings {
            let _ = writeln!(out, "> - {w}");
        }
        let _ = writeln!(out);
    }
    out
}

/// metric | each arm's mean over rounds | each difference against the first
/// arm with its 95% interval | the verdict.
fn table(arms: &[Arm<'_>], rows: &[Vec<Row>]) -> String {
    let mut out = String::new();
    let _ = write!(out, "| metric |");
    for a in arms {
        let _ = write!(out, " {} |", a.name);
    }
    for b in arms.iter().skip(1) {
        let vs = if arms.len() == 2 { String::new() } else { format!(" {} vs {}", b.name, arms[0].name) };
        let _ = write!(out, "{vs} difference (95% CI) | verdict |");
    }
    let _ = write!(out, "\n|---|");
    for _ in 0..arms.len() {
        let _ = write!(out, "---:|");
    }
    for _ in 1..arms.len() {
        let _ = write!(out, "---:|---|");
    }
    let _ = writeln!(out);
    let Some(first) = rows.first() else { return out };
    for (i, m) in first.iter().enumerate().map(|(i, r)| (i, r.metric)) {
        if !m.shown_for(arms.iter().map(|a| a.run)) {
            continue;
        }
        let _ = write!(out, "| {} | {} |", m.label, num(first[i].a, m.decimals));
        for r in rows {
            let _ = write!(out, " {} |", num(r[i].b, m.decimals));
        }
        for (b, r) in arms.iter().skip(1).zip(rows) {
            let _ = write!(out, " {} | {} |", difference_cell(&r[i]), verdict_cell(&r[i], arms[0].name, b.name));
        }
        let _ = writeln!(out);
    }
    out
}

fn validity_section(arms: &[Arm<'_>]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n## Validity\n");
    for a in arms {
        if a.run.is_valid() {
            let _ = writeln!(out, "- **{}**: valid.", a.name);
        } else {
            let _ = writeln!(out, "- **{}**: not a valid measurement:", a.name);
            for p in &a.run.validity {
                let _ = writeln!(out, "  - {p}");
            }
        }
    }
    let other: Vec<String> = arms
        .iter()
        .filter_map(|a| {
            let m = crate::judge::stats::mean(a.run.rounds.iter().filter_map(|r| r.other_cores))?;
            Some(format!("{} {m:.2}", a.name))
        })
        .collect();
    if !other.is_empty() {
        let _ = writeln!(
            out,
            "\nOther load on the machine during the rounds (cores kept busy by processes outside the run, mean): {}.",
            other.join(", ")
        );
    }

    out
}

/// The configuration and the environment.
fn configuration_section(arms: &[Arm<'_>]) -> (String, String) {
    let (mut out, mut env) = (String::new(), String::new());
    if let Some(first) = arms.first() {
        let _ = writeln!(out, "\n## Configuration\n");
        let mut rows = vec![("arms", arms.iter().map(|a| a.name).collect::<Vec<_>>().join(", "))];
        rows.extend(setup::shared_rows(&first.run.config));
        out.push_str(&setup::table(&rows));
        out.push_str(&setup::contract_section(first.run));
        for a in arms {
            let _ = writeln!(out, "\n{} internal hop:\n", a.name);
            out.push_str(&setup::table(&setup::hop_rows(a.run)));
        }
        for a in arms {
            for (tier, info) in &a.run.tiers {
                let _ = writeln!(out, "\n- {} {tier} settings: `{}`", a.name, info.settings);
            }
        }
        let named: Vec<(&str, &RunResult)> = arms.iter().map(|a| (a.name, a.run)).collect();
        out.push_str(&super::link::section(&named));
        let _ = writeln!(env, "\n## Environment\n");
        env.push_str(&environment_table(first.run));
    }
    (out, env)
}

/// The findings for the terminal: validity problems first, then the
/// findings sentences, as `comparison.md` opens.
pub fn terminal_findings(arms: &[Arm<'_>]) -> String {
    let mut out = String::new();
    for a in arms.iter().filter(|a| !a.run.is_valid()) {
        let _ = writeln!(out, "NOT VALID: {}: {}", a.name, a.run.validity.join("; "));
    }
    out.push_str(&findings_section(arms, &judged(arms)).trim_start().replace("## Findings\n", "Findings:"));
    out
}

/// The comparison as a compact, aligned terminal table; verdicts that name a
/// better side highlighted when `color`.
pub fn terminal(arms: &[Arm<'_>], color: bool) -> String {
    let rows = judged(arms);
    let Some(first) = rows.first() else { return String::new() };
    let mut table: Vec<Vec<(String, bool)>> = Vec::new();
    let mut header: Vec<(String, bool)> = vec![("metric".into(), false)];
    header.extend(arms.iter().map(|a| (a.name.to_owned(), false)));
    for _ in arms.iter().skip(1) {
        header.extend([("difference (95% CI)".to_owned(), false), ("verdict".to_owned(), false)]);
    }
    table.push(header);
    for (i, m) in first.iter().enumerate().map(|(i, r)| (i, r.metric)) {
        if !m.shown_for(arms.iter().map(|a| a.run)) {
            continue;
        }
        let mut line = vec![(m.label.to_owned(), false), (num(first[i].a, m.decimals), false)];
        line.extend(rows.iter().map(|r| (num(r[i].b, m.decimals), false)));
        for (b, r) in arms.iter().skip(1).zip(&rows) {
            let called = matches!(r[i].verdict, Verdict::ABetter | Verdict::BBetter);
            line.push((difference_cell(&r[i]), false));
            line.push((verdict_cell(&r[i], arms[0].name, b.name), called));
        }
        table.push(line);
    }
    align(&table, color)
}

fn align(rows: &[Vec<(String, bool)>], color: bool) -> String {
    let cols = rows[0].len();
    let widths: Vec<usize> =
        (0..cols).map(|c| rows.iter().map(|r| r[c].0.chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in rows {
        for (c, (cell, mark)) in row.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            let text = if c == 0 { format!("{cell}{}", " ".repeat(pad)) } else { format!("{}{cell}", " ".repeat(pad)) };
            if *mark && color {
                let _ = write!(out, "\x1b[33m{text}\x1b[0m  ");
            } else {
                let _ = write!(out, "{text}  ");
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_summary_opens_with_validity_and_findings() {
        let (g, r) = crate::testing::both(5, 0.45, 1.0);
        let text = crate::export::summary::text(&[g, r], None, false);
        assert!(text.starts_with("Findings:\n- REST's "), "{text}");
        let (g, bad) = crate::testing::both(3, 1.0, 1.5);
        let arms = [Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &bad }];
        assert!(terminal_findings(&arms).starts_with("NOT VALID: REST: round 1: achieved"));
    }

    #[test]
    fn findings_from_an_arm_that_is_not_valid_say_so_where_they_stand() {
        let (g, mut r) = crate::testing::both(5, 0.45, 1.0);
        let arms = [Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &r }];
        assert!(!findings_section(&arms, &judged(&arms)).contains("NOT a valid"));
        r.validity = vec!["round 1: other processes kept 1.90 of 2 cores busy".into()];
        let arms = [Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &r }];
        let text = findings_section(&arms, &judged(&arms));
        let sentences: Vec<&str> = text.lines().filter(|l| l.starts_with("- REST's")).collect();
        assert!(!sentences.is_empty(), "{text}");
        for line in sentences {
            assert!(
                line.ends_with("**Drawn from REST: NOT a valid measurement (see Validity), no basis for a choice.**"),
                "{line}"
            );
        }
    }

    #[test]
    fn every_no_difference_cell_says_what_the_rounds_could_have_seen() {
        let (g, r) = crate::testing::both(5, 1.0, 1.0);
        let arms = [Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &r }];
        let text = render(&arms, false);
        let cells: Vec<&str> =
            text.lines().filter(|l| l.starts_with('|') && l.contains("no detectable difference")).collect();
        assert!(!cells.is_empty(), "{text}");
        for line in cells {
            assert!(line.contains("no detectable difference (could have seen ±"), "{line}");
        }
    }
}
