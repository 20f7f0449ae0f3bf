//! Turning a finished [`RunResult`] into files (hyperfine's `export/` habit):
//! each submodule only renders bytes; [`write_run`] lays them down as a new
//! run folder, atomically and never over an existing one.

pub mod hgrm;
pub mod markdown;
pub mod summary;

use std::io;
use std::path::{Path, PathBuf};

pub use crate::analysis::validity;
use crate::result::RunResult;
use crate::stats::{decode_histogram, new_histogram};

/// `<timestamp>-<transport>-<qps>qps[-label]`, e.g. `20261129T193505Z-grpc-100qps`.
pub fn folder_name(run: &RunResult) -> String {
    let stamp: String = run.started_at.chars().filter(|c| !matches!(c, '-' | ':')).collect();
    let qps = if run.config.qps.fract() == 0.0 {
        format!("{}", run.config.qps as u64)
    } else {
        format!("{}", run.config.qps)
    };
    let mut name = format!("{stamp}-{}-{qps}qps", run.config.transport.as_str());
    if let Some(label) = &run.config.label {
        name.push('-');
        name.push_str(label);
    }
    name
}

/// The merged corrected-latency histogram of all rounds, as `.hgrm` text.
fn merged_hgrm(rounds: &[&crate::result::RoundResult]) -> String {
    let mut merged = new_histogram();
    for r in rounds {
        if let Some(h) = r.histograms.get("corrected").and_then(|t| decode_histogram(t)) {
            let _ = merged.add(&h);
        }
    }
    hgrm::render(&merged)
}

/// Writes `run.json`, `report.md` and the `.hgrm` files into a new folder
/// under `out`. Everything is written into a hidden temporary folder first and
/// renamed into place, so a run folder is either whole or absent; a name that
/// exists gets a `-2`, `-3`, … suffix instead of being overwritten.
pub fn write_run(run: &RunResult, out: &Path) -> io::Result<PathBuf> {
    std::fs::create_dir_all(out)?;
    let base = folder_name(run);
    let tmp = out.join(format!(".tmp-{base}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir(&tmp)?;
    let json = serde_json::to_vec_pretty(run).map_err(io::Error::other)?;
    std::fs::write(tmp.join("run.json"), json)?;
    std::fs::write(tmp.join("report.md"), markdown::render(run))?;
    let all: Vec<_> = run.rounds.iter().collect();
    std::fs::write(tmp.join("latency.hgrm"), merged_hgrm(&all))?;
    if run.rounds.len() > 1 {
        for r in &run.rounds {
            std::fs::write(tmp.join(format!("latency-round-{}.hgrm", r.index)), merged_hgrm(&[r]))?;
        }
    }
    let mut n = 1u32;
    loop {
        let dest = out.join(if n == 1 { base.clone() } else { format!("{base}-{n}") });
        n += 1;
        if dest.exists() {
            continue;
        }
        match std::fs::rename(&tmp, &dest) {
            Ok(()) => return Ok(dest),
            // Lost a race with another run taking the same name: try the next.
            Err(_) if dest.exists() => continue,
            Err(e) => return Err(e),
        }
    }
}
