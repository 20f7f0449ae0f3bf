//! Where the tiers run beyond the embedded topology: already running tiers
//! the harness drives by URL and samples through their admin endpoints
//! ([`Remote`]), and tiers the harness starts as containers with their own
//! CPU and memory limits ([`Isolation`], [`TierLimits`]). Parsing and checks
//! only; starting anything is `tiers`' work.

use std::collections::BTreeMap;

use caller::Transport;
use serde::{Deserialize, Serialize};

use super::{ConfigError, bad};

/// How the harness starts the tiers it starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// Child processes on this machine (the embedded topology).
    #[default]
    Processes,
    /// One Docker container per tier, on a private network, each with its own
    /// `--tier-cpus` / `--tier-memory` limits.
    Containers,
}

impl Isolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Processes => "processes",
            Isolation::Containers => "containers",
        }
    }

    pub fn is_processes(&self) -> bool {
        *self == Isolation::Processes
    }
}

/// Tiers that already run elsewhere: the caller's front door per arm, and
/// the admin endpoints the harness samples them through. Keys are transport
/// names (`grpc`, `rest`): a caller serves one transport, so `--transport
/// both` needs one caller per arm. One downstream serves both listeners.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remote {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub caller_url: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub caller_admin: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downstream_admin: Option<String>,
}

impl Remote {
    pub fn is_empty(&self) -> bool {
        self.caller_url.is_empty() && self.caller_admin.is_empty() && self.downstream_admin.is_none()
    }

    /// The flag value that gives `map` back (`grpc=URL,rest=URL`).
    pub fn per_arm_arg(map: &BTreeMap<String, String>) -> String {
        map.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }
}

/// Per-tier container limits: CPUs (`docker run --cpus`) and memory in bytes
/// (`--memory`). A tier without an entry runs unlimited.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TierLimits {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cpus: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub memory_bytes: BTreeMap<String, u64>,
}

impl TierLimits {
    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty() && self.memory_bytes.is_empty()
    }

    /// `caller=1,downstream=0.5`, as `--tier-cpus` takes it.
    pub fn cpus_arg(&self) -> Option<String> {
        (!self.cpus.is_empty()).then(|| self.cpus.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","))
    }

    /// `caller=268435456,downstream=134217728` (bytes), as `--tier-memory` takes it.
    pub fn memory_arg(&self) -> Option<String> {
        (!self.memory_bytes.is_empty())
            .then(|| self.memory_bytes.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","))
    }
}

/// The tiers a limit can name.
const LIMITED_TIERS: [&str; 2] = ["caller", "downstream"];
/// Docker refuses a memory limit under 6 MiB.
const MIN_MEMORY_BYTES: u64 = 6 << 20;

/// `http://host:port`, with an optional trailing `/`: the form every URL flag takes.
fn base_url(flag: &'static str, text: &str) -> Result<String, ConfigError> {
    let t = text.trim().trim_end_matches('/');
    let rest = t.strip_prefix("http://").unwrap_or("");
    if rest.is_empty() || rest.contains('/') || rest.contains(',') || !rest.contains(':') {
        return Err(bad(flag, format!("{text:?}: give it as http://host:port")));
    }
    Ok(t.to_owned())
}

/// A per-arm URL flag: one URL for every arm, or `grpc=URL,rest=URL`.
/// Every arm must get one; a plain URL is refused for arms of two
/// transports (a caller serves one).
pub fn per_arm_urls(
    flag: &'static str,
    text: &str,
    arms: &[Transport],
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut map = BTreeMap::new();
    let names: Vec<&str> = arms.iter().map(|t| t.as_str()).collect();
    if !text.contains('=') {
        let url = base_url(flag, text)?;
        if names.iter().any(|n| *n != names[0]) {
            return Err(bad(
                flag,
                format!(
                    "a caller serves one transport, so --transport both needs one per arm: {flag} grpc=http://host:port,rest=http://host:port"
                ),
            ));
        }
        map.insert(names[0].to_owned(), url);
        return Ok(map);
    }
    for part in text.split(',') {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            bad(flag, format!("{part:?}: write transport=http://host:port, e.g. grpc=http://10.0.0.5:8000"))
        })?;
        let k = k.trim();
        if !names.contains(&k) {
            return Err(bad(flag, format!("{k:?} is not an arm of this run ({})", names.join(", "))));
        }
        if map.insert(k.to_owned(), base_url(flag, v)?).is_some() {
            return Err(bad(flag, format!("{k} is given twice")));
        }
    }
    if let Some(missing) = names.iter().find(|n| !map.contains_key(**n)) {
        return Err(bad(flag, format!("no URL for the {missing} arm")));
    }
    Ok(map)
}

/// `--caller-url`, `--caller-admin`, `--downstream-admin`, checked together.
pub fn remote(
    caller_url: Option<&str>,
    caller_admin: Option<&str>,
    downstream_admin: Option<&str>,
    downstream_url: bool,
    arms: &[Transport],
) -> Result<Remote, ConfigError> {
    let mut r = Remote::default();
    if let Some(text) = caller_url {
        r.caller_url = per_arm_urls("--caller-url", text, arms)?;
    }
    if let Some(text) = caller_admin {
        if r.caller_url.is_empty() {
            return Err(bad("--caller-admin", "goes with --caller-url (a caller the harness did not start)"));
        }
        r.caller_admin = per_arm_urls("--caller-admin", text, arms)?;
    }
    if let Some(text) = downstream_admin {
        if r.caller_url.is_empty() && !downstream_url {
            return Err(bad(
                "--downstream-admin",
                "goes with --caller-url or --downstream-url (a downstream the harness did not start)",
            ));
        }
        r.downstream_admin = Some(base_url("--downstream-admin", text)?);
    }
    Ok(r)
}

