//! A process's CPU time to the nanosecond, read from outside it: what the
//! sampler reads of every process it watches and `tree.rs` of every member
//! of a foreign tier's tree.

/// CPU seconds process `pid` has used, every thread, from its CPU-time clock
/// (`clock_getcpuclockid`): the scheduler's run time to the nanosecond, where
/// /proc's figure moves in clock ticks of 10 ms. `None` if it cannot be read.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    use nix::time::{ClockId, clock_gettime};
    let clock = ClockId::pid_cpu_clock_id(nix::unistd::Pid::from_raw(i32::try_from(pid).ok()?)).ok()?;
    let t = clock_gettime(clock).ok()?;
    Some(t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
}
