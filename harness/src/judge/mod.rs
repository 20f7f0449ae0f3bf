//! Judgements over measured data: pure functions, no I/O, unit tested on
//! synthetic inputs.
//!
//! * [`round`]: one round's records, samples and counter differences → its
//!   figures (rates, latency summaries, CPU and bytes per request);
//! * [`stats`]: summaries and means;
//! * [`metrics`]: the rows a report shows and which direction is better;
//! * [`validity`]: whether a run was a fair measurement;
//! * [`capacity`]: sweep steps, whether each was sustained, and the knee.

pub mod capacity;
pub mod metrics;
pub mod round;
pub mod stats;
pub mod validity;

pub use validity::validity;
