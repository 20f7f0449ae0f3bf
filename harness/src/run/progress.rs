//! What the user sees while a run measures: a progress bar on a terminal,
//! plain periodic lines otherwise, nothing with `--quiet`. It only reads the
//! live counters and the phase label; it never touches the records.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;

use crate::load::Live;

/// How often plain progress lines are printed when stderr is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// What the display shows: shared with the run, which updates the phase.
#[derive(Debug, Default)]
pub struct Status {
    pub live: Arc<Live>,
    /// The corrected p99 of the current segment, µs (0: none yet).
    pub p99_us: Arc<AtomicU64>,
    /// e.g. `gRPC warm-up`, `REST round 2/3`.
    pub phase: Mutex<String>,
    /// The current segment's target rate.
    pub qps: Mutex<f64>,
}

impl Status {
    pub fn set_phase(&self, phase: String) {
        *self.phase.lock().unwrap_or_else(|e| e.into_inner()) = phase;
        self.p99_us.store(0, Relaxed);
    }
}

pub struct Progress {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Progress {
    /// Starts the display for a run expected to last `total`; `quiet` shows nothing.
    pub fn start(quiet: bool, total: Duration, status: Arc<Status>) -> Progress {
        let stop = CancellationToken::new();
        if quiet {
            return Progress { stop, task: None };
        }
        let token = stop.clone();
        let tty = std::io::stderr().is_terminal();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let bar = tty.then(|| {
                let bar = ProgressBar::new(total.as_millis() as u64);
                let style = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar());
                bar.set_style(style);
                bar
            });
            let every = if tty { Duration::from_millis(200) } else { PLAIN_EVERY };
            let (mut last_sent, mut last_at) = (0u64, Instant::now());
            loop {
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tokio::time::sleep(every) => {}
                }
                let now = Instant::now();
                let live = &status.live;
                let sent = live.sent.load(Relaxed);
                let rate = sent.saturating_sub(last_sent) as f64 / now.duration_since(last_at).as_secs_f64().max(1e-3);
                (last_sent, last_at) = (sent, now);
                let p99 = match status.p99_us.load(Relaxed) {
                    0 => "-".to_owned(),
                    us => format!("{:.1} ms", us as f64 / 1000.0),
                };
                let phase = status.phase.lock().map(|p| p.clone()).unwrap_or_default();
                let qps = status.qps.lock().map(|q| *q).unwrap_or_default();
                let msg = format!(
                    "{phase} · {rate:.0}/{qps} req/s · in flight {} · errors {} · dropped {} · p99 {p99}",
                    live.in_flight.load(Relaxed),
                    live.errors.load(Relaxed),
                    live.dropped.load(Relaxed),
                );
                let elapsed = now.duration_since(started);
                match &bar {
                    Some(bar) => {
                        bar.set_position(elapsed.min(total).as_millis() as u64);
                        bar.set_message(msg);
                    }
                    None => eprintln!("[{:>6.1}s / {:.0}s] {msg}", elapsed.as_secs_f64(), total.as_secs_f64()),
                }
            }
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
        });
        Progress { stop, task: Some(task) }
    }

    /// Stops the display and waits until the bar is cleared, so the summary
    /// that follows is not drawn over.
    pub async fn finish(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}
