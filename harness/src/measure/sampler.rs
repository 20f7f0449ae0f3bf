//! Samples CPU and resident memory of every tier (and the harness itself) with
//! sysinfo, as a time series.

use super::cpu_clock::process_cpu_seconds;
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
    /// A tier started as a command of the user's: sampled as its whole
    /// process tree from /proc (`super::tree`), exited children included.
    pub foreign: bool,
}

impl Watched {
    /// A tier of arm `arm` the harness started as a child process.
    pub fn tier(arm: usize, t: &crate::tiers::Tier) -> Watched {
        Watched { arm: Some(arm), tier: t.name, pid: t.pid(), foreign: t.foreign.is_some() }
    }
}

/// A sample and the arm its process belongs to (`None`: the harness).
#[derive(Debug, Clone, PartialEq)]
pub struct ArmSample {
    pub arm: Option<usize>,
    pub sample: ResourceSample,
}

/// Reads CPU time, CPU % of one core and RSS (never virtual size) of a fixed
/// set of processes. The processes of one arm's tier (the downstream's
/// replicas) are summed into one sample: the tier's figures are theirs
/// together; each replica's own come from its `/stats`.
///
/// CPU % is the CPU seconds a process used since the previous sample divided
/// by the wall time between the two samples, so a summary's "CPU s" and
/// "% mean" always agree. (sysinfo's own `cpu_usage()` divides by the
/// machine's total CPU-time counter instead, which on a virtual machine
/// drifts from wall time by tens of percent.)
pub struct Sampler {
    system: Option<System>,
    /// One per arm and tier, in the order first watched.
    groups: Vec<Group>,
    /// What the readings' clock counts from.
    epoch: Instant,
    /// The shortest window a CPU % is measured over.
    min_window_seconds: f64,
    /// Tiers sampled as a whole process tree (a proxy's or a balancer's
    /// master and workers).
    trees: Vec<Pid>,
    /// Cores the rest of the machine kept busy over the last interval.
    other_cores: Option<f64>,
    /// Foreign tiers' first processes: each read as its whole tree.
    foreign: Vec<u32>,
}

/// The processes of one arm's tier and their last CPU readings.
struct Group {
    arm: Option<usize>,
    tier: TierName,
    pids: Vec<u32>,
    window: CpuWindow,
}

/// `watched` gathered by arm and tier, in the order first seen.
fn groups(watched: &[Watched]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for w in watched {
        match groups.iter_mut().find(|g| g.arm == w.arm && g.tier == w.tier) {
            Some(g) => g.pids.push(w.pid),
            None => groups.push(Group { arm: w.arm, tier: w.tier, pids: vec![w.pid], window: CpuWindow::default() }),
        }
    }
    groups
}

impl Sampler {
    /// Samples `watched`; a proxy or balancer is summed over its process
    /// and its children, the processes of one arm's tier over all of them.
    pub fn new(watched: &[Watched]) -> Self {
        let mut s = Sampler {
            system: System::new().ok(),
            groups: groups(watched),
            epoch: Instant::now(),
            min_window_seconds: 0.0,
            trees: Vec::new(),
            other_cores: None,
            foreign: watched.iter().filter(|w| w.foreign).map(|w| w.pid).collect(),
        };
        s.find_trees();
        // This first reading is the baseline the first sample's CPU % is measured from.
        s.refresh();
        let now = s.epoch.elapsed().as_secs_f64();
        for i in 0..s.groups.len() {
            let reading = s.group_cpu_seconds(i).map(|c| (now, c));
            s.groups[i].window.next(reading, 0.0);
        }
        s
    }

    fn find_trees(&mut self) {
        self.trees = self
            .groups
            .iter()
            .filter(|g| matches!(g.tier, TierName::Proxy | TierName::Balancer))
            .flat_map(|g| g.pids.iter().map(|p| Pid::from_u32(*p)))
            .collect();
    }

    /// Measures CPU % over windows of at least `d` (see [`CpuWindow`]).
    pub fn cpu_window_at_least(mut self, d: std::time::Duration) -> Self {
        self.min_window_seconds = d.as_secs_f64();
        self
    }

    /// From now on samples `watched` as their arms' tiers (the tiers of an
    /// arm restarted for a fresh round): each arm and tier named there is
    /// sampled as exactly the processes given for it. Their first sample has
    /// no CPU % (no previous reading of the new processes).
    pub fn rewatch(&mut self, watched: &[Watched]) {
        self.foreign.extend(watched.iter().filter(|w| w.foreign).map(|w| w.pid));
        for fresh in groups(watched) {
            match self.groups.iter_mut().find(|g| g.arm == fresh.arm && g.tier == fresh.tier) {
                Some(g) => *g = fresh,
                None => self.groups.push(fresh),
            }
        }
        self.find_trees();
    }

