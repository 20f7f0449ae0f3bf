//! The segments of a run, in the plan's order: one unrecorded warm-up per arm
//! before its first round, then the measured rounds, arms alternating. With
//! fresh tiers (the default) every later round of an arm first gets new tier
//! processes and a warm-up of its own, so rounds are independent samples of
//! a process's memory too. Each segment gets a fresh collector; a measured
//! round also gets the tiers' counters read at its start and end.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::arms::{Arm, Stop, wait_until};
use super::interrupt::Interrupt;
use super::progress::Status;
use super::sampling::Sampling;
use crate::config::{Config, TlsFiles};
use crate::load::{Alarms, Live, Schedule, Share, Target, closed_loop, dispatch};
use crate::measure::record::{CompactRecord, collect};
use crate::measure::tier_stats::{Snapshot, TierStatsReader};
use crate::result::{ScaleEvent, TierName};
use crate::tiers::Topology;

/// Grace for in-flight requests after an interrupt or a tier failure.
pub(super) const STOP_GRACE: Duration = Duration::from_secs(5);
/// Pause between the drain of one arm and the first request of the next.
pub(super) const ARM_SWITCH_PAUSE: Duration = Duration::from_millis(100);

/// A measured round whose requests may still be finishing.
pub(super) struct PendingRound {
    pub arm: usize,
    /// 0-based.
    pub round: u32,
    pub start: Snapshot,
    pub end: Snapshot,
    /// The tier processes the round measured.
    pub pids: BTreeMap<TierName, u32>,
    /// The replicas added or removed during the round (`--scale-at`).
    pub scaling: Vec<ScaleEvent>,
    pub complete: bool,
    /// The round's load segment, which its calls' numbers name.
    pub segment: u64,
    /// Nothing was in flight on the round's tiers when its start was read: a
    /// warm-up before it had drained, or nothing ran before it.
    pub quiet_start: bool,
    /// The tiers' counters read once every call of the round had ended (the
    /// last read before its tiers stopped, or when the run left the arm):
    /// the round's own calls' bytes.
    pub settled: Option<Snapshot>,
    /// `settled` was read for this round alone: no other measured round ran
    /// on the same tiers between its start and that read.
    pub settled_alone: bool,
    pub scheduled: JoinHandle<u64>,
    pub collector: JoinHandle<CompactRecord>,
    pub finish: CancellationToken,
}

impl PendingRound {
    /// The round's record and how many requests were due in it. Requests
    /// still unanswered are left out; everything recorded so far is kept.
    /// Once `cut`, closed-loop workers still waiting for an answer are not
    /// waited for: the requests recorded are the count.
    pub async fn settle(mut self, cut: &CancellationToken) -> (CompactRecord, u64) {
        self.finish.cancel();
        let record = self.collector.await.unwrap_or_default();
        let due = tokio::select! {
            biased;
            n = &mut self.scheduled => Some(n.unwrap_or(0)),
            _ = cut.cancelled() => {
                self.scheduled.abort();
                None
            }
        };
        let scheduled = counted_due(due, &record, cut.is_cancelled());
        (record, scheduled)
    }
}

/// The requests a round's rates count as due, of `due` the schedule issued
/// (`None`: its count was not waited for). What was left out was due but is
/// not counted as sent. Once the run is cut, a request whose answer had not
/// reached the collector when it stopped (a stream still being torn down,
/// say) was in flight at the cut and is left out the same way: the count is
/// then at most the requests reported, sent or dropped.
fn counted_due(due: Option<u64>, record: &CompactRecord, cut: bool) -> u64 {
    let reported = record.sent + record.errors.get("dropped").copied().unwrap_or(0);
    match due {
        Some(n) if !cut => n.saturating_sub(record.left_out),
        Some(n) => n.saturating_sub(record.left_out).min(reported),
        None => reported,
    }
}

