//! The streaming arms' subject (`grpc-stream`, `grpc-pages`, `rest-pages`,
//! `rest-ndjson`, `rest-sse`, `connect-stream`): items per stream (`--stream-items`, a list
//! makes a sweep), the downstream's production time of each item
//! (`--stream-interval`), the paging arms' page size (`--page-size`) and the
//! harness's own slowness as a consumer (`--consumer-delay`). `--qps` is
//! streams started per second and `--max-in-flight` bounds open streams.
//! The downstream is given the interval, the caller the page size.

use std::time::Duration;

use caller::Transport;
use clap::Args;
use payload::Limits;
use serde::{Deserialize, Serialize};

use super::work::parse_sizes;
use super::{ConfigError, Flags, PayloadAxis, PayloadSweep, TierRole, bad, duration, hd, secs};

/// Items per stream without `--stream-items`.
pub const DEFAULT_STREAM_ITEMS: u32 = 100;

#[derive(Debug, Clone, Default, Args)]
#[command(
    next_help_heading = "Streams (grpc-stream, grpc-pages, rest-pages, rest-ndjson, rest-sse, connect-stream) (docs/streaming.md)"
)]
pub struct StreamArgs {
    /// Items per stream [default: 100]; a list (10,100,1000) makes a sweep,
    /// each size a full measured step.
    #[arg(long)]
    pub stream_items: Option<String>,
    /// Opaque bytes added to each item (its size beyond its one record)
    /// [default: 0].
    #[arg(long)]
    pub stream_item_bytes: Option<u32>,
    /// The simulated production time of each item at the downstream, after
    /// --delay before the first [default: 0ms: each item as soon as it is
    /// asked for].
    #[arg(long, value_parser = duration)]
    pub stream_interval: Option<Duration>,
    /// Items per page of the paging arms (grpc-pages, rest-pages).
    ///
    /// the next page is asked for when the previous arrives [default: 10].
    #[arg(long)]
    pub page_size: Option<u32>,
    /// The harness takes each item this long after the previous one (a
    /// consumer slower than the producer: flow control and TCP hold the
    /// rest back) [default: 0ms].
    #[arg(long, value_parser = duration)]
    pub consumer_delay: Option<Duration>,
}

/// The streams section of [`super::Config`]: present for the streaming
/// arms only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Streams {
    /// Items per stream.
    pub items: u32,
    /// Opaque bytes added to each item. Older runs lack it: none.
    #[serde(default, skip_serializing_if = "super::is_default")]
    pub item_bytes: u32,
    #[serde(with = "secs")]
    pub interval: Duration,
    pub page_size: u32,
    #[serde(with = "secs")]
    pub consumer_delay: Duration,
}

/// The streaming arms' names, for messages.
fn names() -> String {
    Transport::STREAMING.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")
}

/// What the streams section's checks need from the other sections.
#[derive(Debug, Clone, Copy)]
pub struct StreamContext<'a> {
    pub arms: &'a [Transport],
    /// The downstream's slowest service time (`--delay` plus `--jitter`).
    pub service_time: Duration,
    pub fanout: u32,
    pub request_bytes: u32,
    /// A payload sweep of `--items` or `--request-bytes` was asked for.
    pub payload_sweep: bool,
    pub rates: usize,
    pub own_contract: bool,
    pub through_caller: bool,
}

impl Streams {
    /// Validates the streaming flags against the arms: `None` for unary
    /// arms (where a streaming flag is refused), else the section and, with
    /// a list of `--stream-items`, the sweep.
    pub fn from_args(
        a: &StreamArgs,
        cx: StreamContext<'_>,
    ) -> Result<Option<(Streams, Option<PayloadSweep>)>, ConfigError> {
        let streaming = cx.arms.iter().filter(|t| t.is_streaming()).count();
        if streaming == 0 {
            let given = [
                ("--stream-items", a.stream_items.is_some()),
                ("--stream-item-bytes", a.stream_item_bytes.is_some()),
                ("--stream-interval", a.stream_interval.is_some()),
                ("--page-size", a.page_size.is_some()),
                ("--consumer-delay", a.consumer_delay.is_some()),
            ];
            if let Some((flag, _)) = given.iter().find(|(_, g)| *g) {
                return Err(bad(
                    flag,
                    format!("applies to the streaming arms only ({}); add one to --transport", names()),
                ));
            }
            return Ok(None);
        }
        if streaming < cx.arms.len() {
            return Err(bad(
                "--transport",
                format!(
                    "streaming arms ({}) are compared with each other, not with unary calls: a stream and a call do \
                     different work; measure them in separate runs",
                    names()
                ),
            ));
        }
        refuse_unary_only(&cx)?;
        let items = parse_sizes("--stream-items", a.stream_items.as_deref().unwrap_or("100"))?;
        if let Some(n) = items.iter().find(|n| !(1..=Limits::DEFAULT_MAX_ITEMS).contains(n)) {
            return Err(bad(
                "--stream-items",
                format!("{n}: a stream carries 1 to {} items", Limits::DEFAULT_MAX_ITEMS),
            ));
        }
        let paged = cx.arms.iter().any(|t| t.delivery() == Some(caller::outbound::Delivery::Pages));
        let page_size = match a.page_size {
            Some(_) if !paged => {
                return Err(bad(
                    "--page-size",
                    "applies to the paging arms (grpc-pages, rest-pages); none is in --transport",
                ));
            }
            Some(n) if !(1..=Limits::DEFAULT_MAX_ITEMS).contains(&n) => {
                return Err(bad("--page-size", format!("must be between 1 and {}", Limits::DEFAULT_MAX_ITEMS)));
            }
            Some(n) => n,
            None => caller::server::DEFAULT_PAGE_SIZE,
        };
        let item_bytes = a.stream_item_bytes.unwrap_or(0);
        if item_bytes as usize > Limits::DEFAULT_MAX_BODY_BYTES {
            return Err(bad(
                "--stream-item-bytes",
                format!(
                    "{item_bytes} is over the services' limit of {} bytes per item",
                    Limits::DEFAULT_MAX_BODY_BYTES
                ),
            ));
        }
        if paged {
            check_page_weight(page_size, item_bytes)?;
        }
        let sweep = (items.len() > 1).then(|| PayloadSweep { axis: PayloadAxis::StreamItems, sizes: items.clone() });
        if sweep.is_some() && cx.rates > 1 {
            return Err(bad("--stream-items", "a list of sizes goes with one --qps, not a rate sweep"));
        }
        let streams = Streams {
            items: items[0],
            item_bytes,
            interval: a.stream_interval.unwrap_or_default(),
            page_size,
            consumer_delay: a.consumer_delay.unwrap_or_default(),
        };
        Ok(Some((streams, sweep)))
    }

