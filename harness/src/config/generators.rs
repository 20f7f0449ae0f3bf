//! Many generators, one measurement: `--segment I/N` (this generator's
//! share of the one schedule), `--start-at` (the instant every generator
//! begins its warm-up) and `--sample-tiers` (which one of them samples the
//! tiers, so their CPU and memory are counted once). `harness merge` puts
//! the segments' folders back together.

use std::time::{Duration, SystemTime};

use clap::Args;
use serde::{Deserialize, Serialize};

use super::{ConfigError, Deploy, Flags, Load, bad, duration, hd};

/// The most generators one run may be split across.
pub const MAX_SEGMENTS: u32 = 1000;
/// How far ahead `--start-at` may be.
pub const MAX_START_AHEAD: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Many generators (docs/generators.md)")]
pub struct GeneratorArgs {
    /// Send only this generator's share of the schedule, as I/N.
    ///
    /// the requests i with i mod N = I of the one schedule at --qps (request i due at t0 + i/qps), so N
    /// generators given 0/N … (N-1)/N send it whole, at the full rate. N > 1 needs tiers started once
    /// (--caller-url or --downstream-url); `harness merge` makes one run of their folders.
    #[arg(long, value_name = "I/N")]
    pub segment: Option<String>,
    /// Begin the warm-up at this instant, so that every generator starts together.
    ///
    /// RFC 3339 (2026-12-03T10:00:00Z) or +D (the first whole second at least D from now, so generators
    /// launched together agree). A generator that starts late says by how much, and its run is marked.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// Whether this generator samples the tiers (their CPU, memory and counters, through the admin URLs).
    ///
    /// exactly one of a run's generators should [default: segment 0 does].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub sample_tiers: Option<bool>,
}

/// This generator's part of a run split across several (`--segment`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// 0-based: this generator sends requests i with i mod `count` = `index`.
    pub index: u32,
    pub count: u32,
    /// Whether this generator sampled the tiers.
    pub sample_tiers: bool,
}

/// The generators section of [`super::Config`]. Both absent from run.json
/// for a run of one generator started at once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generators {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<Segment>,
    /// When the warm-up was to begin (RFC 3339, UTC, milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
}

impl Generators {
    /// Validates the flags against the load and where the tiers run. A
    /// generator that does not sample the tiers is given no admin URL.
    pub fn from_args(
        a: &GeneratorArgs,
        load: &Load,
        sweep: bool,
        deploy: &mut Deploy,
    ) -> Result<Generators, ConfigError> {
        let start_at = a.start_at.as_deref().map(|t| start_at(t, SystemTime::now())).transpose()?;
        let Some(text) = a.segment.as_deref() else {
            if a.sample_tiers.is_some() {
                return Err(bad("--sample-tiers", "goes with --segment (one of several generators)"));
            }
            return Ok(Generators { segment: None, start_at });
        };
        let (index, count) = segment(text)?;
        if load.closed_loop {
            return Err(bad("--segment", "splits an open-loop schedule; give --qps (a closed loop has none)"));
        }
        if sweep {
            return Err(bad("--segment", "splits one run at one rate and size, not a sweep"));
        }
        if count > 1 && deploy.remote.caller_url.is_empty() && deploy.downstream_url.is_none() {
            return Err(bad(
                "--segment",
                "the generators of one run must drive one set of tiers: start them once and give --caller-url \
                 (or --downstream-url)",
            ));
        }
        let sample_tiers = a.sample_tiers.unwrap_or(index == 0);
        if !sample_tiers {
            deploy.remote.caller_admin.clear();
            deploy.remote.downstream_admin = None;
        }
        Ok(Generators { segment: Some(Segment { index, count, sample_tiers }), start_at })
    }

    /// The section's part of the command line `harness rerun` replays.
    pub fn replay(&self, flags: &mut Flags) {
        if let Some(s) = self.segment {
            flags.flag("--segment", format!("{}/{}", s.index, s.count));
            flags.flag("--sample-tiers", s.sample_tiers.to_string());
        }
        if let Some(t) = &self.start_at {
            flags.flag("--start-at", t.clone());
        }
    }