/// `--tier-cpus caller=1,downstream=0.5`: CPUs per tier, above 0 and at most
/// `cores` (what Docker accepts on this machine).
pub fn tier_cpus(text: &str, cores: usize) -> Result<BTreeMap<String, f64>, ConfigError> {
    let flag = "--tier-cpus";
    pairs(flag, text)?
        .into_iter()
        .map(|(k, v)| match v.parse::<f64>() {
            Ok(c) if c >= 0.01 && c <= cores as f64 => Ok((k, c)),
            _ => Err(bad(flag, format!("{k}={v}: CPUs must be between 0.01 and {cores} (this machine's cores)"))),
        })
        .collect()
}

/// `--tier-memory caller=256m,downstream=128m`: bytes per tier (suffix k, m
/// or g for KiB, MiB, GiB), at least 6 MiB (Docker's minimum).
pub fn tier_memory(text: &str) -> Result<BTreeMap<String, u64>, ConfigError> {
    let flag = "--tier-memory";
    pairs(flag, text)?
        .into_iter()
        .map(|(k, v)| {
            let lower = v.to_ascii_lowercase();
            let (digits, scale) = match lower.chars().last() {
                Some('k') => (&lower[..lower.len() - 1], 1u64 << 10),
                Some('m') => (&lower[..lower.len() - 1], 1 << 20),
                Some('g') => (&lower[..lower.len() - 1], 1 << 30),
                _ => (lower.as_str(), 1),
            };
            match digits.parse::<u64>().ok().and_then(|n| n.checked_mul(scale)) {
                Some(b) if b >= MIN_MEMORY_BYTES => Ok((k, b)),
                _ => Err(bad(flag, format!("{k}={v}: give at least 6m (bytes, or with k, m or g), e.g. {k}=256m"))),
            }
        })
        .collect()
}

/// `tier=value,tier=value` over the tiers a limit can name.
fn pairs(flag: &'static str, text: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut seen = Vec::new();
    for part in text.split(',') {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| bad(flag, format!("{part:?}: write tier=value, e.g. {flag} caller=1,downstream=0.5")))?;
        let k = k.trim();
        if !LIMITED_TIERS.contains(&k) {
            return Err(bad(flag, format!("{k:?} is not a tier with a limit (caller or downstream)")));
        }
        if seen.iter().any(|(s, _)| s == k) {
            return Err(bad(flag, format!("{k} is given twice")));
        }
        seen.push((k.to_owned(), v.trim().to_owned()));
    }
    Ok(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_per_arm() {
        let both = [Transport::Grpc, Transport::Rest];
        let m = per_arm_urls("--caller-url", "grpc=http://a:1,rest=http://b:2/", &both).unwrap();
        assert_eq!(m["grpc"], "http://a:1");
        assert_eq!(m["rest"], "http://b:2");
        assert_eq!(per_arm_urls("--caller-url", &Remote::per_arm_arg(&m), &both).unwrap(), m);
        assert!(per_arm_urls("--caller-url", "http://a:1", &both).unwrap_err().problem.contains("one per arm"));
        assert!(per_arm_urls("--caller-url", "grpc=http://a:1", &both).unwrap_err().problem.contains("rest arm"));
        let aa = [Transport::Grpc, Transport::Grpc];
        assert_eq!(per_arm_urls("--caller-url", "http://a:1", &aa).unwrap().len(), 1);
        for bad in ["a:1", "http://", "http://a:1/v1/call", "soap=http://a:1", "http://a"] {
            assert!(per_arm_urls("--caller-url", bad, &both[..1]).is_err(), "{bad}");
        }
    }

    #[test]
    fn admin_urls_need_a_remote_tier() {
        let arms = [Transport::Grpc];
        assert_eq!(remote(None, Some("http://a:1"), None, false, &arms).unwrap_err().flag, "--caller-admin");
        assert_eq!(remote(None, None, Some("http://a:1"), false, &arms).unwrap_err().flag, "--downstream-admin");
        assert!(remote(None, None, Some("http://a:1"), true, &arms).is_ok());
        let r = remote(Some("http://c:1"), Some("http://c:2"), Some("http://d:2"), false, &arms).unwrap();
        assert_eq!(
            (r.caller_admin["grpc"].as_str(), r.downstream_admin.as_deref()),
            ("http://c:2", Some("http://d:2"))
        );
    }

    #[test]
    fn limits_parse_and_name_the_flag() {
        let c = tier_cpus("caller=1,downstream=0.5", 2).unwrap();
        assert_eq!((c["caller"], c["downstream"]), (1.0, 0.5));
        for bad in ["caller=3", "caller=0", "proxy=1", "caller", "caller=1,caller=1", "caller=x"] {
            assert_eq!(tier_cpus(bad, 2).unwrap_err().flag, "--tier-cpus", "{bad}");
        }
        let m = tier_memory("caller=256m,downstream=1g").unwrap();
        assert_eq!((m["caller"], m["downstream"]), (256 << 20, 1 << 30));
        for bad in ["caller=1m", "caller=lots", "harness=64m"] {
            assert_eq!(tier_memory(bad).unwrap_err().flag, "--tier-memory", "{bad}");
        }
        let limits = TierLimits { cpus: c, memory_bytes: m };
        assert_eq!(tier_cpus(&limits.cpus_arg().unwrap(), 2).unwrap(), limits.cpus);
        assert_eq!(tier_memory(&limits.memory_arg().unwrap()).unwrap(), limits.memory_bytes);
    }
}
