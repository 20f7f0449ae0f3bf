//! One cell of an experiment: a plain run of this executable with the
//! cell's argument list and `--out` its folder in the experiment, started
//! as a child in its own process group (a Ctrl-C at the terminal reaches
//! the plan, which passes each signal on once, so the child stops as a run
//! stopped by hand does and writes what it finished). Its progress lines
//! come back prefixed with the cell and the time left for the whole matrix.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::config::hd;
use crate::config::matrix::Cell;
use crate::export::files::{read_runs, run_folders_in};
use crate::result::{RunResult, RunStatus};
use crate::run::interrupt::Interrupt;

/// How a cell's run ended.
#[derive(Debug)]
pub enum CellEnd {
    /// Its run folder, every arm complete.
    Finished(PathBuf),
    /// The run stopped on a signal (its partial folder is set aside).
    Interrupted,
    /// It failed: why.
    Failed(String),
}

/// Where a cell is, for its progress lines.
pub struct Where<'a> {
    pub number: usize,
    pub total: usize,
    /// The estimated time of this cell and of every cell after it.
    pub this: Duration,
    pub after: Duration,
    pub id: &'a str,
}

impl Where<'_> {
    /// `cell 3/12 03-items-100 · matrix ≈2m 10s left`, `since` the cell started.
    pub fn prefix(&self, since: Instant) -> String {
        let left = self.this.saturating_sub(since.elapsed()) + self.after;
        format!(
            "cell {}/{} {} · matrix ≈{} left",
            self.number,
            self.total,
            self.id,
            hd(Duration::from_secs(left.as_secs()))
        )
    }
}

/// The complete run folder in `dir` (a cell's folder), if it has one: a
/// folder whose every arm's run.json says complete.
pub fn finished(dir: &Path) -> Option<(PathBuf, Vec<RunResult>)> {
    run_folders_in(dir).into_iter().find_map(|f| {
        let runs = read_runs(&f).ok()?;
        runs.iter().all(|r| r.status == RunStatus::Complete).then_some((f, runs))
    })
}

/// Sets aside (renamed hidden, kept) every run folder of `dir` that is not
/// complete: a cell run again writes a folder of its own beside nothing.
fn set_aside(dir: &Path) {
    for f in run_folders_in(dir) {
        if let Some(name) = f.file_name().map(|n| n.to_string_lossy().into_owned()) {
            let _ = std::fs::rename(&f, dir.join(format!(".unfinished-{name}")));
        }
    }
}

/// Runs `cell` into `dir`, saying its progress as `at`.
pub async fn run(cell: &Cell, dir: &Path, at: &Where<'_>, interrupt: &Interrupt) -> CellEnd {
    set_aside(dir);
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return CellEnd::Failed(format!("finding this executable: {e}")),
    };
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(&cell.args)
        .arg("--out")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    crate::tiers::process::die_with_parent(&mut cmd, Signal::SIGTERM);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return CellEnd::Failed(format!("starting the cell's run: {e}")),
    };
    let started = Instant::now();
    eprintln!("harness plan: {}: starting: harness {}", at.prefix(started), cell.args.join(" "));
    let prefix = at.prefix(started);
    let lines = child.stderr.take().map(|err| {
        let (number, total, id, this, after) = (at.number, at.total, at.id.to_owned(), at.this, at.after);
        tokio::spawn(async move {
            let at = Where { number, total, this, after, id: &id };
            let mut lines = BufReader::new(err).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if line.trim().is_empty() {
                    continue;
                }
                eprintln!("harness plan: {}: {}", at.prefix(started), line.trim_start_matches("harness: "));
            }
        })
    });
    let pid = child.id().and_then(|p| i32::try_from(p).ok()).map(Pid::from_raw);
    let (mut stopped, mut cut) = (false, false);
    let status = loop {
        tokio::select! {
            s = child.wait() => break s,
            () = interrupt.stopped(), if !stopped => {
                stopped = true;
                pid.map(|p| kill(p, Signal::SIGINT));
            }
            () = interrupt.cut_token().cancelled(), if stopped && !cut => {
                cut = true;
                pid.map(|p| kill(p, Signal::SIGINT));
            }
        }
    };
    if let Some(task) = lines {
        let _ = task.await;
    }
    // A complete folder is a finished cell, whatever the exit code (a gate
    // of the base breached gives 99).
    match (status, finished(dir)) {
        (_, Some((folder, _))) => CellEnd::Finished(folder),
        _ if interrupt.is_stopped() => {
            set_aside(dir);
            CellEnd::Interrupted
        }
        (Ok(s), _) => CellEnd::Failed(format!("{prefix}: its run exited with {s}")),
        (Err(e), _) => CellEnd::Failed(format!("{prefix}: waiting for its run: {e}")),
    }
}