    /// The part of `qps` this generator sends.
    pub fn share_of(&self, qps: f64) -> f64 {
        qps / f64::from(self.segment.map_or(1, |s| s.count.max(1)))
    }

    /// The instant the warm-up is to begin, if one was given.
    pub fn start_instant(&self) -> Option<SystemTime> {
        humantime::parse_rfc3339_weak(self.start_at.as_deref()?).ok()
    }
}

/// `I/N`, with `0 <= I < N <= MAX_SEGMENTS`.
fn segment(text: &str) -> Result<(u32, u32), ConfigError> {
    let refuse = || bad("--segment", format!("{text:?}: write it as I/N, e.g. --segment 0/3 (the first of three)"));
    let (i, n) = text.trim().split_once('/').ok_or_else(refuse)?;
    let (index, count): (u32, u32) = (i.trim().parse().map_err(|_| refuse())?, n.trim().parse().map_err(|_| refuse())?);
    if !(1..=MAX_SEGMENTS).contains(&count) {
        return Err(bad("--segment", format!("{text:?}: N must be between 1 and {MAX_SEGMENTS}")));
    }
    if index >= count {
        return Err(bad("--segment", format!("{text:?}: I counts from 0, so it must be below N ({count})")));
    }
    Ok((index, count))
}

/// `--start-at` as an RFC 3339 instant (milliseconds, UTC): given as one,
/// or `+D` from `now`, rounded up to a whole second.
fn start_at(text: &str, now: SystemTime) -> Result<String, ConfigError> {
    let t = text.trim();
    let at = if let Some(ahead) = t.strip_prefix('+') {
        let d = duration(ahead).map_err(|e| bad("--start-at", e))?;
        let secs = (now + d).duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        let whole = secs.as_secs() + u64::from(secs.subsec_nanos() > 0);
        SystemTime::UNIX_EPOCH + Duration::from_secs(whole)
    } else {
        humantime::parse_rfc3339_weak(t).map_err(|e| {
            bad("--start-at", format!("{t:?} is not an RFC 3339 time ({e}); e.g. 2026-12-03T10:00:00Z or +10s"))
        })?
    };
    if at.duration_since(now).is_ok_and(|ahead| ahead > MAX_START_AHEAD) {
        return Err(bad("--start-at", format!("{t:?} is more than {} away", hd(MAX_START_AHEAD))));
    }
    Ok(humantime::format_rfc3339_millis(at).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_i_of_n() {
        assert_eq!(segment("0/3").unwrap(), (0, 3));
        assert_eq!(segment(" 2 / 3 ").unwrap(), (2, 3));
        assert_eq!(segment("0/1").unwrap(), (0, 1));
        for wrong in ["3/3", "1/0", "a/3", "1", "-1/3", "0/1001", ""] {
            assert_eq!(segment(wrong).unwrap_err().flag, "--segment", "{wrong}");
        }
    }

    #[test]
    fn start_at_is_an_instant_or_whole_seconds_ahead() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_292_000_250);
        // +5s from x.250 is x+5.250, rounded up to the next whole second.
        let t = start_at("+5s", now).unwrap();
        assert_eq!(humantime::parse_rfc3339_weak(&t).unwrap(), now + Duration::from_millis(5750));
        // Generators launched a few ms apart agree.
        assert_eq!(start_at("+5s", now + Duration::from_millis(40)).unwrap(), t);
        assert_eq!(start_at("2026-12-03T10:00:00Z", now).unwrap(), "2026-12-03T10:00:00.000Z");
        // In the past is allowed (that generator is late); too far ahead, or not a time, is not.
        assert!(start_at("2020-01-01T00:00:00Z", now).is_ok());
        assert!(start_at("+2days", now).unwrap_err().problem.contains("more than"));
        assert!(start_at("tomorrow", now).unwrap_err().problem.contains("RFC 3339"));
        assert!(start_at("+soon", now).is_err());
    }
}
