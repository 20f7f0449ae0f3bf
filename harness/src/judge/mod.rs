//! Judgements over measured data: pure functions, no I/O, unit tested on
//! synthetic inputs.
//!
//! * [`input`]: what one measured round hands the judges, and its window;
//! * [`round`]: one round's records, samples and counter differences → its
//!   figures (rates, latency summaries, CPU and bytes per request);
//! * [`stats`]: summaries and means;
//! * [`inference`]: confidence intervals of differences (paired t, Welch),
//!   one method for every row, latency percentiles included, calibrated by
//!   A/A simulation (`aa_simulation.rs`, a test);
//! * [`metrics`]: the rows a report shows and which direction is better;
//! * [`difference`]: two arms row by row: intervals, verdicts, findings;
//! * [`noise`]: the A/A noise of a row type, from an arm's own rounds;
//! * [`attribution`]: the 2×2 of encoding × transport: how much of REST − gRPC each explains;
//! * [`projection`]: what an arm needs at a planned rate (`--plan-qps`);
//! * [`replicas`]: how an arm's calls fell on the downstream's replicas, and the imbalance;
//! * [`validity`]: whether a run was a fair measurement;
//! * [`capacity`]: sweep steps, whether each was sustained, and the knee;
//! * [`payload`]: payload sweep steps: a capacity step and the hop's bytes per request;
//! * [`crossover`]: where a verdict flips along one axis, by log-scale bisection over judged probes;
//! * [`conditions`]: where each option wins along an experiment's axis, row by row, cell by cell;
//! * [`claims`]: whether an experiment agrees with its plan's claims, in direction and ratio;
//! * [`experiment`]: an experiment's cells: each arm's row with its interval, crossover probes judged;
//! * [`gate`]: the `--fail-if` grammar and the CI gates' breaches.

mod aa_simulation;
pub mod attribution;
pub mod capacity;
pub mod claims;
pub mod conditions;
pub mod crossover;
pub mod difference;
pub mod experiment;
pub mod gate;
pub mod inference;
pub mod input;
pub mod merge;
pub mod metrics;
pub mod noise;
pub mod payload;
pub mod projection;
pub mod replicas;
pub mod round;
pub mod stats;
pub mod streams;
pub mod validity;

pub use round::own_calls_apply;
pub use validity::validity;
