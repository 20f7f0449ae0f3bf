//! What the user sees while a run measures: a progress bar on a terminal,
//! plain periodic lines otherwise, nothing with `--quiet`. It only reads the
//! live counters; it never touches the records.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::load::Live;
use crate::record::Phases;

/// How often plain progress lines are printed when stderr is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

pub struct Progress {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Progress {
    pub fn start(cfg: &Config, t0: Instant, phases: Phases, live: Arc<Live>, p99_us: Arc<AtomicU64>) -> Progress {
        let stop = CancellationToken::new();
        if cfg.quiet {
            return Progress { stop, task: None };
        }
        let total = cfg.warmup + cfg.duration * cfg.rounds;
        let warmup = cfg.warmup;
        let qps = cfg.qps;
        let token = stop.clone();
        let tty = std::io::stderr().is_terminal();
        let task = tokio::spawn(async move {
            let bar = tty.then(|| {
                let bar = ProgressBar::new(total.as_millis() as u64);
                let style = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar());
                bar.set_style(style);
                bar
            });
            let every = if tty { Duration::from_millis(200) } else { PLAIN_EVERY };
            let mut last_sent = 0u64;
            let mut last_at = Instant::now();
            loop {
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tokio::time::sleep(every) => {}
                }
                let now = Instant::now();
                let elapsed = now.saturating_duration_since(t0);
                let sent = live.sent.load(Relaxed);
                let rate = (sent - last_sent.min(sent)) as f64 / now.duration_since(last_at).as_secs_f64().max(1e-3);
                (last_sent, last_at) = (sent, now);
                let phase = if elapsed < warmup {
                    "warm-up".to_owned()
                } else {
                    let r = ((elapsed - warmup).as_secs_f64() / (total - warmup).as_secs_f64().max(1e-9)
                        * f64::from(phases.rounds))
                    .floor() as u32;
                    format!("round {}/{}", (r + 1).min(phases.rounds), phases.rounds)
                };
                let p99 = match p99_us.load(Relaxed) {
                    0 => "-".to_owned(),
                    us => format!("{:.1} ms", us as f64 / 1000.0),
                };
                let msg = format!(
                    "{phase} · {rate:.0}/{qps} req/s · in flight {} · errors {} · dropped {} · p99 {p99}",
                    live.in_flight.load(Relaxed),
                    live.errors.load(Relaxed),
                    live.dropped.load(Relaxed),
                );
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
