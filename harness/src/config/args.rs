//! The flags of a measured run put together: every section's flags
//! flattened into [`RunArgs`] (each under its own help heading), validated
//! section by section into a [`Plan`], and given back as the command line
//! `harness rerun` replays.

use clap::Args;

use super::arms::{self, ArmsArgs, DEFAULT_COMPARED_ROUNDS};
use super::deploy::DeployArgs;
use super::generators::GeneratorArgs;
use super::hop::HopArgs;
use super::link::{self, LinkArgs};
use super::load::{LoadArgs, LoadContext};
use super::replicas::ReplicaArgs;
use super::streams::StreamContext;
use super::work::WorkArgs;
use super::{
    Config, ConfigError, Deploy, Flags, Generators, Hop, Load, Output, OutputArgs, PayloadAxis, PayloadSweep, Plan,
    Replicas, Streams, TransportArg, Work,
};
use payload::JsonCodec;

/// Flags of a measured run.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub arms: ArmsArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub work: WorkArgs,
    #[command(flatten)]
    pub deploy: DeployArgs,
    #[command(flatten)]
    pub link: LinkArgs,
    #[command(flatten)]
    pub hop: HopArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub generators: GeneratorArgs,
    #[command(flatten)]
    pub replicas: ReplicaArgs,
    #[command(flatten)]
    pub contract: contract::ContractArgs,
    #[command(flatten)]
    pub streams: super::streams::StreamArgs,
}

impl Plan {
    /// Validates the flags, section by section, each given only its own
    /// flags and the sections it depends on. Touches no file: whether
    /// `--out` can hold the run is `export::files::check_out`'s to say.
    pub fn from_args(a: &RunArgs) -> Result<Plan, ConfigError> {
        let rates = a.load.rates()?;
        let (work, payload) = Work::from_args(&a.work, rates.len())?;
        // A list of data files is a payload sweep too (one step per file).
        let payload = payload.or(super::Contract::sweep(&a.contract, rates.len())?);
        let cx = StreamContext {
            arms: &a.arms.transport.arms(),
            service_time: work.service_time(),
            fanout: work.fanout,
            request_bytes: work.request_bytes,
            payload_sweep: payload.is_some(),
            rates: rates.len(),
            own_contract: !a.contract.proto.is_empty(),
            through_caller: a.deploy.target == super::TargetTier::Caller,
        };
        let (streams, stream_sweep) = Streams::from_args(&a.streams, cx)?.unzip();
        let payload = payload.or(stream_sweep.flatten());
        let (payload, codecs) = codec_sweep(&a.hop, payload, &work, streams.as_ref(), rates.len())?;
        let (arms, baseline) = a.arms.check(rates.len() > 1 || payload.is_some())?;
        // Arms compared at one rate get enough rounds for an interval.
        let compared = arms.len() > 1 && rates.len() <= 1 && payload.is_none();
        let default_rounds = if compared { DEFAULT_COMPARED_ROUNDS } else { 1 };
        let service_time = streams.as_ref().map_or(work.service_time(), |s| s.length(work.service_time(), s.items));
        let cx = LoadContext { service_time, default_rounds, restartable: a.deploy.restartable() };
        let load = Load::from_args(&a.load, rates.first().copied(), cx)?;
        if let Some(s) = &streams {
            if load.closed_loop {
                return Err(super::bad(
                    "--qps",
                    "streams are started on the open-loop schedule: give --qps (streams per second)",
                ));
            }
            let most = payload.as_ref().and_then(|p| p.sizes.last().copied()).unwrap_or(s.items);
            s.check_timeout(work.service_time(), most, load.timeout)?;
        }
        let mut deploy = Deploy::from_args(&a.deploy, &arms)?;
        let sweep = rates.len() > 1 || payload.is_some();
        let generators = Generators::from_args(&a.generators, &load, sweep, &mut deploy)?;
        let link = a.link.check(&deploy)?;
        let hop = Hop::from_args(&a.hop, &deploy)?;
        hop.check_arms(&arms)?;
        let output = Output::from_args(&a.output)?;
        let replicas = Replicas::from_args(&a.replicas, &deploy, &load, link.as_ref(), &hop)?;
        let contract = super::Contract::from_args(&a.contract, &a.work, &deploy)?;
        let config = Config {
            transport: arms[0],
            baseline,
            load,
            work,
            deploy,
            link,
            hop,
            output,
            generators,
            replicas,
            contract,
            streams,
        };
        super::launchers::check(&config)?;
        super::deploy::check_foreign(&config)?;
        Ok(Plan { config, arms, rates, payload, codecs })
    }
}

/// Several `--json-codec`s: a payload sweep (of the one size asked for when
/// no list was given) run with each codec at every size. Not with a rate
/// sweep: a plan file's `json-codec` axis crosses codecs with rates.
fn codec_sweep(
    hop: &HopArgs,
    payload: Option<PayloadSweep>,
    work: &Work,
    streams: Option<&Streams>,
    rates: usize,
) -> Result<(Option<PayloadSweep>, Vec<JsonCodec>), ConfigError> {
    let codecs = super::hop::json_codecs(hop)?;
    if codecs.len() < 2 {
        return Ok((payload, Vec::new()));
    }
    if rates > 1 {
        return Err(super::bad(
            "--json-codec",
            "several codecs sweep payload sizes at one rate, not a rate sweep: give one --qps, or cross codecs \
             with rates in a plan file (an axis on json-codec, docs/comparing.md)",
        ));
    }
    let payload = payload.unwrap_or_else(|| match streams {
        Some(s) => PayloadSweep { axis: PayloadAxis::StreamItems, sizes: vec![s.items] },
        None => PayloadSweep { axis: PayloadAxis::Items, sizes: vec![work.items] },
    });
    Ok((Some(payload), codecs))
}

/// The flags that reproduce `config` measured over `transport`: every flag
/// that shapes a run, each given explicitly, so a later build with other
/// defaults still measures the same thing. `Plan::from_args` of them gives
/// `config` back (tested).
pub fn command_line(config: &Config, transport: TransportArg) -> Vec<String> {
    let mut flags = Flags::default();
    arms::replay(&transport, config.baseline, &mut flags);
    config.load.replay(&mut flags);
    config.work.replay(&mut flags);
    config.deploy.replay(&mut flags);
    link::replay(config.link.as_ref(), &mut flags);
    config.hop.replay(&mut flags);
    config.output.replay(&mut flags);
    config.generators.replay(&mut flags);
    config.replicas.replay(&mut flags);
    super::Contract::replay(config.contract.as_ref(), &mut flags);
    Streams::replay(config.streams.as_ref(), &mut flags);
    Streams::replay_page_size(config.streams.as_ref(), &transport.arms(), &mut flags);
    flags.0
}
