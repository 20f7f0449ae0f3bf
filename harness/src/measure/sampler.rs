//! Samples CPU and resident memory of every tier (and the harness itself) with
//! sysinfo, as a time series.

use std::time::Instant;

use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

use crate::result::{ResourceSample, TierName};

/// One process to sample: a tier of one arm (`arm: Some(i)`), or the
/// harness, which serves every arm (`arm: None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watched {
    pub arm: Option<usize>,
    pub tier: TierName,
    pub pid: u32,
}

/// A sample and the arm its process belongs to (`None`: the harness).
#[derive(Debug, Clone, PartialEq)]
pub struct ArmSample {
    pub arm: Option<usize>,
    pub sample: ResourceSample,
}

/// Reads CPU % (of one core, since the previous refresh) and RSS (never
/// virtual size) of a fixed set of processes.
pub struct Sampler {
    system: Option<System>,
    watched: Vec<Watched>,
    /// Tiers sampled as a whole process tree (a proxy's master and workers).
    trees: Vec<Pid>,
}

impl Sampler {
    /// Samples `watched`; a proxy is summed over its process and its children.
    pub fn new(watched: &[Watched]) -> Self {
        let mut s = Sampler {
            system: System::new().ok(),
            watched: watched.to_vec(),
            trees: watched.iter().filter(|w| w.tier == TierName::Proxy).map(|w| Pid::from_u32(w.pid)).collect(),
        };
        // This first refresh sets the CPU baseline the first sample is measured from.
        s.refresh();
        s
    }

    fn refresh(&mut self) {
        let pids: Vec<Pid> = self.watched.iter().map(|w| Pid::from_u32(w.pid)).collect();
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

    /// One sample per watched process, `t_seconds` after `origin`. A process
    /// that is gone (or a figure sysinfo cannot read) yields `None` fields,
    /// not zeros.
    pub fn sample(&mut self, origin: Instant) -> Vec<ArmSample> {
        let now = Instant::now();
        self.refresh();
        let t_seconds = if now >= origin {
            now.duration_since(origin).as_secs_f64()
        } else {
            -origin.duration_since(now).as_secs_f64()
        };
        self.watched
            .iter()
            .map(|w| {
                let procs = self.members(Pid::from_u32(w.pid));
                let any = !procs.is_empty();
                let sample = ResourceSample {
                    t_seconds,
                    tier: w.tier,
                    cpu_percent: any.then(|| procs.iter().map(|p| f64::from(p.cpu_usage())).sum()),
                    rss_bytes: any.then(|| procs.iter().map(|p| p.memory()).sum()),
                    cpu_seconds: any.then(|| procs.iter().map(|p| p.accumulated_cpu_time() as f64 / 1000.0).sum()),
                };
                ArmSample { arm: w.arm, sample }
            })
            .collect()
    }
}

/// The samples of arm `i`'s tiers and of the harness.
pub fn of_arm(samples: &[ArmSample], i: usize) -> Vec<ResourceSample> {
    samples.iter().filter(|s| s.arm.is_none_or(|a| a == i)).map(|s| s.sample.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_this_process_and_leaves_unknown_ones_empty() {
        let me = Watched { arm: None, tier: TierName::Harness, pid: std::process::id() };
        let ghost = Watched { arm: Some(0), tier: TierName::Caller, pid: u32::MAX - 7 };
        let mut s = Sampler::new(&[me, ghost]);
        std::thread::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL);
        let first = s.sample(Instant::now());
        let me = &first.iter().find(|x| x.sample.tier == TierName::Harness).unwrap().sample;
        assert!(me.rss_bytes.unwrap() > 0);
        assert!(me.cpu_percent.is_some());
        let ghost = first.iter().find(|x| x.sample.tier == TierName::Caller).unwrap();
        assert_eq!(ghost.arm, Some(0));
        assert_eq!((ghost.sample.cpu_percent, ghost.sample.rss_bytes), (None, None));
    }

    #[test]
    fn an_arm_gets_its_own_tiers_and_the_harness() {
        let at = |arm, tier| ArmSample {
            arm,
            sample: ResourceSample { t_seconds: 0.0, tier, cpu_percent: None, rss_bytes: None, cpu_seconds: None },
        };
        let all = [at(Some(0), TierName::Caller), at(Some(1), TierName::Caller), at(None, TierName::Harness)];
        let tiers: Vec<TierName> = of_arm(&all, 1).iter().map(|s| s.tier).collect();
        assert_eq!(tiers, [TierName::Caller, TierName::Harness]);
        assert_eq!(of_arm(&all, 0).len(), 2);
    }
}
