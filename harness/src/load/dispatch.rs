//! Sending on schedule: the open-loop dispatcher (request *i* due at
//! `t0 + i/qps`, never waiting for responses) and the closed-loop workers of
//! throughput mode. Each request runs in its own task and sends one [`Shot`]
//! when it ends.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use downstream::timer::Alarm;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::deferred::Hearing;
use super::{Answer, Live, Outcome, Schedule, Shot, Target};

/// Sends this generator's share of requests `0..total` on `schedule` until
/// done or `stop` fires; returns how many were dispatched (sent or dropped).
///
/// The dispatcher is a task on the runtime that sends the requests, woken at
/// each due time (or at most once per the schedule's window, `Schedule::window`) by an [`Alarm`] (a timerfd on the reactor): tokio's own
/// timer has 1 ms ticks (every wake-up would be up to a millisecond late).
/// Sending from the task that woke avoids a second wake-up per request (see
/// bench/README.md, "Notes moved from the code").
#[allow(clippy::too_many_arguments)]
pub async fn dispatch(
    schedule: Schedule,
    total: u64,
    max_in_flight: usize,
    target: Target,
    live: Arc<Live>,
    shots: UnboundedSender<Shot>,
    stop: CancellationToken,
    alarms: Alarms,
) -> u64 {
    let alarm = alarms
        .take()
        .map_err(|e| tracing::warn!("no timerfd ({e}): requests are sent on tokio's 1 ms timer ticks"))
        .ok();
    let target = Arc::new(target);
    // Answers read when the dispatcher wakes to send (`deferred.rs`).
    let mut answers = Hearing::new(match &target.endpoint {
        super::Endpoint::Front(client) => client.deferred().cloned(),
        super::Endpoint::Direct(_) => None,
    });
    let mut mine = schedule.share.indices(total).peekable();
    let (mut dispatched, mut woke) = (0, None);
    while let Some(&i) = mine.peek()
        && !stop.is_cancelled()
    {
        let wake = schedule.wake_for(schedule.due(i), woke);
        let now = Instant::now();
        if wake > now {
            answers.sleeping(wake - now);
            tokio::select! {
                biased;
                _ = stop.cancelled() => break,
                _ = sleep(alarm.as_ref(), wake - now) => {}
            }
            continue;
        }
        woke = Some(now);
        live.wakeups.fetch_add(1, Relaxed);
        // Everything due by now goes out now, each stamped with its own due time.
        while let Some(i) = mine.next_if(|&i| schedule.due(i) <= now) {
            let due = schedule.due(i);
            if live.in_flight.load(Relaxed) >= max_in_flight {
                live.dropped.fetch_add(1, Relaxed);
                target.reasons.note(Outcome::Dropped, DROPPED);
                let _ = shots.send(Shot {
                    index: i,
                    due,
                    sent: None,
                    done: now,
                    outcome: Outcome::Dropped,
                    downstream_us: None,
                    kernel_stamped: false,
                    stream: None,
                });
            } else {
                live.in_flight.fetch_add(1, Relaxed);
                // Boxed: the exchange's future is large, and a task holding
                // it by value was copied (memcpy) on its way into the task
                // and again on completion (callgrind: about 3k instructions
                // a request, bench/README.md, issue 56).
                tokio::spawn(Box::pin(send_one(i, due, target.clone(), live.clone(), shots.clone())));
            }
            dispatched += 1;
        }
        // The answers that came since the last wake-up, once this one's
        // requests are out.
        answers.sent();
    }
    if let Some(a) = alarm {
        alarms.put(a);
    }
    dispatched
}

/// The reason of a request not sent.
const DROPPED: &str = "not sent: --max-in-flight requests were outstanding when it was due";

/// The dispatchers' alarms, kept from one segment to the next: a segment
/// starts while the previous one's requests still hold their descriptors
/// (thousands at a high rate), the moment a new timerfd is likeliest to find
/// no descriptor left. The first is made before any
/// load; a dispatcher finding none free (two at once) makes its own.
#[derive(Clone, Default)]
pub struct Alarms(Arc<Mutex<Vec<Alarm>>>);

impl Alarms {
    /// A store holding one alarm made now, if a timerfd can be had.
    pub fn ready() -> Alarms {
        let alarms = Alarms::default();
        if let Ok(a) = Alarm::new() {
            alarms.put(a);
        }
        alarms
    }

    fn take(&self) -> std::io::Result<Alarm> {
        match self.0.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            Some(a) => Ok(a),
            None => Alarm::new(),
        }
    }

    fn put(&self, a: Alarm) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(a);
    }
}

