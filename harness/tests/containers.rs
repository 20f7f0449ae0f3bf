//! `--isolation containers`: the harness builds (or reuses) its scratch
//! image from the test's own harness executable, runs the caller and the
//! downstream in containers with CPU limits, samples them through their
//! admin endpoints, and removes its containers and network when the run
//! ends, and when it is stopped by SIGTERM. Needs root and a Docker daemon;
//! skipped with a message otherwise.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{entries, harness_cmd, load, out_dir, run_folder, short_run};
use harness::result::{RunStatus, TierName};

fn docker_usable() -> bool {
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    root && Command::new("docker").arg("info").output().is_ok_and(|o| o.status.success())
}

/// True (after saying so) when the test cannot run: it needs root and a
/// running Docker daemon.
pub(crate) fn skipped() -> bool {
    let skip = !docker_usable();
    if skip {
        eprintln!("skipped: needs root and a running Docker daemon");
    }
    skip
}

/// A light load for a minute: a run the test stops.
const UNTIL_STOPPED: &str = "--qps 20 --delay 1ms --duration 60s --warmup 0s";

/// A containers run of a short run with `flags` (not quiet) writing to the
/// test's folder `name`, both tiers running; `None` when the test is
/// [`skipped`].
fn containers_run(name: &str, flags: &str) -> Option<(std::path::PathBuf, Running)> {
    if skipped() {
        return None;
    }
    let out = out_dir(name);
    let run = short_run(&out).without("--quiet").flags("--isolation containers").flags(flags);
    Some((out, Running::start(&run.to_args())))
}

/// A closed-loop containers run of 2 s with no service delay (a tier would
/// take whole cores if it could) and `args`, to its end: a sweeper of what
/// it left (removed when the test drops it, after it checked) and its output.
fn busy_containers_run(out: &std::path::Path, args: &[&str]) -> (Sweeper, std::process::Output) {
    let fixed = ["--isolation", "containers", "--connections", "8", "--delay", "0ms", "--duration", "2s"];
    let all = [&fixed[..], &["--warmup", "0s"], args, &["--out", out.to_str().unwrap()]].concat();
    let child = harness_cmd(&all).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let sweeper = Sweeper(child.id());
    (sweeper, child.wait_with_output().unwrap())
}

/// Containers and networks labelled with this harness pid.
pub(crate) fn left_by(pid: u32) -> Vec<String> {
    let filter = format!("label=grpc-vs-rest.harness-pid={pid}");
    let list = |args: &[&str]| {
        let o = Command::new("docker").args(args).args(["--filter", &filter, "-q"]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).lines().map(str::to_owned).collect::<Vec<_>>()
    };
    [list(&["ps", "-a"]), list(&["network", "ls"])].concat()
}

/// Removes, when dropped (a failed assertion included), whatever a harness
/// with this pid left: a test never leaves containers behind, even when the
/// harness did.
pub(crate) struct Sweeper(pub(crate) u32);

impl Drop for Sweeper {
    fn drop(&mut self) {
        let filter = format!("label=grpc-vs-rest.harness-pid={}", self.0);
        for (list, rm) in [(&["ps", "-a"][..], &["rm", "-f"][..]), (&["network", "ls"][..], &["network", "rm"][..])] {
            let o = Command::new("docker").args(list).args(["--filter", &filter, "-q"]).output().unwrap();
            let ids: Vec<String> = String::from_utf8_lossy(&o.stdout).lines().map(str::to_owned).collect();
            if !ids.is_empty() {
                let _ = Command::new("docker").args(rm).args(&ids).output();
            }
        }
    }
}

/// A containers run in the background, both its tiers running.
struct Running {
    child: Child,
    pid: u32,
    /// When the harness said it samples the caller (shortly before the load).
    sampled_at: Instant,
    stderr: Arc<Mutex<String>>,
    _sweeper: Sweeper,
}

