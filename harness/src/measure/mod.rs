//! The instruments: everything a figure is read from, and nothing that judges
//! or renders it.
//!
//! * [`record`]: the collector that files every request's [`crate::load::Shot`]
//!   into one round's histograms and counts;
//! * [`histogram`]: the latency histogram and its serialized form;
//! * [`sampler`]: CPU and RSS of every process over time, each process's
//!   CPU clock read by [`cpu_clock`];
//! * [`remote`]: the same for tiers that are not child processes of the
//!   harness (elsewhere, or in containers), read from their `/stats`;
//! * [`tier_stats`]: the tiers' own counters (`/stats`: CPU seconds, wire and
//!   message bytes, connections) read at round boundaries;
//! * [`cgroup`]: a container's CPU quota at work (`cpu.stat`), read at
//!   round boundaries;
//! * [`steal`]: the machine's CPU ticks and the hypervisor's steal, read at
//!   round boundaries;
//! * [`tree`]: a foreign tier's process tree from /proc (CPU, RSS, PSS,
//!   connections), measured from outside;
//! * [`environment`]: the machine and build a run was measured on;
//! * [`calibrate`]: the instrument's precision and its own measured floor.

pub mod calibrate;
pub mod cgroup;
pub mod cpu_clock;
pub mod environment;
pub mod histogram;
pub mod link;
pub mod record;
pub mod remote;
pub mod sampler;
pub mod steal;
pub mod tier_stats;
pub mod tree;
