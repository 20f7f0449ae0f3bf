//! Tiers started as a command (`--downstream-cmd`, `--caller-cmd`) and
//! measured from outside: our own binaries given as foreign commands (the
//! simplest commands that speak the contract), and small `sh -c` tiers that
//! misbehave: one never ready, one that dies mid-round, one that ignores
//! SIGTERM. Everything on 127.0.0.1, every run bounded in time, and no
//! process left behind.

use std::time::Duration;

use harness::result::TierName;

use crate::common::{MARK_VAR, assert_none_left, load, out_dir, run_folder, run_folders, short_run};

/// The harness executable as a foreign command in a tier's role.
fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_harness")
}

/// Our downstream as a foreign command (no admin listener: measured from outside).
fn downstream_cmd() -> String {
    format!("{} __tier downstream --grpc-addr {{grpc_addr}} --rest-addr {{rest_addr}} --delay {{delay_ms}}ms", exe())
}

/// Runs `run` with a mark every process it starts inherits, and proves
/// none is left once it has ended.
fn run_marked(run: &crate::common::ShortRun, name: &str) -> std::process::Output {
    let mark = format!("foreign-{name}-{}", std::process::id());
    let out = run.command().env(MARK_VAR, &mark).output().unwrap();
    assert_none_left(&mark, Duration::from_secs(5));
    out
}