impl Running {
    /// Starts the harness with `args` and waits until both containers run.
    fn start(args: &[String]) -> Running {
        let mut child = harness_cmd(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let pid = child.id();
        let sweeper = Sweeper(pid);
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut seen = String::new();
        while !seen.contains("caller (grpc): sampled through") {
            assert!(Instant::now() < deadline, "no tiers named: {seen}");
            let Some(Ok(line)) = lines.next() else { panic!("the harness ended early: {seen}") };
            seen.push_str(&line);
            seen.push('\n');
        }
        let stderr = Arc::new(Mutex::new(seen));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let mut t = sink.lock().unwrap();
                t.push_str(&line);
                t.push('\n');
            }
        });
        Running { child, pid, sampled_at: Instant::now(), stderr, _sweeper: sweeper }
    }

    fn sleep_until(&self, since_sampled: Duration) {
        std::thread::sleep((self.sampled_at + since_sampled).saturating_duration_since(Instant::now()));
    }

    /// The container of `tier` (`downstream`, `caller`).
    fn container(&self, tier: &str) -> String {
        let filter = format!("label=grpc-vs-rest.harness-pid={}", self.pid);
        let o = Command::new("docker").args(["ps", "--filter", &filter, "--format", "{{.Names}}"]).output().unwrap();
        let names = String::from_utf8_lossy(&o.stdout).into_owned();
        names
            .lines()
            .find(|n| n.ends_with(&format!("-{tier}")))
            .unwrap_or_else(|| panic!("no {tier} in {names}"))
            .into()
    }

    /// Its exit code, waiting at most `limit`, and its stderr.
    fn wait(&mut self, limit: Duration) -> (Option<i32>, String) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the harness did not exit within {limit:?}:\n{}", self.stderr.lock().unwrap());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // Let the reader take the last lines.
        std::thread::sleep(Duration::from_millis(100));
        (status.code(), self.stderr.lock().unwrap().clone())
    }
}

/// CFS enforces `--cpus` per 100 ms period (Docker's default): a window of
/// `w` seconds overlaps at most `w / 0.1 + 1` periods, so its CPU can reach
/// the quota times `1 + 0.1 / w`; the kernel charges run time at scheduler
/// ticks, so a period's quota can be overrun by a tick (at most 10 ms) and
/// repaid in the next: one tick of slack per window. The window is the
/// tier's own (its clock between the two CPU readings, as the sample
/// records it).
fn ceiling_percent(cpus: f64, window_seconds: f64) -> f64 {
    cpus * 100.0 * (1.0 + 0.1 / window_seconds) + 0.010 / window_seconds * 100.0
}

