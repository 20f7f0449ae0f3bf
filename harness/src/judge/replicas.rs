//! How one arm's calls fell on the downstream's replicas over its rounds:
//! each replica's mean share, calls, CPU and memory, and the imbalance
//! (largest share ÷ fair share) with its 95% t interval over the rounds,
//! in words a finding can use. Pure arithmetic on `run.json`.

use crate::config::Balance;
use crate::judge::inference::{Interval, MIN_ROUNDS, paired_t};
use crate::judge::stats::mean;
use crate::result::{ReplicaRound, RunResult};

/// A largest share at or above this is "every call on one replica".
const ALL_ON_ONE: f64 = 0.995;

/// One replica over an arm's rounds: means of its per-round figures.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaMeans {
    pub index: u32,
    pub share: Option<f64>,
    pub ok: Option<f64>,
    /// Calls it refused for want of capacity (`shed`).
    pub shed: Option<f64>,
    pub cpu_us_per_request: Option<f64>,
    pub rss_mib: Option<f64>,
    pub connections: Option<f64>,
    pub connections_aged: Option<f64>,
    pub in_flight_peak: Option<f64>,
    /// The part of its CPU limit's enforcement periods in which it was
    /// throttled (0 to 1), for a replica in a CPU-limited container.
    pub throttled: Option<f64>,
}

/// An arm's replicas over its rounds.
#[derive(Debug, Clone, PartialEq)]
pub struct ArmReplicas {
    pub mode: Balance,
    pub replicas: usize,
    /// The imbalance's mean over the rounds that measured it.
    pub imbalance: Option<f64>,
    /// Its 95% t interval over those rounds (from [`MIN_ROUNDS`] rounds on).
    pub interval: Option<Interval>,
    pub rounds: usize,
    /// The largest share's mean, for words.
    pub largest_share: Option<f64>,
    pub each: Vec<ReplicaMeans>,
    /// Each `--scale-at` step over the rounds, in step order.
    pub steps: Vec<StepOverRounds>,
}

/// One `--scale-at` step over an arm's rounds.
#[derive(Debug, Clone, PartialEq)]
pub struct StepOverRounds {
    pub change: i32,
    /// Its mean time after the round's start.
    pub at_seconds: f64,
    pub rounds: usize,
    /// Rounds in which a replica it added answered a call, and the mean time to that.
    pub called: usize,
    pub first_call_seconds: Option<f64>,
    /// Rounds in which the replicas it added reached half their fair share, and the mean time to that.
    pub reached: usize,
    pub time_to_share_seconds: Option<f64>,
    /// The shortest time any round watched it (to the round's end).
    pub watched_seconds: f64,
}

/// Each step over the rounds that made it.
fn steps(sets: &[&crate::result::ReplicaSet]) -> Vec<StepOverRounds> {
    let most = sets.iter().map(|s| s.scaling.len()).max().unwrap_or(0);
    (0..most)
        .map(|k| {
            let events: Vec<_> = sets.iter().filter_map(|s| s.scaling.get(k)).collect();
            let firsts: Vec<f64> = events.iter().filter_map(|e| e.first_call_seconds).collect();
            let shares: Vec<f64> = events.iter().filter_map(|e| e.time_to_share_seconds).collect();
            StepOverRounds {
                change: events[0].change,
                at_seconds: mean(events.iter().map(|e| e.at_seconds)).unwrap_or(0.0),
                rounds: events.len(),
                called: firsts.len(),
                first_call_seconds: mean(firsts),
                reached: shares.len(),
                time_to_share_seconds: mean(shares),
                watched_seconds: events.iter().map(|e| e.watched_seconds).fold(f64::INFINITY, f64::min),
            }
        })
        .collect()
}

impl StepOverRounds {
    /// `At 2.0 s, +1 replica: a new replica answered its first call after
    /// 0.8 s and half its fair share after 1.8 s (mean of 3 rounds).`
    pub fn sentence(&self, arm: &str) -> String {
        let n = self.change.unsigned_abs();
        let what = if n == 1 { "replica" } else { "replicas" };
        let head = format!("{arm}: at {:.1} s, {:+} {what}", self.at_seconds, self.change);
        if self.change < 0 {
            return format!("{head} taken out of the balancer (their calls so far still count).");
        }
        let of = |k: usize| {
            if k == self.rounds { format!("in every round ({k})") } else { format!("in {k} of {} rounds", self.rounds) }
        };
        match (self.first_call_seconds, self.time_to_share_seconds) {
            (None, _) => format!(
                "{head}: no call reached the new {what} in the {:.1} s to the round's end, in any of {} round(s).",
                self.watched_seconds, self.rounds
            ),
            (Some(first), None) => format!(
                "{head}: the first call reached the new {what} after {first:.1} s ({}), but not half the fair share \
                 by the round's end.",
                of(self.called)
            ),
            (Some(first), Some(share)) => format!(
                "{head}: the first call reached the new {what} after {first:.1} s ({}), half the fair share after \
                 {share:.1} s ({}); means over those rounds.",
                of(self.called),
                of(self.reached)
            ),
        }
    }
}

