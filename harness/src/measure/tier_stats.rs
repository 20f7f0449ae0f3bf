//! The tiers' own counters, read from their admin listeners (`/stats`) at the
//! boundaries of every measured round: CPU seconds, wire and message bytes per
//! listener, connections; and the `cpu.stat` of every tier with a CPU limit
//! (`super::cgroup`). The differences between two reads are what a round
//! used ([`Deltas`]); a read that failed leaves its figures unmeasured.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use telemetry::{CallTally, CountersSnapshot, ProcessSnapshot, ProcessStats, StatsSnapshot};

use super::cgroup::CpuStat;
use super::steal::CpuTicks;
use crate::result::{CpuThrottling, TierName};
use crate::tiers::{Tier, Topology};

/// The counters and process figures of one arm's tiers at one instant.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub at: Instant,
    /// The downstream's counters: with replicas, all of them summed (unread
    /// if any could not be read).
    pub downstream: Option<StatsSnapshot>,
    /// Each replica's own by index (`downstream#0` first), those removed
    /// during the round by their last read; empty for one replica reached
    /// directly.
    pub replicas: BTreeMap<u32, Option<StatsSnapshot>>,
    pub caller: Option<StatsSnapshot>,
    pub harness: ProcessSnapshot,
    /// Each CPU-limited tier's limit (cores) and `cpu.stat`; a downstream
    /// of several replicas, their limits and counters summed.
    pub cpu_stat: BTreeMap<TierName, (f64, CpuStat)>,
    /// Each CPU-limited replica's own, by index.
    pub replica_cpu_stat: BTreeMap<u32, (f64, CpuStat)>,
    /// The machine's CPU ticks (`/proc/stat`).
    pub ticks: Option<CpuTicks>,
    /// The internal hop as the pass-through relay between two foreign
    /// tiers counted it (request bytes in, response bytes out).
    pub relay: Option<CountersSnapshot>,
}

/// The largest `/stats` body read: a tier's is a few kilobytes; a body
/// declared or sent beyond this is refused, not held in memory.
pub const MAX_STATS_BYTES: usize = 1 << 20;

