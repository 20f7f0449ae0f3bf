//! Payload sweeps: one summary per arm and payload size — the figures a rate
//! sweep judges a step by ([`capacity::step`]) plus the internal hop's bytes
//! per request — so cost can be read against payload size. Pure functions
//! over results; no I/O.

use serde::{Deserialize, Serialize};

use caller::Transport;
use payload::{JsonCodec, Shape};

use crate::config::PayloadAxis;
use crate::judge::capacity::{self, Step};
use crate::judge::stats::mean;
use crate::result::{HopBytes, RunResult};

/// One arm at one payload size, averaged over its rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PayloadStep {
    /// Items per response or request body bytes, per the sweep's axis.
    pub size: u32,
    /// Throughput, latency, errors, CPU µs per request and RSS by tier, and
    /// whether the rate was sustained, as a rate sweep judges a step.
    #[serde(flatten)]
    pub step: Step,
    /// The internal hop's bytes per request (caller → downstream is the
    /// request), counted by the downstream's listener; `null`: not measured.
    pub request_wire_bytes: Option<f64>,
    pub response_wire_bytes: Option<f64>,
    pub request_message_bytes: Option<f64>,
    pub response_message_bytes: Option<f64>,
}

impl PayloadStep {
    /// Wire bytes per request, both directions; `None` unless both were measured.
    pub fn wire_bytes(&self) -> Option<f64> {
        Some(self.request_wire_bytes? + self.response_wire_bytes?)
    }
}

/// Everything a payload sweep found for one arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmPayload {
    pub transport: Transport,
    /// The JSON codec this arm's tiers used, in a sweep over several
    /// (`--json-codec a,b`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_codec: Option<JsonCodec>,
    pub steps: Vec<PayloadStep>,
}

impl ArmPayload {
    /// `REST`, or `REST (sonic-rs)` in a sweep over codecs.
    pub fn title(&self) -> String {
        match self.json_codec {
            None => self.transport.title().to_owned(),
            Some(c) => format!("{} ({c})", self.transport.title()),
        }
    }
}

/// `payload.json`: the sweep's axis and shape, and every arm's steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PayloadReport {
    pub axis: PayloadAxis,
    pub shape: Shape,
    /// Every size asked for, in order.
    pub sizes: Vec<u32>,
    /// The offered rate of every step (0 in closed-loop throughput mode).
    pub qps: f64,
    pub slo_p99_ms: f64,
    pub arms: Vec<ArmPayload>,
    /// Set when the sweep stopped before its last size.
    #[serde(default)]
    pub interrupted: Option<PayloadInterruption>,
}

/// Why a payload sweep stopped early, and the sizes no arm ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PayloadInterruption {
    pub reason: String,
    pub not_run_sizes: Vec<u32>,
}

/// Summarizes one arm's run at one payload size.
pub fn step(run: &RunResult, size: u32, slo_p99_ms: f64, folder: String) -> PayloadStep {
    let per_request = |f: fn(&HopBytes) -> Option<f64>| mean(run.rounds.iter().filter_map(|r| f(&r.bytes.internal)));
    PayloadStep {
        size,
        step: capacity::step(run, slo_p99_ms, folder),
        request_wire_bytes: per_request(|h| h.request_wire_bytes_per_request),
        response_wire_bytes: per_request(|h| h.response_wire_bytes_per_request),
        request_message_bytes: per_request(|h| h.request_message_bytes_per_request),
        response_message_bytes: per_request(|h| h.response_message_bytes_per_request),
    }
}

/// The sizes of `sizes` that no arm ran a step at.
pub fn not_run(sizes: &[u32], arms: &[ArmPayload]) -> Vec<u32> {
    sizes.iter().copied().filter(|n| !arms.iter().any(|a| a.steps.iter().any(|s| s.size == *n))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn a_step_carries_the_capacity_figures_and_the_hop_bytes_per_request() {
        let mut run = testing::run(Transport::Grpc, 1.0);
        for (k, r) in run.rounds.iter_mut().enumerate() {
            r.bytes.internal.request_wire_bytes_per_request = Some(100.0 + k as f64);
            r.bytes.internal.response_wire_bytes_per_request = Some(1000.0);
            r.bytes.internal.response_message_bytes_per_request = None;
        }
        let s = step(&run, 10, 600.0, "step-10items".into());
        let rounds = run.rounds.len() as f64;
        let expected_request = 100.0 + (0..run.rounds.len()).sum::<usize>() as f64 / rounds;
        assert_eq!((s.size, s.step.transport, s.step.folder.as_str()), (10, Transport::Grpc, "step-10items"));
        assert_eq!(s.request_wire_bytes, Some(expected_request));
        assert_eq!(s.wire_bytes(), Some(expected_request + 1000.0));
        assert_eq!(s.response_message_bytes, None, "not measured stays null");
        assert_eq!(s.step, capacity::step(&run, 600.0, "step-10items".into()));
        // The step's own fields sit beside the capacity figures in JSON.
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!((json["size"].as_u64(), json["offered_qps"].is_number()), (Some(10), true));
        assert_eq!(serde_json::from_value::<PayloadStep>(json).unwrap(), s);

        let arms = [ArmPayload { transport: Transport::Grpc, json_codec: None, steps: vec![s] }];
        assert_eq!(not_run(&[1, 10, 100], &arms), [1, 100]);
    }
}
