//! Sending on schedule: the open-loop dispatcher (request *i* due at
//! `t0 + i/qps`, never waiting for responses) and the closed-loop workers of
//! throughput mode. Each request runs in its own task and sends one [`Shot`]
//! when it ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::{Answer, Live, Outcome, Schedule, Shot, Target};

/// Sends requests `0..total` on `schedule` until done or `stop` fires; returns
/// how many were dispatched (sent or dropped).
pub async fn dispatch(
    schedule: Schedule,
    total: u64,
    max_in_flight: usize,
    target: Target,
    live: Arc<Live>,
    shots: UnboundedSender<Shot>,
    stop: CancellationToken,
) -> u64 {
    // The dispatcher runs on its own OS thread: tokio's timer wheel has 1 ms
    // ticks (every wake-up would be up to a millisecond late), while a
    // thread's sleep is a high-resolution kernel timer (1 µs slack, below). The
    // requests themselves still run as tasks on the runtime.
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        dispatch_on_thread(runtime, schedule, total, max_in_flight, target, live, shots, stop)
    })
    .await
    .unwrap_or(0)
}

/// Longest single sleep, so a stop is noticed promptly.
const MAX_SLEEP: Duration = Duration::from_millis(5);

#[allow(clippy::too_many_arguments)]
fn dispatch_on_thread(
    runtime: tokio::runtime::Handle,
    schedule: Schedule,
    total: u64,
    max_in_flight: usize,
    target: Target,
    live: Arc<Live>,
    shots: UnboundedSender<Shot>,
    stop: CancellationToken,
) -> u64 {
    // The kernel may end a sleep up to the thread's timer slack late (50 µs by
    // default, to coalesce wake-ups); every request would be sent that late.
    // The same slack as the downstream's service-time timer. Best effort: a
    // kernel that refuses keeps the default.
    let _ = nix::sys::prctl::set_timerslack(downstream::timer::TIMER_SLACK_NS);
    let target = Arc::new(target);
    let mut i = 0;
    while i < total && !stop.is_cancelled() {
        let next = schedule.due(i);
        let now = Instant::now();
        if next > now {
            std::thread::sleep((next - now).min(MAX_SLEEP));
            continue;
        }
        // Everything due by now goes out now, each stamped with its own due time.
        while i < total && schedule.due(i) <= now {
            let due = schedule.due(i);
            if live.in_flight.load(Relaxed) >= max_in_flight {
                live.dropped.fetch_add(1, Relaxed);
                let _ = shots.send(Shot {
                    index: i,
                    due,
                    sent: None,
                    done: now,
                    outcome: Outcome::Dropped,
                    downstream_us: None,
                    kernel_stamped: false,
                });
            } else {
                live.in_flight.fetch_add(1, Relaxed);
                runtime.spawn(send_one(i, due, target.clone(), live.clone(), shots.clone()));
            }
            i += 1;
        }
    }
    i
}

/// Closed loop (throughput mode, as wrk or bombardier): `connections` workers
/// send back to back until `until` or `stop`. Each request is "due" when it is
/// sent, so latency here is not corrected for coordinated omission. Returns
/// how many requests were sent.
pub async fn closed_loop(
    connections: usize,
    until: Instant,
    target: Target,
    live: Arc<Live>,
    shots: UnboundedSender<Shot>,
    stop: CancellationToken,
    first_index: u64,
) -> u64 {
    let target = Arc::new(target);
    let next = Arc::new(AtomicU64::new(first_index));
    let workers: Vec<_> = (0..connections.max(1))
        .map(|_| {
            let (target, live, shots, stop, next) =
                (target.clone(), live.clone(), shots.clone(), stop.clone(), next.clone());
            tokio::spawn(async move {
                while Instant::now() < until && !stop.is_cancelled() {
                    let index = next.fetch_add(1, Relaxed);
                    live.in_flight.fetch_add(1, Relaxed);
                    send_one(index, Instant::now(), target.clone(), live.clone(), shots.clone()).await;
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.await;
    }
    next.load(Relaxed) - first_index
}

async fn send_one(index: u64, due: Instant, target: Arc<Target>, live: Arc<Live>, shots: UnboundedSender<Shot>) {
    // With a connection bound, the request is sent only once a connection is
    // free; the wait before that is in the corrected latency, not the service time.
    let _permit = match &target.connections {
        Some(s) => s.clone().acquire_owned().await.ok(),
        None => None,
    };
    let sent = Instant::now();
    live.sent.fetch_add(1, Relaxed);
    let answer = target.send(index).await;
    let Answer { outcome, done, downstream_us, kernel_stamped } = answer;
    live.in_flight.fetch_sub(1, Relaxed);
    if outcome == Outcome::Ok {
        live.ok.fetch_add(1, Relaxed);
    } else {
        live.errors.fetch_add(1, Relaxed);
    }
    let _ = shots.send(Shot { index, due, sent: Some(sent), done, outcome, downstream_us, kernel_stamped });
}
