//! The [`Plan`] of a run: its arms, in the order of their first round, the
//! rates of a sweep and the sizes of a payload sweep, and the order in which
//! arms are compared and named.

use std::time::Duration;

use caller::Transport;
use payload::JsonCodec;

use super::{Config, PayloadAxis, PayloadSweep};

/// A validated run: the shared configuration and the arms (transports) to
/// measure with it, in the order of their first round.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub config: Config,
    pub arms: Vec<Transport>,
    /// The offered rates: one for a single run, several for a sweep (empty in
    /// closed-loop mode).
    pub rates: Vec<f64>,
    /// A payload sweep (`--items 1,10,100` or `--request-bytes` as a list);
    /// never together with several rates.
    pub payload: Option<PayloadSweep>,
    /// The JSON codecs a payload sweep measures every arm with at every
    /// size (`--json-codec a,b`); empty unless there are several, each step
    /// then on `config.hop.json_codec`.
    pub codecs: Vec<JsonCodec>,
}

impl Plan {
    /// True for a sweep over several rates or payload sizes.
    pub fn is_sweep(&self) -> bool {
        self.rates.len() > 1 || self.payload.is_some()
    }

    /// The plan of one step of a sweep, over the given arms.
    pub fn step(&self, qps: f64, arms: &[Transport]) -> Plan {
        let mut config = self.config.clone();
        config.load.qps = qps;
        Plan { config, arms: arms.to_vec(), rates: vec![qps], payload: None, codecs: Vec::new() }
    }

    /// The plan of one step of a payload sweep: every arm at `size`.
    pub fn payload_step(&self, axis: PayloadAxis, size: u32) -> Plan {
        let mut config = self.config.clone();
        match axis {
            PayloadAxis::Items => config.work.items = size,
            PayloadAxis::RequestBytes => config.work.request_bytes = size,
            PayloadAxis::StreamItems => {
                config.streams = config.streams.map(|s| super::Streams { items: size, ..s });
            }
            PayloadAxis::RequestData | PayloadAxis::ResponseData => {
                config.contract = config.contract.map(|c| c.step(axis, size));
            }
        }
        Plan { config, arms: self.arms.clone(), rates: self.rates.clone(), payload: None, codecs: Vec::new() }
    }

    /// The JSON codecs each step of a sweep runs with, in order: the
    /// sweep's several, or the one of the configuration.
    pub fn step_codecs(&self) -> Vec<JsonCodec> {
        if self.codecs.is_empty() { vec![self.config.hop.json_codec] } else { self.codecs.clone() }
    }

    /// This plan with its hop's JSON codec `codec`.
    pub fn with_codec(mut self, codec: JsonCodec) -> Plan {
        self.config.hop.json_codec = codec;
        self
    }

    /// The configuration of one arm.
    pub fn arm(&self, transport: Transport) -> Config {
        Config { transport, ..self.config.clone() }
    }

    /// The order in which (arm, 0-based round) pairs run. With two arms the
    /// order is counterbalanced (A B, B A, A B, …) so that drift on a shared
    /// machine hits both arms equally, linear drift cancelling out.
    pub fn order(&self) -> Vec<(usize, u32)> {
        let n = self.arms.len();
        (0..self.config.load.rounds)
            .flat_map(|r| {
                let arms: Vec<usize> = if r % 2 == 1 { (0..n).rev().collect() } else { (0..n).collect() };
                arms.into_iter().map(move |a| (a, r))
            })
            .collect()
    }

    /// How long the load runs in all: every arm's warm-up (one per round with
    /// fresh tiers), every re-warm after an arm switch, and every round.
    pub fn load_duration(&self) -> Duration {
        let c = &self.config.load;
        let arms = self.arms.len() as u32;
        if c.fresh_tiers {
            return (c.warmup + c.duration) * c.rounds * arms;
        }
        let order = self.order();
        let switches = order.windows(2).filter(|w| w[0].0 != w[1].0).count() as u32;
        // The first switch to each arm but the first is covered by its warm-up.
        let rewarms = switches.saturating_sub(arms.saturating_sub(1));
        (c.warmup + c.duration * c.rounds) * arms + self.config.rewarm() * rewarms
    }

