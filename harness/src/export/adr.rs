//! `decision.md`: a MADR 4.0 architecture decision record drafted from a
//! comparison (<https://adr.github.io/madr/>). The measured rows become the
//! options' pros and cons; the outcome is left to people unless one is
//! preferred explicitly (`harness adr --prefer`), because a measurement does
//! not decide. Bytes only.

use std::fmt::Write;

use caller::Transport;

use super::comparison::{Arm, not_valid};
use super::findings::{detectable_text, name_and_unit, sentence, validity_mark, with_unit};
use super::markdown::setup;
use super::numbers::num;
use super::setup::load_text;
use crate::config::{TransportArg, arm_dirs, command_line};
use crate::judge::difference::{FINDING_THRESHOLD_PERCENT, Row, Verdict, compare};

/// What a record needs beyond the arms.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    /// `YYYY-MM-DD`.
    pub date: &'a str,
    /// The option people chose, if any.
    pub prefer: Option<Transport>,
    /// Where the run folder is, as links from the record should name it
    /// (empty: the record sits in the folder).
    pub folder: &'a str,
}

/// The MADR headings in order, for the structure test and for readers.
pub const HEADINGS: &[&str] = &[
    "## Context and Problem Statement",
    "## Decision Drivers",
    "## Considered Options",
    "## Decision Outcome",
    "### Consequences",
    "### Confirmation",
    "## Pros and Cons of the Options",
    "## More Information",
];

