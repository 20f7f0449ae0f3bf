//! `--tier-cpus` and `--tier-memory`: per-tier limits of the containers the
//! harness starts (`docker run --cpus` / `--memory`); `--huge-pages`, what
//! the tiers it starts do with transparent huge pages. Parsing only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{DeployArgs, HugePages};
use crate::config::{ConfigError, bad};

/// `--huge-pages`: set in the tiers the harness starts, so refused where it
/// starts none.
pub fn huge_pages(a: &DeployArgs) -> Result<HugePages, ConfigError> {
    if a.huge_pages != HugePages::Off && !a.restartable() {
        return Err(bad(
            "--huge-pages",
            "sets the tiers the harness starts, and with --caller-url or --downstream-url it starts none; set huge \
             pages where those tiers run",
        ));
    }
    Ok(a.huge_pages)
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