/// Waits `d` on the alarm, or on tokio's timer without one (or if it fails).
async fn sleep(alarm: Option<&Alarm>, d: Duration) {
    match alarm {
        Some(a) if a.sleep(d).await.is_ok() => {}
        _ => tokio::time::sleep(d).await,
    }
}

/// Closed loop (throughput mode, as wrk or bombardier): `connections` workers
/// send back to back until `until` or `stop`. Each request is "due" when it is
/// sent, so latency here is not corrected for coordinated omission. Returns
/// how many requests were sent.
///
/// A worker writes its next request before it checks and records the answer
/// it has: the end-to-end check is the generator's own work, and made after
/// the next send it is not in the turn-around between an answer and the next
/// request, which is all a connection waits on beside the exchange itself.
/// Every answer is still checked, and its stamps were taken as it arrived.
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
                let mut unchecked = None;
                while Instant::now() < until && !stop.is_cancelled() {
                    let index = next.fetch_add(1, Relaxed);
                    live.in_flight.fetch_add(1, Relaxed);
                    let _permit = permit(&target).await;
                    let sent = Instant::now();
                    live.sent.fetch_add(1, Relaxed);
                    let exchanged = {
                        let mut check_last = || check(unchecked.take(), &target, &live, &shots);
                        target.exchange(index, &mut check_last).await
                    };
                    live.in_flight.fetch_sub(1, Relaxed);
                    // An exchange that ended before its request went out checked nothing.
                    check(unchecked.take(), &target, &live, &shots);
                    if exchanged.held_bytes() > DEFER_CHECK_BYTES {
                        check(Some((index, sent, exchanged)), &target, &live, &shots);
                    } else {
                        unchecked = Some((index, sent, exchanged));
                    }
                }
                check(unchecked, &target, &live, &shots);
            })
        })
        .collect();
    for w in workers {
        let _ = w.await;
    }
    next.load(Relaxed) - first_index
}

/// The largest answer a closed loop checks after its next send. A larger
/// one is checked at once: its check costs more than any turn-around, and
/// held beside the next answer it would count twice against the answer
/// budget ([`super::front::AnswerBudget`]).
const DEFER_CHECK_BYTES: usize = 64 << 10;

/// Checks a closed loop's answer to request `index`, sent at `sent`, and
/// records it (its due time is its send).
fn check(
    unchecked: Option<(u64, Instant, super::Exchanged)>,
    target: &Target,
    live: &Live,
    shots: &UnboundedSender<Shot>,
) {
    if let Some((index, sent, exchanged)) = unchecked {
        record(index, sent, sent, target.judge(exchanged), target, live, shots);
    }
}

/// With a connection bound, the request is sent only once a connection is
/// free; the wait before that is in the corrected latency, not the service time.
async fn permit(target: &Target) -> Option<tokio::sync::OwnedSemaphorePermit> {
    match &target.connections {
        Some(s) => s.clone().acquire_owned().await.ok(),
        None => None,
    }
}

async fn send_one(index: u64, due: Instant, target: Arc<Target>, live: Arc<Live>, shots: UnboundedSender<Shot>) {
    let _permit = permit(&target).await;
    let sent = Instant::now();
    live.sent.fetch_add(1, Relaxed);
    let answer = target.send(index).await;
    live.in_flight.fetch_sub(1, Relaxed);
    record(index, due, sent, answer, &target, &live, &shots);
}

