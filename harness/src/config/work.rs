//! What each request asks of the tiers: the downstream's service time
//! (`--delay`, `--jitter`), the records an answer carries and their shape
//! (`--items`, `--shape`), the upload (`--request-bytes`), the caller's
//! fan-out, and a payload sweep when a size is a list. The downstream is
//! given the service time, the caller its fan-out.

use std::time::Duration;

use clap::Args;
use payload::{Limits, Shape};
use serde::{Deserialize, Serialize};

use super::{ConfigError, Flags, TierRole, bad, duration, secs};

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Work per request (docs/capacity.md)")]
pub struct WorkArgs {
    /// Simulated service time of the downstream.
    #[arg(long, default_value = "500ms", value_parser = duration)]
    pub delay: Duration,
    /// Extra downstream service time in [0, jitter], derived from the request id.
    #[arg(long, default_value = "0ms", value_parser = duration)]
    pub jitter: Duration,
    /// Records per downstream response (10 ≈ 1 KB of protobuf).
    ///
    /// a list (1,10,100,1000) makes a payload sweep: each size a full measured step.
    #[arg(long, default_value = "10", allow_hyphen_values = true)]
    pub items: String,
    /// Bytes of opaque body the caller uploads with each downstream call (the contract's `body` field, to
    /// study uploads).
    ///
    /// a list (0,1024,65536) makes a payload sweep.
    #[arg(long, default_value = "0", allow_hyphen_values = true)]
    pub request_bytes: String,
    /// The kind of record responses carry.
    ///
    /// `order` (ids, names, e-mail, prices, tags, a timestamp) or `timeseries` (numeric points: a series
    /// id, a timestamp and five numbers).
    #[arg(long, value_parser = parse_shape, default_value = "order")]
    pub shape: Shape,
    /// Concurrent downstream calls per front request.
    #[arg(long, default_value_t = 1)]
    pub fanout: u32,
}

/// The work section of [`super::Config`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Work {
    #[serde(with = "secs")]
    pub delay: Duration,
    #[serde(with = "secs")]
    pub jitter: Duration,
    pub items: u32,
    /// Bytes of opaque body uploaded with each downstream call (`--request-bytes`).
    /// Older runs lack it: they uploaded nothing.
    #[serde(default)]
    pub request_bytes: u32,
    /// The kind of record responses carry (`--shape`). Older runs lack it:
    /// they fetched orders.
    #[serde(default)]
    pub shape: Shape,
    pub fanout: u32,
}

/// What a payload sweep varies: the records per response (`--items`) or the
/// upload per request (`--request-bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PayloadAxis {
    Items,
    RequestBytes,
    /// A team's own request data files, numbered from 1 (`--request-data a,b,c`).
    RequestData,
    /// A team's own answer data files, numbered from 1 (`--response-data a,b,c`).
    ResponseData,
    /// Items per stream of the streaming arms (`--stream-items 10,100,1000`).
    StreamItems,
}

impl PayloadAxis {
    /// The flag that gives the sizes.
    pub fn flag(self) -> &'static str {
        match self {
            PayloadAxis::Items => "--items",
            PayloadAxis::RequestBytes => "--request-bytes",
            PayloadAxis::RequestData => "--request-data",
            PayloadAxis::ResponseData => "--response-data",
            PayloadAxis::StreamItems => "--stream-items",
        }
    }

    /// What one size counts, for axes and tables.
    pub fn unit(self) -> &'static str {
        match self {
            PayloadAxis::Items => "items per response",
            PayloadAxis::RequestBytes => "request body bytes",
            PayloadAxis::RequestData => "request data file (in the order given)",
            PayloadAxis::ResponseData => "answer data file (in the order given)",
            PayloadAxis::StreamItems => "items per stream",
        }
    }

    /// True for a sweep over a team's own data files.
    pub fn is_data(self) -> bool {
        matches!(self, PayloadAxis::RequestData | PayloadAxis::ResponseData)
    }
}

/// A payload sweep: one full measured step per size, at one rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadSweep {
    pub axis: PayloadAxis,
    /// Strictly increasing.
    pub sizes: Vec<u32>,
}

/// `--shape`: `order` or `timeseries`.
fn parse_shape(text: &str) -> Result<Shape, String> {
    text.parse()
}

/// A payload size list (`--items`, `--request-bytes`): one whole number, or
/// several, strictly increasing.
pub(super) fn parse_sizes(flag: &'static str, text: &str) -> Result<Vec<u32>, ConfigError> {
    let sizes = text
        .split(',')
        .map(|part| {
            part.trim().parse::<u32>().map_err(|_| {
                bad(flag, format!("{:?} in {text:?} is not a whole number; e.g. {flag} 10 or {flag} 1,10,100", part))
            })
        })
        .collect::<Result<Vec<u32>, _>>()?;
    if sizes.windows(2).any(|w| w[0] >= w[1]) {
        return Err(bad(
            flag,
            format!("{text:?}: list the sizes of a sweep in increasing order, e.g. {flag} 1,10,100"),
        ));
    }
    Ok(sizes)
}

