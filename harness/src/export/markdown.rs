//! `report.md`: the table reviewers paste into a decision record (rows =
//! metrics with units, columns = rounds and their mean), then validity,
//! configuration and environment. Turns a result into text, nothing else.

use std::fmt::Write;

use super::numbers::num;
use super::setup;
use crate::judge::metrics::metrics;
use crate::judge::stats::mean;
use crate::measure::histogram::{decode_histogram, resolution_us};
use crate::result::{CpuThrottling, RunResult, RunStatus, TierName};

pub use super::setup::{setup, shape, title};

/// The "Charts" section linking the SVGs written beside a report.
pub fn charts_section() -> String {
    let mut out = String::from("\n## Charts\n\n");
    for (file, what) in [
        ("latency.svg", "Latency by percentile"),
        ("rss.svg", "Memory over time"),
        ("cpu.svg", "CPU over time"),
        ("rate.svg", "Achieved rate and in flight over time"),
    ] {
        let _ = writeln!(out, "![{what}]({file})\n");
    }
    out
}

/// The environment of a run as a two-column Markdown table.
pub fn environment_table(run: &RunResult) -> String {
    let mut out = String::new();
    let e = &run.environment;
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
    let _ = writeln!(out, "| | |\n|---|---|");
    let mut env_rows: Vec<(&str, String)> = vec![
        ("build profile", e.build_text()),
        ("tool version", e.tool_version.clone()),
        (
            "git commit",
            match (&e.git_commit, e.git_dirty) {
                (Some(c), Some(true)) => format!("{c} (uncommitted changes)"),
                (Some(c), _) => c.clone(),
                (None, _) => "unknown".into(),
            },
        ),
        ("rustc", opt(&e.rustc)),
        ("CPU", opt(&e.cpu_model)),
        (
            "cores (logical / physical)",
            format!("{} / {}", num(e.logical_cores.map(|v| v as f64), 0), num(e.physical_cores.map(|v| v as f64), 0)),
        ),
        ("memory", num(e.memory_bytes.map(|b| b as f64 / 1024f64.powi(3)), 1) + " GiB"),
        ("OS / kernel", format!("{} / {}", opt(&e.os), opt(&e.kernel))),
        (
            "open files (soft before → soft / hard)",
            format!(
                "{} → {} / {}",
                num(e.nofile_soft_before.map(|v| v as f64), 0),
                num(e.nofile_soft.map(|v| v as f64), 0),
                num(e.nofile_hard.map(|v| v as f64), 0)
            ),
        ),
        ("started", run.started_at.clone()),
    ];
    // Recorded since the streaming arms' reads moved to their own thread;
    // an older run's report stays as it was written.
    if let Some(p) = &e.stamp_reader_priority {
        env_rows.insert(env_rows.len() - 1, ("stream reader's scheduling (`stamp-reader`)", p.clone()));
    }
    for (k, v) in env_rows {
        let _ = writeln!(out, "| {k} | {v} |");
    }
    out
}

/// `report.md` in its parts, each Markdown: the file is them in this order;
/// `report.html` shows the same parts in an order of its own.
#[derive(Debug, Clone, Default)]
pub struct Parts {
    /// `# grpc-vs-rest: …`
    pub title: String,
    /// A debug build, throughput mode, exposure, a run that did not complete.
    pub warnings: String,
    /// Rows = metrics, columns = rounds (and their mean, min and max).
    pub table: String,
    /// CPU limits, replicas, generators and errors by reason, where they apply.
    pub details: String,
    pub validity: String,
    pub configuration: String,
    /// The environment and the notes on how the figures were taken.
    pub environment: String,
}

impl Parts {
    /// The parts as `report.md` orders them.
    pub fn markdown(&self) -> String {
        [
            &self.title,
            &self.warnings,
            &self.table,
            &self.details,
            &self.validity,
            &self.configuration,
            &self.environment,
        ]
        .into_iter()
        .map(String::as_str)
        .collect()
    }
}