#[test]
fn a_cpu_limited_caller_never_samples_above_its_quota_and_nothing_is_left() {
    if skipped() {
        return;
    }
    let out = out_dir("containers");
    let cpus = 0.1;
    let limits = format!("caller={cpus},downstream=0.5");
    let args =
        ["--tier-cpus", &limits, "--tier-memory", "caller=128m,downstream=128m", "--sample-interval", "1s", "--quiet"];
    let (harness, o) = busy_containers_run(&out, &args);
    let pid = harness.0;
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert_eq!(left_by(pid), Vec::<String>::new(), "containers or networks left after the run");

    let run = load(&run_folder(&out));
    let caller = &run.tiers[&TierName::Caller];
    assert_eq!(caller.settings["container"]["cpus"], cpus);
    assert_eq!(caller.pid, Some(1), "the tier is its container's first process");
    // (the window its CPU % is over, CPU %, its ceiling) per sample.
    let samples: Vec<(f64, f64, f64)> = run
        .samples
        .iter()
        .filter(|s| s.tier == TierName::Caller)
        .filter_map(|s| {
            let window = s.cpu_window_seconds?;
            s.cpu_percent.map(|p| (window, p, ceiling_percent(cpus, window)))
        })
        .collect();
    assert!(samples.len() >= 2, "{samples:?}");
    // No window is shorter than half the 1 s sampling interval, the closing
    // sample's included (over 50 ms, a 10% quota can read 30% and more).
    assert!(samples.iter().all(|(w, _, _)| *w >= 0.5), "{samples:.3?}");
    assert!(
        samples.iter().all(|(_, p, ceiling)| p <= ceiling),
        "caller (window s, CPU %, ceiling %) {samples:.3?} above its quota"
    );
    assert!(samples.iter().any(|(_, p, _)| *p > cpus * 100.0 * 0.5), "the caller was not busy: {samples:.3?}");
    eprintln!("caller (window s, CPU % of a core, ceiling %), limit {cpus} CPUs: {samples:.3?}");
    let r = &run.rounds[0].resources[&TierName::Caller];
    assert!(r.cpu_seconds.is_some() && r.rss_mib_peak.is_some_and(|m| m < 128.0), "{r:?}");
    assert!(run.rounds[0].requests.ok > 0);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn sigterm_removes_the_containers() {
    let Some((out, mut h)) = containers_run("containers-term", UNTIL_STOPPED) else { return };
    assert!(!left_by(h.pid).is_empty(), "the run's containers are labelled with its pid");
    h.sleep_until(Duration::from_millis(500));
    common::signal(h.pid as i32, nix::sys::signal::Signal::SIGTERM);
    let (code, stderr) = h.wait(Duration::from_secs(60));
    assert_eq!(code, Some(130), "{stderr}");
    assert_eq!(left_by(h.pid), Vec::<String>::new(), "containers or networks left after SIGTERM");
    let run = load(&run_folder(&out));
    assert_eq!(run.status, harness::result::RunStatus::Interrupted);
    let _ = std::fs::remove_dir_all(&out);
}

/// Internal-hop wire bytes per request (request, response) of a short REST
/// run in containers with `compression`, and what the downstream reported.
fn containerised_hop(compression: &str) -> ((f64, f64), serde_json::Value) {
    let out = out_dir(&format!("containers-{compression}"));
    let o = short_run(&out)
        .flags("--isolation containers --transport rest --items 50 --qps 20 --delay 5ms")
        .args(&["--compression", compression])
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let run = load(&run_folder(&out));
    let hop = &run.rounds[0].bytes.internal;
    let bytes = (hop.request_wire_bytes_per_request.unwrap(), hop.response_wire_bytes_per_request.unwrap());
    let settings = run.tiers[&TierName::Downstream].settings["compression"].clone();
    let _ = std::fs::remove_dir_all(&out);
    (bytes, settings)
}

/// A team's own contract in containers: the tiers see its .proto and data
/// files at the paths their flags name (mounted read-only), serve the
/// descriptor set the harness compiled, and every answer arrives verified
/// with the data's own JSON size.
#[test]
fn a_contract_is_served_from_containers() {
    if skipped() {
        return;
    }
    use crate::contract::{ANSWER, contract_flags, shop, write};
    let dir = out_dir("containers-contract");
    let proto = shop(&dir.join("api")).display().to_string();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let answers = write(&dir.join("data"), "answers.jsonl", &format!("{ANSWER}\n"));
    let out = dir.join("out");
    let run = short_run(&out).args(&contract_flags(&proto, &answers));
    let o = run.flags("--isolation containers --transport rest --qps 20 --delay 5ms").output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let run = load(&run_folder(&out));
    let r = &run.rounds[0];
    assert!(r.requests.sent >= 19 && r.requests.ok == r.requests.sent, "{:?}", r.requests);
    assert_eq!(r.bytes.internal.response_message_bytes_per_request, Some(ANSWER.len() as f64));
    let compiled = &run.contract.as_ref().unwrap().descriptor_sha256;
    for tier in [TierName::Caller, TierName::Downstream] {
        let settings = &run.tiers[&tier].settings;
        assert!(settings["container"].is_object(), "{tier} ran in a container: {settings}");
        assert_eq!(settings["contract"]["descriptor_sha256"].as_str(), Some(compiled.as_str()), "{tier}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gzip_in_containers_compresses_the_internal_hop() {
    if skipped() {
        return;
    }
    let (plain, plain_settings) = containerised_hop("none");
    let (gzip, gzip_settings) = containerised_hop("gzip");
    // The downstream's settings say `"none"`, or name the encoding it serves.
    let encoding = |v: &serde_json::Value| v.as_str().or(v["encoding"].as_str()).map(str::to_owned);
    assert_eq!(encoding(&plain_settings).as_deref(), Some("none"), "{plain_settings}");
    assert_eq!(encoding(&gzip_settings).as_deref(), Some("gzip"), "{gzip_settings}");
    // 50 generated records of JSON compress to well under half; the
    // request (a small JSON body with its headers) shrinks too, or at least
    // does not grow by more than gzip's framing.
    assert!(gzip.1 < plain.1 * 0.5, "response bytes/request: gzip {gzip:?}, none {plain:?}");
    eprintln!("internal hop wire bytes/request (request, response): none {plain:?}, gzip {gzip:?}");
}

#[test]
fn a_killed_container_aborts_the_run_naming_the_tier_and_keeps_the_finished_round() {
    let args = "--qps 20 --delay 1ms --duration 2s --rounds 2 --reuse-tiers --warmup 0s";
    let Some((out, mut h)) = containers_run("containers-killed", args) else { return };
    // Round 1 runs from about 0.1 s to 2.1 s; kill the caller early in round 2.
    h.sleep_until(Duration::from_millis(2500));
    let killed = Command::new("docker").args(["kill", &h.container("caller")]).output().unwrap();
    assert!(killed.status.success(), "{killed:?}");
    let (code, stderr) = h.wait(Duration::from_secs(60));
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(left_by(h.pid), Vec::<String>::new(), "containers or networks left after the abort");
    let run = load(&run_folder(&out));
    assert_eq!(run.status, RunStatus::Aborted);
    let reason = run.status_reason.as_deref().unwrap();
    assert!(reason.contains("the caller of the gRPC arm (container") && reason.contains("SIGKILL"), "{reason}");
    assert!(reason.contains("not the OOM killer") && reason.contains(" at t="), "{reason}");
    assert!(stderr.contains("run aborted: the caller"), "{stderr}");
    assert!(run.rounds[0].complete && run.rounds[0].requests.ok >= 39, "{:?}", run.rounds[0].requests);
    eprintln!("{}", reason.lines().next().unwrap());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_tier_the_oom_killer_takes_aborts_the_run_and_is_named() {
    // An upload of 1 MB with every call, 50 a second, each held by the
    // downstream for its whole second of service time: about 50 MB at once
    // for certain, against a 20 MiB limit. (Answers of 10,000 records alone
    // are built only after the wait and freed once sent, so only the few
    // in the making are held at once: near the limit, which the kernel met
    // at times by evicting the binary's file pages instead of killing.)
    let run = containers_run(
        "containers-oom",
        "--tier-memory downstream=20m --request-bytes 1000000 --items 10000 --qps 50 --delay 1s --duration 4s \
         --warmup 0s",
    );
    let Some((out, mut h)) = run else { return };
    let (code, stderr) = h.wait(Duration::from_secs(60));
    assert_eq!(code, Some(1), "{stderr}");
    let run = load(&run_folder(&out));
    assert_eq!(run.status, RunStatus::Aborted);
    let reason = run.status_reason.as_deref().unwrap();
    assert!(reason.contains("the downstream of the gRPC arm (container"), "{reason}");
    assert!(reason.contains("OOM killer at its memory limit (20 MiB; exit code 137)"), "{reason}");
    assert!(stderr.contains("run aborted: the downstream"), "{stderr}");
    eprintln!("{}", reason.lines().next().unwrap());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn sigkill_of_the_harness_leaves_no_container_or_network_for_long() {
    let Some((out, mut h)) = containers_run("containers-sigkill", UNTIL_STOPPED) else { return };
    assert!(!left_by(h.pid).is_empty(), "the run's containers are labelled with its pid");
    h.sleep_until(Duration::from_millis(300));
    common::signal(h.pid as i32, nix::sys::signal::Signal::SIGKILL);
    let _ = h.child.wait();
    let killed = Instant::now();
    // Bounded: far longer than `docker rm -f` of two containers takes.
    while !left_by(h.pid).is_empty() && killed.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(left_by(h.pid), Vec::<String>::new(), "containers or networks left after SIGKILL");
    eprintln!("containers and network gone {:?} after the SIGKILL", killed.elapsed());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_third_ctrl_c_leaves_no_temporary_folder_and_no_container() {
    let Some((out, mut h)) = containers_run("containers-third", UNTIL_STOPPED) else { return };
    h.sleep_until(Duration::from_millis(500));
    // The third arrives while the tiers are being stopped, before the
    // folder is written.
    for _ in 0..3 {
        common::signal(h.pid as i32, nix::sys::signal::Signal::SIGINT);
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, stderr) = h.wait(Duration::from_secs(60));
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("again to exit at once"), "{stderr}");
    assert!(!entries(&out).iter().any(|e| e.starts_with(".tmp-")), "left a temporary folder: {:?}", entries(&out));
    assert_eq!(left_by(h.pid), Vec::<String>::new(), "containers or networks left after a third Ctrl-C");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_cpu_limit_that_binds_is_reported_in_run_json_validity_and_the_reports() {
    if skipped() {
        return;
    }
    let out = out_dir("containers-throttled");
    // A caller held to a tenth of a core uses its quota in every period.
    let (_harness, o) = busy_containers_run(&out, &["--tier-cpus", "caller=0.1"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let run = load(&run_folder(&out));
    let t = &run.rounds[0].cpu_throttling[&TierName::Caller];
    assert_eq!(t.cpus, 0.1);
    // A 2 s round holds about 20 periods of 100 ms.
    assert!(t.periods >= 10 && t.throttled_periods * 2 > t.periods && t.throttled_seconds > 0.0, "{t:?}");
    assert!(!run.rounds[0].cpu_throttling.contains_key(&TierName::Downstream), "the downstream has no limit");
    let note = format!(
        "round 1: the caller's CPU limit (0.1 cores) bound in {} of {} periods",
        t.throttled_periods, t.periods
    );
    assert!(run.validity.iter().any(|v| v.starts_with(&note) && v.contains("hop time")), "{:?}", run.validity);
    let report = std::fs::read_to_string(run_folder(&out).join("report.md")).unwrap();
    assert!(
        report.contains("### CPU limits") && report.contains("measured inside the caller, whose CPU limit bound"),
        "{report}"
    );
    let terminal = String::from_utf8_lossy(&o.stdout);
    assert!(terminal.contains("measured inside a throttled caller"), "{terminal}");
    eprintln!("{note}: {t:?}");
    let _ = std::fs::remove_dir_all(&out);
}

/// The replicas' shares in round 1 of `run`, by index.
fn replica_shares(run: &harness::result::RunResult) -> Vec<f64> {
    let set = run.rounds[0].replicas.as_ref().expect("a round with replicas");
    set.each.iter().map(|r| r.share.expect("each replica's share measured")).collect()
}

#[test]
fn replicas_in_cpu_limited_containers_show_where_grpc_pins_and_the_limit_binds() {
    if skipped() {
        return;
    }
    // Three replicas, each in a container held to a fifth of a core, behind
    // an L4 balancer: gRPC's one connection lands on one of them, which
    // alone uses its quota; the others idle.
    let out = out_dir("containers-replicas-l4");
    let replicas = ["--downstream-replicas", "3", "--tier-cpus", "downstream=0.2"];
    let (_harness, o) = busy_containers_run(&out, &[&replicas[..], &["--balance", "l4"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let run = load(&run_folder(&out));
    let shares = replica_shares(&run);
    assert_eq!(shares.len(), 3, "{shares:?}");
    let pinned = shares.iter().position(|s| *s == 1.0).unwrap_or_else(|| panic!("one replica took all: {shares:?}"));
    let each = &run.rounds[0].replicas.as_ref().unwrap().each;
    for r in each {
        let t = r.throttling.as_ref().unwrap_or_else(|| panic!("replica {} has its own limit: {r:?}", r.index));
        assert_eq!(t.cpus, 0.2);
        if r.index as usize == pinned {
            // Held back by its limit, where no other replica ever is: a
            // relation within the run (how many of its periods depends on
            // how hard a busy machine lets the caller push).
            assert!(t.throttled_periods > 0, "the pinned replica is held back: {t:?}");
        } else {
            assert_eq!(t.throttled_periods, 0, "a replica with no calls is never throttled: {t:?}");
        }
    }
    // The tier's limit is the replicas' together.
    let tier = &run.rounds[0].cpu_throttling[&TierName::Downstream];
    assert!((tier.cpus - 0.6).abs() < 1e-9, "{tier:?}");
    assert_eq!(tier.throttled_periods, each[pinned].throttling.as_ref().unwrap().throttled_periods);
    // Each round names the host pids of the containers it measured: a
    // tier's memory is judged only over rounds on processes of their own.
    for tier in [TierName::Caller, TierName::Downstream] {
        let pids: std::collections::BTreeSet<u32> =
            run.rounds.iter().filter_map(|r| r.pids.get(&tier).copied()).collect();
        assert_eq!(
            pids.len(),
            run.rounds.len(),
            "{tier:?}: {:?}",
            run.rounds.iter().map(|r| &r.pids).collect::<Vec<_>>()
        );
    }
    // The balancer runs on the host, sampled as a process of its own.
    assert!(run.tiers.contains_key(&TierName::Balancer), "{:?}", run.tiers.keys());
    let report = std::fs::read_to_string(run_folder(&out).join("report.md")).unwrap();
    assert!(report.contains("CPU limit bound (% of periods)"), "{report}");
    let _ = std::fs::remove_dir_all(&out);

    // The same replicas balanced by the caller: every one gets calls.
    let out = out_dir("containers-replicas-client");
    let (_harness, o) = busy_containers_run(&out, &[&replicas[..], &["--balance", "client"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let shares = replica_shares(&load(&run_folder(&out)));
    assert!(shares.iter().all(|s| (0.2..=0.47).contains(s)), "{shares:?}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn streams_run_between_containers_item_by_item() {
    if skipped() {
        return;
    }
    let out = out_dir("containers-streams");
    let o = short_run(&out)
        .flags("--isolation containers --transport grpc-stream,rest-sse --stream-items 10 --stream-interval 10ms")
        .flags("--delay 5ms --qps 10 --rounds 1")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    for arm in ["grpc-stream", "rest-sse"] {
        let run = load(&folder.join(arm));
        let r = &run.rounds[0];
        assert!(r.requests.sent >= 9 && r.requests.ok == r.requests.sent, "{arm}: {:?}", r.requests);
        let s = r.stream.as_ref().unwrap();
        assert_eq!(s.items, 10 * r.requests.ok, "{arm}");
        // The downstream in its container made the items on its schedule, and counted them.
        assert!(s.downstream.as_ref().is_some_and(|d| d.items > 0), "{arm}: {:?}", s.downstream);
        assert!(s.internal.response_wire_bytes_per_item.is_some_and(|b| b > 0.0), "{arm}: {:?}", s.internal);
        assert!(run.tiers[&TierName::Downstream].settings["container"].is_object(), "{arm}");
        assert_eq!(s.item_delay_clocks, "same_host");
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// A team's image for the test: built from `scratch` with the harness
/// executable (our tiers as a foreign stack would ship them), labelled so
/// the reaper knows it; removed when dropped.
struct ForeignImage(String);

impl ForeignImage {
    fn build(name: &str) -> ForeignImage {
        let tag = format!("grpc-vs-rest-foreign-{name}:{}", std::process::id());
        let context = std::env::temp_dir().join(format!("grpc-vs-rest-foreign-{name}-{}", std::process::id()));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let exe = std::path::Path::new(env!("CARGO_BIN_EXE_harness"));
        runtime.block_on(harness::tiers::image::build_context(exe, &context)).unwrap();
        let o = Command::new("docker")
            .args(["build", "-q", "--label", "grpc-vs-rest=1", "-t", &tag])
            .arg(&context)
            .env("DOCKER_BUILDKIT", "0")
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&context);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        ForeignImage(tag)
    }
}

impl Drop for ForeignImage {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rmi", "-f", &self.0]).output();
    }
}

/// The harness with `args`, to its end, having left no container or network.
fn to_its_end_leaving_nothing(args: &[&str]) -> std::process::Output {
    let child = harness_cmd(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let sweeper = Sweeper(child.id());
    let o = child.wait_with_output().unwrap();
    assert!(left_by(sweeper.0).is_empty(), "containers or networks left: {:?}", left_by(sweeper.0));
    o
}

#[test]
fn foreign_images_run_in_limited_containers_measured_from_outside() {
    if skipped() {
        return;
    }
    let image = ForeignImage::build("tiers");
    let out = out_dir("containers-foreign");
    let downstream = "__tier downstream --grpc-addr {grpc_addr} --rest-addr {rest_addr} --delay {delay_ms}ms";
    let caller = "__tier caller --listen {listen} --transport {transport} --downstream-grpc {downstream_grpc} \
                  --downstream-rest {downstream_rest}";
    let args = [
        "--isolation",
        "containers",
        "--transport",
        "both",
        "--qps",
        "40",
        "--delay",
        "5ms",
        "--duration",
        "2s",
        "--warmup",
        "1s",
        "--tier-cpus",
        "downstream=0.5",
        "--downstream-image",
        &image.0,
        "--downstream-cmd",
        downstream,
        "--caller-image",
        &image.0,
        "--caller-cmd",
        caller,
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ];
    let o = to_its_end_leaving_nothing(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    for arm in ["grpc", "rest"] {
        let run = load(&folder.join(arm));
        for tier in [TierName::Downstream, TierName::Caller] {
            let settings = &run.tiers[&tier].settings;
            let command = settings["foreign"]["command"].as_str().unwrap_or_default();
            assert!(command.starts_with(&image.0), "{arm} {tier:?}: {settings}");
            assert_eq!(settings["container"]["image"].as_str(), Some(image.0.as_str()), "{settings}");
        }
        let limited = &run.tiers[&TierName::Downstream].settings["container"]["cpus"];
        assert_eq!(limited.as_f64(), Some(0.5), "--tier-cpus reaches a foreign image: {limited}");
        for round in &run.rounds {
            assert_eq!((round.requests.ok, round.requests.error_total()), (round.requests.sent, 0), "{arm}");
            for tier in [TierName::Downstream, TierName::Caller] {
                let r = &round.resources[&tier];
                assert!(r.cpu_seconds.is_some_and(|c| c > 0.0) && r.rss_mib_peak.is_some_and(|m| m > 1.0), "{r:?}");
            }
            // Between two foreign tiers the relay, on the network's gateway, counts the hop.
            let relay = round.bytes.relay.as_ref().expect("the relay's count");
            assert!(relay.request_wire_bytes.is_some_and(|b| b > 0), "{relay:?}");
        }
    }
}

#[test]
fn a_foreign_image_that_never_listens_is_named_and_removed() {
    if skipped() {
        return;
    }
    let image = ForeignImage::build("never");
    let out = out_dir("containers-foreign-never");
    // The image's executable, given words it does not take: it exits at once.
    let never = "__tier downstream --listen-on {grpc_addr} {rest_addr}";
    let args = [
        "--isolation",
        "containers",
        "--downstream-image",
        &image.0,
        "--downstream-cmd",
        never,
        "--foreign-ready-timeout",
        "5s",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ];
    let o = to_its_end_leaving_nothing(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("the downstream command `{image}", image = image.0)), "{err}");
    assert!(err.contains("exited before it was ready") && err.contains("--listen-on"), "its own words: {err}");
}