/// The record for two arms (the first is A).
pub fn render(arms: &[Arm<'_>], r: &Record<'_>) -> String {
    let rows = if arms.len() >= 2 { compare(arms[0].run, arms[1].run) } else { Vec::new() };
    let mut out = String::new();
    let names: Vec<&str> = arms.iter().map(|a| a.name).collect();
    let _ = writeln!(out, "---\nstatus: proposed\ndate: {}\ndecision-makers: []\n---\n", r.date);
    let _ = writeln!(out, "# Transport of the internal hop: {}\n", names.join(" or "));
    out.push_str(&context(arms));
    out.push_str(&drivers(arms));
    let _ = writeln!(out, "\n## Considered Options\n");
    for n in &names {
        let _ = writeln!(out, "* {n}");
    }
    out.push_str(&outcome(arms, &rows, r));
    out.push_str(&confirmation(arms, r));
    let _ = writeln!(out, "\n## Pros and Cons of the Options");
    for (i, a) in arms.iter().enumerate() {
        let _ = writeln!(out, "\n### {}\n", a.name);
        out.push_str(&pros_and_cons(&rows, arms, i));
    }
    out.push_str(&more_information(arms, r));
    out
}

fn context(arms: &[Arm<'_>]) -> String {
    let Some(first) = arms.first() else { return String::new() };
    let c = &first.run.config;
    format!(
        "## Context and Problem Statement\n\nWhich transport should the internal hop between the caller and the \
         downstream service use? The options were measured on one machine with grpc-vs-rest: {}, {} \
         counterbalanced round(s) of {} per option after {} of warm-up, the same front door and payload for both, \
         only the internal hop differing.\n",
        setup(first.run),
        c.load.rounds,
        humantime::format_duration(c.load.duration),
        humantime::format_duration(c.load.warmup),
    )
}

fn drivers(arms: &[Arm<'_>]) -> String {
    // The load as it was given: a closed loop has no rate (it is not 0 req/s).
    let load = arms.first().map_or_else(String::new, |a| format!(", {}", load_text(&a.run.config)));
    let mut out = String::from("\n## Decision Drivers\n\n");
    for d in [
        "Memory (resident set) of the caller and the downstream".to_owned(),
        format!("Latency (p50, p99){load}"),
        "Throughput sustained and errors".to_owned(),
        "CPU per request in each tier (cores at the team's rate)".to_owned(),
        "Bytes per request on the internal hop, each direction (egress per day)".to_owned(),
        "Whether the measurement was valid".to_owned(),
    ] {
        let _ = writeln!(out, "* {d}");
    }
    if arms.first().is_some_and(|a| a.run.config.streams.is_some()) {
        for d in [
            "Time to the first and the last item of a stream, and each item's delay from its production",
            "CPU and bytes per item in each tier and on each hop",
            "What a consumer slower than the producer costs (items held back, memory)",
        ] {
            let _ = writeln!(out, "* {d}");
        }
    }
    out
}

fn outcome(arms: &[Arm<'_>], rows: &[Row], r: &Record<'_>) -> String {
    let mut out = String::from("\n## Decision Outcome\n\n");
    let invalid = not_valid(arms);
    if !invalid.is_empty() {
        let _ = writeln!(
            out,
            "> **Not a basis for a decision yet**: {} {} not a valid measurement ({}). Every pro and con drawn \
             from {} says so where it stands; measure again before choosing on it.\n",
            invalid.join(" and "),
            if invalid.len() == 1 { "was" } else { "were" },
            arms.iter().filter(|a| !a.run.is_valid()).map(|a| a.run.validity.join("; ")).collect::<Vec<_>>().join("; "),
            if invalid.len() == 1 { "it" } else { "them" },
        );
    }
    let chosen = r.prefer.and_then(|t| arms.iter().position(|a| a.run.config.transport == t));
    match chosen {
        Some(i) => {
            let _ = writeln!(
                out,
                "Chosen option: \"{}\", because the people deciding preferred it (`--prefer {}`), weighing the \
                 measured pros and cons below.\n\n### Consequences\n",
                arms[i].name,
                arms[i].run.config.transport.as_str()
            );
            let list = pros_and_cons(rows, arms, i);
            let consequences: String = list
                .lines()
                .filter(|l| !l.starts_with("* Neutral") && !l.starts_with("* Inconclusive"))
                .map(|l| format!("{l}\n"))
                .collect();
            out.push_str(if consequences.is_empty() {
                "* Neutral, because no headline row differed detectably.\n"
            } else {
                &consequences
            });
        }
        None => {
            let _ = writeln!(
                out,
                "Not decided. A measurement does not decide: the people who own this choice weigh the pros and cons \
                 below against what it cannot see (skills, tooling, clients beyond this hop) and record the \
                 outcome here (`Chosen option: \"…\", because …`, and `status: accepted`).\n\n### Consequences\n\n\
                 * Neutral, because none are recorded until an option is chosen."
            );
        }
    }
    out
}

/// Single-quotes a shell word unless it is plain.
fn shell_word(w: &str) -> String {
    if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./,:=@".contains(c)) {
        w.to_owned()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

fn confirmation(arms: &[Arm<'_>], r: &Record<'_>) -> String {
    let mut out = String::from("\n### Confirmation\n\n");
    let Some(first) = arms.first() else { return out };
    let transports: Vec<Transport> = arms.iter().map(|a| a.run.config.transport).collect();
    let Some(t) = TransportArg::from_arms(&transports) else { return out };
    let args: Vec<String> = command_line(&first.run.config, t).iter().map(|a| shell_word(a)).collect();
    let commit = first.run.environment.git_commit.as_deref().unwrap_or("unknown");
    let dirty = if first.run.environment.git_dirty == Some(true) { " (it had uncommitted changes)" } else { "" };
    let folder = if r.folder.is_empty() { "<this folder>" } else { r.folder };
    let _ = writeln!(
        out,
        "Re-measure at commit `{commit}`{dirty} with exactly this configuration:\n\n```sh\ngit checkout {commit}\n\
         cargo run --release -p harness -- {}\n```\n\nor `harness rerun {folder}`, which repeats the saved \
         configuration and reports what differs in the environment. In CI, a gate such as \
         `--fail-if 'rest.cpu_us_per_request.caller > 1.2 * grpc'` turns a finding into a check (exit 99 when breached).",
        args.join(" ")
    );
    out
}

/// Good / Bad from the headline rows with a detectable difference, Neutral
/// from those without where the run could have seen one that matters,
/// Inconclusive where it could not, for option `i` (0 = A, 1 = B). Every
/// line drawn from an arm that was not valid says so.
fn pros_and_cons(rows: &[Row], arms: &[Arm<'_>], i: usize) -> String {
    let mut out = String::new();
    let (a, b) = (arms[0].name, arms.get(1).map_or("", |x| x.name));
    let mark = validity_mark(&not_valid(&arms[..arms.len().min(2)]));
    let headline = crate::judge::difference::headline(rows);
    for row in headline {
        let good = match (row.verdict, i) {
            (Verdict::ABetter, 0) | (Verdict::BBetter, 1) => Some(true),
            (Verdict::ABetter, _) | (Verdict::BBetter, _) => Some(false),
            _ => None,
        };
        // A difference the interval shows but under the findings' threshold
        // is not a reason to prefer either option.
        let small = row.relative().map(|r| r.estimate).filter(|e| e.abs() < FINDING_THRESHOLD_PERCENT);
        // `name` and "B value, A value", for the Neutral lines.
        let values = || {
            let (name, unit) = name_and_unit(row.metric.label);
            let d = row.metric.decimals;
            (name, format!("{b} {}, {a} {}", with_unit(row.b, d, unit), with_unit(row.a, d, unit)))
        };
        let text = match (good, row.verdict) {
            (Some(_), _) if small.is_some() => {
                let (name, values) = values();
                let rel = small.unwrap_or_default();
                format!(
                    "* Neutral, because {name} differed detectably but by less than {FINDING_THRESHOLD_PERCENT}% \
                     ({values}; {rel:+.2}%)."
                )
            }
            (Some(true), _) => format!("* Good, because {}", sentence(row, a, b)),
            (Some(false), _) => format!("* Bad, because {}", sentence(row, a, b)),
            (None, Verdict::NoDifference) if row.inconclusive() => {
                let (name, values) = values();
                format!(
                    "* Inconclusive, because {name} showed no detectable difference but the rounds could only have \
                     seen one of {} or more ({values}); more rounds narrow it.",
                    detectable_text(row)
                )
            }
            (None, Verdict::NoDifference) => {
                let (name, values) = values();
                format!(
                    "* Neutral, because {name} showed no detectable difference where the rounds could have seen \
                     {} ({values}).",
                    detectable_text(row)
                )
            }
            (None, Verdict::BelowResolution) => {
                let (name, values) = values();
                format!("* Neutral, because {name} differed by less than the report prints ({values}).")
            }
            (None, Verdict::NotJudged { rounds }) => {
                format!("* Neutral, because {} was not judged ({rounds} rounds).", name_and_unit(row.metric.label).0)
            }
            (None, Verdict::OneProcess) => format!(
                "* Neutral, because {} was not judged (one process per arm, tiers reused across rounds).",
                name_and_unit(row.metric.label).0
            ),
            _ => continue,
        };
        let _ = writeln!(out, "{text}{mark}");
    }
    if out.is_empty() {
        out.push_str("* Neutral, because no headline row was measured for it.\n");
    }
    out
}

fn more_information(arms: &[Arm<'_>], r: &Record<'_>) -> String {
    let mut out = String::from("\n## More Information\n\n");
    for a in arms {
        let v = if a.run.is_valid() {
            "a valid measurement".to_owned()
        } else {
            format!("NOT a valid measurement: {}", a.run.validity.join("; "))
        };
        let _ = writeln!(out, "* Validity: {} was {v}.", a.name);
    }
    let Some(first) = arms.first() else { return out };
    let (e, c) = (&first.run.environment, &first.run.config);
    let _ = writeln!(
        out,
        "* Environment: {} ({} logical cores), {}, {} build, commit {}.",
        e.cpu_model.as_deref().unwrap_or("unknown CPU"),
        num(e.logical_cores.map(|n| n as f64), 0),
        e.kernel.as_deref().map_or("unknown kernel".to_owned(), |k| format!("kernel {k}")),
        e.build_text(),
        e.git_commit.as_deref().unwrap_or("unknown")
    );
    let payload = match &first.run.contract {
        Some(k) => format!(
            "this contract only ({}, {} request and {} answer messages; fan-out {})",
            k.method, k.requests.count, k.answers.count, c.work.fanout
        ),
        None => format!("this payload only ({} items per response, fan-out {})", c.work.items, c.work.fanout),
    };
    let _ = writeln!(
        out,
        "* Caveats: one machine, where the harness and every tier share the cores; loopback, so no network \
         latency, loss or bandwidth limit; {}; {payload}; one load ({}){}.",
        if c.hop.tls.is_on() { "TLS on the internal hop only" } else { "no TLS" },
        load_text(c),
        c.deploy.proxy.map_or(String::new(), |p| format!(
            "; {} on the {} hop",
            p.as_str(),
            c.deploy.proxy_hop.as_str()
        ))
    );
    if let Some(k) = &first.run.contract {
        let _ = writeln!(
            out,
            "* Contract: `{}` from {} (descriptor set SHA-256 `{}`); requests {}, answers {}.",
            k.method,
            k.files.join(", "),
            k.descriptor_sha256,
            super::setup::data_text(&k.requests, true),
            super::setup::data_text(&k.answers, true)
        );
    }
    let base = if r.folder.is_empty() { String::new() } else { format!("{}/", r.folder.trim_end_matches('/')) };
    let transports: Vec<Transport> = arms.iter().map(|a| a.run.config.transport).collect();
    let runs: Vec<String> =
        arm_dirs(&transports).iter().map(|d| format!("[{d}/run.json]({base}{d}/run.json)")).collect();
    let _ = writeln!(
        out,
        "* Evidence: [comparison.md]({base}comparison.md) (every row with its interval, the cost at the planned \
         rate), charts [latency]({base}latency.svg), [memory]({base}rss.svg), [CPU]({base}cpu.svg), \
         [rate]({base}rate.svg), and the raw data {}.",
        runs.join(", ")
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("--qps"), "--qps");
        assert_eq!(shell_word("results/a b"), "'results/a b'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
    }

    #[test]
    fn a_preferred_option_gets_an_outcome_and_consequences() {
        let (g, r) = testing::both(5, 0.45, 1.0);
        let arms = [Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &r }];
        let rec = Record { date: "2026-11-30", prefer: Some(Transport::Grpc), folder: "" };
        let text = render(&arms, &rec);
        assert!(text.contains("Chosen option: \"gRPC\", because"), "{text}");
        let consequences = text.split("### Consequences").nth(1).unwrap().split("### Confirmation").next().unwrap();
        assert!(consequences.contains("* Good, because REST's caller memory mean is 2.22× gRPC's"), "{consequences}");
    }

    #[test]
    fn a_closed_loop_is_stated_as_one_never_as_0_req_s_or_an_open_loop() {
        let (mut g, mut r) = testing::both(5, 0.45, 1.0);
        for run in [&mut g, &mut r] {
            (run.config.load.closed_loop, run.config.load.connections, run.config.load.qps) = (true, 8, 0.0);
        }
        let arms = [Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &r }];
        let text = render(&arms, &Record { date: "2026-12-05", prefer: None, folder: "" });
        assert!(text.contains("* Latency (p50, p99), closed loop over 8 connections"), "{text}");
        assert!(!text.contains("req/s") && !text.contains("open loop"), "{text}");
    }

    fn pros_of(text: &str) -> &str {
        text.split("## Pros and Cons of the Options").nth(1).unwrap().split("## More Information").next().unwrap()
    }

    #[test]
    fn pros_and_cons_from_an_arm_that_is_not_valid_say_so_where_they_stand() {
        let (g, mut r) = testing::both(5, 0.45, 1.0);
        let arms = [Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &r }];
        let rec = Record { date: "2026-12-05", prefer: Some(Transport::Rest), folder: "" };
        assert!(!render(&arms, &rec).contains("NOT a valid"));
        r.validity = vec!["round 1: other processes kept 1.90 of 2 cores busy (over 25% of the machine)".into()];
        let arms = [Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &r }];
        let text = render(&arms, &rec);
        let mark = "**Drawn from REST: NOT a valid measurement (see Validity), no basis for a choice.**";
        let lines: Vec<&str> = pros_of(&text).lines().filter(|l| l.starts_with("* ")).collect();
        assert!(lines.iter().any(|l| l.starts_with("* Good, because REST's caller CPU")), "{text}");
        assert!(lines.iter().all(|l| l.ends_with(mark)), "{lines:#?}");
        // The outcome opens with it, and the consequences carry the mark.
        let outcome = text.split("## Decision Outcome").nth(1).unwrap().split("### Confirmation").next().unwrap();
        assert!(outcome.trim_start().starts_with("> **Not a basis for a decision yet**: REST was not a valid"));
        assert!(outcome.contains("other processes kept 1.90 of 2 cores busy"), "{outcome}");
        assert!(
            outcome.lines().filter(|l| l.starts_with("* Bad") || l.starts_with("* Good")).all(|l| l.ends_with(mark))
        );
    }

    #[test]
    fn a_wide_interval_is_inconclusive_and_a_tight_one_neutral() {
        let (g, mut r) = testing::both(3, 1.0, 1.0);
        // REST's p99 moves by 40% from round to round; p50 stays put.
        for (round, w) in r.rounds.iter_mut().zip([0.7, 1.4, 0.9]) {
            let s = round.latency.corrected.as_mut().unwrap();
            s.p99_ms *= w;
        }
        let arms = [Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &r }];
        let text = render(&arms, &Record { date: "2026-12-05", prefer: None, folder: "" });
        let pros = pros_of(&text);
        let p99 = pros.lines().find(|l| l.contains("latency p99")).unwrap();
        assert!(
            p99.starts_with("* Inconclusive, because latency p99 showed no detectable difference but the rounds could only have seen one of ±"),
            "{p99}"
        );
        let p50 = pros.lines().find(|l| l.contains("latency p50")).unwrap();
        assert!(
            p50.starts_with(
                "* Neutral, because latency p50 showed no detectable difference where the rounds could have seen ±"
            ),
            "{p50}"
        );
        assert!(!pros.contains("* Neutral, because latency p99"), "{pros}");
    }

    #[test]
    fn a_detectable_difference_under_the_threshold_is_neutral() {
        // Every scaled figure 3% apart: the intervals call them, the
        // findings' 5% threshold does not.
        let (g, r) = testing::both(5, 0.97, 1.0);
        let arms = [Arm { name: "gRPC", run: &g }, Arm { name: "REST", run: &r }];
        let text = render(&arms, &Record { date: "2026-11-30", prefer: None, folder: "" });
        let pros =
            text.split("## Pros and Cons of the Options").nth(1).unwrap().split("## More Information").next().unwrap();
        assert!(
            pros.contains("* Neutral, because caller memory mean differed detectably but by less than 5%"),
            "{pros}"
        );
        assert!(!pros.contains("Good, because") && !pros.contains("Bad, because"), "{pros}");
    }
}