/// The parts of `report.md`.
pub fn parts(run: &RunResult) -> Parts {
    let mut details = cpu_limits_section(run);
    details.push_str(&super::replicas::section(&[(run.config.transport.title(), run)]));
    details.push_str(&super::generators::section(run));
    details.push_str(&error_reasons_section(run));
    let mut env = String::from("\n## Environment\n\n");
    env.push_str(&environment_table(run));
    let _ = writeln!(
        env,
        "\nLatency is measured from each request's intended send time (coordinated-omission corrected); \
         service time from its actual send. Raw data: `run.json`; latency distribution: `latency.hgrm` \
         (and `latency-round-<k>.hgrm` per round).{}{}",
        service_time_note(run).unwrap_or_default(),
        send_note(run).unwrap_or_default()
    );
    if let Some(note) = instrument_note(run) {
        let _ = writeln!(env, "\n{note}");
    }
    for note in [other_load_note(run), steal_note(run)].into_iter().flatten() {
        let _ = writeln!(env, "\n{note}");
    }
    Parts {
        title: format!("# grpc-vs-rest: {}\n\n", title(run)),
        warnings: warnings(run),
        table: rounds_table(run),
        details,
        validity: validity_section(run),
        configuration: configuration_section(run),
        environment: env,
    }
}

/// `report.md`. With `charts`, it shows the charts written beside it.
pub fn render(run: &RunResult, charts: bool) -> String {
    let mut out = parts(run).markdown();
    if charts {
        out.push_str(&charts_section());
    }
    out
}

/// The simulated service time's precision, from what the downstream
/// reports (`service_time_resolution_ms`, the tick of the timer it waits
/// on); nothing for a downstream that does not report it, or no delay.
pub fn service_time_note(run: &RunResult) -> Option<String> {
    let settings = &run.tiers.get(&TierName::Downstream)?.settings;
    let tick_ms = settings["service_time_resolution_ms"].as_f64()?;
    let delay_ms = settings["delay_ms"].as_f64()?;
    let jitter_ms = settings["jitter_ms"].as_f64().unwrap_or(0.0);
    if delay_ms + jitter_ms <= 0.0 {
        return Some(" The downstream answers without a service time (no delay: no timer).".into());
    }
    let plus = if jitter_ms > 0.0 { " (plus its jitter)" } else { "" };
    Some(format!(
        " Service time ≥ delay{plus}, to {tick} ms: the downstream waits on its runtime's own timer, as a handler \
         waiting on I/O would, and a wait ends on the first {tick} ms tick at or after its due time, never before \
         it (the downstream's `service_time_resolution_ms`).",
        tick = trimmed(tick_ms)
    ))
}

/// When the open loop's requests left against their due times: the
/// precision asked for (`--send-precision`), the window its wake-ups are set
/// within, and the worst round's send lag p99 as measured, within the
/// precision or over it; nothing for a closed loop.
pub fn send_note(run: &RunResult) -> Option<String> {
    let load = &run.config.load;
    if load.closed_loop {
        return None;
    }
    let precision = load.send_precision;
    let window = crate::load::Schedule::window_of(precision);
    let asked = if precision.is_zero() {
        " Requests leave at their due times, the generator woken at each one.".to_owned()
    } else {
        format!(
            " Requests leave within {} of their due times (`--send-precision`): the generator's wake-ups are set \
             at most {} after a due time, the rest left for the wake-up's own delay, and send what is due by \
             then.",
            crate::config::hd(precision),
            crate::config::hd(window)
        )
    };
    let worst = run.rounds.iter().filter_map(|r| r.latency.send_lag.as_ref().map(|s| s.p99_ms)).reduce(f64::max);
    Some(match worst {
        Some(p99) if !precision.is_zero() => {
            let within =
                if p99 <= precision.as_secs_f64() * 1e3 { "within the precision" } else { "over the precision" };
            format!("{asked} Send lag p99: {p99:.3} ms in the worst round, {within}.")
        }
        Some(p99) => format!("{asked} Send lag p99: {p99:.3} ms in the worst round."),
        None => format!("{asked} Send lag: not measured."),
    })
}

