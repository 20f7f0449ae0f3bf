//! The downstream's replicas in words and tables: how calls reached them,
//! each arm's imbalance with its interval, and each replica's share, calls,
//! CPU and memory (means over the rounds). Shared by `report.md` and
//! `comparison.md`; the arithmetic is `judge::replicas`'s.

use std::fmt::Write;

use super::numbers::num;
use crate::judge::replicas::{ArmReplicas, summarize};
use crate::result::RunResult;

/// Each arm's replica sentence, as findings list items (empty without replicas).
pub fn findings(arms: &[(&str, &RunResult)]) -> String {
    let mut out = String::new();
    for (name, run) in arms {
        if let Some(s) = summarize(run) {
            let _ = writeln!(out, "- {}", s.sentence(name));
            for step in &s.steps {
                let _ = writeln!(out, "- {}", step.sentence(name));
            }
        }
    }
    out
}

/// Where the replicas ran, for the section's first sentence: `, each in a
/// container of its own limited to 0.5 cores, the balancer on the host`;
/// nothing for processes.
fn placement(run: &RunResult) -> String {
    let deploy = &run.config.deploy;
    if deploy.isolation != crate::config::Isolation::Containers {
        return String::new();
    }
    let limits = &deploy.tier_limits;
    let mut each: Vec<String> = Vec::new();
    if let Some(c) = limits.cpus.get("downstream") {
        each.push(format!("{c} cores"));
    }
    if let Some(m) = limits.memory_bytes.get("downstream") {
        each.push(format!("{:.0} MiB", *m as f64 / 1048576.0));
    }
    let limited = if each.is_empty() { String::new() } else { format!(" limited to {}", each.join(" and ")) };
    let host = if run.config.replicas.balance.has_balancer() { ", the balancer on the host" } else { "" };
    format!(", each in a container of its own{limited}{host}")
}

/// `## Replicas`: how calls reached them, then per arm its sentence and a
/// table of its replicas. Empty for one replica reached directly.
pub fn section(arms: &[(&str, &RunResult)]) -> String {
    let summaries: Vec<(&str, ArmReplicas)> =
        arms.iter().filter_map(|(name, run)| Some((*name, summarize(run)?))).collect();
    let Some((_, first)) = summaries.first() else { return String::new() };
    let mut out = String::from("\n## Replicas\n\n");
    let placed = placement(arms[0].1);
    let _ = writeln!(
        out,
        "The downstream ran as {} replicas{placed}, reached by {}{}. Each replica's figures come from its own `/stats`, read \
         at each round's start and end; its share is its part of the calls all replicas answered, and the \
         imbalance is the largest share ÷ the fair share (1 = even; {} = every call on one), with its 95% t \
         interval over the rounds. Means over the rounds; the in-flight peak is since the replica started (its \
         warm-up included).\n",
        arms[0].1.config.replicas.downstream_replicas,
        first.mode.describe(),
        if first.steps.is_empty() {
            String::new()
        } else {
            format!(
                " ({} ran in a round as --scale-at added and took out replicas; the fair share is over all of them)",
                first.replicas
            )
        },
        first.replicas
    );
    if summaries.iter().any(|(_, s)| !s.steps.is_empty()) {
        let _ = writeln!(
            out,
            "Replicas were added or taken out during every round (`--scale-at`), the balancer reloaded with the \
             new set. The harness read the replicas' `/stats` every 250 ms after a step that added replicas: when \
             one of them answered its first call, and when together they answered at least half their fair share \
             of the calls over a window of at least 1 s. A replica taken out has its calls counted up to its last \
             read, just before it was stopped.\n"
        );
    }
    for (name, s) in &summaries {
        let _ = writeln!(out, "{}\n", s.sentence(name));
        let aged: f64 = s.each.iter().filter_map(|r| r.connections_aged).sum();
        let run = arms.iter().find(|(n, _)| n == name).map(|(_, r)| *r);
        let errors: u64 = run.map_or(0, |r| r.rounds.iter().map(|r| r.requests.error_total()).sum());
        if aged > 0.0 && errors > 0 {
            let _ = writeln!(
                out,
                "The replicas ended {aged:.1} connections a round at their age, and {name} had {errors} errors in \
                 its rounds: a client that does not retry them fails the calls it sent on a connection as its \
                 GOAWAY arrived (see Errors by reason).\n"
            );
        }
        // Containers with a CPU limit: how often each replica's limit held it back.
        let limited = s.each.iter().any(|r| r.throttled.is_some());
        let _ = writeln!(
            out,
            "| {name} replica | share of calls (%) | OK calls | shed | CPU per call (µs) | RSS (MiB) | connections \
             opened | aged out | in-flight peak |{}\n|---|---:|---:|---:|---:|---:|---:|---:|---:|{}",
            if limited { " CPU limit bound (% of periods) |" } else { "" },
            if limited { "---:|" } else { "" }
        );
        for r in &s.each {
            let _ = writeln!(
                out,
                "| downstream#{} | {} | {} | {} | {} | {} | {} | {} | {} |{}",
                r.index,
                num(r.share.map(|s| s * 100.0), 1),
                num(r.ok, 0),
                num(r.shed, 0),
                num(r.cpu_us_per_request, 1),
                num(r.rss_mib, 1),
                num(r.connections, 1),
                num(r.connections_aged, 1),
                num(r.in_flight_peak, 0),
                if limited { format!(" {} |", num(r.throttled.map(|t| t * 100.0), 1)) } else { String::new() },
            );
        }
        out.push('\n');
        for step in &s.steps {
            let _ = writeln!(out, "{}\n", step.sentence(name));
        }
    }
    out
}
