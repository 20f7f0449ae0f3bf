//! Samples CPU and resident memory of every tier (and the harness itself) with
//! sysinfo, as a time series.

use std::time::Instant;

use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

use crate::result::ResourceSample;

/// Reads CPU % (of one core, since the previous refresh) and RSS (never
/// virtual size) of a fixed set of processes.
pub struct Sampler {
    system: Option<System>,
    tiers: Vec<(String, Pid)>,
}

impl Sampler {
    pub fn new(tiers: &[(&str, u32)]) -> Self {
        let mut s = Sampler {
            system: System::new().ok(),
            tiers: tiers.iter().map(|(n, p)| ((*n).to_owned(), Pid::from_u32(*p))).collect(),
        };
        // This first refresh sets the CPU baseline the first sample is measured from.
        s.refresh();
        s
    }

    fn refresh(&mut self) {
        let pids: Vec<Pid> = self.tiers.iter().map(|(_, p)| *p).collect();
        if let Some(system) = self.system.as_mut() {
            system.refresh_processes_specifics(
                ProcessesToUpdate::Some(&pids),
                true,
                ProcessRefreshKind::nothing().with_cpu().with_memory(),
            );
        }
    }

    /// One sample per tier, `t_seconds` after `origin`. A tier that is gone (or
    /// a figure sysinfo cannot read) yields `None` fields, not zeros.
    pub fn sample(&mut self, origin: Instant) -> Vec<ResourceSample> {
        let now = Instant::now();
        self.refresh();
        let t_seconds = if now >= origin {
            now.duration_since(origin).as_secs_f64()
        } else {
            -origin.duration_since(now).as_secs_f64()
        };
        self.tiers
            .iter()
            .map(|(tier, pid)| {
                let p = self.system.as_ref().and_then(|s| s.process(*pid));
                ResourceSample {
                    t_seconds,
                    tier: tier.clone(),
                    cpu_percent: p.map(|p| f64::from(p.cpu_usage())),
                    rss_bytes: p.map(|p| p.memory()),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_this_process_and_leaves_unknown_ones_empty() {
        let mut s = Sampler::new(&[("self", std::process::id()), ("ghost", u32::MAX - 7)]);
        std::thread::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL);
        let first = s.sample(Instant::now());
        let me = first.iter().find(|x| x.tier == "self").unwrap();
        assert!(me.rss_bytes.unwrap() > 0);
        assert!(me.cpu_percent.is_some());
        let ghost = first.iter().find(|x| x.tier == "ghost").unwrap();
        assert_eq!((ghost.cpu_percent, ghost.rss_bytes), (None, None));
    }
}
