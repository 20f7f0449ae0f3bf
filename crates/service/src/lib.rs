//! The service kit every tier is built from: how a listener is bound and
//! served, and how a service starts and stops.
//!
//! This crate owns:
//! * [`serve`]: the accept loop (TCP_NODELAY, byte counting, TLS, HTTP/1.1 and
//!   h2c limits, idle and dead-peer timeouts, graceful drain) that every
//!   listener of every tier runs, with [`ServerSettings`] and [`bind`];
//! * [`tls`]: a listener's rustls configuration from PEM files;
//! * [`compression`]: the hop's [`Compression`] and its one mapping onto each
//!   library's type;
//! * [`api`]: the JSON error shape and body decoding of every HTTP API, and
//!   [`json_errors`]: that shape on every error answer a listener sends;
//!   [`rest_edge`]: that, the in-flight bound and the coding refusal as the
//!   one layer a REST listener puts around its router;
//! * [`InFlightLimit`]: the bound on requests a tier works on at once, and
//!   [`WorkBudget`]: the bound on the records and uploads they hold;
//! * the lifecycle: ready line, logging, signals, drain and exit code;
//! * [`runtime_settings`]: the runtime a tier serves on (flavor, workers and
//!   where their count came from);
//! * [`huge_pages`]: transparent huge pages set for the process (off unless
//!   `--huge-pages machine`), and its settings saying so; [`h2`]: the
//!   HTTP/2 windows every side sets.
//!
//! What is counted lives in `telemetry`; this crate depends on it, never the
//! reverse. It does not know about the contract or the transports' messages.

pub mod api;
pub mod around;
mod body;
pub mod compression;
mod edge;
mod errors;
pub mod h2;
pub mod huge_pages;
mod lifecycle;
mod limit;
mod runtime;
mod serve;
pub mod tls;
mod work;

pub use body::{bytes_holding, hold_until_dropped, watch_frames};
pub use compression::Compression;
pub use edge::{rest_edge, rest_edge_over};
pub use errors::{MAX_HEADER_BYTES, json_errors};
pub use lifecycle::{
    ReadyLine, Served, cancel_on_signal, exit_code, init_logging, parse_positive_duration, print_ready,
};
pub use limit::{InFlightLimit, MIN_DEFAULT_MAX_IN_FLIGHT, SHED};
pub use runtime::{WORKERS_ENV, runtime_settings};
pub use serve::{App, Protocols, ServerSettings, bind, serve, serve_tls};
pub use work::{
    DEFAULT_MAX_WORK_BYTES, FILLER_COPIES, HeldUntilSent, Refused, WORK_BYTES_PER_RECORD, WorkBudget, WorkPermit,
};