/// A response's body, at most `limit` bytes, or why it was refused.
async fn bounded_body(mut resp: reqwest::Response, limit: usize) -> Result<Vec<u8>, String> {
    if let Some(declared) = resp.content_length().filter(|n| *n > limit as u64) {
        return Err(format!("the body declares {declared} bytes, over the {limit} read"));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > limit {
            return Err(format!("the body runs past the {limit} bytes read"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Reads the tiers' `/stats` and the harness's own process figures.
pub struct TierStatsReader {
    http: reqwest::Client,
    harness: ProcessStats,
}

impl TierStatsReader {
    pub fn new() -> reqwest::Result<Self> {
        Ok(TierStatsReader {
            // A fresh connection per read: an idle keep-alive connection may
            // have been closed by the tier's header-read timeout between two
            // snapshots.
            http: reqwest::Client::builder()
                .no_proxy()
                .pool_max_idle_per_host(0)
                .timeout(Duration::from_secs(5))
                // An address with no host behind it (a container that died)
                // would hold each read for the ARP timeout, the samples with it.
                .connect_timeout(Duration::from_secs(1))
                .tls_backend_preconfigured(caller::hop::plaintext_only())
                .build()?,
            harness: ProcessStats::current(),
        })
    }

    /// A tier's `/stats`, tried twice: a snapshot that cannot be read leaves
    /// its figures unmeasured for the whole round.
    pub async fn stats(&self, tier: Option<&Tier>) -> Option<StatsSnapshot> {
        self.stats_at(Some(&tier?.admin_url())).await
    }

    /// The `/stats` of the admin endpoint at `admin_url` (`http://host:port`).
    pub async fn stats_at(&self, admin_url: Option<&str>) -> Option<StatsSnapshot> {
        let url = format!("{}/stats", admin_url?);
        for _ in 0..2 {
            if let Ok(resp) = self.http.get(&url).send().await {
                match bounded_body(resp, MAX_STATS_BYTES).await {
                    Ok(body) => {
                        if let Ok(stats) = serde_json::from_slice(&body) {
                            return Some(stats);
                        }
                    }
                    Err(why) => {
                        tracing::warn!("{url}: {why}: its figures are not measured");
                        return None;
                    }
                }
            }
        }
        None
    }

    /// [`TierStatsReader::snapshot`], or once `cut` a snapshot whose tier
    /// figures are unmeasured (a stopped tier would hold the read for seconds).
    pub async fn snapshot_until(&self, topology: &Topology, cut: &tokio_util::sync::CancellationToken) -> Snapshot {
        let (harness, at) = self.own();
        tokio::select! {
            snapshot = self.tiers_at(topology, harness.clone(), at) => snapshot,
            _ = cut.cancelled() => Snapshot {
                at,
                downstream: None,
                replicas: BTreeMap::new(),
                caller: None,
                harness,
                cpu_stat: BTreeMap::new(),
                replica_cpu_stat: BTreeMap::new(),
                ticks: CpuTicks::read(),
                relay: None,
            },
        }
    }

    /// The harness's own figures, and the instant that is the boundary: the
    /// CPU clock read right before it. Read before the tiers' `/stats`, so
    /// the harness's CPU seconds cover the window its wall time and samples
    /// cover. Read after them (as it was), a round's CPU seconds left out
    /// what the harness used while the round's first reads were under way
    /// and took in the quieter moments after its last: 0.2–2% of a 4 s
    /// round's on a busy machine, more after a slow read.
    fn own(&self) -> (ProcessSnapshot, Instant) {
        let harness = self.harness.snapshot();
        (harness, Instant::now())
    }

    pub async fn snapshot(&self, topology: &Topology) -> Snapshot {
        let (harness, at) = self.own();
        self.tiers_at(topology, harness, at).await
    }

    /// The tiers' figures, read now, beside the harness's own read at `at`.
    async fn tiers_at(&self, topology: &Topology, harness: ProcessSnapshot, at: Instant) -> Snapshot {
        let (d, c) = (topology.admin_url(TierName::Downstream), topology.admin_url(TierName::Caller));
        let replica_urls = topology.replica_admin_urls();
        let relay_url = topology.relay_stats_url();
        let (mut downstream, mut caller, live, relay) = tokio::join!(
            self.stats_at(d.as_deref()),
            self.stats_at(c.as_deref()),
            futures::future::join_all(replica_urls.iter().map(|(_, u)| self.stats_at(Some(u)))),
            self.stats_at(relay_url.as_deref()),
        );
        let relay = relay.and_then(|mut r| r.listeners.remove("relay"));
        outside(topology, (&mut downstream, &mut caller), relay.as_ref());
        let mut replicas: BTreeMap<u32, Option<StatsSnapshot>> =
            topology.retired.iter().map(|(i, s)| (*i, Some(s.clone()))).collect();
        replicas.extend(replica_urls.iter().map(|(i, _)| *i).zip(live));
        if !replicas.is_empty() {
            downstream = replicas.values().cloned().collect::<Option<Vec<_>>>().map(|all| summed(&all));
        }
        let (mut cpu_stat, mut replica_cpu_stat) = (BTreeMap::new(), BTreeMap::new());
        for (tier, replica, path, cpus) in topology.cpu_limited() {
            let Some(read) = CpuStat::read(path) else { continue };
            let sum: &mut (f64, CpuStat) = cpu_stat.entry(tier).or_insert((0.0, CpuStat::default()));
            // Limits are given to the thousandth of a core: the sum in the
            // same unit (0.1 three times is 0.3, not 0.30000000000000004).
            *sum = (((sum.0 + cpus) * 1000.0).round() / 1000.0, sum.1 + read);
            if let Some(i) = replica {
                replica_cpu_stat.insert(i, (cpus, read));
            }
        }
        let ticks = CpuTicks::read();
        Snapshot { at, downstream, replicas, caller, harness, cpu_stat, replica_cpu_stat, ticks, relay }
    }
}

/// Foreign tiers that serve no `/stats`, measured from outside: each one's
/// process tree (`super::tree`) for CPU and memory, and the internal hop's
/// bytes from our side of it: the relay's count between two foreign tiers,
/// else our caller's client (its bytes out are the downstream's bytes in).
fn outside(
    topology: &Topology,
    (downstream, caller): (&mut Option<StatsSnapshot>, &mut Option<StatsSnapshot>),
    relay: Option<&CountersSnapshot>,
) {
    if let Some(pid) = topology.outside(TierName::Caller) {
        *caller = super::tree::outside_stats("caller", pid);
    }
    let Some(pid) = topology.outside(TierName::Downstream) else { return };
    *downstream = super::tree::outside_stats("downstream", pid);
    let hop = match relay {
        Some(r) => Some(r.clone()),
        None => caller.as_ref().and_then(|c| c.clients.values().next()).map(as_seen_by_the_server),
    };
    if let (Some(d), Some(hop)) = (downstream.as_mut(), hop) {
        d.listeners.insert(topology.internal_listener.to_owned(), hop);
    }
}

/// A client's counters as its server would have counted them: the wire
/// bytes the client sent are what the server read.
fn as_seen_by_the_server(c: &CountersSnapshot) -> CountersSnapshot {
    CountersSnapshot {
        bytes_in: c.bytes_out,
        bytes_out: c.bytes_in,
        // Message bytes are counted as (request, response) on both ends.
        ..c.clone()
    }
}

/// Several processes' `/stats` as one tier's: CPU seconds, RSS and every
/// listener's counters summed; the first one's name and settings.
fn summed(all: &[StatsSnapshot]) -> StatsSnapshot {
    let mut sum = all[0].clone();
    let plus = |a: Option<f64>, b: Option<f64>| Some(a? + b?);
    for s in &all[1..] {
        sum.process.cpu_seconds = plus(sum.process.cpu_seconds, s.process.cpu_seconds);
        sum.process.rss_bytes = sum.process.rss_bytes.zip(s.process.rss_bytes).map(|(a, b)| a + b);
        for (name, counters) in &s.listeners {
            let entry = sum.listeners.entry(name.clone()).or_default();
            *entry = &*entry + counters;
        }
    }
    sum
}

/// `s` as it was when its process started: no CPU, every counter at zero.
fn zeroed(s: &StatsSnapshot) -> StatsSnapshot {
    let mut z = s.clone();
    z.process.cpu_seconds = Some(0.0);
    for c in z.listeners.values_mut() {
        *c = CountersSnapshot { tls: c.tls.as_ref().map(|_| Default::default()), ..CountersSnapshot::default() };
    }
    z
}

/// What one replica did between two snapshots.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplicaDelta {
    /// Its index: `downstream#0`, …
    pub index: u32,
    /// Its pid, as it reported it.
    pub pid: Option<u32>,
    pub cpu_seconds: Option<f64>,
    /// Its RSS at the end read.
    pub rss_bytes: Option<u64>,
    /// Its listener for the transport.
    pub internal: Option<CountersSnapshot>,
    /// Its CPU limit at work, for a replica in a CPU-limited container.
    pub throttling: Option<CpuThrottling>,
}

/// What the counters moved by between two snapshots. `None` wherever either
/// read is missing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Deltas {
    pub caller_cpu_seconds: Option<f64>,
    pub downstream_cpu_seconds: Option<f64>,
    pub harness_cpu_seconds: Option<f64>,
    /// The caller's front listener.
    pub front: Option<CountersSnapshot>,
    /// The downstream's listener for the transport.
    pub internal: Option<CountersSnapshot>,
    /// Each CPU-limited tier's quota at work, where both reads were made.
    pub throttling: BTreeMap<TierName, CpuThrottling>,
    /// Each of the downstream's replicas, `downstream#0` first; empty for
    /// one replica reached directly.
    pub replicas: Vec<ReplicaDelta>,
    /// The hypervisor's steal, % of the machine's CPU ticks between the reads.
    pub steal_percent: Option<f64>,
    /// What the round's own calls carried on the front hop and the internal
    /// hop, whenever each ended (read after the last of them); `None` where
    /// the calls do not name their segment (the built-in call) or no read
    /// after them was made.
    pub front_calls: Option<CallTally>,
    pub internal_calls: Option<CallTally>,
    /// The internal hop as the pass-through relay counted it, between two
    /// foreign tiers.
    pub relay: Option<CountersSnapshot>,
    /// The round's own calls, every one of them and nothing else: the
    /// counters from the round's start, read with nothing in flight, to the
    /// read once its last call had ended, no other round having run on the
    /// tiers between. `None` where the round cannot be so bounded (it began
    /// where another round ended, on the same tiers, or a later one ran
    /// before the read).
    pub own: Option<Box<Deltas>>,
}

impl Deltas {
    /// These deltas with the own calls of load segment `segment`, from
    /// `settled`, a read made once they had all ended: their message bytes
    /// by segment, and, where `bounded` (the round started with nothing in
    /// flight and nothing else ran before `settled`), everything between
    /// `start` and `settled` ([`Deltas::own`]).
    pub fn with_own_calls(
        self,
        start: &Snapshot,
        settled: Option<&Snapshot>,
        (segment, bounded): (u64, bool),
        internal_listener: &str,
    ) -> Deltas {
        let of = |stats: Option<&StatsSnapshot>, name: &str| {
            stats?.listeners.get(name)?.segments.get(&segment).copied().filter(|t| t.calls > 0)
        };
        let Some(s) = settled else { return self };
        Deltas {
            front_calls: of(s.caller.as_ref(), "front"),
            internal_calls: of(s.downstream.as_ref(), internal_listener),
            own: bounded.then(|| Box::new(Deltas::between(start, s, internal_listener))),
            ..self
        }
    }

    /// `end - start`, the internal hop read from the downstream's
    /// `internal_listener` (`grpc` or `rest`).
    pub fn between(start: &Snapshot, end: &Snapshot, internal_listener: &str) -> Deltas {
        let cpu = |a: Option<&StatsSnapshot>, b: Option<&StatsSnapshot>| {
            Some(b?.process.cpu_seconds? - a?.process.cpu_seconds?)
        };
        let listener = |a: Option<&StatsSnapshot>, b: Option<&StatsSnapshot>, name: &str| {
            Some(b?.listeners.get(name)?.since(a?.listeners.get(name)?))
        };
        let (s, e) = (start, end);
        Deltas {
            caller_cpu_seconds: cpu(s.caller.as_ref(), e.caller.as_ref()),
            downstream_cpu_seconds: cpu(s.downstream.as_ref(), e.downstream.as_ref()),
            harness_cpu_seconds: e.harness.cpu_seconds.zip(s.harness.cpu_seconds).map(|(b, a)| b - a),
            front: listener(s.caller.as_ref(), e.caller.as_ref(), "front"),
            internal: listener(s.downstream.as_ref(), e.downstream.as_ref(), internal_listener),
            throttling: e
                .cpu_stat
                .iter()
                .filter_map(|(tier, (cpus, b))| Some((*tier, b.since(&s.cpu_stat.get(tier)?.1, *cpus))))
                .collect(),
            steal_percent: e.ticks.zip(s.ticks).and_then(|(b, a)| b.steal_percent_since(&a)),
            replicas: e
                .replicas
                .iter()
                .map(|(i, b)| {
                    // A replica started during the round began it at zero.
                    let zero = b.as_ref().map(zeroed);
                    let a = match s.replicas.get(i) {
                        Some(read) => read.as_ref(),
                        None => zero.as_ref(),
                    };
                    ReplicaDelta {
                        index: *i,
                        pid: b.as_ref().map(|b| b.process.pid),
                        cpu_seconds: cpu(a, b.as_ref()),
                        rss_bytes: b.as_ref().and_then(|b| b.process.rss_bytes),
                        internal: listener(a, b.as_ref(), internal_listener),
                        throttling: e
                            .replica_cpu_stat
                            .get(i)
                            .zip(s.replica_cpu_stat.get(i))
                            .map(|((cpus, b), (_, a))| b.since(a, *cpus)),
                    }
                })
                .collect(),
            front_calls: None,
            internal_calls: None,
            relay: e.relay.as_ref().zip(s.relay.as_ref()).map(|(b, a)| b.since(a)),
            own: None,
        }
    }
}

#[cfg(test)]
mod body_tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// An admin endpoint on loopback answering every request with `body`
    /// (declaring `declared` bytes), for `requests` requests.
    async fn serve(body: Vec<u8>, declared: usize, requests: usize) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            for _ in 0..requests {
                let Ok((mut s, _)) = listener.accept().await else { return };
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let head =
                    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {declared}\r\n\r\n");
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(&body).await;
            }
        });
        url
    }

    #[tokio::test]
    async fn a_stats_body_past_the_bound_is_refused_not_held() {
        let snapshot = telemetry::Registry::new("downstream").snapshot();
        let json = serde_json::to_vec(&snapshot).unwrap();
        let reader = TierStatsReader::new().unwrap();
        // A tier's own answer is read.
        let url = serve(json.clone(), json.len(), 1).await;
        assert_eq!(reader.stats_at(Some(&url)).await.map(|s| s.service), Some("downstream".to_owned()));
        // The same answer padded past the bound (valid JSON all the same) is not.
        let mut padded = json.clone();
        padded.resize(MAX_STATS_BYTES + 1, b' ');
        let url = serve(padded.clone(), padded.len(), 2).await;
        assert!(reader.stats_at(Some(&url)).await.is_none());
        // A body that declares 4 GB is refused before a byte of it is read.
        let url = serve(json.clone(), 4 << 30, 2).await;
        assert!(reader.stats_at(Some(&url)).await.is_none());
    }
}
