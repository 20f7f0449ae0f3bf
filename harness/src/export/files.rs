//! The one place that touches the file system for results: run folders that
//! are whole or absent, every file in them (rendered by the sibling modules),
//! the time series appended while a run measures, and saved runs read back.
//!
//! A run folder is written into a hidden `.tmp-…` folder (the time series
//! while the run measures, the rest after) and renamed into place at the end;
//! an existing name gets a `-2`, `-3`, … suffix instead of being overwritten.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::comparison::{self, Arm};
use super::{adr, arm_names, capacity, charts, folder_name, hgrm, html, markdown, payload, qps_part, timeseries};
use caller::Transport;

use crate::config::{ConfigError, arm_dirs, bad};
use crate::judge::capacity::Capacity;
use crate::judge::payload::PayloadReport;
use crate::measure::histogram::decode_histogram;
use crate::result::ProxyInfo;
use crate::result::{RunResult, TierName};
use crate::tiers::tls::TlsMaterial;

/// The temporary folders of this process's run folders not committed yet,
/// for [`remove_unfinished`].
static UNFINISHED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn unfinished() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    UNFINISHED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes every run folder still being written, at once: for a harness
/// about to exit on the spot (a third Ctrl-C), where no destructor runs.
/// A folder whose commit has begun is left to it (the two hold one lock).
pub fn remove_unfinished() {
    for tmp in std::mem::take(&mut *unfinished()) {
        // Renamed away first: a write still under way then fails instead of
        // putting files back into a folder being removed.
        let mut doomed = tmp.clone().into_os_string();
        doomed.push(".removing");
        let doomed = PathBuf::from(doomed);
        let gone = if std::fs::rename(&tmp, &doomed).is_ok() { doomed } else { tmp };
        let _ = std::fs::remove_dir_all(gone);
    }
}

/// A run folder being written: a hidden temporary folder until
/// [`RunFolder::commit`] renames it into place. Dropped without a commit (a
/// failed write, an early return, a panic) it removes itself, and a harness
/// that exits on the spot removes it with [`remove_unfinished`], so no
/// `.tmp-…` folder is ever left behind.
#[derive(Debug)]
pub struct RunFolder {
    out: PathBuf,
    base: String,
    tmp: PathBuf,
    committed: bool,
}

