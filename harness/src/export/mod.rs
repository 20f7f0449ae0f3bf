//! Turning finished results into files (hyperfine's `export/` habit): each
//! submodule only renders bytes; this module lays them down in a run folder.
//!
//! A single-transport run folder holds the arm's files directly; a
//! `--transport both` folder holds `comparison.md`, overlaid charts and the
//! time series at its top, and one complete arm folder per transport
//! (`grpc/`, `rest/`), each of which `harness compare` accepts on its own.

pub mod capacity;
pub mod charts;
pub mod comparison;
pub mod folder;
pub mod hgrm;
pub mod markdown;
pub mod summary;
pub mod timeseries;

use std::io;
use std::path::{Path, PathBuf};

pub use crate::analysis::validity;
use crate::result::RunResult;
use crate::stats::decode_histogram;
use comparison::Arm;
use folder::RunFolder;

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

/// The name an arm goes by in a comparison: `gRPC` / `REST`, or its label when
/// two arms share a transport.
pub fn arm_names(runs: &[&RunResult]) -> Vec<String> {
    let base: Vec<String> = runs
        .iter()
        .map(|r| {
            let t = markdown::transport_name(r.config.transport.as_str());
            match r.config.proxy {
                Some(p) => format!(
                    "{t} via {}{}",
                    p.as_str(),
                    if r.config.proxy_hop == crate::proxy::ProxyHop::Front { " (front)" } else { "" }
                ),
                None => t.to_owned(),
            }
        })
        .collect();
    base.iter()
        .enumerate()
        .map(|(i, name)| {
            if base.iter().filter(|n| *n == name).count() == 1 {
                return name.clone();
            }
            match &runs[i].config.label {
                Some(l) => format!("{name} ({l})"),
                None => format!("{name} #{}", i + 1),
            }
        })
        .collect()
}

/// Writes one arm's files into `dir`: `run.json`, `report.md`, `latency.hgrm`,
/// `latency-round-<k>.hgrm` and the charts.
pub fn write_arm(dir: &Path, run: &RunResult) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_vec_pretty(run).map_err(io::Error::other)?;
    std::fs::write(dir.join("run.json"), json)?;
    std::fs::write(dir.join("report.md"), markdown::render(run, true))?;
    std::fs::write(dir.join("latency.hgrm"), hgrm::render(&charts::merged_corrected(run)))?;
    for r in &run.rounds {
        if let Some(h) = r.histograms.get("corrected").and_then(|t| decode_histogram(t)) {
            std::fs::write(dir.join(format!("latency-round-{}.hgrm", r.index)), hgrm::render(&h))?;
        }
    }
    // The proxy's configuration, so a reviewer can read exactly what was measured.
    if let Some(settings) = run.tiers.get("proxy").map(|t| &t.settings)
        && let (Some(file), Some(text)) = (settings["config_file"].as_str(), settings["config"].as_str())
    {
        std::fs::write(dir.join(file), text)?;
    }
    let name = arm_names(&[run]).remove(0);
    for (file, svg) in charts::all(&[(name, run)]) {
        std::fs::write(dir.join(file), svg)?;
    }
    Ok(())
}

/// Writes `comparison.md` and the overlaid charts of `runs` into `dir`.
pub fn write_comparison(dir: &Path, runs: &[&RunResult]) -> io::Result<()> {
    let names = arm_names(runs);
    let arms: Vec<Arm<'_>> = names.iter().zip(runs).map(|(name, run)| Arm { name, run }).collect();
    std::fs::write(dir.join("comparison.md"), comparison::render(&arms, true))?;
    let named: Vec<(String, &RunResult)> = names.iter().cloned().zip(runs.iter().copied()).collect();
    for (file, svg) in charts::all(&named) {
        std::fs::write(dir.join(file), svg)?;
    }
    Ok(())
}

/// Lays down a whole run into `folder`: the arm's files directly for one arm;
/// the comparison and one sub-folder per arm for several.
pub fn write_results(folder: &Path, runs: &[RunResult]) -> io::Result<()> {
    match runs {
        [single] => write_arm(folder, single),
        many => {
            for run in many {
                write_arm(&folder.join(run.config.transport.as_str()), run)?;
            }
            write_comparison(folder, &many.iter().collect::<Vec<_>>())
        }
    }
}

/// Writes a single run as a new folder under `out` (whole or absent, never
/// over an existing one) and returns its path.
pub fn write_run(run: &RunResult, out: &Path) -> io::Result<PathBuf> {
    let name = folder_name(
        &run.started_at,
        run.config.transport.as_str(),
        &qps_part(run.config.qps),
        run.config.label.as_deref(),
    );
    let folder = RunFolder::create(out, &name)?;
    if let Err(e) = write_results(folder.path(), std::slice::from_ref(run)) {
        folder.discard();
        return Err(e);
    }
    folder.commit()
}

/// Reads the runs a folder holds: its own `run.json`, or the `run.json` of
/// each arm sub-folder of a `--transport both` folder.
pub fn read_runs(folder: &Path) -> Result<Vec<RunResult>, String> {
    let read = |path: &Path| -> Result<RunResult, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{} is not a run.json this harness wrote: {e}", path.display()))
    };
    let own = folder.join("run.json");
    if own.is_file() {
        return Ok(vec![read(&own)?]);
    }
    let mut runs = Vec::new();
    for arm in ["grpc", "rest"] {
        let path = folder.join(arm).join("run.json");
        if path.is_file() {
            runs.push(read(&path)?);
        }
    }
    if runs.is_empty() {
        return Err(format!(
            "{} is not a run folder (it has no run.json and no grpc/ or rest/ arm folder); give folders written by the harness under results/",
            folder.display()
        ));
    }
    Ok(runs)
}
