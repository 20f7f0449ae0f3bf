//! Many generators' segments of one run (`--segment I/N`) put back together
//! into one run (`harness merge`): latency histograms added bucket by
//! bucket (exact, not an average of percentiles), request counts and error
//! reasons summed, the tiers' figures taken from the generator that sampled
//! them (the tiers counted every generator's traffic, so their bytes and CPU
//! are already the whole), each generator's own send lag, client floor and
//! validity kept. Pure: the folders are read and written by `app::merge`.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::judge::round::throughput;
use crate::judge::stats::summarize;
use crate::measure::histogram::{decode_histogram, encode_histogram, new_histogram};
use crate::result::{
    ErrorReason, Generator, GeneratorFigures, Latency, LoadSample, Requests, Resources, RoundResult, RunResult,
    RunStatus, StreamRound, TierName,
};

/// One generator's run of one arm, and the folder it came from.
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    pub folder: &'a str,
    pub run: &'a RunResult,
}

/// The configuration keys that may differ between the generators of one
/// run: the share, when it began, whether it sampled the tiers (and so its
/// admin URLs), and where and how it wrote its folder.
const OWN_KEYS: [&str; 8] =
    ["segment", "start_at", "caller_admin", "downstream_admin", "out", "label", "quiet", "json"];

/// Checks that `parts` are every segment of one run, once each; returns
/// the parts in segment order. A refusal names the folder at fault.
pub fn check<'a>(parts: &[Part<'a>]) -> Result<Vec<Part<'a>>, String> {
    let Some(first) = parts.first() else { return Err("no run folder given".into()) };
    let mut by_index: BTreeMap<u32, Part<'a>> = BTreeMap::new();
    let count = segment_of(first)?.count;
    if count == 0 {
        return Err(format!("{} says it is a segment of 0 generators: no run has none", first.folder));
    }
    let reference = comparable(first.run);
    for p in parts {
        let s = segment_of(p)?;
        if s.index >= count {
            return Err(format!(
                "{} says it is segment {} of {}: a run of {} generators has segments 0 to {}",
                p.folder,
                s.index,
                s.count,
                s.count,
                s.count.saturating_sub(1)
            ));
        }
        if p.run.rounds.is_empty() {
            return Err(format!("{} holds no measured round: there is nothing of it to merge", p.folder));
        }
        if s.count != count {
            return Err(format!(
                "{} is segment {} of {}, but {} is one of {count}: they are not one run",
                p.folder, s.index, s.count, first.folder
            ));
        }
        if let Some(key) = first_difference(&reference, &comparable(p.run)) {
            return Err(format!(
                "{} was run with another configuration than {} ({key} differs): they are not one run",
                p.folder, first.folder
            ));
        }
        if let Some(twin) = by_index.insert(s.index, *p) {
            return Err(format!(
                "segment {}/{count} is given twice: {} and {} (begun at {} and {}); remove the folder that is not \
                 of the run to merge, or give each folder of that run by name",
                s.index,
                twin.folder,
                p.folder,
                began(twin.run),
                began(p.run)
            ));
        }
    }
    if let Some(missing) = (0..count).find(|i| !by_index.contains_key(i)) {
        let given: Vec<String> = by_index.keys().map(|i| format!("{i}/{count}")).collect();
        return Err(format!("segment {missing}/{count} is missing (given: {})", given.join(", ")));
    }
    Ok(by_index.into_values().collect())
}

/// When a segment's generator was to begin (`--start-at`), else when its run started.
fn began(run: &RunResult) -> &str {
    run.generators.first().and_then(|g| g.start_at.as_deref()).unwrap_or(&run.started_at)
}

fn segment_of(p: &Part<'_>) -> Result<crate::config::Segment, String> {
    p.run
        .config
        .generators
        .segment
        .ok_or_else(|| format!("{} is not a segment of a run (made without --segment)", p.folder))
}

/// The configuration with the keys a generator may set on its own removed.
fn comparable(run: &RunResult) -> serde_json::Value {
    let mut v = serde_json::to_value(&run.config).unwrap_or_default();
    if let Some(map) = v.as_object_mut() {
        for k in OWN_KEYS {
            map.remove(k);
        }
        if let Some(remote) = map.get_mut("remote").and_then(|r| r.as_object_mut()) {
            for k in OWN_KEYS {
                remote.remove(k);
            }
        }
        if map.get("remote").and_then(|r| r.as_object()).is_some_and(|r| r.is_empty()) {
            map.remove("remote");
        }
    }
    v
}