/// `1` for 1.0, `0.5` for 0.5: a setting as its owner wrote it.
fn trimmed(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// How busy the rest of the machine kept its cores during the rounds, for
/// runs that measured it: work the run competed with for CPU.
pub fn other_load_note(run: &RunResult) -> Option<String> {
    let per_round: Vec<f64> = run.rounds.iter().filter_map(|r| r.other_cores).collect();
    let mean = crate::judge::stats::mean(per_round.iter().copied())?;
    let (lo, hi) = per_round.iter().fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
    let cores = run.environment.logical_cores.map_or(String::new(), |n| format!(" of {n}"));
    Some(format!(
        "Other load: processes outside this run kept {mean:.2} cores{cores} busy on average during the rounds \
         (per round {lo:.2} to {hi:.2}; the machine's busy share from /proc/stat less the run's own processes). \
         CPU figures measured beside other work can read higher than on a quiet machine."
    ))
}

/// The hypervisor's steal over the rounds, for runs that measured it.
pub fn steal_note(run: &RunResult) -> Option<String> {
    let steal: Vec<f64> = run.rounds.iter().filter_map(|r| r.steal_percent).collect();
    let most = steal.iter().copied().reduce(f64::max)?;
    Some(format!(
        "Steal: the hypervisor's steal was {:.2}% of the machine's CPU ticks on average over the rounds, at most \
         {most:.2}% in a round (/proc/stat; a round over {}% is not valid: its tiers ran on a slower machine).",
        crate::judge::stats::mean(steal.iter().copied()).unwrap_or(most),
        crate::judge::validity::STEAL_LIMIT_PERCENT
    ))
}

/// How "done" was stamped: for the front client, the kernel's receive stamp
/// of the answer's last packet where there was one (counted over the rounds).
fn arrival_note(run: &RunResult) -> String {
    let (mut stamped, mut ok, mut front) = (0, 0, false);
    for r in &run.rounds {
        if let Some(k) = r.latency.kernel_stamped {
            (stamped, ok, front) = (stamped + k, ok + r.requests.ok, true);
        }
    }
    if !front {
        return " Latency is stamped when the client hands back a decoded answer; checking it comes after.".into();
    }
    format!(
        " Latency ends at the kernel's receive stamp (SO_TIMESTAMPNS) of an answer's last packet, not at the clock \
         after the read (which adds this process's wake-up), for {stamped} of {ok} successful answers (the rest: the \
         clock after the read); parsing and checking the answer come after."
    )
}

/// What the latency instrument can resolve and what it adds by itself, for
/// runs that recorded it.
pub fn instrument_note(run: &RunResult) -> Option<String> {
    let i = run.instrument.as_ref()?;
    let mut note = format!("Instrument: every latency is recorded to {} significant digits", i.significant_digits);
    let median = run.rounds.first().and_then(|r| Some((r.histograms.get("corrected")?, r.latency.corrected.as_ref()?)));
    if let Some((text, summary)) = median
        && let Some(h) = decode_histogram(text)
    {
        let p50_us = (summary.p50_ms * 1000.0).round() as u64;
        let _ = write!(
            note,
            " (steps of {} µs at the median, {} ms)",
            resolution_us(&h, p50_us),
            num(Some(summary.p50_ms), 2)
        );
    }
    match &i.client_floor {
        Some(f) => {
            let _ = write!(
                note,
                "; the load client's own floor, measured before the warm-up over {} requests to an endpoint inside \
                 the harness that answers at once (client, loopback and a minimal server together), is p50 {} ms, \
                 p99 {} ms.",
                i.client_floor_requests,
                num(Some(f.p50_ms), 3),
                num(Some(f.p99_ms), 3)
            );
        }
        None => note.push_str("; the load client's own floor was not measured for this target."),
    }
    note.push_str(&arrival_note(run));
    if i.cpu_clock.is_some() {
        note.push_str(
            " CPU seconds per round come from each process's own CPU-time clock (nanoseconds), not from /proc's \
             10 ms ticks.",
        );
    }
    Some(note)
}

/// The block quotes above the table: a debug build, throughput mode, a run
/// that did not complete.
fn warnings(run: &RunResult) -> String {
    let mut out = String::new();
    if !run.environment.is_optimised() {
        let _ = writeln!(
            out,
            "> **WARNING: {} build.** These figures are not representative; rerun with `cargo run --release`.\n",
            run.environment.build_profile.to_uppercase()
        );
    }
    if run.config.load.closed_loop {
        let _ = writeln!(
            out,
            "> **Throughput mode (closed loop):** {} connections send back to back. Latency here is *not* corrected \
             for coordinated omission: a slow response delays the requests behind it instead of showing in the \
             percentiles. Use an open-loop run (`--qps`) for latency figures.\n",
            run.config.load.connections
        );
    }
    if let Some(text) = exposure(&run.config) {
        let _ = writeln!(out, "> **Listening beyond loopback**: {text}\n");
    }
    if run.status != RunStatus::Complete {
        let _ = writeln!(
            out,
            "> **Run {}**: {}\n",
            match run.status {
                RunStatus::Interrupted => "interrupted",
                _ => "aborted",
            },
            run.status_reason.as_deref().unwrap_or("").replace('\n', "\n> ")
        );
    }

    out
}

/// What a run exposed beyond loopback, said once for the terminal and the
/// report; `None` on loopback.
pub fn exposure(c: &crate::config::Config) -> Option<String> {
    let exposed = c.deploy.exposed();
    if exposed.is_empty() {
        return None;
    }
    let what: Vec<String> = exposed
        .iter()
        .map(|(flag, ip)| {
            let listeners = if *flag == "--bind" {
                "the downstream's gRPC (with reflection) and REST listeners, the caller's front door and any proxy"
            } else {
                "the admin listeners (/stats, /metrics)"
            };
            format!("{flag} {ip} is not a loopback address: {listeners} take connections from other machines")
        })
        .collect();
    Some(format!(
        "{}. Traffic from anywhere else is counted too: the byte counters and request counts (and so every per-request \
         figures) include whatever other machines send.",
        what.join("; ")
    ))
}

/// Rows = metrics, columns = rounds (and with several rounds their mean, min and max).
fn rounds_table(run: &RunResult) -> String {
    let mut out = String::new();
    let many = run.rounds.len() > 1;
    let _ = write!(out, "| metric |");
    for r in &run.rounds {
        let _ = write!(out, " round {}{} |", r.index, if r.complete { "" } else { " (partial)" });
    }
    if many {
        let _ = write!(out, " mean | min | max |");
    }
    let _ = write!(out, "\n|---|");
    for _ in 0..run.rounds.len() + if many { 3 } else { 0 } {
        let _ = write!(out, "---:|");
    }
    let _ = writeln!(out);
    for m in metrics().iter().filter(|m| m.shown_for(std::iter::once(run))) {
        let values: Vec<Option<f64>> = run.rounds.iter().map(|r| (m.get)(r)).collect();
        let _ = write!(out, "| {} |", m.label);
        for v in &values {
            let _ = write!(out, " {} |", num(*v, m.decimals));
        }
        if many {
            let present: Vec<f64> = values.iter().flatten().copied().collect();
            let (lo, hi) = present.iter().fold((None, None), |(lo, hi): (Option<f64>, Option<f64>), v| {
                (Some(lo.map_or(*v, |l| l.min(*v))), Some(hi.map_or(*v, |h| h.max(*v))))
            });
            let _ = write!(
                out,
                " {} | {} | {} |",
                num(mean(present.iter().copied()), m.decimals),
                num(lo, m.decimals),
                num(hi, m.decimals)
            );
        }
        let _ = writeln!(out);
    }
    if run.rounds.is_empty() {
        let _ = writeln!(out, "\nNo round was measured.");
    }
    if let Some(note) = per_request_note(run) {
        let _ = writeln!(out, "\n{note}");
    }
    out
}

/// What the rounds' CPU and bytes per request are over, where run.json
/// records it (older runs do not).
fn per_request_note(run: &RunResult) -> Option<String> {
    use crate::result::PerRequestBasis::{OwnCalls, Window};
    let of = |b| run.rounds.iter().filter(move |r| r.per_request_basis == Some(b)).map(|r| r.index.to_string());
    let (own, window): (Vec<String>, Vec<String>) = (of(OwnCalls).collect(), of(Window).collect());
    let own_text = "the round's own calls, each whole and nothing else's (it began with nothing in flight \
                    and its tiers were read again once its last call had ended)";
    let window_text = "the round's counter window, which holds the tail of the calls before it and misses \
                       its own last answers";
    match (own.is_empty(), window.is_empty()) {
        (true, true) => None,
        (false, true) => Some(format!("CPU and bytes per request: {own_text}.")),
        (true, false) => Some(format!("CPU and bytes per request: {window_text}.")),
        (false, false) => Some(format!(
            "CPU and bytes per request: rounds {}: {own_text}; rounds {}: {window_text}.",
            own.join(", "),
            window.join(", ")
        )),
    }
}

/// How each CPU-limited tier's quota acted, round by round (its cgroup's
/// `cpu.stat`), and what a limit that bound means for the hop time.
fn cpu_limits_section(run: &RunResult) -> String {
    let mut out = String::new();
    let limited: std::collections::BTreeSet<TierName> =
        run.rounds.iter().flat_map(|r| r.cpu_throttling.keys().copied()).collect();
    if limited.is_empty() {
        return out;
    }
    let _ = writeln!(out, "\n### CPU limits\n");
    let _ =
        writeln!(out, "From each limited tier's cgroup (`cpu.stat`): periods of the quota, and those it used up.\n");
    let _ = writeln!(
        out,
        "| tier | limit (cores) | round | periods | throttled periods | throttled (s) |\n|---|---:|---:|---:|---:|---:|"
    );
    for tier in &limited {
        for r in &run.rounds {
            if let Some(t) = r.cpu_throttling.get(tier) {
                let _ = writeln!(
                    out,
                    "| {tier} | {} | {} | {} | {} | {:.2} |",
                    t.cpus, r.index, t.periods, t.throttled_periods, t.throttled_seconds
                );
            }
        }
    }
    let bound: Vec<String> = run
        .rounds
        .iter()
        .filter(|r| r.cpu_throttling.get(&TierName::Caller).is_some_and(CpuThrottling::bound))
        .map(|r| r.index.to_string())
        .collect();
    if !bound.is_empty() {
        let _ = writeln!(
            out,
            "\nThe downstream hop time is measured inside the caller, whose CPU limit bound (round {}): it includes \
             the caller's own waiting for quota, not only the downstream and the wire.",
            bound.join(", ")
        );
    }
    out
}

/// Why requests failed, when any did: the counts above say how many of each
/// class, this says what the failing side said.
fn error_reasons_section(run: &RunResult) -> String {
    let mut out = String::new();
    if run.error_reasons.is_empty() {
        return out;
    }
    let _ = writeln!(out, "\n## Errors by reason\n");
    let _ = writeln!(
        out,
        "Over the whole run, warm-up included; at most {} distinct reasons are kept per class.\n",
        crate::load::MAX_REASONS_PER_CLASS
    );
    let _ = writeln!(out, "| class | requests | reason |\n|---|---:|---|");
    for e in &run.error_reasons {
        // A reason is text from a peer: keep it on one table row.
        let reason = e.reason.replace(['\n', '\r'], " ").replace('|', "\\|");
        let _ = writeln!(out, "| {} | {} | {} |", e.class, e.count, reason);
    }
    out
}

fn validity_section(run: &RunResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n## Validity\n");
    if run.is_valid() {
        let _ = writeln!(
            out,
            "Valid: every round achieved at least 99% of the target with no errors or drops, the generator kept its schedule (send lag p99 under 10 ms) and was not near a full core, and other processes kept at most 25% of the machine's cores busy where that was measured."
        );
    } else {
        let _ = writeln!(out, "**Not a valid measurement of the transports:**\n");
        for p in &run.validity {
            let _ = writeln!(out, "- {p}");
        }
    }

    out
}

fn configuration_section(run: &RunResult) -> String {
    let mut out = String::new();
    let c = &run.config;
    let _ = writeln!(out, "\n## Configuration\n");
    let mut rows = vec![("transport (internal hop)", c.transport.as_str().to_owned())];
    rows.extend(setup::shared_rows(c));
    rows.extend(setup::hop_rows(run));
    out.push_str(&setup::table(&rows));
    for (tier, info) in &run.tiers {
        let _ = writeln!(out, "| {tier} settings | `{}` |", info.settings);
    }
    out.push_str(&setup::contract_section(run));
    out.push_str(&super::link::section(&[(c.transport.title(), run)]));

    out
}
