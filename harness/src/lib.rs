//! The harness: drives the three-tier topology at a fixed rate, measures every
//! tier, and writes reports a review board can trust.
//!
//! * [`config`]: flags → one validated [`config::Config`];
//! * [`topology`]: the tiers as child processes;
//! * [`load`]: the open-loop generator; [`record`]: the collector;
//!   [`sample`]: CPU/RSS sampling; [`run`]: one measured run end to end;
//! * [`stats`] and [`analysis`]: pure functions over results;
//! * [`export`]: results → files and terminal text; [`progress`]: live display;
//! * [`app`]: the command-line entry point and exit codes.

pub mod analysis;
pub mod app;
pub mod capacity;
pub mod config;
pub mod env;
pub mod export;
pub mod load;
pub mod progress;
pub mod proxy;
pub mod record;
pub mod result;
pub mod run;
pub mod sample;
pub mod stats;
pub mod testing;
pub mod topology;
