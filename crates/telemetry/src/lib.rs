//! What every service measures about itself, and the one accept loop that
//! measures it.
//!
//! This crate owns:
//! * [`CountingStream`]: a socket wrapper that counts the bytes each way;
//! * [`Counters`]: shared per-listener (or per-client) counters of wire bytes,
//!   message bytes, connections and requests by outcome;
//! * [`ProcessStats`]: the process's own CPU seconds and resident set;
//! * [`Registry`]: all of the above for one service, rendered as Prometheus text
//!   and as the JSON [`StatsSnapshot`] the harness reads back;
//! * [`serve`]: the accept loop (TCP_NODELAY, counting, HTTP/1.1 and h2c limits,
//!   idle and dead-peer timeouts, graceful drain) that every listener of every
//!   tier runs, and [`admin_router`];
//! * [`InFlightLimit`]: the bound on requests a tier works on at once;
//! * [`runtime_settings`]: the runtime a tier serves on (flavor, workers and
//!   where their count came from);
//! * [`huge_pages`]: transparent huge pages turned off for the process, and
//!   its settings saying so;
//! * [`tls`]: a listener's rustls configuration from PEM files, the handshakes
//!   it counted, and the hop's [`Compression`] names.
//!
//! It does not know about the contract or the transports' message types.

mod admin;
pub mod api;
mod body;
mod counters;
mod counting;
pub mod h2;
pub mod huge_pages;
mod lifecycle;
mod limit;
mod process;
mod registry;
mod runtime;
mod serve;
pub mod tls;

pub use admin::admin_router;
pub use body::{hold_until_dropped, watch_frames};
pub use counters::{Counters, CountersSnapshot};
pub use counting::CountingStream;
pub use lifecycle::{
    ReadyLine, Served, cancel_on_signal, exit_code, init_logging, parse_positive_duration, print_ready,
};
pub use limit::{InFlightLimit, MIN_DEFAULT_MAX_IN_FLIGHT, SHED};
pub use process::{ProcessSnapshot, ProcessStats, own_cpu_seconds};
pub use registry::{Registry, StatsSnapshot};
pub use runtime::{WORKERS_ENV, runtime_settings};
pub use serve::{Protocols, ServerSettings, bind, serve, serve_tls};
pub use tls::{Compression, TlsSnapshot};
