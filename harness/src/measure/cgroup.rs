//! A container's CPU quota at work: its cgroup's `cpu.stat` (enforcement
//! periods, the periods in which it was throttled, the time it waited),
//! read at the boundaries of every measured round. cgroup v1 names the
//! waiting `throttled_time` (ns), v2 `throttled_usec`.
//!
//! Reads a file the kernel keeps; judges nothing (see `judge::validity`).

use std::path::Path;

use crate::result::CpuThrottling;

/// One read of `cpu.stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStat {
    pub periods: u64,
    pub throttled_periods: u64,
    pub throttled_ns: u64,
}

/// Two groups' counters as one tier's (the downstream's replicas): each
/// group is throttled on its own, so a tier's periods are the sum of theirs.
impl std::ops::Add for CpuStat {
    type Output = CpuStat;
    fn add(self, o: CpuStat) -> CpuStat {
        CpuStat {
            periods: self.periods + o.periods,
            throttled_periods: self.throttled_periods + o.throttled_periods,
            throttled_ns: self.throttled_ns + o.throttled_ns,
        }
    }
}

impl CpuStat {
    /// The counters in `cpu.stat` at `path`; `None` if it cannot be read
    /// or has no quota counters (no CPU controller there).
    pub fn read(path: &Path) -> Option<CpuStat> {
        parse(&std::fs::read_to_string(path).ok()?)
    }

    /// What the counters moved by since `start`, for a tier limited to `cpus`.
    pub fn since(&self, start: &CpuStat, cpus: f64) -> CpuThrottling {
        CpuThrottling {
            cpus,
            periods: self.periods.saturating_sub(start.periods),
            throttled_periods: self.throttled_periods.saturating_sub(start.throttled_periods),
            throttled_seconds: self.throttled_ns.saturating_sub(start.throttled_ns) as f64 / 1e9,
        }
    }
}

/// `cpu.stat`'s text, either version.
pub fn parse(text: &str) -> Option<CpuStat> {
    let field =
        |name: &str| text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse::<u64>().ok());
    let throttled_ns = field("throttled_time").or_else(|| field("throttled_usec").map(|us| us * 1000))?;
    Some(CpuStat { periods: field("nr_periods")?, throttled_periods: field("nr_throttled")?, throttled_ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_cgroup_versions_read_the_same() {
        let v1 = "nr_periods 81\nnr_throttled 80\nthrottled_time 3200000000\nnr_bursts 0\nburst_time 0\n";
        let v2 = "usage_usec 9\nuser_usec 5\nsystem_usec 4\nnr_periods 81\nnr_throttled 80\nthrottled_usec 3200000\n";
        let expected = CpuStat { periods: 81, throttled_periods: 80, throttled_ns: 3_200_000_000 };
        assert_eq!(parse(v1), Some(expected));
        assert_eq!(parse(v2), Some(expected));
        // A unified hierarchy without the CPU controller counts no periods.
        assert_eq!(parse("usage_usec 9\nuser_usec 5\nsystem_usec 4\n"), None);
        let start = CpuStat { periods: 1, throttled_periods: 0, throttled_ns: 0 };
        let t = expected.since(&start, 0.5);
        assert_eq!((t.periods, t.throttled_periods, t.throttled_seconds, t.cpus), (80, 80, 3.2, 0.5));
    }
}