    /// The arm and step that needs the most open files: every arm at the
    /// highest rate of a sweep (a step that would not fit is refused before
    /// the first one runs, never reported as the knee).
    pub fn busiest(&self) -> Config {
        let rates: Vec<Option<f64>> =
            if self.rates.is_empty() { vec![None] } else { self.rates.iter().copied().map(Some).collect() };
        let configs = self.arms.iter().flat_map(|t| {
            rates.iter().map(move |q| {
                let mut c = self.arm(*t);
                c.load.qps = q.unwrap_or(self.config.load.qps);
                c
            })
        });
        configs.max_by_key(Config::expected_open_files).unwrap_or_else(|| self.config.clone())
    }

    /// About how many bytes the run folder takes, generously: every sample
    /// appears in `run.json`, `timeseries.csv` and the charts, and each arm
    /// (of each step) has its reports, histograms and charts. Checked against
    /// the free space of `--out` before anything starts.
    pub fn expected_output_bytes(&self) -> u64 {
        const PER_ROW: u64 = 512;
        // Five latency histograms at five significant digits, base64.
        const PER_ROUND: u64 = 128 << 10;
        const PER_ARM: u64 = 512 << 10;
        const PER_FOLDER: u64 = 512 << 10;
        let c = &self.config.load;
        let sizes = self.payload.as_ref().map_or(1, |p| p.sizes.len()) * self.codecs.len().max(1);
        let (steps, arms) = ((self.rates.len().max(1) * sizes) as u64, self.arms.len() as u64);
        // Samples are taken over the whole run, every arm's time included.
        let run = (c.warmup + c.duration * c.rounds).as_secs_f64() * arms as f64;
        let intervals = (run / c.sample_interval.as_secs_f64()).ceil() as u64 + 1;
        // Per interval: downstream, caller, proxy, harness, and the load.
        let rows = intervals * 5;
        PER_FOLDER + steps * arms * (PER_ARM + u64::from(c.rounds) * PER_ROUND + rows * PER_ROW)
    }

    /// `grpc`, `rest`, `both`, `aa-grpc` / `aa-rest`, or the arms joined by
    /// `+` for any other list: the transport part of the run folder's name.
    pub fn transport_name(&self) -> String {
        match self.arms.as_slice() {
            [a, b] if a == b => format!("aa-{a}"),
            [Transport::Grpc, Transport::Rest] => "both".into(),
            [_, _, ..] => self.arms.iter().map(|t| t.as_str()).collect::<Vec<_>>().join("+"),
            _ => self.config.transport.as_str().into(),
        }
    }

    /// The folder (and time-series) name of each arm: its transport, or
    /// `grpc-a` / `grpc-b` when both arms share one (an A/A run).
    pub fn arm_dirs(&self) -> Vec<String> {
        arm_dirs(&self.arms)
    }
}

/// The order in which the arms of a run are compared: the baseline first
/// (`baseline`, or without it the first arm of [`Transport::ALL`]'s order,
/// then [`Transport::STREAMING`]'s, that ran), then the others in that
/// order; arms of one transport
/// (an A/A pair) keep their order. Indices into `transports`. A `both` run
/// compares gRPC against REST, as it always did.
pub fn compared_order(transports: &[Transport], baseline: Option<Transport>) -> Vec<usize> {
    let rank = |t: Transport| Transport::ALL.iter().chain(&Transport::STREAMING).position(|u| *u == t);
    let mut order: Vec<usize> = (0..transports.len()).collect();
    order.sort_by_key(|&i| (Some(transports[i]) != baseline, rank(transports[i])));
    order
}

/// The baseline to record in a run's configuration: `None` where
/// [`compared_order`] puts it first without being told.
pub fn recorded_baseline(arms: &[Transport], baseline: Transport) -> Option<Transport> {
    let first = compared_order(arms, None).first().map(|&i| arms[i]);
    (first != Some(baseline)).then_some(baseline)
}

/// The folder name of each arm of a run over `transports`: the transport's
/// name, suffixed `-a`, `-b`, … where arms share a transport.
pub fn arm_dirs(transports: &[Transport]) -> Vec<String> {
    transports
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let same = transports.iter().filter(|u| *u == t).count();
            if same == 1 {
                t.as_str().to_owned()
            } else {
                let k = transports[..i].iter().filter(|u| *u == t).count();
                format!("{}-{}", t.as_str(), (b'a' + k as u8) as char)
            }
        })
        .collect()
}