/// The first top-level key whose value differs.
fn first_difference(a: &serde_json::Value, b: &serde_json::Value) -> Option<String> {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else { return (a != b).then(|| "it".into()) };
    a.keys().chain(b.keys()).find(|k| a.get(*k) != b.get(*k)).map(|k| format!("--{}", k.replace('_', "-")))
}

/// One run from the checked segments of one arm (in segment order).
pub fn merge(parts: &[Part<'_>]) -> RunResult {
    let sampler =
        parts.iter().find(|p| p.run.config.generators.segment.is_some_and(|s| s.sample_tiers)).unwrap_or(&parts[0]);
    let mut run = sampler.run.clone();
    // One run of the whole schedule: a rerun of it is one generator at the
    // full rate, from now (each generator's start is kept in `generators`).
    run.config.generators = crate::config::Generators::default();
    run.status = parts.iter().map(|p| p.run.status).max_by_key(|s| severity(*s)).unwrap_or(RunStatus::Complete);
    run.status_reason = parts.iter().find(|p| p.run.status == run.status).and_then(|p| p.run.status_reason.clone());
    run.started_at = parts.iter().map(|p| p.run.started_at.clone()).min().unwrap_or_default();
    // Rounds every generator measured.
    let indices: Vec<u32> = sampler
        .run
        .rounds
        .iter()
        .map(|r| r.index)
        .filter(|i| parts.iter().all(|p| p.run.rounds.iter().any(|r| r.index == *i)))
        .collect();
    run.rounds = indices
        .iter()
        .map(|i| {
            let rounds: Vec<&RoundResult> =
                parts.iter().filter_map(|p| p.run.rounds.iter().find(|r| r.index == *i)).collect();
            let own = sampler.run.rounds.iter().find(|r| r.index == *i).unwrap_or(rounds[0]);
            let mut merged = merge_round(&run.config, own, &rounds);
            merged.other_cores = other_cores(sampler, parts, own);
            merged
        })
        .collect();
    run.load_samples = load_samples(&sampler.run.load_samples, parts);
    run.error_reasons = error_reasons(parts);
    if let Some(instrument) = run.instrument.as_mut() {
        // The worst floor of any generator bounds what the merged latency can resolve.
        instrument.client_floor = parts
            .iter()
            .filter_map(|p| p.run.instrument.as_ref()?.client_floor.clone())
            .max_by(|a, b| a.p50_ms.total_cmp(&b.p50_ms));
    }
    run.generators = parts.iter().map(generator).collect();
    run.validity = crate::judge::validity(&run);
    let merged_notes = run.validity.clone();
    for p in parts {
        let Some(s) = p.run.config.generators.segment else { continue };
        // A late start is said once, by the merged run's own check (it keeps
        // every generator's start); what the machine was is said once too.
        for v in p.run.validity.iter().filter(|v| !v.starts_with("generator ") && !merged_notes.contains(v)) {
            run.validity.push(format!("generator {}/{}: {v}", s.index, s.count));
        }
    }
    let dropped: Vec<String> = parts
        .iter()
        .flat_map(|p| p.run.rounds.iter().map(|r| r.index))
        .filter(|i| !indices.contains(i))
        .map(|i| i.to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !dropped.is_empty() {
        run.validity.push(format!("round {}: left out, not every generator measured it", dropped.join(", ")));
    }
    run
}

/// The cores kept busy outside the run during the sampler's round, less the
/// other generators on its host: they are part of this run, not other load.
fn other_cores(sampler: &Part<'_>, parts: &[Part<'_>], own: &RoundResult) -> Option<f64> {
    let host = sampler.run.environment.hostname.as_ref()?;
    let mut cores = own.other_cores?;
    for p in
        parts.iter().filter(|p| !std::ptr::eq(p.run, sampler.run) && p.run.environment.hostname.as_ref() == Some(host))
    {
        let cpu = p
            .run
            .rounds
            .iter()
            .find(|r| r.index == own.index)
            .and_then(|r| r.resources.get(&TierName::Harness)?.cpu_seconds);
        cores -= cpu? / own.window_seconds.max(1e-9);
    }
    Some(cores.max(0.0))
}

fn severity(s: RunStatus) -> u8 {
    match s {
        RunStatus::Complete => 0,
        RunStatus::Interrupted => 1,
        RunStatus::Aborted => 2,
    }
}

/// One round of every generator as one: histograms added, counts summed,
/// rates over the whole schedule, the tiers' figures from `sampler`'s
/// reading (their CPU per request over every generator's OK answers), the
/// harness's CPU the sum of the generators'.
pub fn merge_round(config: &crate::config::Config, sampler: &RoundResult, rounds: &[&RoundResult]) -> RoundResult {
    let mut requests = Requests::default();
    for r in rounds {
        requests.scheduled += r.requests.scheduled;
        requests.sent += r.requests.sent;
        requests.ok += r.requests.ok;
        for (class, n) in &r.requests.errors {
            *requests.errors.entry(class.clone()).or_default() += n;
        }
    }
    let mut histograms: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
    for name in sampler.histograms.keys() {
        if let Some(sum) = sum_of(rounds.iter().copied(), name) {
            histograms.insert(name.clone(), sum);
        }
    }
    let summary = |name: &str| histograms.get(name).and_then(summarize);
    let kernel_stamped: Option<Vec<u64>> = rounds.iter().map(|r| r.latency.kernel_stamped).collect();
    let mut resources = sampler.resources.clone();
    for (tier, res) in resources.iter_mut() {
        if *tier != TierName::Harness {
            res.cpu_us_per_request = res.cpu_seconds.filter(|_| requests.ok > 0).map(|c| c * 1e6 / requests.ok as f64);
        }
    }
    resources.insert(TierName::Harness, harness(rounds, sampler.window_seconds, requests.sent));
    let stream = sampler.stream.as_ref().map(|own| merge_stream(own, rounds, &histograms, &resources));
    RoundResult {
        stream,
        complete: rounds.iter().all(|r| r.complete),
        throughput: throughput(config, requests.sent, requests.ok, requests.scheduled, sampler.window_seconds),
        latency: Latency {
            corrected: summary("corrected"),
            service: summary("service"),
            send_lag: summary("send_lag"),
            downstream_hop: summary("downstream_hop"),
            caller_overhead: summary("caller_overhead"),
            kernel_stamped: kernel_stamped.map(|k| k.iter().sum()),
        },
        histograms: histograms.iter().map(|(k, h)| (k.clone(), encode_histogram(h))).collect(),
        requests,
        resources,
        // The worst of the generators' machines.
        steal_percent: rounds.iter().filter_map(|r| r.steal_percent).reduce(f64::max),
        ..sampler.clone()
    }
}

/// The sampler's stream figures with every generator's items: counts
/// summed, percentiles from the added histograms, the front hop's bytes
/// (counted for every generator) over the items its front door relayed.
fn merge_stream(
    own: &StreamRound,
    rounds: &[&RoundResult],
    histograms: &BTreeMap<String, Histogram<u64>>,
    resources: &BTreeMap<TierName, Resources>,
) -> StreamRound {
    let each: Vec<&StreamRound> = rounds.iter().filter_map(|r| r.stream.as_ref()).collect();
    let items: u64 = each.iter().map(|s| s.items).sum();
    let mut cut_after_items = BTreeMap::new();
    for (k, n) in each.iter().flat_map(|s| &s.cut_after_items) {
        *cut_after_items.entry(k.clone()).or_default() += n;
    }
    let scale = |v: Option<f64>| Some(v? * own.items as f64 / items.max(1) as f64);
    let f = &own.front;
    let mut cpu_us_per_item = own.cpu_us_per_item.clone();
    if let Some(cpu) = resources.get(&TierName::Harness).and_then(|r| r.cpu_seconds).filter(|_| items > 0) {
        cpu_us_per_item.insert(TierName::Harness, cpu * 1e6 / items as f64);
    }
    StreamRound {
        streams_ok: each.iter().map(|s| s.streams_ok).sum(),
        items,
        items_per_second: each.iter().map(|s| s.items_per_second).sum(),
        first_item: histograms.get("first_item").and_then(summarize),
        last_item: histograms.get("corrected").and_then(summarize),
        item_delay: histograms.get("item_delay").and_then(summarize),
        item_lateness: histograms.get("item_lateness").and_then(summarize),
        item_transit: histograms.get("item_transit").and_then(summarize),
        cut_after_items,
        // The front door's own count of the items it relayed (every
        // generator's) divides its bytes already; a folder whose front
        // divided by the sampler's own items alone is scaled to all.
        front: if f.items != Some(own.items) {
            f.clone()
        } else {
            crate::result::ItemBytes {
                items: Some(items),
                request_wire_bytes_per_item: scale(f.request_wire_bytes_per_item),
                response_wire_bytes_per_item: scale(f.response_wire_bytes_per_item),
                request_message_bytes_per_item: scale(f.request_message_bytes_per_item),
                response_message_bytes_per_item: scale(f.response_message_bytes_per_item),
            }
        },
        cpu_us_per_item,
        ..own.clone()
    }
}

/// The histogram `name` of every round added bucket by bucket; `None` if
/// any round lacks it or it does not decode.
fn sum_of<'a>(rounds: impl Iterator<Item = &'a RoundResult>, name: &str) -> Option<Histogram<u64>> {
    let mut sum = new_histogram();
    for r in rounds {
        sum.add(decode_histogram(r.histograms.get(name)?)?).ok()?;
    }
    Some(sum)
}

