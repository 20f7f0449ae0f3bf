//! What waking at each due time costs a process that does nothing else: the
//! floor under an open-loop generator that sends every request at its due
//! time (bench/ratios.py's open-loop rows; bench/README.md, "Issue 56,
//! seventh pass").
//!
//! One tokio worker (as the harness runs with `--load-threads 1`) waits for
//! each due time of a steady RATE on the harness's own [`Alarm`] (a timerfd
//! on the reactor, the dispatcher's wake-up) and does nothing when it comes.
//! `MODE=tick` waits on tokio's own timer instead (`sleep_until`, 1 ms
//! ticks: several due times a wake-up, as oha's sends wait); `MODE=thread`
//! on no runtime at all, a plain thread in `clock_nanosleep` to each due
//! time: the kernel's own price of a timed wake-up.
//!
//! ```sh
//! cargo run --release -p downstream --example sleep_floor -- 5000 10   # RATE SECS
//! ```
//!
//! Prints one JSON line: the due times, how many were waited for (the rest
//! had already passed when the last wait ended), the seconds taken and the
//! process's CPU seconds (every thread, `CLOCK_PROCESS_CPUTIME_ID`).

use std::time::{Duration, Instant};

use downstream::timer::Alarm;
use nix::sys::time::TimeSpec;
use nix::time::{ClockId, ClockNanosleepFlags, clock_gettime, clock_nanosleep};

const MAX_RATE: u64 = 1_000_000;
const MAX_SECS: u64 = 3_600;

fn main() -> std::process::ExitCode {
    let arg = |i: usize, default: u64| std::env::args().nth(i).map_or(Some(default), |a| a.parse::<u64>().ok());
    let (Some(rate @ 1..=MAX_RATE), Some(secs @ 1..=MAX_SECS)) = (arg(1, 5_000), arg(2, 10)) else {
        eprintln!("sleep_floor RATE SECS: RATE 1 to {MAX_RATE} due times a second, SECS 1 to {MAX_SECS}");
        return std::process::ExitCode::from(2);
    };
    let mode = std::env::var("MODE").unwrap_or_else(|_| "alarm".into());
    if !["alarm", "tick", "thread"].contains(&mode.as_str()) {
        eprintln!("sleep_floor: MODE is alarm (the default), tick or thread, not {mode:?}");
        return std::process::ExitCode::from(2);
    }
    let tick = mode == "tick";
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sleep_floor: starting the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let start = Instant::now();
    // On a worker, as the harness's dispatcher runs (a future given to
    // `block_on` runs on this thread, the reactor on the worker's).
    let waits = if mode == "thread" {
        sleep_to_due_times(rate, secs)
    } else {
        rt.block_on(rt.spawn(wake_at_due_times(rate, secs, tick))).unwrap_or_else(|e| Err(e.into()))
    };
    let cpu = clock_gettime(ClockId::CLOCK_PROCESS_CPUTIME_ID).map(Duration::from).map_err(std::io::Error::from);
    match (waits, cpu) {
        (Ok(waits), Ok(cpu)) => {
            println!(
                "{{\"mode\":\"{}\",\"rate\":{rate},\"due_times\":{},\"waits\":{waits},\"seconds\":{:.6},\"cpu_seconds\":{:.6}}}",
                mode,
                rate * secs,
                start.elapsed().as_secs_f64(),
                cpu.as_secs_f64()
            );
            std::process::ExitCode::SUCCESS
        }
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("sleep_floor: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Waits for each of `rate × secs` due times, `1/rate` apart; returns how
/// many it waited for.
async fn wake_at_due_times(rate: u64, secs: u64, tick: bool) -> std::io::Result<u64> {
    let alarm = Alarm::new()?;
    let gap = Duration::from_nanos(1_000_000_000 / rate);
    let start = Instant::now();
    let mut waits = 0;
    for i in 1..=rate * secs {
        let due = start + gap * u32::try_from(i).unwrap_or(u32::MAX);
        let now = Instant::now();
        if due <= now {
            continue;
        }
        waits += 1;
        if tick {
            tokio::time::sleep_until(due.into()).await;
        } else {
            alarm.sleep(due - now).await?;
        }
    }
    Ok(waits)
}

/// [`wake_at_due_times`] on this thread, each wait a `clock_nanosleep` to
/// the due time on the monotonic clock.
fn sleep_to_due_times(rate: u64, secs: u64) -> std::io::Result<u64> {
    let gap = Duration::from_nanos(1_000_000_000 / rate);
    let start = Duration::from(clock_gettime(ClockId::CLOCK_MONOTONIC)?);
    let mut waits = 0;
    for i in 1..=rate * secs {
        let due = start + gap * u32::try_from(i).unwrap_or(u32::MAX);
        if due <= Duration::from(clock_gettime(ClockId::CLOCK_MONOTONIC)?) {
            continue;
        }
        waits += 1;
        clock_nanosleep(ClockId::CLOCK_MONOTONIC, ClockNanosleepFlags::TIMER_ABSTIME, &TimeSpec::from_duration(due))?;
    }
    Ok(waits)
}
