//! The process CPU figure every tier serves is finer than a clock tick: a
//! burn of a few milliseconds on one thread shows up as a few milliseconds,
//! not as 0 or 10 ms. One test in its own binary, so no other test thread
//! adds CPU time to the process while it runs.

use nix::time::{ClockId, clock_gettime};
use telemetry::ProcessStats;

fn thread_cpu_seconds() -> f64 {
    let t = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap();
    t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9
}

#[test]
fn process_cpu_time_resolves_a_few_milliseconds() {
    let stats = ProcessStats::current();
    for burn_ms in [3.0, 4.5, 6.0] {
        let before = stats.snapshot().cpu_seconds.unwrap();
        let start = thread_cpu_seconds();
        let mut x = 0u64;
        while thread_cpu_seconds() - start < burn_ms / 1e3 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let used_ms = (stats.snapshot().cpu_seconds.unwrap() - before) * 1e3;
        // The burning thread's own clock is a lower bound; the process adds
        // only the snapshot's own work, far under a 10 ms tick.
        assert!(used_ms >= burn_ms, "burned {burn_ms} ms on one thread, the process figure moved {used_ms:.3} ms");
        assert!(used_ms < burn_ms + 3.0, "burned {burn_ms} ms, the process figure moved {used_ms:.3} ms");
    }
}