impl RunFolder {
    pub fn create(out: &Path, base: &str) -> io::Result<RunFolder> {
        std::fs::create_dir_all(out)?;
        let tmp = out.join(format!(".tmp-{base}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir(&tmp)?;
        unfinished().push(tmp.clone());
        Ok(RunFolder { out: out.to_owned(), base: base.to_owned(), tmp, committed: false })
    }

    /// Where files go until [`RunFolder::commit`].
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Renames the folder into place under a name not taken yet.
    pub fn commit(mut self) -> io::Result<PathBuf> {
        let mut live = unfinished();
        let Some(at) = live.iter().position(|p| *p == self.tmp) else {
            return Err(io::Error::other("the run folder was removed (the harness is exiting)"));
        };
        let dest = self.rename()?;
        live.remove(at);
        Ok(dest)
    }

    fn rename(&mut self) -> io::Result<PathBuf> {
        let mut n = 1u32;
        loop {
            let dest = self.out.join(if n == 1 { self.base.clone() } else { format!("{}-{n}", self.base) });
            n += 1;
            if dest.exists() {
                continue;
            }
            match std::fs::rename(&self.tmp, &dest) {
                Ok(()) => {
                    self.committed = true;
                    return Ok(dest);
                }
                // Lost a race with another run taking the same name: try the next.
                Err(_) if dest.exists() => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Removes the folder: nothing was measured.
    pub fn discard(self) {}
}

impl Drop for RunFolder {
    fn drop(&mut self) {
        if !self.committed {
            unfinished().retain(|p| *p != self.tmp);
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// `timeseries.csv`, appended and flushed as samples come, so a crash loses
/// at most one interval.
pub struct TimeseriesFile {
    file: BufWriter<File>,
}

impl TimeseriesFile {
    pub fn create(path: &Path) -> io::Result<Self> {
        let mut file = BufWriter::new(File::create(path)?);
        writeln!(file, "{}", timeseries::HEADER)?;
        file.flush()?;
        Ok(TimeseriesFile { file })
    }

    /// Appends rows and flushes them. A failed write is not an error of the
    /// run: the same samples are kept in `run.json`.
    pub fn append(&mut self, rows: &str) {
        let _ = self.file.write_all(rows.as_bytes());
        let _ = self.file.flush();
    }
}

/// Writes a run's certificates and keys into `dir/tls/` (before any tier
/// starts: the tiers read them from there) and returns that folder. The keys
/// are throwaway (they belong to a CA made for this run alone) but private
/// all the same: only their owner may read them (0600).
pub fn write_tls(dir: &Path, material: &TlsMaterial) -> io::Result<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    let tls = dir.join("tls");
    std::fs::create_dir_all(&tls)?;
    for (name, text) in crate::tiers::tls::files(material) {
        let mode = if name.ends_with("-key.pem") { 0o600 } else { 0o644 };
        let mut file =
            std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(tls.join(name))?;
        file.write_all(text.as_bytes())?;
    }
    Ok(tls)
}

/// A run as run.json keeps it: every path a tier reported inside the
/// hidden folder the run was written in (`…/.tmp-<name>-<pid>/tls/ca.pem`)
/// made relative to the run folder (`tls/ca.pem`), since that folder is
/// renamed into place once written.
fn with_final_paths(run: &RunResult) -> RunResult {
    fn relative(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) => {
                if let Some(at) = s.find("/.tmp-") {
                    let rest = &s[at + 1..];
                    if let Some(slash) = rest.find('/') {
                        *s = rest[slash + 1..].to_owned();
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(relative),
            serde_json::Value::Object(o) => o.values_mut().for_each(relative),
            _ => {}
        }
    }
    let mut run = run.clone();
    for info in run.tiers.values_mut() {
        relative(&mut info.settings);
    }
    run
}

/// Writes one arm's files into `dir`: `run.json`, `report.md`,
/// `report.html`, `latency.hgrm`, `latency-round-<k>.hgrm` and the charts.
pub fn write_arm(dir: &Path, run: &RunResult) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let saved = with_final_paths(run);
    let json = serde_json::to_vec_pretty(&saved).map_err(io::Error::other)?;
    std::fs::write(dir.join("run.json"), json)?;
    std::fs::write(dir.join("report.md"), markdown::render(run, true))?;
    std::fs::write(dir.join("report.html"), html::run_page(&saved))?;
    std::fs::write(dir.join("latency.hgrm"), hgrm::render(&charts::merged_corrected(run)))?;
    for r in &run.rounds {
        if let Some(h) = r.histograms.get("corrected").and_then(|t| decode_histogram(t)) {
            std::fs::write(dir.join(format!("latency-round-{}.hgrm", r.index)), hgrm::render(&h))?;
        }
    }
    // The proxy's and the balancer's configurations, so a reviewer can read
    // exactly what was measured.
    if let Some(proxy) = run.tiers.get(&TierName::Proxy).and_then(|t| ProxyInfo::from_settings(&t.settings)) {
        std::fs::write(dir.join(&proxy.config_file), &proxy.config)?;
    }
    if let Some(balancer) = run.tiers.get(&TierName::Balancer).and_then(|t| ProxyInfo::from_settings(&t.settings)) {
        std::fs::write(dir.join(format!("balancer-{}", balancer.config_file)), &balancer.config)?;
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
    write_charts(dir, &names, runs)
}

/// `report.html` of the arms `runs`, with the decision record of two
/// different arms when `decision`.
pub fn write_comparison_page(dir: &Path, runs: &[&RunResult], decision: bool) -> io::Result<()> {
    let saved: Vec<RunResult> = runs.iter().map(|r| with_final_paths(r)).collect();
    let refs: Vec<&RunResult> = saved.iter().collect();
    let names = arm_names(&refs);
    let arms: Vec<Arm<'_>> = names.iter().zip(&saved).map(|(name, run)| Arm { name, run }).collect();
    let record = if decision { html::decision_text(&arms) } else { None };
    std::fs::write(dir.join("report.html"), html::comparison_page(&arms, record.as_deref()))
}

/// `decision.md` of two arms compared in one run, when they are different
/// options (an A/A run decides nothing).
fn write_decision(dir: &Path, runs: &[&RunResult]) -> io::Result<()> {
    let names = arm_names(runs);
    let arms: Vec<Arm<'_>> = names.iter().zip(runs).map(|(name, run)| Arm { name, run }).collect();
    if arms.len() != 2 || comparison::is_a_a(&arms) {
        return Ok(());
    }
    let date = runs[0].started_at.get(..10).unwrap_or(&runs[0].started_at);
    write_record(&dir.join("decision.md"), &arms, &adr::Record { date, prefer: None, folder: "" })
}

/// Writes a decision record to `path`.
pub fn write_record(path: &Path, arms: &[Arm<'_>], record: &adr::Record<'_>) -> io::Result<()> {
    std::fs::write(path, adr::render(arms, record))
}

fn write_charts(dir: &Path, names: &[String], runs: &[&RunResult]) -> io::Result<()> {
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
            let transports: Vec<_> = many.iter().map(|r| r.config.transport).collect();
            for (run, dir) in many.iter().zip(arm_dirs(&transports)) {
                write_arm(&folder.join(dir), run)?;
            }
            let refs: Vec<&RunResult> = many.iter().collect();
            write_comparison(folder, &refs)?;
            write_decision(folder, &refs)?;
            write_comparison_page(folder, &refs, true)
        }
    }
}

/// Writes a single run as a new folder under `out` (whole or absent, never
/// over an existing one) and returns its path.
pub fn write_run(run: &RunResult, out: &Path) -> io::Result<PathBuf> {
    let name = folder_name(
        &run.started_at,
        run.config.transport.as_str(),
        &qps_part(run.config.load.qps),
        run.config.output.label.as_deref(),
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
        let run: RunResult = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a run.json this harness wrote: {e}", path.display()))?;
        // Every histogram is checked before any is made from it.
        for r in &run.rounds {
            for (name, h) in &r.histograms {
                if let Some(why) = crate::measure::histogram::refusal(h) {
                    return Err(format!("{}: round {} histogram {name} is refused: it {why}", path.display(), r.index));
                }
            }
        }
        Ok(run)
    };
    let own = folder.join("run.json");
    if own.is_file() {
        return Ok(vec![read(&own)?]);
    }
    let mut runs = Vec::new();
    let names = Transport::ALL.iter().chain(&Transport::STREAMING).flat_map(|t| {
        let t = t.as_str();
        [t.to_owned(), format!("{t}-a"), format!("{t}-b")]
    });
    for arm in names {
        let path = folder.join(arm).join("run.json");
        if path.is_file() {
            runs.push(read(&path)?);
        }
    }
    let runs = crate::judge::difference::in_compared_order(runs);
    if runs.is_empty() {
        return Err(format!(
            "{} is not a run folder (it has no run.json and no arm folder such as grpc/, rest/ or grpc-stream/); give folders written by the harness under results/",
            folder.display()
        ));
    }
    Ok(runs)
}

/// The run folders directly inside `dir` (not hidden), in name order.
pub fn run_folders_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .filter(|p| read_runs(p).is_ok())
        .collect();
    found.sort();
    found
}

/// A sweep folder's `capacity.json`, and the runs of its first step: what
/// `harness rerun` needs to repeat it. `None` when `folder` is not a sweep.
pub fn read_sweep(folder: &Path) -> Option<Result<(Capacity, Vec<RunResult>), String>> {
    let path = folder.join("capacity.json");
    if !path.is_file() {
        return None;
    }
    let read = || -> Result<(Capacity, Vec<RunResult>), String> {
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let c: Capacity = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a capacity.json this harness wrote: {e}", path.display()))?;
        let first = c
            .arms
            .iter()
            .filter_map(|a| a.steps.first())
            .min_by(|x, y| x.offered_qps.total_cmp(&y.offered_qps))
            .ok_or_else(|| format!("{}: the sweep ran no step", folder.display()))?;
        // A step of several arms is one folder holding an arm folder each.
        let step = folder.join(first.folder.split('/').next().unwrap_or(&first.folder));
        Ok((c, read_runs(&step)?))
    };
    Some(read())
}

/// What a saved folder holds, read back for `harness report`.
#[derive(Debug)]
pub enum Saved {
    /// One run, or the arms of a comparison.
    Runs(Vec<RunResult>),
    /// A rate sweep and the setup line its capacity.md gives.
    Capacity(Capacity, String),
    /// A payload sweep and the setup line its payload.md gives.
    Payload(PayloadReport, String),
}

/// The largest `capacity.json` or `payload.json` read back (a sweep of many
/// steps is a few hundred KiB).
pub const MAX_SWEEP_JSON_BYTES: u64 = 64 << 20;

/// Reads a saved folder of any kind: a sweep (`capacity.json`,
/// `payload.json`), one run, or a comparison's arms.
pub fn read_saved(folder: &Path) -> Result<Saved, String> {
    if !folder.is_dir() {
        return Err(format!("{}: no such folder", folder.display()));
    }
    let sweep = |json: &str, md: &str| -> Result<Option<(String, String)>, String> {
        let path = folder.join(json);
        if !path.is_file() {
            return Ok(None);
        }
        let size = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?.len();
        if size > MAX_SWEEP_JSON_BYTES {
            return Err(format!(
                "{}: {size} bytes, over the {MAX_SWEEP_JSON_BYTES} a sweep's file can be",
                path.display()
            ));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        // The setup line is the third line of the Markdown written beside it.
        let setup = std::fs::read_to_string(folder.join(md)).ok().and_then(|m| m.lines().nth(2).map(str::to_owned));
        Ok(Some((text, setup.unwrap_or_default())))
    };
    if let Some((text, setup)) = sweep("capacity.json", "capacity.md")? {
        let c = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a capacity.json this harness wrote: {e}", folder.display()))?;
        return Ok(Saved::Capacity(c, setup));
    }
    if let Some((text, setup)) = sweep("payload.json", "payload.md")? {
        let p = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a payload.json this harness wrote: {e}", folder.display()))?;
        return Ok(Saved::Payload(p, setup));
    }
    read_runs(folder).map(Saved::Runs)
}

/// `report.html` of what a saved folder holds, written to `path`.
pub fn write_saved_page(path: &Path, saved: &Saved) -> io::Result<()> {
    let page = match saved {
        Saved::Capacity(c, setup) => html::capacity_page(c, setup),
        Saved::Payload(p, setup) => html::payload_page(p, setup),
        Saved::Runs(runs) if runs.len() == 1 => html::run_page(&runs[0]),
        Saved::Runs(runs) => {
            let refs: Vec<&RunResult> = runs.iter().collect();
            let names = arm_names(&refs);
            let arms: Vec<Arm<'_>> = names.iter().zip(runs).map(|(name, run)| Arm { name, run }).collect();
            html::comparison_page(&arms, html::decision_text(&arms).as_deref())
        }
    };
    std::fs::write(path, page)
}

/// A sweep's `capacity.md`, `capacity.json`, charts and `report.html`.
pub fn write_capacity(dir: &Path, c: &Capacity, setup: &str) -> io::Result<()> {
    std::fs::write(dir.join("capacity.md"), capacity::render(c, setup))?;
    std::fs::write(dir.join("report.html"), html::capacity_page(c, setup))?;
    std::fs::write(dir.join("capacity.json"), capacity::json(c))?;
    for (file, svg) in capacity::charts(c) {
        std::fs::write(dir.join(file), svg)?;
    }
    Ok(())
}

/// A payload sweep's `payload.md`, `payload.json`, charts and `report.html`.
pub fn write_payload(dir: &Path, p: &PayloadReport, setup: &str) -> io::Result<()> {
    std::fs::write(dir.join("payload.md"), payload::render(p, setup))?;
    std::fs::write(dir.join("report.html"), html::payload_page(p, setup))?;
    std::fs::write(dir.join("payload.json"), payload::json(p))?;
    for (file, svg) in payload::charts(p) {
        std::fs::write(dir.join(file), svg)?;
    }
    Ok(())
}

/// A new experiment folder `name` under `out` (a `-2`, `-3`, … suffix
/// where the name is taken); its cells' run folders come later, each whole.
pub fn create_experiment(out: &Path, name: &str) -> io::Result<PathBuf> {
    std::fs::create_dir_all(out)?;
    for n in 1u32.. {
        let dir = out.join(if n == 1 { name.to_owned() } else { format!("{name}-{n}") });
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no free name"))
}

/// Writes `bytes` to `path` whole: beside it first, then renamed over it.
fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// An experiment's plan as given (`plan.toml`) and in its normalised form
/// (`plan.json`), which `--resume` compares the plan file with.
pub fn write_plan(dir: &Path, text: &str, normal: &str) -> io::Result<()> {
    write_whole(&dir.join("plan.toml"), text.as_bytes())?;
    write_whole(&dir.join("plan.json"), normal.as_bytes())
}

/// The normalised plan an experiment folder was started with.
pub fn read_plan(dir: &Path) -> io::Result<String> {
    std::fs::read_to_string(dir.join("plan.json"))
}

/// An experiment's `summary.md`, its charts, `decision.md` and `experiment.json`.
pub fn write_experiment(dir: &Path, e: &super::experiment::Shown<'_>, json: &str) -> io::Result<()> {
    for (file, svg) in super::experiment::chart_files(e) {
        write_whole(&dir.join(file), svg.as_bytes())?;
    }
    write_whole(&dir.join("experiment.json"), json.as_bytes())?;
    write_whole(&dir.join("decision.md"), super::experiment::decision(e).as_bytes())?;
    write_whole(&dir.join("summary.md"), super::experiment::render(e).as_bytes())?;
    write_whole(&dir.join("report.html"), html::experiment_page(e, json).as_bytes())
}

/// Whether `out` can hold a run folder of about `needed_bytes`, asked before
/// anything starts: it must be, or become, a folder this process may write
/// in, with room for the run. It creates `out` (where the run folder goes
/// anyway) and writes nothing else.
pub fn check_out(out: &Path, needed_bytes: u64) -> Result<(), ConfigError> {
    let fail = |e: io::Error| {
        bad("--out", format!("{} is not writable ({e}); choose a folder you can write to", out.display()))
    };
    std::fs::create_dir_all(out).map_err(fail)?;
    // access(2) also says no on a read-only file system, where root may not write either.
    nix::unistd::access(out, nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK)
        .map_err(|e| fail(io::Error::from(e)))?;
    check_space(out, needed_bytes, free_bytes(out))
}

/// Bytes an unprivileged user may still write under `out`; `None` if unknown.
// statvfs's field types differ between platforms (u32 on some): the
// conversions are only useless on this one.
#[allow(clippy::useless_conversion)]
fn free_bytes(out: &Path) -> Option<u64> {
    let s = nix::sys::statvfs::statvfs(out).ok()?;
    Some(u64::from(s.blocks_available()).saturating_mul(u64::from(s.fragment_size())))
}

/// A run folder of about `needed` bytes must fit in the `free` bytes of
/// `out` (unknown free space is not held against it).
fn check_space(out: &Path, needed: u64, free: Option<u64>) -> Result<(), ConfigError> {
    let mib = |bytes: u64| format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64);
    match free {
        Some(free) if free < needed => Err(bad(
            "--out",
            format!(
                "{} has {} free, but this run writes about {}; free some space, choose another --out, or run \
                 shorter (--duration, --rounds) or sample less often (--sample-interval)",
                out.display(),
                mib(free),
                mib(needed)
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_never_committed_leaves_nothing() {
        let out = std::env::temp_dir().join(format!("gvr-runfolder-{}", std::process::id()));
        let folder = RunFolder::create(&out, "run").unwrap();
        std::fs::write(folder.path().join("run.json"), b"{}").unwrap();
        drop(folder);
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "the temporary folder was left");
        let committed = RunFolder::create(&out, "run").unwrap().commit().unwrap();
        assert!(committed.is_dir() && committed.ends_with("run"));
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn the_time_series_is_flushed_row_by_row() {
        let path = std::env::temp_dir().join(format!("gvr-ts-{}.csv", std::process::id()));
        let mut f = TimeseriesFile::create(&path).unwrap();
        f.append("1.500,grpc,caller,12.35,,50,99.50\n");
        // Read while the writer is still open: the row is already on disk.
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{}\n1.500,grpc,caller,12.35,,50,99.50\n", timeseries::HEADER));
        drop(f);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn the_run_folder_must_fit_in_the_free_space() {
        let out = Path::new("/somewhere");
        let err = check_space(out, 1 << 20, Some((1 << 20) - 1)).unwrap_err();
        assert_eq!(err.flag, "--out");
        assert!(err.problem.contains("/somewhere has") && err.problem.contains("free"), "{err}");
        assert!(check_space(out, 1 << 20, Some(1 << 20)).is_ok());
        assert!(check_space(out, 1 << 20, None).is_ok());
    }

    #[test]
    fn an_unwritable_out_is_refused_and_a_good_one_gets_no_probe_file() {
        let file = std::env::temp_dir().join(format!("gvr-not-a-dir-{}", std::process::id()));
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(check_out(&file.join("sub"), 1).unwrap_err().flag, "--out");
        std::fs::remove_file(file).unwrap();
        let out = std::env::temp_dir().join(format!("gvr-out-ok-{}", std::process::id())).join("deeper");
        check_out(&out, 1).unwrap();
        assert!(out.is_dir(), "--out is made");
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "nothing is written but the folder");
        std::fs::remove_dir_all(out.parent().unwrap()).unwrap();
    }
}