/// The replicas of `run`, `None` for one replica reached directly.
pub fn summarize(run: &RunResult) -> Option<ArmReplicas> {
    let sets: Vec<_> = run.rounds.iter().filter_map(|r| r.replicas.as_ref()).collect();
    let replicas = sets.iter().filter_map(|s| s.each.iter().map(|r| r.index as usize + 1).max()).max()?;
    let imbalances: Vec<f64> = sets.iter().filter_map(|s| s.imbalance).collect();
    let interval = (imbalances.len() >= MIN_ROUNDS).then(|| one_sample(&imbalances)).flatten();
    let of = |i: usize, f: fn(&ReplicaRound) -> Option<f64>| {
        mean(sets.iter().filter_map(|s| f(s.each.iter().find(|r| r.index == i as u32)?)))
    };
    let each = (0..replicas)
        .map(|i| ReplicaMeans {
            index: i as u32,
            share: of(i, |r| r.share),
            ok: of(i, |r| Some(r.requests.get("ok").copied().unwrap_or(0) as f64)),
            shed: of(i, |r| Some(r.requests.get("shed").copied().unwrap_or(0) as f64)),
            cpu_us_per_request: of(i, |r| r.cpu_us_per_request),
            rss_mib: of(i, |r| r.rss_bytes.map(|b| b as f64 / (1024.0 * 1024.0))),
            connections: of(i, |r| r.connections.map(|c| c as f64)),
            connections_aged: of(i, |r| r.connections_aged.map(|c| c as f64)),
            in_flight_peak: of(i, |r| r.in_flight_peak.map(|c| c as f64)),
            throttled: of(i, |r| {
                let t = r.throttling.as_ref()?;
                Some(if t.periods == 0 { 0.0 } else { t.throttled_periods as f64 / t.periods as f64 })
            }),
        })
        .collect();
    let largest =
        sets.iter().filter_map(|s| s.each.iter().filter_map(|r| r.share).reduce(f64::max)).collect::<Vec<_>>();
    Some(ArmReplicas {
        mode: run.config.replicas.balance,
        replicas,
        imbalance: mean(imbalances.iter().copied()),
        interval,
        rounds: imbalances.len(),
        largest_share: mean(largest),
        each,
        steps: steps(&sets),
    })
}

/// The 95% t interval of the mean of `x`.
fn one_sample(x: &[f64]) -> Option<Interval> {
    paired_t(&vec![0.0; x.len()], x)
}