    /// CPU seconds group `i`'s processes have used so far, together; `None`
    /// if any of them cannot be read.
    fn group_cpu_seconds(&self, i: usize) -> Option<f64> {
        self.groups[i].pids.iter().map(|p| self.cpu_seconds(Pid::from_u32(*p))).sum()
    }

    /// CPU seconds a process (or process tree) has used so far: each
    /// member's nanosecond CPU clock, or its clock-tick count from /proc
    /// where that clock cannot be read.
    fn cpu_seconds(&self, pid: Pid) -> Option<f64> {
        if self.foreign.contains(&pid.as_u32()) {
            return super::tree::usage(pid.as_u32()).map(|(cpu, _)| cpu);
        }
        let procs = self.members(pid);
        (!procs.is_empty()).then(|| {
            procs
                .iter()
                .map(|p| process_cpu_seconds(p.pid().as_u32()).unwrap_or(p.accumulated_cpu_time() as f64 / 1000.0))
                .sum()
        })
    }

    fn refresh(&mut self) {
        let pids: Vec<Pid> = self.groups.iter().flat_map(|g| g.pids.iter().map(|p| Pid::from_u32(*p))).collect();
        let which = if self.trees.is_empty() { ProcessesToUpdate::Some(&pids) } else { ProcessesToUpdate::All };
        if let Some(system) = self.system.as_mut() {
            system.refresh_processes_specifics(which, true, ProcessRefreshKind::nothing().with_cpu().with_memory());
            system.refresh_cpu_usage();
        }
    }

    /// Cores kept busy by processes other than the watched ones over the
    /// last interval: the machine's busy share (/proc/stat, every core) times
    /// its cores, minus what the run's own processes used. `None` before the
    /// second sample or where the machine's CPU use cannot be read.
    pub fn other_cores(&self) -> Option<f64> {
        self.other_cores
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

    /// One sample per arm's tier (its processes summed), `t_seconds` after `origin`. A process
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
        let mut out = Vec::with_capacity(self.groups.len());
        let at = now.saturating_duration_since(self.epoch).as_secs_f64();
        for i in 0..self.groups.len() {
            let rss_bytes = self.groups[i]
                .pids
                .iter()
                .map(|p| {
                    if self.foreign.contains(p) {
                        return super::tree::usage(*p).map(|(_, rss)| rss);
                    }
                    let procs = self.members(Pid::from_u32(*p));
                    (!procs.is_empty()).then(|| procs.iter().map(|p| p.memory()).sum::<u64>())
                })
                .sum::<Option<u64>>();
            let cpu_seconds = self.group_cpu_seconds(i);
            let min_window = self.min_window_seconds;
            let g = &mut self.groups[i];
            let cpu = g.window.next(cpu_seconds.map(|c| (at, c)), min_window);
            let sample = ResourceSample {
                t_seconds,
                tier: g.tier,
                cpu_percent: cpu.map(|(p, _)| p),
                cpu_window_seconds: cpu.map(|(_, w)| w),
                rss_bytes,
                cpu_seconds,
            };
            out.push(ArmSample { arm: g.arm, sample });
        }
        let ours: Option<f64> = out.iter().map(|s| s.sample.cpu_percent.map(|p| p / 100.0)).sum();
        self.other_cores = self.system.as_ref().filter(|s| !s.cpus().is_empty()).and_then(|system| {
            let busy = f64::from(system.global_cpu_usage()) / 100.0 * system.cpus().len() as f64;
            Some(other_cores(busy, ours?))
        });
        out
    }
}

/// CPU % of one process from its successive (clock seconds, CPU seconds)
/// readings, over windows of at least a minimum length: the last two
/// readings are kept, and a reading that comes sooner than the minimum after
/// the previous one (the closing reading, taken when a run ends between two
/// ticks) is measured from the one before. Over a window much shorter than
/// the sampling interval the figure is mostly the granularity of CPU
/// accounting and of a CPU quota's 100 ms periods, not the process's load,
/// and a peak taken over such windows would overstate it.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuWindow {
    last: [Option<(f64, f64)>; 2],
}

