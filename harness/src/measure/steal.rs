//! The machine's CPU time as the kernel counts it (`/proc/stat`'s first
//! line, in clock ticks): all of it, and the part the hypervisor gave to
//! other guests while this one had work (`steal`). Read at the boundaries of
//! every measured round, beside the tiers' own counters; on a shared VM a
//! round whose steal is high measured a slower machine than its neighbours.
//!
//! Reads a file the kernel keeps; judges nothing (see `judge::validity`).

/// One read of the machine's CPU ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// Every state summed (user, nice, system, idle, iowait, irq, softirq,
    /// steal; guest time is already inside user and nice).
    pub total: u64,
    pub steal: u64,
}

impl CpuTicks {
    /// The machine's ticks now; `None` where `/proc/stat` cannot be read.
    pub fn read() -> Option<CpuTicks> {
        parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// Steal since `start`, as a percentage of every tick since then;
    /// `None` if no tick passed (or the counters went back).
    pub fn steal_percent_since(&self, start: &CpuTicks) -> Option<f64> {
        let total = self.total.checked_sub(start.total).filter(|t| *t > 0)?;
        let steal = self.steal.checked_sub(start.steal)?;
        Some(steal as f64 * 100.0 / total as f64)
    }
}

/// `/proc/stat`'s aggregate `cpu` line. Kernels before 2.6.11 have no steal
/// column: `None` (not measured), never zero.
pub fn parse(text: &str) -> Option<CpuTicks> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line.split_whitespace().skip(1).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    let steal = *fields.get(7)?;
    Some(CpuTicks { total: fields.iter().take(8).sum(), steal })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_its_share_of_every_tick_and_guest_time_is_not_counted_twice() {
        let a = parse("cpu  100 0 50 800 10 0 5 5 40 0\ncpu0 50 0 25 400 5 0 2 2 20 0\n").unwrap();
        assert_eq!(a, CpuTicks { total: 970, steal: 5 });
        let b = parse("cpu  160 0 70 900 10 0 5 35 60 0\n").unwrap();
        // 210 ticks passed, 30 of them stolen.
        assert_eq!(b.steal_percent_since(&a), Some(30.0 * 100.0 / 210.0));
        assert_eq!(a.steal_percent_since(&a), None, "no tick passed");
        assert_eq!(parse("cpu  100 0 50 800 10 0 5\n"), None, "no steal column: not measured");
        assert!(CpuTicks::read().is_some(), "this machine's /proc/stat reads");
    }
}
