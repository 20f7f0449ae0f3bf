//! The harness: drives the three-tier topology at a fixed rate, measures every
//! tier, and writes reports a review board can trust.
//!
//! The folders are the stages a figure passes through (ARCHITECTURE.md at the
//! repository root draws the map):
//!
//! * [`config`]: flags → one validated [`config::Config`] / [`config::Plan`];
//! * [`tiers`]: the measured processes (downstream, caller, proxy) started,
//!   watched and stopped;
//! * [`load`]: the open-loop generator (schedule, dispatch, front client);
//! * [`measure`]: the instruments (latency record, resource sampler, the
//!   tiers' own counters, the environment);
//! * [`run`]: one measured run in phases, tying the above together;
//! * [`judge`]: pure functions from measurements to figures and verdicts
//!   (per-round arithmetic, statistics, report rows, validity, capacity);
//! * [`result`]: the `run.json` model every stage hands on;
//! * [`export`]: renderers that only make bytes, and the one module that
//!   writes files;
//! * [`app`]: the command line and exit codes.

pub mod app;
pub mod config;
pub mod export;
pub mod judge;
pub mod load;
pub mod measure;
pub mod result;
pub mod run;
pub mod testing;
pub mod tiers;
