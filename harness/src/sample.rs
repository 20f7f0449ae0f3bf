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
    /// Tiers sampled as a whole process tree (a proxy's master and workers).
    trees: Vec<Pid>,
}

impl Sampler {
    /// Samples `tiers`; those whose name ends in `proxy` are summed over the
    /// process and its children.
    pub fn new(tiers: &[(&str, u32)]) -> Self {
        let mut s = Sampler {
            system: System::new().ok(),
            tiers: tiers.iter().map(|(n, p)| ((*n).to_owned(), Pid::from_u32(*p))).collect(),
            trees: tiers.iter().filter(|(n, _)| n.ends_with("proxy")).map(|(_, p)| Pid::from_u32(*p)).collect(),
        };
        // This first refresh sets the CPU baseline the first sample is measured from.
        s.refresh();
        s
    }

    fn refresh(&mut self) {
        let pids: Vec<Pid> = self.tiers.iter().map(|(_, p)| *p).collect();
        let which = if self.trees.is_empty() { ProcessesToUpdate::Some(&pids) } else { ProcessesToUpdate::All };
        if let Some(system) = self.system.as_mut() {
            system.refresh_processes_specifics(which, true, ProcessRefreshKind::nothing().with_cpu().with_memory());
        }
    }

    /// The process `pid` and, for a tree, every process whose parent it is.
    fn members(&self, pid: Pid) -> Vec<&sysinfo::Process> {
        let Some(system) = self.system.as_ref() else { return Vec::new() };
        if !self.trees.contains(&pid) {
            return system.process(pid).into_iter().collect();
        }
        // sysinfo lists a process's threads as tasks whose parent is the
        // process: they share its memory and CPU, so only real processes count.
        system
            .processes()
            .values()
            .filter(|p| p.thread_kind().is_none() && (p.pid() == pid || p.parent() == Some(pid)))
            .collect()
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
                let procs = self.members(*pid);
                let any = !procs.is_empty();
                ResourceSample {
                    t_seconds,
                    tier: tier.clone(),
                    cpu_percent: any.then(|| procs.iter().map(|p| f64::from(p.cpu_usage())).sum()),
                    rss_bytes: any.then(|| procs.iter().map(|p| p.memory()).sum()),
                    cpu_seconds: any.then(|| procs.iter().map(|p| p.accumulated_cpu_time() as f64 / 1000.0).sum()),
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