/// Counts how request `index` ended and hands its one [`Shot`] on.
fn record(
    index: u64,
    due: Instant,
    sent: Instant,
    answer: Answer,
    target: &Target,
    live: &Live,
    shots: &UnboundedSender<Shot>,
) {
    let Answer { outcome, done, downstream_us, kernel_stamped, reason, stream } = answer;
    if outcome == Outcome::Ok {
        live.ok.fetch_add(1, Relaxed);
    } else {
        live.errors.fetch_add(1, Relaxed);
        target.reasons.note(outcome, reason.as_deref().unwrap_or("(no reason given)"));
    }
    let _ = shots.send(Shot { index, due, sent: Some(sent), done, outcome, downstream_us, kernel_stamped, stream });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{Endpoint, Share};

    /// Dispatches 100 requests due 1 ms apart with `precision`, to a port
    /// nobody listens on (each request fails at once: only when it left
    /// counts); the dispatcher's wake-ups and each request's send lag.
    async fn dispatched_with(precision: Duration) -> (u64, Vec<Duration>) {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let target = Target::front(format!("http://{closed}/v1/call"), 1, 1, Duration::from_secs(5), 0).unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let live = Arc::new(Live::default());
        let schedule =
            Schedule { t0: Instant::now(), qps: 1000.0, ramp: Duration::ZERO, share: Share::default(), precision };
        let stop = CancellationToken::new();
        let n = dispatch(schedule, 100, 1000, target, live.clone(), tx, stop, Alarms::ready()).await;
        assert_eq!(n, 100);
        let mut lags = Vec::new();
        while let Some(shot) = rx.recv().await {
            lags.push(shot.sent.expect("sent") - shot.due);
        }
        assert_eq!(lags.len(), 100);
        (live.wakeups.load(Relaxed), lags)
    }

    #[tokio::test]
    async fn a_send_precision_sends_what_falls_due_within_it_on_one_wake_up() {
        // 100 ms of due times: with 20 ms of precision the dispatcher wakes
        // at most once per window of 15 ms (three quarters of it; and at the
        // first due time), however busy the machine; with none it wakes for
        // each request it finds due.
        let (wakes, lags) = dispatched_with(Duration::from_millis(20)).await;
        assert!((1..=8).contains(&wakes), "{wakes} wake-ups");
        // Batched, a request waits: most of them leave well after their due time.
        let waited = lags.iter().filter(|l| **l >= Duration::from_millis(5)).count();
        assert!(waited >= 50, "{waited} of 100 left 5 ms or more after their due time");
        let (precise, _) = dispatched_with(Duration::ZERO).await;
        assert!(precise > wakes, "{precise} wake-ups without a precision, {wakes} with 20 ms");
    }

    /// An HTTP/1.1 server answering each request at once; its URL.
    async fn answering() -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/call", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    // Each request comes in one read (small, TCP_NODELAY).
                    while let Ok(n @ 1..) = tcp.read(&mut buf).await {
                        assert!(buf[..n].starts_with(b"POST /v1/call HTTP/1.1"));
                        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
                        if tcp.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        url
    }

    /// 400 requests at 2,000 req/s to a server that answers at once, the
    /// client's answers heard at sends (`deferred.rs`): each answer comes
    /// before the next due time, so the dispatcher reads almost every one
    /// when it wakes to send, and the watcher only those after the last
    /// send. Every answer still arrives, stamped by the kernel.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn answers_are_read_when_the_dispatcher_wakes_to_send() {
        let url = answering().await;
        let client = Arc::new(crate::load::front::FrontClient::new(&url).unwrap().hearing_answers_at_sends().unwrap());
        let mut target = Target::with(Endpoint::Front(client.clone()), 1, 1, Duration::from_secs(5), 0);
        target.checks.front = |_, _, _| true;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let live = Arc::new(Live::default());
        let schedule = Schedule {
            t0: Instant::now(),
            qps: 2000.0,
            ramp: Duration::ZERO,
            share: Share::default(),
            precision: Duration::ZERO,
        };
        let n = dispatch(schedule, 400, 1000, target, live, tx, CancellationToken::new(), Alarms::ready()).await;
        assert_eq!(n, 400);
        let (mut ok, mut stamped) = (0, 0);
        while let Some(shot) = rx.recv().await {
            ok += u32::from(shot.outcome == Outcome::Ok);
            stamped += u32::from(shot.kernel_stamped);
            // Never before it was sent.
            assert!(shot.done >= shot.sent.expect("sent"));
        }
        assert_eq!(ok, 400);
        // The first packets after a machine's first stamping socket may
        // carry none (`stamped.rs`).
        assert!(stamped >= 390, "{stamped} of 400 answers stamped by the kernel");
        let set = client.deferred().expect("a set");
        let (at_send, by_watcher) = set.heard();
        assert!(
            at_send >= 4 * by_watcher && at_send >= 300,
            "{at_send} events read at sends, {by_watcher} by the watcher"
        );
    }

    /// Requests the closed-loop test's server has read, answers its
    /// generator has checked, and answers the server sent without the one
    /// before checked.
    static RECEIVED: AtomicU64 = AtomicU64::new(0);
    static CHECKED: AtomicU64 = AtomicU64::new(0);
    static UNCHECKED_BEFORE: AtomicU64 = AtomicU64::new(0);

    /// Waits at most 1 s for `ready`; whether it came.
    fn within_a_second(ready: impl Fn() -> bool) -> bool {
        let until = Instant::now() + Duration::from_secs(1);
        while !ready() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        ready()
    }

    /// The closed-loop test's check: passes an answer only once the server
    /// has read the next request.
    fn next_request_read(call: &payload::CallRequest, _: u32, _: &[u8]) -> bool {
        let n: u64 = call.request_id.parse().expect("a number");
        let read = within_a_second(|| RECEIVED.load(Relaxed) >= n + 2);
        CHECKED.store(n + 1, Relaxed);
        read
    }

    /// A one-connection server on a thread of its own, so that it reads
    /// while the generator's one worker is inside a check: it hands each
    /// request it reads to `on_request`, then answers `body`. Its URL.
    fn answering_server(body: Vec<u8>, mut on_request: impl FnMut(&[u8]) + Send + 'static) -> String {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/call", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (mut tcp, _) = listener.accept().unwrap();
            let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
            let mut buf = vec![0u8; 4096];
            while let Ok(n @ 1..) = tcp.read(&mut buf) {
                on_request(&buf[..n]);
                if tcp.write_all(head.as_bytes()).and_then(|_| tcp.write_all(&body)).is_err() {
                    return;
                }
            }
        });
        url
    }

    /// A one-connection closed loop against `url`, with `check` as its
    /// answer check, stopped once `enough` holds of the shots so far: the
    /// shots and the count it sent.
    async fn closed_loop_until(
        url: String,
        check: fn(&payload::CallRequest, u32, &[u8]) -> bool,
        enough: impl Fn(&[Shot]) -> bool,
    ) -> (Vec<Shot>, u64) {
        let mut target = Target::front(url, 1, 1, Duration::from_secs(5), 1).unwrap();
        target.checks.front = check;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let (live, stop) = (Arc::new(Live::default()), CancellationToken::new());
        let until = Instant::now() + Duration::from_secs(20);
        let run = tokio::spawn(closed_loop(1, until, target, live, tx, stop.clone(), 0));
        let mut shots = Vec::new();
        while let Some(shot) = rx.recv().await {
            shots.push(shot);
            if enough(&shots) {
                stop.cancel();
            }
        }
        (shots, run.await.unwrap())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_closed_loop_checks_an_answer_while_its_next_request_is_out() {
        // The server answers request k once answer k - 1 is checked
        // (waiting at most 1 s).
        let url = answering_server(b"{}".to_vec(), |request| {
            assert!(request.starts_with(b"POST /v1/call HTTP/1.1"));
            let k = RECEIVED.fetch_add(1, Relaxed);
            if !within_a_second(|| CHECKED.load(Relaxed) >= k) {
                UNCHECKED_BEFORE.fetch_add(1, Relaxed);
            }
        });
        let (shots, sent) = closed_loop_until(url, next_request_read, |shots| shots.len() >= 5).await;
        assert_eq!(shots.len() as u64, sent);
        // Every answer was checked after its next request was read and
        // before that request's answer was sent; the last had none after it.
        assert_eq!(UNCHECKED_BEFORE.load(Relaxed), 0);
        let last = shots.iter().map(|s| s.index).max().unwrap();
        for shot in &shots {
            assert_eq!(shot.outcome == Outcome::Ok, shot.index != last, "request {}: {:?}", shot.index, shot.outcome);
            assert!(shot.done >= shot.sent.expect("sent"));
        }
    }

    static BIG_RECEIVED: AtomicU64 = AtomicU64::new(0);

    /// The large-answer test's check: passes an answer only if the server
    /// reads no next request in the 100 ms it waits (none is out yet).
    fn no_next_request_yet(call: &payload::CallRequest, _: u32, body: &[u8]) -> bool {
        let n: u64 = call.request_id.parse().expect("a number");
        let until = Instant::now() + Duration::from_millis(100);
        while BIG_RECEIVED.load(Relaxed) == n + 1 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        body.len() > DEFER_CHECK_BYTES && BIG_RECEIVED.load(Relaxed) == n + 1
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_closed_loop_checks_a_large_answer_before_its_next_request() {
        let url = answering_server(vec![b' '; DEFER_CHECK_BYTES + 1], |_| {
            BIG_RECEIVED.fetch_add(1, Relaxed);
        });
        let ok = |shots: &[Shot]| shots.iter().filter(|s| s.outcome == Outcome::Ok).count() as u64;
        let (shots, sent) = closed_loop_until(url, no_next_request_yet, |shots| ok(shots) >= 5).await;
        // Each one checked before the next request went out, the last too.
        assert_eq!(ok(&shots), sent);
    }

    #[tokio::test]
    async fn alarms_are_reused_and_made_when_none_is_free() {
        let alarms = Alarms::ready();
        let first = alarms.take().expect("the stored alarm");
        // None left: a second dispatcher at once gets one of its own.
        let second = alarms.take().expect("a new alarm");
        assert!(alarms.0.lock().unwrap().is_empty());
        alarms.put(first);
        alarms.put(second);
        assert_eq!(alarms.0.lock().unwrap().len(), 2);
        // A reused alarm still keeps time.
        let a = alarms.take().unwrap();
        let t = Instant::now();
        a.sleep(Duration::from_millis(2)).await.unwrap();
        assert!(t.elapsed() >= Duration::from_millis(2));
    }
}