fn text(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_foreign_downstream_is_measured_from_outside_on_both_arms() {
    let dir = out_dir("foreign-downstream");
    let run = short_run(&dir)
        .args(&["--transport", "both", "--rounds", "2", "--qps", "40", "--duration", "2s", "--warmup", "1s"])
        .args(&["--downstream-cmd", &downstream_cmd()]);
    let out = run_marked(&run, "downstream");
    assert!(out.status.success(), "{}", text(&out));
    let folder = run_folder(&dir);
    for arm in ["grpc", "rest"] {
        let run = load(&folder.join(arm));
        let settings = &run.tiers[&TierName::Downstream].settings["foreign"];
        assert!(settings["command"].as_str().is_some_and(|c| c.contains("__tier downstream")), "{settings}");
        assert!(settings["not_measured"].as_array().is_some_and(|a| !a.is_empty()), "{settings}");
        for round in &run.rounds {
            assert_eq!((round.requests.ok, round.requests.error_total()), (round.requests.sent, 0), "{arm}");
            let d = &round.resources[&TierName::Downstream];
            assert!(d.cpu_seconds.is_some_and(|c| c > 0.0), "{arm}: {d:?}");
            assert!(d.rss_mib_peak.is_some_and(|r| r > 1.0), "{arm}: {d:?}");
            let internal = &round.bytes.internal;
            assert_eq!(internal.requests, round.requests.ok, "{arm}: the caller's client counted every call");
            // Our caller's gRPC client counts its socket; reqwest cannot.
            assert_eq!(internal.request_wire_bytes.is_some(), arm == "grpc", "{arm}: {internal:?}");
            assert!(round.bytes.relay.is_none());
        }
    }
}

#[test]
fn between_two_foreign_tiers_a_relay_counts_the_hop_as_the_tiers_do() {
    // Both tiers are ours, given as commands that also serve /stats: the
    // relay's count (from outside) and theirs must agree.
    let dir = out_dir("foreign-relay");
    let downstream = format!("{} --admin-addr {{admin_addr}}", downstream_cmd());
    let caller = format!(
        "{} __tier caller --listen {{listen}} --admin-addr {{admin_addr}} --transport {{transport}} \
         --downstream-grpc {{downstream_grpc}} --downstream-rest {{downstream_rest}}",
        exe()
    );
    // A 1 ms service time: nothing is in flight at a round's boundaries.
    let run = short_run(&dir)
        .args(&["--transport", "both", "--rounds", "2", "--qps", "50", "--duration", "2s", "--delay", "1ms"])
        .args(&["--downstream-cmd", &downstream, "--caller-cmd", &caller]);
    let out = run_marked(&run, "relay");
    assert!(out.status.success(), "{}", text(&out));
    let folder = run_folder(&dir);
    for arm in ["grpc", "rest"] {
        let run = load(&folder.join(arm));
        assert!(run.tiers.contains_key(&TierName::Link), "the relay runs as a process of its own");
        for round in &run.rounds {
            assert_eq!(round.requests.ok, round.requests.sent, "{arm}");
            let (tier, relay) = (&round.bytes.internal, round.bytes.relay.as_ref().expect("the relay's count"));
            // It forwards bytes and reads no message: not measured, not zero.
            assert_eq!((relay.request_message_bytes, relay.response_message_bytes), (None, None), "{relay:?}");
            for (theirs, outside) in [
                (tier.request_wire_bytes, relay.request_wire_bytes),
                (tier.response_wire_bytes, relay.response_wire_bytes),
            ] {
                let (theirs, outside) = (theirs.unwrap() as f64, outside.unwrap() as f64);
                assert!(theirs > 0.0 && (outside - theirs).abs() <= theirs * 0.001, "{arm}: {tier:?} vs {relay:?}");
            }
        }
    }
}

#[test]
fn a_command_that_never_gets_ready_is_named_with_its_output() {
    let dir = out_dir("foreign-never");
    let never = "sh -c 'echo warming the cache for $0 $1 >&2; exec sleep 30' {grpc_addr} {rest_addr}";
    let run = short_run(&dir).args(&["--downstream-cmd", never, "--foreign-ready-timeout", "1s"]);
    let out = run_marked(&run, "never");
    let err = text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the downstream command `sh -c"), "{err}");
    assert!(err.contains("was not ready within 1s") && err.contains("warming the cache for 127.0.0.1:"), "{err}");
}

#[test]
fn a_command_that_dies_mid_round_ends_the_run_with_the_finished_rounds_kept() {
    let dir = out_dir("foreign-dies");
    let flag = dir.with_extension("started");
    let _ = std::fs::remove_file(&flag);
    // The first process serves; the next one (the second round's) dies a
    // second after it starts.
    let dies = format!(
        "sh -c 'if [ -e {f} ]; then (sleep 1; echo out of memory, giving up >&2; kill -9 $$) & fi; touch {f}; \
         exec \"$0\" __tier downstream --grpc-addr $1 --rest-addr $2 --delay 5ms' {exe} {{grpc_addr}} {{rest_addr}}",
        f = flag.display(),
        exe = exe()
    );
    let run = short_run(&dir).args(&["--rounds", "2", "--duration", "3s", "--downstream-cmd", &dies]);
    let out = run_marked(&run, "dies");
    let _ = std::fs::remove_file(&flag);
    let err = text(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    let run = load(&run_folders(&dir)[0]);
    let reason = run.status_reason.clone().unwrap_or_default();
    assert!(reason.contains("downstream (`") && reason.contains("out of memory, giving up"), "{reason}");
    assert!(run.rounds.iter().any(|r| r.complete && r.index == 1), "the first round is kept: {reason}");
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_and_named() {
    let dir = out_dir("foreign-stubborn");
    // The shell ignores SIGTERM (its downstream does not) and keeps going.
    let stubborn = format!(
        "sh -c 'trap \"\" TERM; \"$0\" __tier downstream --grpc-addr $1 --rest-addr $2 --delay 5ms & \
         while :; do sleep 0.2; done' {} {{grpc_addr}} {{rest_addr}}",
        exe()
    );
    let run = short_run(&dir).args(&["--downstream-cmd", &stubborn]);
    let out = run_marked(&run, "stubborn");
    let err = text(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("ignored SIGTERM") && err.contains("and was killed"), "{err}");
    let run = load(&run_folder(&dir));
    let stops = &run.tiers[&TierName::Downstream].settings["foreign"]["stops"];
    assert!(stops.as_array().is_some_and(|s| s.len() == 1), "{stops}");
}

#[test]
fn a_foreign_tier_gets_huge_pages_as_the_flag_says_not_as_the_harness_has_them() {
    // The harness turns huge pages off for itself; a command it starts gets
    // them as --huge-pages says: read by the command itself before our
    // downstream runs in its place, and by the harness from outside once
    // it is ready (run.json).
    for (mode, enabled, said) in [("off", "0", "off (PR_SET_THP_DISABLE)"), ("machine", "1", "the machine's mode")] {
        let dir = out_dir(&format!("foreign-huge-{mode}"));
        let seen = dir.with_extension("thp");
        let _ = std::fs::remove_file(&seen);
        let cmd = format!(
            "sh -c 'grep THP_enabled /proc/self/status > {f}; exec \"$0\" __tier downstream --grpc-addr $1 \
             --rest-addr $2 --delay 5ms --huge-pages {mode}' {exe} {{grpc_addr}} {{rest_addr}}",
            f = seen.display(),
            exe = exe()
        );
        let run = short_run(&dir).args(&["--downstream-cmd", &cmd, "--huge-pages", mode]);
        let out = run_marked(&run, &format!("huge-{mode}"));
        assert!(out.status.success(), "{}", text(&out));
        let line = std::fs::read_to_string(&seen).unwrap();
        let _ = std::fs::remove_file(&seen);
        assert_eq!(line.split_whitespace().nth(1), Some(enabled), "{mode}: {line:?}");
        let run = load(&run_folder(&dir));
        assert_eq!(run.tiers[&TierName::Downstream].settings["foreign"]["transparent_huge_pages"], said, "{mode}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Each thread's run time from its schedstat (nanoseconds), summed over
/// the live threads of `pids`: the scheduler's own count, another file and
/// another clock than the one `measure::tree` reads.
fn schedstat_seconds(pids: &[u32]) -> f64 {
    let mut ns = 0u64;
    for pid in pids {
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
            let text = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            ns += text.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    ns as f64 * 1e-9
}

/// Resident bytes of `pids` from the kernel's walk of their page tables
/// (`smaps_rollup`'s `Rss:`), where `measure::tree` sums `status`'s VmRSS.
fn smaps_rss_bytes(pids: &[u32]) -> u64 {
    let kib = |pid: &u32| -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        let line = text.lines().find(|l| l.starts_with("Rss:")).unwrap_or_default().to_owned();
        line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
    };
    pids.iter().map(kib).sum::<u64>() * 1024
}

#[test]
fn a_foreign_trees_cpu_and_rss_under_load_agree_with_proc_read_independently() {
    // Our downstream, started by a shell that waits for it (a tree of two
    // processes, as a command's wrapper makes), answering REST calls.
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (grpc, rest) = (free(), free());
    let line = format!("\"$0\" __tier downstream --grpc-addr {grpc} --rest-addr {rest} --delay 1ms & wait");
    let mut sh = std::process::Command::new("sh").args(["-c", &line, exe()]).spawn().unwrap();
    let root = sh.id();
    let ready = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        std::net::TcpStream::connect(rest).is_ok()
    });
    let tick = 0.01;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let client = reqwest::Client::new();
    let url = format!("http://{rest}/v1/fetch");
    // Four callers, at most 3,000 calls or 10 s, while the tree is read.
    let load = runtime.spawn(async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let calls = (0..4).map(|w| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                for i in 0..750 {
                    let body = format!(r#"{{"requestId":"w{w}-{i}","items":50}}"#);
                    let sent = client.post(&url).header("content-type", "application/json").body(body).send();
                    let ok = tokio::time::timeout_at(deadline, sent).await.is_ok_and(|r| r.is_ok());
                    if !ok || tokio::time::Instant::now() >= deadline {
                        break;
                    }
                }
            })
        });
        futures::future::join_all(calls).await;
    });
    std::thread::sleep(Duration::from_millis(700));
    // Ours, the independent reading, ours again: the kernel's figures were
    // taken between our two, so they lie between them, to a tick and 1%.
    let before = harness::measure::tree::read(root);
    let members = harness::tiers::foreign::tree(root);
    let (cpu, rss) = (schedstat_seconds(&members), smaps_rss_bytes(&members));
    let after = harness::measure::tree::read(root);
    load.abort();
    for p in harness::tiers::foreign::tree(root) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p as i32), nix::sys::signal::Signal::SIGKILL);
    }
    let _ = sh.wait();
    assert!(ready, "the downstream did not listen on {rest}");
    let (before, after) = (before.unwrap(), after.unwrap());
    assert_eq!((before.processes, members.len()), (2, 2), "the shell and the downstream: {before:?}");
    assert!(before.cpu_seconds > 0.05, "the load made the downstream work: {before:?}");
    println!(
        "outside: {:.4} s then {:.4} s, {} then {} B; /proc independently: {cpu:.4} s, {rss} B",
        before.cpu_seconds, after.cpu_seconds, before.rss_bytes, after.rss_bytes
    );
    let slack = members.len() as f64 * tick + 0.01 * cpu;
    assert!(
        before.cpu_seconds - slack <= cpu && cpu <= after.cpu_seconds + slack,
        "CPU {:.4} s from outside, then {:.4} s; schedstat {cpu:.4} s",
        before.cpu_seconds,
        after.cpu_seconds
    );
    let (low, high) = (before.rss_bytes.min(after.rss_bytes) as f64, before.rss_bytes.max(after.rss_bytes) as f64);
    let rss = rss as f64;
    assert!(low * 0.99 <= rss && rss <= high * 1.01, "RSS {low}..{high} B from outside; smaps {rss} B");
}

#[test]
fn the_relays_count_agrees_with_a_packet_capture_of_both_legs() {
    // bench/relay-check.sh as the docs show it: tcpdump on loopback (root,
    // as CI runs), both tiers ours given as commands, one round per arm.
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/relay-check.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .envs([("HARNESS", exe()), ("QPS", "50"), ("DURATION", "2s"), ("WARMUP", "1s"), ("DELAY", "20ms")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let rows: Vec<&str> =
        text.lines().filter(|l| l.starts_with("| caller → relay") || l.starts_with("| relay →")).collect();
    // Two arms × two legs × two directions, each capture beside the relay.
    let counted: Vec<&&str> = rows.iter().filter(|l| l.ends_with("% |")).collect();
    assert_eq!(counted.len(), 8, "{text}");
    for row in counted {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (capture, relay): (f64, f64) = (cells[3].parse().unwrap(), cells[4].parse().unwrap());
        assert!(capture > 0.0 && (relay - capture).abs() <= capture * 0.001, "{row}\n{text}");
    }
}
