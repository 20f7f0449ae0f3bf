//! The start-up and shutdown contract every service binary follows.
//!
//! On start a service prints exactly one [`ReadyLine`] as JSON on stdout, after
//! every listener is bound, so whoever started it (the harness, a script, a
//! person) learns the real ports even when it asked for port 0.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// The one JSON line a service prints on stdout once it is ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyLine {
    pub service: String,
    pub pid: u32,
    /// Bound addresses by listener name (`grpc`, `rest`, `front`, `admin`).
    pub listeners: BTreeMap<String, SocketAddr>,
}

impl ReadyLine {
    pub fn new(service: &str, listeners: impl IntoIterator<Item = (&'static str, SocketAddr)>) -> Self {
        ReadyLine {
            service: service.to_owned(),
            pid: std::process::id(),
            listeners: listeners.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        }
    }
}

/// Prints `line` as one JSON line on stdout and flushes it.
pub fn print_ready(line: &ReadyLine) -> std::io::Result<()> {
    use std::io::Write;
    let text = serde_json::to_string(line).map_err(std::io::Error::other)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

/// Logs to stderr, `warn` and above unless `RUST_LOG` says otherwise; in
/// colour only on a terminal and without `NO_COLOR`.
pub fn init_logging() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    let ansi = colour_wanted(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR").as_deref());
    let _ = tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(ansi).with_env_filter(filter).try_init();
}

/// Colour codes only for a person at a terminal, and never when `NO_COLOR` is
/// set to anything but the empty string (<https://no-color.org>).
fn colour_wanted(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// A duration flag that must be above zero (`500ms`, `30s`).
pub fn parse_positive_duration(text: &str) -> Result<std::time::Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if d.is_zero() => Err("must be above zero".to_owned()),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{e} (write e.g. 500ms or 30s)")),
    }
}

/// A binary's exit code for its result: 0, or 1 with the whole error chain.
pub fn exit_code<E: std::fmt::Display>(name: &str, result: Result<(), E>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A service's serving tasks and the token that stops them.
#[derive(Debug)]
pub struct Served {
    shutdown: CancellationToken,
    tasks: JoinSet<()>,
}

impl Served {
    pub fn new(shutdown: CancellationToken, tasks: JoinSet<()>) -> Self {
        Served { shutdown, tasks }
    }

    /// Waits until every listener has stopped (after the shutdown token fires
    /// and in-flight requests drained).
    pub async fn wait(mut self) {
        while self.tasks.join_next().await.is_some() {}
    }

    /// Signals shutdown and waits for the drain.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.wait().await;
    }
}

/// Cancels `token` on the first SIGINT (Ctrl-C) or SIGTERM.
pub fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match signal(SignalKind::terminate()) {
                Ok(mut term) => {
                    tokio::select! {
                        _ = ctrl_c => {}
                        _ = term.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = ctrl_c.await;
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = ctrl_c.await;
        }
        token.cancel();
    });
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::colour_wanted;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour_wanted(true, None));
        assert!(colour_wanted(true, Some(OsStr::new(""))), "an empty NO_COLOR does not count");
        assert!(!colour_wanted(true, Some(OsStr::new("1"))));
        assert!(!colour_wanted(false, None), "a file or a pipe gets no colour codes");
        assert!(!colour_wanted(false, Some(OsStr::new("1"))));
    }
}
