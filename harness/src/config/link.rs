//! `--link` and `--link-hop`: a link with a round-trip time and a rate on one
//! or both hops, as settings or as a named profile. The link itself is made
//! by the user-space emulator (`crates/linkemu`), started by `tiers::link`.

use std::time::Duration;

use clap::Args;
use serde::{Deserialize, Serialize};

use super::{ConfigError, Deploy, Flags, TargetTier, bad};

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "A link between the tiers (docs/deployment.md)")]
pub struct LinkArgs {
    /// Put a link with a round-trip time and a rate on a hop.
    ///
    /// `rtt=10ms,rate=1gbit` (rate in bit, kbit, mbit or gbit; either part may be left out) or a profile:
    /// `lan` (1ms, 1gbit), `dc` (2ms, 10gbit), `wan` (40ms, 100mbit). Made by a user-space emulator (a
    /// loopback TCP relay process), because the kernel here has no netem.
    #[arg(long)]
    pub link: Option<String>,
    /// Which hop the link is on.
    ///
    /// `internal` (caller → downstream), `front` (harness → caller) or `both` (a link of its own on each).
    #[arg(long, value_enum, default_value_t = LinkHop::Internal)]
    pub link_hop: LinkHop,
}

impl LinkArgs {
    /// `--link` and `--link-hop`, and the topologies a link goes with: the
    /// emulator is a relay process the harness starts on loopback in front of
    /// a tier it started itself.
    pub fn check(&self, deploy: &Deploy) -> Result<Option<Link>, ConfigError> {
        let Some(text) = self.link.as_deref() else {
            if self.link_hop != LinkHop::Internal {
                return Err(bad("--link-hop", "goes with --link (there is no link to place)"));
            }
            return Ok(None);
        };
        let conflicts = [
            ("--caller-url", !deploy.remote.caller_url.is_empty()),
            ("--downstream-url", deploy.downstream_url.is_some()),
            ("--target", deploy.target != TargetTier::Caller),
            ("--proxy", deploy.proxy.is_some()),
            ("--bind", deploy.bind != std::net::IpAddr::from([127, 0, 0, 1])),
        ];
        if let Some((flag, _)) = conflicts.iter().find(|(_, given)| *given) {
            return Err(bad(
                flag,
                "does not go with --link: the link is a user-space relay the harness starts on loopback between \
                 the caller and the downstream (or the harness and the caller) it starts itself as local processes, \
                 with no proxy; leave out --link or this flag",
            ));
        }
        parse_link(text, self.link_hop).map(Some)
    }
}

/// The link's part of the command line `harness rerun` replays.
pub fn replay(link: Option<&Link>, flags: &mut Flags) {
    if let Some(link) = link {
        flags.flag("--link", link.arg());
        flags.flag("--link-hop", link.hop.as_str());
    }
}

/// The longest round-trip time a link may add.
const MAX_RTT: Duration = Duration::from_secs(10);
/// The slowest and fastest rates accepted, bits per second.
const MIN_RATE: u64 = 1_000;
const MAX_RATE: u64 = 10_000_000_000;

/// The named profiles: name, RTT in microseconds, rate in bits per second,
/// and what each stands for (docs/deployment.md: "A link between the tiers").
pub const PROFILES: [(&str, u64, u64, &str); 3] = [
    ("lan", 1_000, 1_000_000_000, "one site, 1 GbE through a switch or two"),
    ("dc", 2_000, 10_000_000_000, "across availability zones of one cloud region, 10 GbE"),
    ("wan", 40_000, 100_000_000, "between regions of one continent, 100 Mbit/s"),
];

/// Which hop the link is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkHop {
    /// caller → link → downstream.
    #[default]
    Internal,
    /// harness → link → caller.
    Front,
    /// Both hops, each its own link.
    Both,
}

impl LinkHop {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkHop::Internal => "internal",
            LinkHop::Front => "front",
            LinkHop::Both => "both",
        }
    }

    pub fn internal(self) -> bool {
        self != LinkHop::Front
    }

    pub fn front(self) -> bool {
        self != LinkHop::Internal
    }
}

/// A link between two tiers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// The profile it was named by, if any.
    pub profile: Option<String>,
    /// Round-trip time added (half each way), in seconds in JSON.
    #[serde(with = "super::secs")]
    pub rtt: Duration,
    /// Rate of each direction; `null`: not limited.
    pub rate_bits_per_second: Option<u64>,
    pub hop: LinkHop,
}

impl Link {
    /// What the emulator is given.
    pub fn settings(&self) -> linkemu::LinkSettings {
        linkemu::LinkSettings { rtt: self.rtt, rate_bits_per_second: self.rate_bits_per_second }
    }

    /// The `--link` value that gives this link back: the profile's name, or
    /// `rtt=…,rate=…` in exact units.
    pub fn arg(&self) -> String {
        if let Some(p) = &self.profile {
            return p.clone();
        }
        let mut parts = vec![format!("rtt={}us", self.rtt.as_micros())];
        if let Some(r) = self.rate_bits_per_second {
            parts.push(format!("rate={r}bit"));
        }
        parts.join(",")
    }

    /// `rtt 10 ms, rate 1 Gbit/s` for reports.
    pub fn describe(&self) -> String {
        let rtt_ms = self.rtt.as_secs_f64() * 1e3;
        let rate = self.rate_bits_per_second.map_or("not limited".to_owned(), rate_text);
        let profile = self.profile.as_ref().map_or(String::new(), |p| format!("profile `{p}`: "));
        format!("{profile}RTT {rtt_ms} ms, rate {rate} per direction")
    }
}

