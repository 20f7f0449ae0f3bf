//! The process's own CPU time and resident set, read through sysinfo.

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
    /// User + system CPU time since the process started.
    pub cpu_seconds: Option<f64>,
    /// Resident set size (never virtual size).
    pub rss_bytes: Option<u64>,
}

impl ProcessStats {
    pub fn current() -> Self {
        ProcessStats { pid: Pid::from_u32(std::process::id()), system: Mutex::new(System::new().ok()) }
    }

    pub fn snapshot(&self) -> ProcessSnapshot {
        let mut snap = ProcessSnapshot { pid: self.pid.as_u32(), ..ProcessSnapshot::default() };
        // A poisoned lock only means another reader panicked mid-refresh; the
        // System inside is still usable.
        let mut guard = self.system.lock().unwrap_or_else(|e| e.into_inner());
        let Some(system) = guard.as_mut() else { return snap };
        system.refresh_processes_specifics(
            ProcessesToUpdate::Some(&[self.pid]),
            false,
            ProcessRefreshKind::nothing().with_cpu().with_memory(),
        );
        if let Some(p) = system.process(self.pid) {
            snap.cpu_seconds = Some(p.accumulated_cpu_time() as f64 / 1000.0);
            snap.rss_bytes = Some(p.memory());
        }
        snap
    }
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
