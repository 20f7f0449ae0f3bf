//! The process's own CPU time and resident set.
//!
//! CPU time comes from `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`: every
//! thread's run time, to the nanosecond. `/proc/PID/stat` (what sysinfo
//! reads) counts in clock ticks of 10 ms, coarser than what a short round
//! uses per request: at 100 req/s over 5 s one tick is 20 µs per request,
//! and two equal processes then differ by a tick often enough for a
//! comparison to call it. The resident set comes through sysinfo.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

/// Reads this process's CPU seconds and RSS on demand.
#[derive(Debug)]
pub struct ProcessStats {
    pid: Pid,
    system: Mutex<Option<System>>,
}

/// CPU and memory of one process at one instant. A figure that could not be
/// read is `None`, never zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessSnapshot {
    pub pid: u32,
    /// User + system CPU time since the process started (nanosecond clock).
    pub cpu_seconds: Option<f64>,
    /// Resident set size (never virtual size).
    pub rss_bytes: Option<u64>,
}

impl ProcessStats {
    pub fn current() -> Self {
        ProcessStats { pid: Pid::from_u32(std::process::id()), system: Mutex::new(System::new().ok()) }
    }

    /// RSS first, CPU time last: whoever pairs the CPU time with a clock
    /// reading (the registry's uptime) reads that clock right after, so a
    /// slow RSS refresh (or a CPU-throttled moment) does not fall between
    /// the two.
    pub fn snapshot(&self) -> ProcessSnapshot {
        let rss_bytes = {
            // A poisoned lock only means another reader panicked mid-refresh;
            // the System inside is still usable.
            let mut guard = self.system.lock().unwrap_or_else(|e| e.into_inner());
            guard.as_mut().and_then(|system| {
                system.refresh_processes_specifics(
                    ProcessesToUpdate::Some(&[self.pid]),
                    false,
                    ProcessRefreshKind::nothing().with_cpu().with_memory(),
                );
                system.process(self.pid).map(|p| p.memory())
            })
        };
        ProcessSnapshot { pid: self.pid.as_u32(), rss_bytes, cpu_seconds: own_cpu_seconds() }
    }
}

/// CPU seconds this process has used, all threads, from the kernel's
/// nanosecond run-time clock; `None` if the clock cannot be read.
pub fn own_cpu_seconds() -> Option<f64> {
    use nix::time::{ClockId, clock_gettime};
    let t = clock_gettime(ClockId::CLOCK_PROCESS_CPUTIME_ID).ok()?;
    Some(t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process() {
        let s = ProcessStats::current().snapshot();
        assert_eq!(s.pid, std::process::id());
        assert!(s.rss_bytes.unwrap() > 0);
        assert!(s.cpu_seconds.unwrap() >= 0.0);
    }
}
