//! The start-up and shutdown contract every service binary follows.
//!
//! On start a service prints exactly one [`ReadyLine`] as JSON on stdout, after
//! every listener is bound, so whoever started it (the harness, a script, a
//! person) learns the real ports even when it asked for port 0.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};
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