/// `1 Gbit/s`, `40 Mbit/s`, `1.5 kbit/s`.
pub fn rate_text(bits: u64) -> String {
    let (value, unit) = match bits {
        b if b >= 1_000_000_000 => (b as f64 / 1e9, "Gbit/s"),
        b if b >= 1_000_000 => (b as f64 / 1e6, "Mbit/s"),
        b if b >= 1_000 => (b as f64 / 1e3, "kbit/s"),
        b => (b as f64, "bit/s"),
    };
    format!("{value} {unit}")
}

/// Parses `--link`: a profile name, or `rtt=DURATION,rate=RATE` (either may
/// be left out: no delay, or no rate limit).
pub fn parse_link(text: &str, hop: LinkHop) -> Result<Link, ConfigError> {
    let text = text.trim();
    let names = PROFILES.iter().map(|p| p.0).collect::<Vec<_>>().join(", ");
    if let Some(&(name, rtt_us, rate, _)) = PROFILES.iter().find(|p| p.0 == text) {
        return Ok(Link {
            profile: Some(name.to_owned()),
            rtt: Duration::from_micros(rtt_us),
            rate_bits_per_second: Some(rate),
            hop,
        });
    }
    if !text.contains('=') {
        return Err(bad(
            "--link",
            format!(
                "{text:?} is not a profile ({names}) nor rtt=…,rate=…; e.g. --link rtt=10ms,rate=1gbit or --link wan"
            ),
        ));
    }
    let (mut rtt, mut rate) = (None, None);
    for part in text.split(',') {
        let (key, value) = part.split_once('=').unwrap_or((part, ""));
        match key.trim() {
            "rtt" if rtt.is_none() => rtt = Some(parse_rtt(value.trim())?),
            "rate" if rate.is_none() => rate = Some(parse_rate(value.trim())?),
            "rtt" | "rate" => return Err(bad("--link", format!("{text:?} gives {} twice", key.trim()))),
            other => {
                return Err(bad(
                    "--link",
                    format!("{other:?} is not a link setting (rtt, rate); e.g. --link rtt=10ms,rate=1gbit"),
                ));
            }
        }
    }
    Ok(Link { profile: None, rtt: rtt.unwrap_or(Duration::ZERO), rate_bits_per_second: rate, hop })
}

fn parse_rtt(text: &str) -> Result<Duration, ConfigError> {
    let d = humantime::parse_duration(text)
        .map_err(|e| bad("--link", format!("rtt={text:?} is not a duration ({e}); e.g. rtt=10ms or rtt=500us")))?;
    if d > MAX_RTT {
        return Err(bad("--link", format!("rtt={text} is above the 10s a link may add")));
    }
    Ok(d)
}

/// A rate in tc's units: `bit`, `kbit`, `mbit`, `gbit` (powers of 1000).
fn parse_rate(text: &str) -> Result<u64, ConfigError> {
    let lower = text.to_ascii_lowercase();
    let split = lower.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(lower.len());
    let (number, unit) = lower.split_at(split);
    let scale = match unit {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        _ => {
            return Err(bad(
                "--link",
                format!("rate={text:?}: give a number with bit, kbit, mbit or gbit; e.g. rate=100mbit"),
            ));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| bad("--link", format!("rate={text:?}: {number:?} is not a number; e.g. rate=100mbit")))?;
    let bits = (value * scale).round();
    if !(MIN_RATE as f64..=MAX_RATE as f64).contains(&bits) {
        return Err(bad("--link", format!("rate={text} is outside 1kbit to 10gbit")));
    }
    Ok(bits as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_and_profiles_parse() {
        let l = parse_link("rtt=10ms,rate=1gbit", LinkHop::Internal).unwrap();
        assert_eq!((l.rtt, l.rate_bits_per_second), (Duration::from_millis(10), Some(1_000_000_000)));
        let l = parse_link("rate=2.5mbit", LinkHop::Front).unwrap();
        assert_eq!((l.rtt, l.rate_bits_per_second), (Duration::ZERO, Some(2_500_000)));
        let l = parse_link("rtt=20ms", LinkHop::Both).unwrap();
        assert_eq!((l.rtt, l.rate_bits_per_second), (Duration::from_millis(20), None));
        let wan = parse_link("wan", LinkHop::Internal).unwrap();
        assert_eq!((wan.profile.as_deref(), wan.rtt), (Some("wan"), Duration::from_millis(40)));
        for l in [parse_link("rtt=1500us,rate=40mbit", LinkHop::Internal).unwrap(), wan] {
            assert_eq!(parse_link(&l.arg(), l.hop).unwrap(), l, "{} gives the link back", l.arg());
        }
    }

    #[test]
    fn bad_links_name_the_flag() {
        for text in [
            "rtt=-1ms",
            "rate=abc",
            "rate=10mbps",
            "rate=0bit",
            "rate=20gbit",
            "moon",
            "rtt=1h",
            "x=1",
            "rtt=1ms,rtt=2ms",
        ] {
            let e = parse_link(text, LinkHop::Internal).unwrap_err();
            assert_eq!(e.flag, "--link", "{text}: {e}");
        }
    }
}