/// Runs the segments of every arm against one clock.
pub(super) struct Driver<'a> {
    pub config: &'a Config,
    /// The run's certificate files, when the internal hop uses TLS.
    pub tls: Option<&'a TlsFiles>,
    pub arms: &'a mut [Arm],
    pub reader: &'a TierStatsReader,
    pub status: Arc<Status>,
    pub interrupt: &'a Interrupt,
    pub origin: Instant,
    /// Stops every segment's sending at once.
    pub stop_load: CancellationToken,
    /// Told of every tier process started for a fresh round.
    pub sampling: &'a Sampling,
    /// The open-loop dispatchers' high-resolution alarms.
    pub alarms: Alarms,
}

/// A measured round's end read, kept for a round that starts at its end.
struct Boundary {
    arm: usize,
    /// The first due time after the round.
    due: Instant,
    snapshot: Snapshot,
}

/// One segment's load, started.
struct Started {
    t0: Instant,
    end_at: Instant,
    scheduled: JoinHandle<u64>,
    collector: JoinHandle<CompactRecord>,
    finish: CancellationToken,
}

impl Driver<'_> {
    /// Runs `order` ((arm, 0-based round) pairs) until its end or a stop;
    /// returns the measured rounds and why it stopped early, if it did.
    pub async fn run(mut self, order: &[(usize, u32)]) -> (Vec<PendingRound>, Option<Stop>) {
        let mut pending = Vec::new();
        let mut warmed = vec![false; self.arms.len()];
        let mut cursor = self.origin;
        let mut previous_arm: Option<usize> = None;
        // Every segment's number, from 1: a team's own contract's calls
        // carry it (and closed-loop request ids start at it, a fresh range
        // per segment).
        let mut segment = 0u64;
        // The last measured round's end, which is the next round's start when
        // that round follows it directly on the same tiers.
        let mut boundary: Option<Boundary> = None;
        for &(a, round) in order {
            let switched = previous_arm.is_some_and(|p| p != a);
            // A round after the arm's first gets new processes (fresh tiers).
            let fresh = warmed[a] && self.config.load.fresh_tiers;
            if switched || fresh {
                // Let the previous segment's tail finish, so two arms never
                // overlap and no process stops with requests in flight.
                drain(&self.status.live, self.config.load.timeout + STOP_GRACE, self.interrupt).await;
                // The arm just left is read now, idle, for its rounds' own
                // calls: later its idle tiers would add what they spent
                // waiting through this arm's turn.
                if let Some(p) = previous_arm.filter(|_| switched) {
                    let topology = &self.arms[p].topology;
                    settle_before_stop(&mut pending, p, topology, self.reader, self.interrupt).await;
                }
                // The arm just left gets new tiers and a new target next time:
                // its idle front connections would only hold descriptors (one
                // per request it had in flight) through this arm's turn.
                if let Some(p) = previous_arm
                    && switched
                    && self.config.load.fresh_tiers
                {
                    self.arms[p].target.release_idle();
                }
                if fresh {
                    let topology = &self.arms[a].topology;
                    settle_before_stop(&mut pending, a, topology, self.reader, self.interrupt).await;
                    if let Err(stop) = self.restart(a).await {
                        return (pending, Some(stop));
                    }
                }
                cursor = Instant::now() + ARM_SWITCH_PAUSE;
            }
            previous_arm = Some(a);
            // (measured round, length, ramp): only a cold warm-up ramps up.
            let mut segments = Vec::new();
            if (!warmed[a] || fresh) && !self.config.load.warmup.is_zero() {
                segments.push((None, self.config.load.warmup, self.config.load.warmup_ramp));
            } else if switched && !self.config.rewarm().is_zero() {
                // Back after the other arm: warm again so the round measures a
                // steady state (its connections are open: no ramp).
                segments.push((None, self.config.rewarm(), Duration::ZERO));
            }
            warmed[a] = true;
            segments.push((Some(round), self.config.load.duration, Duration::ZERO));
            // Only a round whose per-request figures can be bounded to its
            // own calls waits for its warm-up to drain (streams are per item,
            // over the window, and keep their load continuous).
            let after_warmup = segments.len() > 1 && crate::judge::own_calls_apply(&self.arms[a].config);
            for (measured, length, ramp) in segments {
                segment += 1;
                if measured.is_some() && after_warmup {
                    cursor = self.drain_warmup(cursor).await;
                }
                let load = self.start_load(a, measured, cursor, length, ramp, segment);
                cursor = load.end_at;
                let (round, stopped) = self.segment(a, (measured, segment), load, &mut boundary).await;
                pending.extend(round);
                if stopped.is_some() {
                    return (pending, stopped);
                }
            }
        }
        (pending, None)
    }

    /// Waits until the warm-up's calls have all ended and returns when the
    /// round after it may start: its start read then holds none of theirs,
    /// and every byte and CPU second between it and the read after the
    /// round's own last call is the round's.
    async fn drain_warmup(&self, cursor: Instant) -> Instant {
        drain(&self.status.live, self.config.load.timeout + STOP_GRACE, self.interrupt).await;
        cursor.max(Instant::now() + ARM_SWITCH_PAUSE)
    }

    /// Replaces arm `a`'s tiers with freshly started ones and has the
    /// sampler follow them. The old ones stop first, so fixed ports
    /// (`--caller-port`) are free again and nothing of theirs runs beside the
    /// new round; if the new ones fail to start, the arm is left without tiers
    /// and the run stops.
    async fn restart(&mut self, a: usize) -> Result<(), Stop> {
        if self.interrupt.is_stopped() {
            return Err(Stop::Interrupted);
        }
        let arm = &mut self.arms[a];
        let title = arm.config.transport.title();
        let failed = |e: String| Stop::TierDied(format!("starting fresh tiers of the {title} arm failed: {e}"));
        std::mem::replace(&mut arm.topology, Topology::empty()).stop(self.interrupt.cut_token()).await;
        let topology = Topology::start(&arm.config, self.tls).await.map_err(|e| failed(e.to_string()))?;
        // Kept on the arm even if its target cannot be made: the run stops it at the end.
        arm.topology = topology;
        arm.target = Target::for_arm(&arm.config, &arm.topology.target_url, self.tls, arm.contract.clone())
            .map_err(|e| failed(e.to_string()))?;
        self.sampling.rewatch(super::arms::watched_of(a, &arm.topology));
        self.sampling.rewatch_remote(a, super::remote::watched_of(a, &arm.topology));
        Ok(())
    }

    /// Starts the load of one segment (its collector, then its dispatcher or
    /// workers), due from `t0` for `length`, the open loop's rate ramped up
    /// over its first `ramp`.
    fn start_load(
        &self,
        a: usize,
        measured: Option<u32>,
        t0: Instant,
        length: Duration,
        ramp: Duration,
        segment: u64,
    ) -> Started {
        let cfg = self.config;
        let title = self.arms[a].config.transport.title();
        self.status.set_phase(match measured {
            None => format!("{title} warm-up"),
            Some(r) => format!("{title} round {}/{}", r + 1, cfg.load.rounds),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let finish = CancellationToken::new();
        // A round's record is kept compact until the run ends: memory flat in rounds.
        // The live p99 only for a display that shows it (not with --quiet).
        let live_p99 = (!cfg.output.quiet).then(|| self.status.p99_us.clone());
        let records = collect(rx, live_p99, finish.clone(), self.interrupt.cut_at());
        let collector = tokio::spawn(async move { records.await.compact() });
        let (live, stop, mut target) =
            (self.status.live.clone(), self.stop_load.child_token(), self.arms[a].target.clone());
        target.segment = segment;
        let (end_at, scheduled) = if cfg.load.closed_loop {
            let until = t0 + length;
            let (connections, first) = (cfg.load.connections, segment << contract::SEGMENT_SHIFT);
            let task = tokio::spawn(async move {
                tokio::time::sleep_until(t0.into()).await;
                closed_loop(connections, until, target, live, tx, stop, first).await
            });
            (until, task)
        } else {
            let share = cfg
                .generators
                .segment
                .map_or_else(Share::default, |s| Share { index: u64::from(s.index), count: u64::from(s.count) });
            let precision = cfg.load.send_precision;
            let schedule = Schedule { t0, qps: cfg.load.qps, ramp: ramp.min(length), share, precision };
            let n = schedule.requests_in(length);
            let max_in_flight = cfg.load.max_in_flight;
            let alarms = self.alarms.clone();
            let task =
                tokio::spawn(async move { dispatch(schedule, n, max_in_flight, target, live, tx, stop, alarms).await });
            (schedule.due(n), task)
        };
        Started { t0, end_at, scheduled, collector, finish }
    }

    /// Waits out one started segment, reading the tiers' counters at a
    /// measured round's boundaries. A warm-up's records are dropped.
    async fn segment(
        &mut self,
        a: usize,
        (measured, segment): (Option<u32>, u64),
        load: Started,
        boundary: &mut Option<Boundary>,
    ) -> (Option<PendingRound>, Option<Stop>) {
        // The counters are read in the quiet between two due times, not at
        // one: read at the round's first due time, they raced its first
        // request, and on a busy machine that request's bytes were counted
        // before the snapshot and its start after (a 50-request round's
        // front-hop bytes per request read 2% low).
        let lead = boundary_lead(self.config);
        let ahead = |due: Instant| due.checked_sub(lead).unwrap_or(due);
        let mut stopped = wait_until(ahead(load.t0), self.arms, self.interrupt, self.origin).await.err();
        // Only measured rounds need the tiers' counters at their boundaries.
        // A round that starts where the last one ended, on the same tiers,
        // starts at that round's end read: the windows then meet exactly (a
        // second read, after the first had taken longer than the lead, raced
        // the round's first request again).
        let carried = boundary.take().filter(|b| b.arm == a && b.due == load.t0).map(|b| b.snapshot);
        let carried_from_round = carried.is_some();
        let start = match (measured, carried) {
            (Some(_), Some(end_of_last)) => Some(end_of_last),
            (Some(_), None) => Some(self.reader.snapshot(&self.arms[a].topology).await),
            (None, _) => None,
        };
        let mut scaling = Vec::new();
        if stopped.is_none() {
            stopped = match measured {
                Some(_) if !self.arms[a].config.replicas.scale_at.is_empty() => {
                    let (events, waited) = self.wait_scaling(a, load.t0, ahead(load.end_at)).await;
                    scaling = events;
                    waited.err()
                }
                _ => wait_until(ahead(load.end_at), self.arms, self.interrupt, self.origin).await.err(),
            };
        }
        if stopped.is_some() {
            self.stop_load.cancel();
        }
        let quiet_start = !carried_from_round;
        let (Some(round), Some(start)) = (measured, start) else {
            // Warm-up records are not kept; the collector ends with its senders.
            load.finish.cancel();
            drop(load.collector);
            // Its last calls are sent before a drain counts what is in flight.
            let mut scheduled = load.scheduled;
            if stopped.is_none() {
                tokio::select! {
                    _ = &mut scheduled => {}
                    _ = self.interrupt.stopped() => {}
                }
            }
            return (None, stopped);
        };
        let end = self.reader.snapshot_until(&self.arms[a].topology, self.interrupt.cut_token()).await;
        *boundary = Some(Boundary { arm: a, due: load.end_at, snapshot: end.clone() });
        let pending = PendingRound {
            arm: a,
            round,
            start,
            end,
            // The downstream's first replica stands for it; every replica's
            // pid is in the round's replica figures.
            pids: round_pids(&self.arms[a].topology),
            scaling,
            complete: stopped.is_none(),
            segment,
            quiet_start,
            settled: None,
            settled_alone: false,
            scheduled: load.scheduled,
            collector: load.collector,
            finish: load.finish,
        };
        (Some(pending), stopped)
    }
}

/// Hands `last`, the last read of arm `a`'s tiers before they stop, made
/// once every call sent to them had ended, to the rounds they measured
/// (those not settled by an earlier set of tiers): their own calls' bytes.
fn settle_calls(pending: &mut [PendingRound], a: usize, last: &Snapshot) {
    let alone = pending.iter().filter(|p| p.arm == a && p.settled.is_none()).count() == 1;
    for p in pending.iter_mut().filter(|p| p.arm == a && p.settled.is_none()) {
        p.settled = Some(last.clone());
        p.settled_alone = alone;
    }
}

/// Once every call has ended (or been given up on), reads arm `a`'s tiers
/// one last time before they stop, for its rounds not settled yet: that
/// read holds those rounds' own calls' bytes.
pub(super) async fn settle_before_stop(
    pending: &mut [PendingRound],
    a: usize,
    topology: &Topology,
    reader: &TierStatsReader,
    interrupt: &Interrupt,
) {
    if pending.iter().any(|p| p.arm == a && p.settled.is_none()) {
        let last = reader.snapshot_until(topology, interrupt.cut_token()).await;
        settle_calls(pending, a, &last);
    }
}

/// The most a segment's boundary is read ahead of its due time.
const MAX_BOUNDARY_LEAD: Duration = Duration::from_millis(50);

/// How long before a segment's first due time (and before the first due time
/// after it) the tiers' counters are read: half an interval of the open
/// loop's rate, at most [`MAX_BOUNDARY_LEAD`], so the read falls in the gap
/// between two requests (at its middle, up to 10 req/s). A closed loop has no
/// gap to aim for.
fn boundary_lead(config: &Config) -> Duration {
    if config.load.closed_loop || config.load.qps <= 0.0 {
        return Duration::ZERO;
    }
    Duration::from_secs_f64(0.5 / config.load.qps).min(MAX_BOUNDARY_LEAD)
}

/// Waits until nothing is in flight, at most `limit`; once the run is
/// interrupted at most [`STOP_GRACE`] more, and not at all once it is cut.
pub(super) async fn drain(live: &Live, limit: Duration, interrupt: &Interrupt) {
    let mut deadline = Instant::now() + limit;
    while live.in_flight.load(Relaxed) > 0 && Instant::now() < deadline && !interrupt.is_cut() {
        if interrupt.is_stopped() {
            deadline = deadline.min(Instant::now() + STOP_GRACE);
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            _ = interrupt.cut_token().cancelled() => {}
        }
    }
}

/// The pid of each tier a round measured: the harness's child processes,
/// and the containers it started (their host pids); the downstream's first
/// replica stands for it.
fn round_pids(topology: &crate::tiers::Topology) -> BTreeMap<TierName, u32> {
    let mut pids = BTreeMap::new();
    for t in topology.tiers() {
        pids.entry(t.name).or_insert(t.pid());
    }
    for r in topology.remote() {
        if let Some(pid) = r.host_pid {
            pids.entry(r.name).or_insert(pid);
        }
    }
    pids
}

#[cfg(test)]
mod tests {
    use super::*;
    use caller::Transport;

    #[test]
    fn boundaries_are_read_mid_gap_and_closed_loops_at_their_ends() {
        let mut c = crate::testing::config(Transport::Grpc);
        c.load.qps = 50.0;
        assert_eq!(boundary_lead(&c), Duration::from_millis(10));
        c.load.qps = 4.0;
        assert_eq!(boundary_lead(&c), MAX_BOUNDARY_LEAD);
        c.load.closed_loop = true;
        assert_eq!(boundary_lead(&c), Duration::ZERO);
    }

    #[test]
    fn after_a_cut_a_request_never_reported_is_not_counted_as_due() {
        // 12 due: 2 left out after the cut, 1 dropped, 6 reported sent, and
        // 3 streams whose answers had not come in when the collector stopped.
        let mut r = CompactRecord::default();
        (r.sent, r.left_out) = (6, 2);
        r.errors.insert("dropped".into(), 1);
        assert_eq!(counted_due(Some(12), &r, true), 7);
        // Without a cut, an answer still missing is a request that did not end.
        assert_eq!(counted_due(Some(12), &r, false), 10);
        // The schedule's count not waited for: what was reported.
        assert_eq!(counted_due(None, &r, true), 7);
        // Nothing lost: the schedule's count less what was left out.
        assert_eq!(counted_due(Some(9), &r, true), 7);
    }
}
