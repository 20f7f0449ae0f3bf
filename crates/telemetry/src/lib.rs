//! What every service measures about itself.
//!
//! This crate owns:
//! * [`CountingStream`]: a socket wrapper that counts the bytes each way;
//! * [`Counters`]: shared per-listener (or per-client) counters of wire bytes,
//!   message bytes, connections, requests by outcome and TLS handshakes
//!   ([`TlsTally`], [`TlsSnapshot`]);
//! * [`ProcessStats`]: the process's own CPU seconds and resident set;
//! * [`Registry`]: all of the above for one service, rendered as Prometheus text
//!   and as the JSON [`StatsSnapshot`] the harness reads back, served by
//!   [`admin_router`].
//!
//! It does not serve anything itself (the accept loop, TLS configuration and
//! lifecycle are the `service` crate's), nor know the contract or transports.

mod admin;
mod calls;
mod counters;
mod counting;
mod handshakes;
mod process;
mod registry;
mod streams;

pub use admin::{ADMIN_API, admin_router};
pub use calls::{CallTally, MAX_SEGMENTS};
pub use counters::{Counters, CountersSnapshot};
pub use counting::CountingStream;
pub use handshakes::{TlsSnapshot, TlsTally};
pub use process::{ProcessSnapshot, ProcessStats, own_cpu_seconds};
pub use registry::{Registry, StatsSnapshot};
pub use streams::{StreamSnapshot, StreamTally};