    /// How long the longest stream of `items` takes at the least: the
    /// service time, then every item's interval, and the consumer's delay
    /// after each when it is the slower.
    pub fn length(&self, service_time: Duration, items: u32) -> Duration {
        service_time + self.interval.max(self.consumer_delay) * items
    }

    /// Checks that a stream of `items` can end within `timeout`.
    pub fn check_timeout(&self, service_time: Duration, items: u32, timeout: Duration) -> Result<(), ConfigError> {
        let length = self.length(service_time, items);
        if length >= timeout {
            return Err(bad(
                "--timeout",
                format!(
                    "{} bounds a whole stream, and one of {items} items takes at least {} (--delay, then \
                     --stream-interval or --consumer-delay per item); give a longer --timeout",
                    hd(timeout),
                    hd(length)
                ),
            ));
        }
        Ok(())
    }

    /// The streams' part of the command line `harness rerun` replays.
    pub fn replay(streams: Option<&Streams>, flags: &mut Flags) {
        let Some(s) = streams else { return };
        flags.flag("--stream-items", s.items.to_string());
        flags.flag("--stream-item-bytes", s.item_bytes.to_string());
        flags.duration("--stream-interval", s.interval);
        flags.duration("--consumer-delay", s.consumer_delay);
    }

    /// The page size is replayed only where a paging arm takes it.
    pub fn replay_page_size(streams: Option<&Streams>, arms: &[Transport], flags: &mut Flags) {
        if let Some(s) = streams
            && arms.iter().any(|t| t.delivery() == Some(caller::outbound::Delivery::Pages))
        {
            flags.flag("--page-size", s.page_size.to_string());
        }
    }

    /// The downstream produces on the interval; the caller pages by the page size.
    pub fn tier_flags(&self, role: TierRole, flags: &mut Flags) {
        match role {
            TierRole::Downstream => flags.duration("--stream-interval", self.interval),
            TierRole::Caller => flags.flag("--page-size", self.page_size.to_string()),
        }
    }
}

/// A page must fit the downstream's work budget for one request (seven
/// eighths of `--max-work-bytes`, by default 256 MiB): the downstream
/// would refuse every page of a heavier one (413 / RESOURCE_EXHAUSTED).
fn check_page_weight(page_size: u32, item_bytes: u32) -> Result<(), ConfigError> {
    let budget = service::WorkBudget::new(service::DEFAULT_MAX_WORK_BYTES);
    let per_item = budget.weigh_items(1, u64::from(item_bytes));
    let weight = budget.weigh_items(u64::from(page_size), u64::from(item_bytes));
    if weight <= budget.largest() {
        return Ok(());
    }
    Err(bad(
        "--page-size",
        format!(
            "a page of {page_size} items of {item_bytes} bytes weighs {weight} bytes of work (each item's record and \
             {} copies of its bytes), over the {} a downstream holds for one request (7/8 of its default \
             --max-work-bytes of {}): every page would be refused; give --page-size {} or less, or smaller \
             --stream-item-bytes",
            service::FILLER_COPIES,
            budget.largest(),
            service::DEFAULT_MAX_WORK_BYTES,
            budget.largest() / per_item,
        ),
    ))
}

/// The flags of unary calls that a stream has no use for, refused.
fn refuse_unary_only(cx: &StreamContext<'_>) -> Result<(), ConfigError> {
    if !cx.through_caller {
        return Err(bad(
            "--target",
            "streams are driven through the caller's front door (POST /v1/stream); use --target caller",
        ));
    }
    if cx.own_contract {
        return Err(bad(
            "--proto",
            "a team's own contract is a unary method; the streaming arms stream bench.v1.Items",
        ));
    }
    if cx.fanout != 1 {
        return Err(bad("--fanout", "a stream is one downstream call; the streaming arms take --fanout 1"));
    }
    if cx.request_bytes != 0 || cx.payload_sweep {
        return Err(bad(
            "--request-bytes",
            "--items and --request-bytes shape unary calls; a stream's size is --stream-items (a list makes a sweep)",
        ));
    }
    Ok(())
}