impl Work {
    /// Validates the work flags; `rates` is how many offered rates the run
    /// has (a payload sweep goes with one). Returns the work of the first
    /// (or only) size, and the payload sweep if a size is a list.
    pub fn from_args(a: &WorkArgs, rates: usize) -> Result<(Work, Option<PayloadSweep>), ConfigError> {
        let (delay, jitter) = (a.delay, a.jitter);
        if !(1..=1000).contains(&a.fanout) {
            return Err(bad("--fanout", "must be between 1 and 1000"));
        }
        let items = parse_sizes("--items", &a.items)?;
        let request_bytes = parse_sizes("--request-bytes", &a.request_bytes)?;
        let sweep = sweep(&items, &request_bytes, rates)?;
        for &n in &items {
            check_items(n, a.fanout)?;
        }
        if let Some(&n) = request_bytes.iter().find(|&&n| n as usize > Limits::DEFAULT_MAX_BODY_BYTES) {
            return Err(bad(
                "--request-bytes",
                format!(
                    "{n} is over the services' limit of {} bytes of body per request",
                    Limits::DEFAULT_MAX_BODY_BYTES
                ),
            ));
        }
        let work =
            Work { delay, jitter, items: items[0], request_bytes: request_bytes[0], shape: a.shape, fanout: a.fanout };
        Ok((work, sweep))
    }

    /// The slowest service time the downstream is asked for.
    pub fn service_time(&self) -> Duration {
        self.delay + self.jitter
    }

    /// The work's part of the command line `harness rerun` replays.
    pub fn replay(&self, flags: &mut Flags) {
        flags.duration("--delay", self.delay);
        flags.duration("--jitter", self.jitter);
        flags.flag("--items", self.items.to_string());
        flags.flag("--request-bytes", self.request_bytes.to_string());
        flags.flag("--shape", self.shape.as_str());
        flags.flag("--fanout", self.fanout.to_string());
    }

    /// The downstream waits the service time and serves up to the services'
    /// item limit; the caller fans each request out. Items, shape and upload
    /// travel in each request, not as flags.
    pub fn tier_flags(&self, role: TierRole, flags: &mut Flags) {
        match role {
            TierRole::Downstream => {
                flags.duration("--delay", self.delay);
                flags.duration("--jitter", self.jitter);
                flags.flag("--max-items", Limits::DEFAULT_MAX_ITEMS.to_string());
            }
            TierRole::Caller => flags.flag("--fanout", self.fanout.to_string()),
        }
    }
}

/// The payload sweep the size lists make: one axis, at one rate.
fn sweep(items: &[u32], request_bytes: &[u32], rates: usize) -> Result<Option<PayloadSweep>, ConfigError> {
    let sweep = match (items.len() > 1, request_bytes.len() > 1) {
        (true, true) => {
            return Err(bad(
                "--request-bytes",
                "a payload sweep varies one size: give a list to --items or to --request-bytes, not both",
            ));
        }
        (true, false) => Some(PayloadSweep { axis: PayloadAxis::Items, sizes: items.to_vec() }),
        (false, true) => Some(PayloadSweep { axis: PayloadAxis::RequestBytes, sizes: request_bytes.to_vec() }),
        (false, false) => None,
    };
    if let Some(s) = &sweep
        && rates > 1
    {
        return Err(bad(
            s.axis.flag(),
            "a payload sweep goes with one rate, and --qps gives several: sweep the rate or the payload, one per command",
        ));
    }
    Ok(sweep)
}

/// `--items n` within the services' limit, and its fan-out within the caller's.
fn check_items(n: u32, fanout: u32) -> Result<(), ConfigError> {
    if n > Limits::DEFAULT_MAX_ITEMS {
        return Err(bad(
            "--items",
            format!("{n} is over the services' limit of {} records per response", Limits::DEFAULT_MAX_ITEMS),
        ));
    }
    let records = u64::from(n) * u64::from(fanout);
    if records > caller::front::DEFAULT_MAX_RECORDS {
        return Err(bad(
            "--fanout",
            format!(
                "--items {n} × --fanout {fanout} asks the caller for {records} records per request, over its limit \
                 of {}; lower one of them",
                caller::front::DEFAULT_MAX_RECORDS
            ),
        ));
    }
    Ok(())
}