/// The generators' own CPU together: seconds summed, per request sent, mean
/// memory summed (the generators are separate processes). A peak of the sum
/// was not measured, so it is `None`.
fn harness(rounds: &[&RoundResult], window_seconds: f64, sent: u64) -> Resources {
    let own: Vec<Option<&Resources>> = rounds.iter().map(|r| r.resources.get(&TierName::Harness)).collect();
    let total = |f: fn(&Resources) -> Option<f64>| -> Option<f64> { own.iter().map(|r| r.and_then(f)).sum() };
    let cpu_seconds = total(|r| r.cpu_seconds);
    Resources {
        cpu_seconds,
        cpu_percent_mean: cpu_seconds.filter(|_| window_seconds > 0.0).map(|c| c / window_seconds * 100.0),
        cpu_percent_peak: None,
        cpu_us_per_request: cpu_seconds.filter(|_| sent > 0).map(|c| c * 1e6 / sent as f64),
        rss_mib_mean: total(|r| r.rss_mib_mean),
        rss_mib_peak: None,
        samples: own.iter().flatten().map(|r| r.samples).sum(),
    }
}

/// The sampler's load samples with every other generator's counts at the
/// same moment added (the sample nearest in time, within half the
/// interval; their clocks started together at `--start-at`).
fn load_samples(own: &[LoadSample], parts: &[Part<'_>]) -> Vec<LoadSample> {
    own.iter()
        .map(|s| {
            let mut sum = LoadSample { in_flight: 0, sent: 0, ok: 0, errors: 0, dropped: 0, ..s.clone() };
            for p in parts {
                let half = p.run.config.load.sample_interval.as_secs_f64() / 2.0;
                let near = p
                    .run
                    .load_samples
                    .iter()
                    .min_by(|a, b| (a.t_seconds - s.t_seconds).abs().total_cmp(&(b.t_seconds - s.t_seconds).abs()));
                if let Some(n) = near.filter(|n| (n.t_seconds - s.t_seconds).abs() <= half) {
                    sum.in_flight += n.in_flight;
                    sum.sent += n.sent;
                    sum.ok += n.ok;
                    sum.errors += n.errors;
                    sum.dropped += n.dropped;
                }
            }
            sum
        })
        .collect()
}

fn error_reasons(parts: &[Part<'_>]) -> Vec<ErrorReason> {
    let mut map: BTreeMap<(String, String), u64> = BTreeMap::new();
    for e in parts.iter().flat_map(|p| &p.run.error_reasons) {
        *map.entry((e.class.clone(), e.reason.clone())).or_default() += e.count;
    }
    map.into_iter().map(|((class, reason), count)| ErrorReason { class, reason, count }).collect()
}

/// One generator as the merged run keeps it: its share, its start, and what
/// it measured on its own over the merged rounds.
fn generator(p: &Part<'_>) -> Generator {
    let run = p.run;
    let own = run.generators.first().cloned().unwrap_or_default();
    let sum = |f: fn(&RoundResult) -> u64| run.rounds.iter().map(f).sum::<u64>();
    let over_rounds = |name: &str| summarize(&sum_of(run.rounds.iter(), name)?);
    let cpu: Option<f64> =
        run.rounds.iter().map(|r| r.resources.get(&TierName::Harness).and_then(|h| h.cpu_seconds)).sum();
    let s = run.config.generators.segment;
    Generator {
        segment: s.map_or(own.segment, |s| s.index),
        count: s.map_or(own.count, |s| s.count),
        sampled_tiers: s.is_some_and(|s| s.sample_tiers),
        hostname: own.hostname.or_else(|| run.environment.hostname.clone()),
        own: Some(GeneratorFigures {
            folder: p.folder.to_owned(),
            status: Some(run.status),
            scheduled: sum(|r| r.requests.scheduled),
            sent: sum(|r| r.requests.sent),
            ok: sum(|r| r.requests.ok),
            latency: over_rounds("corrected"),
            send_lag: over_rounds("send_lag"),
            client_floor: run.instrument.as_ref().and_then(|i| i.client_floor.clone()),
            cpu_seconds: cpu,
            validity: run.validity.clone(),
        }),
        ..own
    }
}

#[cfg(test)]
mod tests {
    use caller::Transport;

    use super::*;
    use crate::config::Segment;
    use crate::testing;

    /// Three generators' runs of one schedule: shot i went to segment i mod 3.
    fn segments(shots: &[u64]) -> Vec<RunResult> {
        (0..3u32)
            .map(|index| {
                let mut run = testing::run(Transport::Grpc, 1.0);
                run.config.generators.segment = Some(Segment { index, count: 3, sample_tiers: index == 0 });
                let mut h = new_histogram();
                let mine: Vec<u64> = shots.iter().skip(index as usize).step_by(3).copied().collect();
                for v in &mine {
                    h.record(*v).unwrap();
                }
                let r = &mut run.rounds[0];
                r.histograms.insert("corrected".into(), encode_histogram(&h));
                r.requests = Requests {
                    scheduled: mine.len() as u64,
                    sent: mine.len() as u64,
                    ok: mine.len() as u64,
                    errors: BTreeMap::new(),
                };
                r.resources.get_mut(&TierName::Harness).unwrap().cpu_seconds = Some(0.1 * f64::from(index + 1));
                run
            })
            .collect()
    }

    fn parts(runs: &[RunResult]) -> Vec<Part<'_>> {
        const NAMES: [&str; 5] = ["seg0", "seg1", "seg2", "seg3", "seg4"];
        runs.iter().zip(NAMES).map(|(run, folder)| Part { folder, run }).collect()
    }

    #[test]
    fn merged_histograms_are_the_sum_of_the_parts_exactly() {
        // Latencies spread over four decades, in an order no part shares.
        let shots: Vec<u64> = (0..30_001u64).map(|i| 200 + (i * 7919) % 900_000 + (i % 13) * 31).collect();
        let runs = segments(&shots);
        let merged = merge(&check(&parts(&runs)).unwrap());
        let r = &merged.rounds[0];
        let got = decode_histogram(&r.histograms["corrected"]).unwrap();
        let mut all = new_histogram();
        for v in &shots {
            all.record(*v).unwrap();
        }
        // Bucket by bucket, and so every percentile, as one histogram of every shot.
        assert_eq!(got, all);
        assert_eq!(r.latency.corrected, summarize(&all));
        assert_eq!((r.requests.scheduled, r.requests.ok), (30_001, 30_001));
        // Rates over the whole schedule at the full rate.
        assert_eq!(r.throughput.target_qps, Some(merged.config.load.qps));
        // The generators' own CPU summed; the tiers' from the sampler, per merged answer.
        let harness = &r.resources[&TierName::Harness];
        assert!((harness.cpu_seconds.unwrap() - 0.6).abs() < 1e-12);
        assert_eq!(harness.cpu_percent_peak, None);
        let caller = &r.resources[&TierName::Caller];
        assert_eq!(caller.cpu_seconds, runs[0].rounds[0].resources[&TierName::Caller].cpu_seconds);
        assert!((caller.cpu_us_per_request.unwrap() - caller.cpu_seconds.unwrap() * 1e6 / 30_001.0).abs() < 1e-9);
        // Other load less the other generators on the sampler's host (same
        // host here): 1.2 cores seen beside 0.2 + 0.3 CPU s of theirs over 60 s.
        let mut busy = segments(&shots);
        busy[0].rounds[0].other_cores = Some(1.2);
        let busy_merged = merge(&check(&parts(&busy)).unwrap());
        let other = busy_merged.rounds[0].other_cores.unwrap();
        assert!((other - (1.2 - 0.5 / 60.0)).abs() < 1e-9, "{other}");
        busy[2].environment.hostname = Some("elsewhere".into());
        let other = merge(&check(&parts(&busy)).unwrap()).rounds[0].other_cores.unwrap();
        assert!((other - (1.2 - 0.2 / 60.0)).abs() < 1e-9, "{other}");
        // Each generator is kept with its own figures.
        assert_eq!(merged.generators.len(), 3);
        assert_eq!(merged.config.generators.segment, None);
        let own: Vec<u64> = merged.generators.iter().map(|g| g.own.as_ref().unwrap().ok).collect();
        assert_eq!(own, vec![10_001, 10_000, 10_000]);
        assert!(merged.generators[0].sampled_tiers && !merged.generators[1].sampled_tiers);
    }

    #[test]
    fn segments_of_another_run_missing_or_twice_are_refused_by_folder() {
        let shots: Vec<u64> = (0..300).map(|i| 1000 + i).collect();
        let runs = segments(&shots);
        // Missing.
        let err = check(&parts(&runs[..2])).unwrap_err();
        assert!(err.contains("segment 2/3 is missing"), "{err}");
        // Twice.
        let twice = [runs[0].clone(), runs[1].clone(), runs[1].clone()];
        let err = check(&parts(&twice)).unwrap_err();
        assert!(err.contains("segment 1/3 is given twice: seg1 and seg2"), "{err}");
        // Another configuration.
        let mut other = runs.clone();
        other[2].config.work.items += 1;
        let err = check(&parts(&other)).unwrap_err();
        assert!(err.contains("seg2 was run with another configuration") && err.contains("--items"), "{err}");
        // Another split, and a run made without --segment.
        let mut split = runs.clone();
        split[1].config.generators.segment = Some(Segment { index: 1, count: 4, sample_tiers: false });
        assert!(check(&parts(&split)).unwrap_err().contains("seg1 is segment 1 of 4"));
        let mut whole = runs.clone();
        whole[0].config.generators.segment = None;
        assert!(check(&parts(&whole)).unwrap_err().contains("seg0 is not a segment"));
        // A segment past the count (it merged as a fourth of three), a run
        // of no generators, a segment with no round.
        let mut past = runs.clone();
        past.push(runs[0].clone());
        past[3].config.generators.segment = Some(Segment { index: 7, count: 3, sample_tiers: false });
        let err = check(&parts(&past)).unwrap_err();
        assert!(err.contains("seg3 says it is segment 7 of 3: a run of 3 generators has segments 0 to 2"), "{err}");
        let mut none = runs.clone();
        for r in &mut none {
            r.config.generators.segment = Some(Segment { index: 0, count: 0, sample_tiers: true });
        }
        assert!(check(&parts(&none)).unwrap_err().contains("seg0 says it is a segment of 0 generators"));
        let mut empty = runs.clone();
        empty[1].rounds.clear();
        assert!(check(&parts(&empty)).unwrap_err().contains("seg1 holds no measured round"));
        // What a generator sets on its own may differ: its admin URLs, its start, its label.
        let mut own = runs.clone();
        own[1].config.generators.start_at = Some("2026-12-03T10:00:00.000Z".into());
        own[2].config.output.label = Some("zone-b".into());
        own[0].config.deploy.remote.downstream_admin = Some("http://10.0.0.1:9000".into());
        assert_eq!(check(&parts(&own)).unwrap().len(), 3);
    }

    #[test]
    fn a_late_generator_marks_the_merged_run() {
        let shots: Vec<u64> = (0..300).map(|i| 1000 + i).collect();
        let mut runs = segments(&shots);
        for (i, r) in runs.iter_mut().enumerate() {
            r.generators = vec![Generator {
                segment: i as u32,
                count: 3,
                start_at: Some("2026-12-03T10:00:00.000Z".into()),
                late_seconds: Some(if i == 2 { 0.75 } else { 0.0 }),
                ..Generator::default()
            }];
            r.validity = crate::judge::validity(r);
        }
        assert!(
            runs[2].validity.iter().any(|v| v.contains("generator 2/3 began 0.750 s after")),
            "{:?}",
            runs[2].validity
        );
        let merged = merge(&check(&parts(&runs)).unwrap());
        let late: Vec<&String> = merged.validity.iter().filter(|v| v.contains("began")).collect();
        assert_eq!(late.len(), 1, "{:?}", merged.validity);
    }
}
