//! Turning finished results into bytes (hyperfine's `export/` habit): each
//! renderer is a pure function of the results it is given, and [`files`] is
//! the one place that writes (and reads back) the files of a run folder.
//!
//! * [`markdown`]: `report.md`; [`comparison`]: `comparison.md` and the
//!   terminal table; [`findings`]: its findings sentences, verdict cells,
//!   method note and cost table; [`adr`]: `decision.md`, a MADR 4.0 record;
//!   [`summary`]: what is printed at the end (text or JSON);
//! * [`capacity`]: a sweep's `capacity.md` / `capacity.json`; [`payload`]: a
//!   payload sweep's `payload.md` / `payload.json`; [`charts`]: SVGs;
//!   [`hgrm`]: HdrHistogram percentile text; [`timeseries`]: CSV rows;
//!   [`setup`]: the run's configuration in words, for every report, and
//!   [`codec`]: its JSON codec row, the sample answer compared across codecs;
//!   [`replicas`]: the downstream's replicas, their shares and the imbalance;
//! * [`html`]: `report.html`, the one self-contained page of a run folder,
//!   from the same parts as the Markdown; [`mdhtml`]: that Markdown as
//!   escaped HTML, charts inline;
//! * [`experiment`]: an experiment's `summary.md` and charts; [`conditions`]:
//!   its `decision.md` (where each option wins) and its claims checked;
//! * [`numbers`]: how every renderer writes a figure (`n/a` where it was
//!   not measured);
//! * [`files`]: run folders (whole or absent), every file in them, and
//!   reading saved runs back for `harness compare`.
//!
//! A single-transport run folder holds the arm's files directly; a
//! `--transport both` folder holds `comparison.md`, `decision.md`, overlaid
//! charts and the time series at its top, and one complete arm folder per
//! transport (`grpc/`, `rest/`; an A/A run's `grpc-a/`, `grpc-b/`), each of
//! which `harness compare` accepts on its own.

pub mod adr;
pub mod capacity;
pub mod charts;
pub mod codec;
pub mod comparison;
pub mod conditions;
pub mod experiment;
pub mod files;
pub mod findings;
pub mod generators;
pub mod hgrm;
pub mod html;
pub mod link;
pub mod markdown;
pub mod mdhtml;
pub mod numbers;
pub mod payload;
pub mod replicas;
pub mod setup;
pub mod summary;
pub mod timeseries;

use crate::config::ProxyHop;
use crate::result::RunResult;

pub use files::{read_runs, write_run};

/// A rate as a folder name part: `100qps`, `2.5qps`.
pub fn qps_part(qps: f64) -> String {
    if qps.fract() == 0.0 { format!("{}qps", qps as u64) } else { format!("{qps}qps") }
}

/// `<timestamp>-<transport>-<load>[-label]`, e.g. `20261129T193505Z-grpc-100qps`,
/// with `load` from [`qps_part`], `<N>conn` or `sweep-<a>-<b>qps`.
pub fn folder_name(started_at: &str, transport: &str, load: &str, label: Option<&str>) -> String {
    let stamp: String = started_at.chars().filter(|c| !matches!(c, '-' | ':')).collect();
    let mut name = format!("{stamp}-{transport}-{load}");
    if let Some(label) = label {
        name.push('-');
        name.push_str(label);
    }
    name
}

/// The name an arm goes by in a comparison: `gRPC` / `REST` (and its proxy,
/// and `from N generators` beside runs of another number of generators),
/// or with its label (or position) when two arms share a name.
pub fn arm_names(runs: &[&RunResult]) -> Vec<String> {
    let generators = |r: &RunResult| r.generators.len().max(1);
    let mixed = runs.iter().any(|r| generators(r) != generators(runs[0]));
    let base: Vec<String> = runs
        .iter()
        .map(|r| {
            let t = match generators(r) {
                n if n > 1 && mixed => format!("{} from {n} generators", r.config.transport.title()),
                _ => r.config.transport.title().to_owned(),
            };
            match r.config.deploy.proxy {
                Some(p) => format!(
                    "{t} via {}{}",
                    p.as_str(),
                    if r.config.deploy.proxy_hop == ProxyHop::Front { " (front)" } else { "" }
                ),
                None => t,
            }
        })
        .collect();
    let labelled: Vec<String> = base
        .iter()
        .enumerate()
        .map(|(i, name)| {
            if base.iter().filter(|n| *n == name).count() == 1 {
                return name.clone();
            }
            match &runs[i].config.output.label {
                Some(l) => format!("{name} ({l})"),
                None => format!("{name} #{}", i + 1),
            }
        })
        .collect();
    // Arms of one run share its label (an A/A run): their position tells them apart.
    labelled
        .iter()
        .enumerate()
        .map(|(i, name)| match labelled.iter().filter(|n| *n == name).count() {
            1 => name.clone(),
            _ => format!("{name} #{}", i + 1),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use caller::Transport;

    use super::*;

    #[test]
    fn arms_are_named_apart_even_when_they_share_a_label() {
        let (mut a, mut b) = (crate::testing::run(Transport::Grpc, 1.0), crate::testing::run(Transport::Rest, 1.0));
        assert_eq!(arm_names(&[&a, &b]), ["gRPC", "REST"]);
        b.config.transport = Transport::Grpc;
        assert_eq!(arm_names(&[&a, &b]), ["gRPC #1", "gRPC #2"]);
        // Runs of their own, labelled apart.
        a.config.output.label = Some("zone-a".into());
        b.config.output.label = Some("zone-b".into());
        assert_eq!(arm_names(&[&a, &b]), ["gRPC (zone-a)", "gRPC (zone-b)"]);
        // An A/A run's arms share the run's label: their position tells them apart.
        b.config.output.label = Some("zone-a".into());
        assert_eq!(arm_names(&[&a, &b]), ["gRPC (zone-a) #1", "gRPC (zone-a) #2"]);
    }
}