impl ArmReplicas {
    /// How the calls reached the replicas, for a sentence: `through an L4
    /// balancer`.
    fn route(&self) -> &'static str {
        match self.mode {
            Balance::L4 => "through an L4 balancer",
            Balance::L7 => "through an L7 balancer",
            Balance::Client => "balanced by the caller",
            Balance::None => "reached directly",
        }
    }

    /// The imbalance and its interval in words.
    fn imbalance_text(&self) -> String {
        let Some(i) = self.imbalance else { return "imbalance not measured".to_owned() };
        match self.interval {
            Some(ci) => format!("imbalance {i:.2}, 95% CI {:.2} to {:.2} over {} rounds", ci.lo, ci.hi, self.rounds),
            None => format!("imbalance {i:.2} over {} round(s); an interval needs at least {MIN_ROUNDS}", self.rounds),
        }
    }

    /// One sentence: `gRPC through an L4 balancer sent 100% of calls to one
    /// of 3 replicas (imbalance 3.00, 95% CI 3.00 to 3.00 over 3 rounds).`
    pub fn sentence(&self, arm: &str) -> String {
        let (n, route) = (self.replicas, self.route());
        let shed: f64 = self.each.iter().filter_map(|r| r.shed).sum();
        let shed_text = if shed > 0.0 {
            format!(" Its replicas shed {shed:.0} calls a round for want of capacity.")
        } else {
            String::new()
        };
        let what = match self.largest_share {
            Some(l) if l >= ALL_ON_ONE && n > 1 => format!("sent {:.0}% of calls to one of {n} replicas", l * 100.0),
            Some(l) => format!(
                "spread calls over {n} replicas, the largest share {:.1}% (fair: {:.1}%)",
                l * 100.0,
                100.0 / n as f64
            ),
            None => format!("called {n} replicas; their shares were not measured"),
        };
        format!("{arm} {route} {what} ({}).{shed_text}", self.imbalance_text())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::result::ReplicaSet;
    use crate::testing;

    fn set(shares: &[f64], shed: u64) -> ReplicaSet {
        let each = shares
            .iter()
            .enumerate()
            .map(|(i, s)| ReplicaRound {
                index: i as u32,
                pid: None,
                requests: BTreeMap::from([("ok".to_owned(), (s * 300.0) as u64), ("shed".to_owned(), shed)]),
                share: Some(*s),
                cpu_seconds: None,
                cpu_us_per_request: None,
                rss_bytes: Some(8 << 20),
                connections: Some(1),
                connections_open: Some(1),
                connections_aged: Some(0),
                in_flight_peak: Some(5),
                throttling: None,
            })
            .collect();
        let largest = shares.iter().copied().reduce(f64::max).unwrap();
        ReplicaSet { imbalance: Some(largest * shares.len() as f64), each, scaling: Vec::new() }
    }

    fn run(balance: Balance, sets: Vec<ReplicaSet>) -> RunResult {
        let mut run = testing::run(caller::Transport::Grpc, 1.0);
        run.config.replicas.balance = balance;
        run.config.replicas.downstream_replicas = 3;
        let first = run.rounds[0].clone();
        run.rounds = sets
            .into_iter()
            .enumerate()
            .map(|(i, s)| crate::result::RoundResult { index: i as u32 + 1, replicas: Some(s), ..first.clone() })
            .collect();
        run
    }

    #[test]
    fn every_call_on_one_replica_is_said_so_with_its_interval() {
        let pinned = run(Balance::L4, vec![set(&[1.0, 0.0, 0.0], 0); 3]);
        let s = summarize(&pinned).unwrap();
        assert_eq!((s.replicas, s.imbalance, s.rounds), (3, Some(3.0), 3));
        assert_eq!(
            s.sentence("gRPC"),
            "gRPC through an L4 balancer sent 100% of calls to one of 3 replicas (imbalance 3.00, 95% CI 3.00 to \
             3.00 over 3 rounds)."
        );
        assert_eq!(s.each[0].in_flight_peak, Some(5.0));
    }

    #[test]
    fn a_step_says_when_the_new_replica_was_first_called_and_took_its_share_or_that_it_never_was() {
        let event = |first: Option<f64>, share: Option<f64>| crate::result::ScaleEvent {
            at_seconds: 10.0,
            change: 1,
            added: vec![2],
            removed: Vec::new(),
            replicas: 3,
            first_call_seconds: first,
            time_to_share_seconds: share,
            watched_seconds: 50.0,
        };
        let with = |events: Vec<crate::result::ScaleEvent>| {
            let sets =
                events.into_iter().map(|e| ReplicaSet { scaling: vec![e], ..set(&[0.5, 0.5, 0.0], 0) }).collect();
            summarize(&run(Balance::L4, sets)).unwrap().steps.remove(0).sentence("gRPC")
        };
        assert_eq!(
            with(vec![event(None, None); 3]),
            "gRPC: at 10.0 s, +1 replica: no call reached the new replica in the 50.0 s to the round's end, in any of \
             3 round(s)."
        );
        let text = with(vec![event(Some(1.0), Some(2.0)), event(Some(2.0), None), event(None, None)]);
        assert!(
            text.contains("after 1.5 s (in 2 of 3 rounds), half the fair share after 2.0 s (in 1 of 3 rounds)"),
            "{text}"
        );
    }

    #[test]
    fn a_spread_is_said_with_the_largest_share_and_shed_calls_are_counted() {
        let spread = run(Balance::L7, vec![set(&[0.34, 0.33, 0.33], 2), set(&[0.36, 0.32, 0.32], 2)]);
        let s = summarize(&spread).unwrap();
        let text = s.sentence("REST");
        assert!(
            text.starts_with("REST through an L7 balancer spread calls over 3 replicas, the largest share 35.0%"),
            "{text}"
        );
        assert!(text.contains("over 2 round(s); an interval needs at least 3"), "{text}");
        assert!(text.contains("shed 6 calls a round"), "{text}");
        // One replica reached directly: nothing to say.
        assert_eq!(summarize(&testing::run(caller::Transport::Grpc, 1.0)), None);
    }
}