impl CpuWindow {
    /// Takes a reading (`None`: it could not be read) and returns the % of
    /// one core since the chosen earlier reading, with that window's length
    /// in seconds. `None` without an earlier reading, or if the clock did not
    /// move forward (a tier that restarted: its clock began again). A
    /// process tree that lost a member can read less CPU than before: that
    /// window counts as 0, not negative.
    pub fn next(&mut self, reading: Option<(f64, f64)>, min_seconds: f64) -> Option<(f64, f64)> {
        let [older, newer] = self.last;
        self.last = [newer, reading];
        let (t1, c1) = reading?;
        let base = match (older, newer) {
            (_, Some((t0, _))) if t1 - t0 >= min_seconds => newer,
            (Some(_), _) => older,
            _ => newer,
        };
        let (t0, c0) = base?;
        let window = t1 - t0;
        (window > 0.0).then(|| ((c1 - c0).max(0.0) / window * 100.0, window))
    }
}

/// The machine's busy cores less the run's own, never below zero (the two
/// are read a moment apart).
pub fn other_cores(machine_busy: f64, ours: f64) -> f64 {
    (machine_busy - ours).max(0.0)
}

/// The samples of arm `i`'s tiers and of the harness.
pub fn of_arm(samples: &[ArmSample], i: usize) -> Vec<ResourceSample> {
    samples.iter().filter(|s| s.arm.is_none_or(|a| a == i)).map(|s| s.sample.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_process_outside_the_run_shows_as_other_load() {
        // A child that keeps one core busy for at most three seconds, in one
        // process (bash's own clock: a loop that ran `date` spent its time in
        // children, which its own CPU time does not count).
        let mut burner =
            std::process::Command::new("bash").args(["-c", "while (( SECONDS < 3 )); do :; done"]).spawn().unwrap();
        let me = Watched { arm: None, tier: TierName::Harness, pid: std::process::id(), foreign: false };
        let mut s = Sampler::new(&[me]);
        // The burner's own share, read by a sampler of its own so that it is
        // not one of "ours": it shares two cores with this binary's other
        // tests (one of them burns a core for 0.6 s), so it may get well
        // under one.
        let mut b = Sampler::new(&[Watched { arm: None, tier: TierName::Caller, pid: burner.id(), foreign: false }]);
        assert_eq!(s.other_cores(), None, "no interval yet");
        std::thread::sleep(std::time::Duration::from_millis(600));
        s.sample(Instant::now());
        let burner_cores = b.sample(Instant::now())[0].sample.cpu_percent.map(|p| p / 100.0);
        let other = s.other_cores();
        let _ = burner.kill();
        let _ = burner.wait();
        assert!(burner_cores.is_some_and(|c| c > 0.1), "the burner hardly ran: {burner_cores:?}");
        // The rest of the machine is at least the burner, less the 10-ms
        // ticks of two readings a moment apart.
        assert!(other.zip(burner_cores).is_some_and(|(o, c)| o >= 0.7 * c - 0.05), "{other:?} < {burner_cores:?}");
        assert!(other.is_some_and(|o| o <= s.system.as_ref().unwrap().cpus().len() as f64 + 0.01), "{other:?}");
    }

    #[test]
    fn samples_this_process_and_leaves_unknown_ones_empty() {
        let me = Watched { arm: None, tier: TierName::Harness, pid: std::process::id(), foreign: false };
        let ghost = Watched { arm: Some(0), tier: TierName::Caller, pid: u32::MAX - 7, foreign: false };
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

    /// CPU seconds this process has used, from getrusage(2): a different
    /// kernel interface than the /proc/<pid>/stat the sampler reads.
    fn rusage_cpu_seconds() -> f64 {
        use nix::sys::resource::{UsageWho, getrusage};
        let u = getrusage(UsageWho::RUSAGE_SELF).unwrap();
        let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
        secs(u.user_time()) + secs(u.system_time())
    }

    #[test]
    fn cpu_percent_is_cpu_seconds_over_wall_time() {
        // A thread burns CPU for ~0.6 s of wall time while the process is
        // sampled twice; whatever share of a core it got on a busy machine,
        // the sampled % must be what getrusage says it used over that wall time.
        let me = Watched { arm: None, tier: TierName::Harness, pid: std::process::id(), foreign: false };
        let mut s = Sampler::new(&[me]);
        let (cpu0, t0) = (rusage_cpu_seconds(), Instant::now());
        let burner = std::thread::spawn(|| {
            let until = Instant::now() + std::time::Duration::from_millis(600);
            let mut x = 0u64;
            while Instant::now() < until {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            x
        });
        let _ = burner.join();
        let sample = s.sample(t0).remove(0).sample;
        let (cpu1, t1) = (rusage_cpu_seconds(), Instant::now());
        let expected = (cpu1 - cpu0) / (t1 - t0).as_secs_f64() * 100.0;
        let got = sample.cpu_percent.unwrap();
        // /proc counts in clock ticks (10 ms): a few ticks over ~0.6 s.
        assert!((got - expected).abs() < 8.0, "sampled {got:.1}% of a core, getrusage says {expected:.1}%");
        assert!(expected > 10.0, "the burner got almost no CPU ({expected:.1}%): the check proves nothing");
    }

    #[test]
    fn cpu_seconds_come_from_the_nanosecond_clock() {
        // Burn some CPU, then read the sampler's figure for this process and
        // the process's own clock right after: the same clock, so they agree
        // to the few µs between the reads. /proc's clock-tick figure would
        // trail by up to 10 ms.
        let until = Instant::now() + std::time::Duration::from_millis(120);
        let mut x = 0u64;
        while Instant::now() < until {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let me = Watched { arm: None, tier: TierName::Harness, pid: std::process::id(), foreign: false };
        let s = Sampler::new(&[me]);
        let sampled = s.cpu_seconds(Pid::from_u32(me.pid)).unwrap();
        let own = telemetry::own_cpu_seconds().unwrap();
        assert!(own >= sampled && own - sampled < 0.002, "sampled {sampled:.6} s, own clock {own:.6} s");
        // Another process's clock can be read too.
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let other = process_cpu_seconds(child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(other.is_some_and(|c| (0.0..1.0).contains(&c)), "{other:?}");
    }

    /// The percents of readings taken one after another by one window.
    fn percents(min: f64, readings: &[Option<(f64, f64)>]) -> Vec<Option<(f64, f64)>> {
        let mut w = CpuWindow::default();
        readings.iter().map(|r| w.next(*r, min)).collect()
    }

    #[test]
    fn cpu_percent_needs_two_readings_and_is_never_negative() {
        assert_eq!(percents(0.0, &[Some((0.0, 1.0)), Some((0.5, 1.25))]), [None, Some((50.0, 0.5))]);
        assert_eq!(percents(0.0, &[None, Some((0.5, 1.25))]), [None, None]);
        assert_eq!(percents(0.0, &[Some((0.0, 1.0)), None]), [None, None]);
        assert_eq!(percents(0.0, &[Some((0.0, 2.0)), Some((0.5, 1.0))]), [None, Some((0.0, 0.5))]);
        // A clock that did not move, or went back (a restarted tier).
        assert_eq!(percents(0.0, &[Some((10.0, 1.0)), Some((10.0, 1.0))]), [None, None]);
        assert_eq!(percents(0.0, &[Some((10.0, 1.0)), Some((1.0, 0.1))]), [None, None]);
    }

    #[test]
    fn a_short_window_is_measured_from_the_reading_before() {
        let got = percents(0.5, &[Some((0.0, 0.0)), Some((1.0, 0.1)), Some((1.05, 0.2))]);
        // 0.1 s of CPU in the last 0.05 s would read 200%; over 1.05 s it is 19%.
        assert_eq!(got[1], Some((10.0, 1.0)));
        let (p, w) = got[2].unwrap();
        assert!((w - 1.05).abs() < 1e-9 && (p - 0.2 / 1.05 * 100.0).abs() < 1e-9, "{:?}", got[2]);
        // Without an earlier reading the short window is all there is.
        assert_eq!(
            percents(0.5, &[Some((1.0, 0.1)), Some((1.05, 0.11))])[1].map(|(_, w)| (w * 100.0).round()),
            Some(5.0)
        );
        // Long windows are measured from the reading just before.
        let steady = percents(0.5, &[Some((0.0, 0.0)), Some((1.0, 0.1)), Some((2.0, 0.4))]);
        assert_eq!(steady[2].map(|(p, w)| ((p * 1e6).round() / 1e6, w)), Some((30.0, 1.0)));
    }

    #[test]
    fn an_arm_gets_its_own_tiers_and_the_harness() {
        let at = |arm, tier| ArmSample {
            arm,
            sample: ResourceSample {
                t_seconds: 0.0,
                tier,
                cpu_percent: None,
                cpu_window_seconds: None,
                rss_bytes: None,
                cpu_seconds: None,
            },
        };
        let all = [at(Some(0), TierName::Caller), at(Some(1), TierName::Caller), at(None, TierName::Harness)];
        let tiers: Vec<TierName> = of_arm(&all, 1).iter().map(|s| s.tier).collect();
        assert_eq!(tiers, [TierName::Caller, TierName::Harness]);
        assert_eq!(of_arm(&all, 0).len(), 2);
    }
}
