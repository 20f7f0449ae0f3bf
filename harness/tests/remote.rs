//! Remote tiers: the test starts a downstream and one caller per transport
//! itself (as root on separate network namespaces joined by veth links it
//! makes and removes; otherwise as processes on loopback), then runs the
//! harness against them with `--caller-url` and the admin URLs, and checks
//! the figures of both remote tiers and that the bytes on both sides of the
//! internal hop agree.

use crate::common;

use std::process::Command;

use common::{TierProcess, harness_cmd, load, out_dir, run_folder, short_run, start_tier};
use harness::result::TierName;
use telemetry::StatsSnapshot;

/// Network namespaces (and the links between them) made by the test,
/// removed when dropped.
struct Hosts {
    caller_ns: String,
    downstream_ns: String,
    /// Addresses: the caller's on the front link, the downstream's on the
    /// internal hop, the downstream's on its admin link.
    caller_ip: String,
    downstream_ip: String,
    downstream_admin_ip: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Hosts {
    /// Two "hosts" (namespaces): root ↔ caller (the front hop), caller ↔
    /// downstream (the internal hop), and root ↔ downstream for its admin
    /// endpoint only, so no namespace forwards packets for another.
    fn make() -> Hosts {
        let id = std::process::id();
        let net = 20 + id % 200;
        let (c, d) = (format!("gvr-{id}-c"), format!("gvr-{id}-d"));
        let hosts = Hosts {
            caller_ns: c.clone(),
            downstream_ns: d.clone(),
            caller_ip: format!("10.{net}.1.2"),
            downstream_ip: format!("10.{net}.2.2"),
            downstream_admin_ip: format!("10.{net}.3.2"),
        };
        ip(&["netns", "add", &c]);
        ip(&["netns", "add", &d]);
        let link = |a: &str, a_ns: Option<&str>, a_ip: String, b: &str, b_ns: &str, b_ip: String| {
            ip(&["link", "add", a, "type", "veth", "peer", "name", b]);
            if let Some(ns) = a_ns {
                ip(&["link", "set", a, "netns", ns]);
            }
            ip(&["link", "set", b, "netns", b_ns]);
            let in_ns = |ns: Option<&str>, args: &[&str]| {
                let mut full = ns.map_or(Vec::new(), |n| vec!["netns", "exec", n, "ip"]);
                full.extend_from_slice(args);
                ip(&full);
            };
            in_ns(a_ns, &["addr", "add", &format!("{a_ip}/24"), "dev", a]);
            in_ns(a_ns, &["link", "set", a, "up"]);
            in_ns(Some(b_ns), &["addr", "add", &format!("{b_ip}/24"), "dev", b]);
            in_ns(Some(b_ns), &["link", "set", b, "up"]);
            in_ns(Some(b_ns), &["link", "set", "lo", "up"]);
        };
        link(&format!("gvr{id}f0"), None, format!("10.{net}.1.1"), &format!("gvr{id}f1"), &c, hosts.caller_ip.clone());
        link(
            &format!("gvr{id}i0"),
            Some(&c),
            format!("10.{net}.2.1"),
            &format!("gvr{id}i1"),
            &d,
            hosts.downstream_ip.clone(),
        );
        link(
            &format!("gvr{id}a0"),
            None,
            format!("10.{net}.3.1"),
            &format!("gvr{id}a1"),
            &d,
            hosts.downstream_admin_ip.clone(),
        );
        hosts
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth ends in it, and their peers.
        for ns in [&self.caller_ns, &self.downstream_ns] {
            let _ = Command::new("ip").args(["netns", "delete", ns]).status();
        }
    }
}

/// A tier process the test started; killed when dropped.
fn stats(admin_url: &str) -> StatsSnapshot {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async { reqwest::get(format!("{admin_url}/stats")).await.unwrap().json().await.unwrap() })
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
        && Command::new("ip").arg("-V").output().is_ok_and(|o| o.status.success())
}

#[test]
fn both_transports_against_remote_tiers_measure_both_tiers_and_bytes_agree() {
    let hosts = if is_root() {
        Some(Hosts::make())
    } else {
        eprintln!("not root (or no `ip`): the remote tiers run on loopback instead of in network namespaces");
        None
    };
    let (downstream, grpc, rest) = start_remote_tiers(hosts.as_ref());
    both_arms_measure_every_remote_tier(&downstream, &grpc, &rest);
    an_unreadable_admin_endpoint_gives_nulls_and_a_note(&grpc);
    drop((grpc, rest, downstream));
    drop(hosts);
}

/// A downstream and one caller per transport, in the test's network
/// namespaces when there are any, on loopback otherwise.
fn start_remote_tiers(hosts: Option<&Hosts>) -> (TierProcess, TierProcess, TierProcess) {
    let (caller_ns, downstream_ns) = match hosts {
        Some(h) => (Some(h.caller_ns.as_str()), Some(h.downstream_ns.as_str())),
        None => (None, None),
    };
    let at = |addr: Option<&String>| format!("{}:0", addr.map_or("127.0.0.1", |s| s.as_str()));
    let d_ip = hosts.map(|h| &h.downstream_ip);
    let downstream = start_tier(
        downstream_ns,
        "downstream",
        &[
            "--grpc-addr".into(),
            at(d_ip),
            "--rest-addr".into(),
            at(d_ip),
            "--admin-addr".into(),
            at(hosts.map(|h| &h.downstream_admin_ip)),
            "--delay".into(),
            "5ms".into(),
        ],
    );
    let caller_at = at(hosts.map(|h| &h.caller_ip));
    let caller = |transport: &str| {
        let (flag, listener) =
            if transport == "grpc" { ("--downstream-grpc", "grpc") } else { ("--downstream-rest", "rest") };
        start_tier(
            caller_ns,
            "caller",
            &[
                "--transport".into(),
                transport.into(),
                flag.into(),
                downstream.url(listener),
                "--listen".into(),
                caller_at.clone(),
                "--admin-addr".into(),
                caller_at.clone(),
            ],
        )
    };
    let (grpc, rest) = (caller("grpc"), caller("rest"));
    (downstream, grpc, rest)
}

/// `--transport both` against the remote tiers: every tier reached, sampled
/// and measured, and both ends of the internal hop count the same bytes.
fn both_arms_measure_every_remote_tier(downstream: &TierProcess, grpc: &TierProcess, rest: &TierProcess) {
    let out = out_dir("remote");
    let per_arm = |l: &str| format!("grpc={},rest={}", grpc.url(l), rest.url(l));
    let o = short_run(&out)
        .args(&["--caller-url", &per_arm("front"), "--caller-admin", &per_arm("admin")])
        .args(&["--downstream-admin", &downstream.url("admin")])
        .flags("--transport both --qps 40 --rounds 1 --delay 5ms --sample-interval 200ms")
        .output();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let folder = run_folder(&out);
    for (arm, tier_process) in [("grpc", grpc), ("rest", rest)] {
        let run = load(&folder.join(arm));
        // Every tier reached and measured; a generator that fell behind its
        // schedule on a busy machine is the one note allowed.
        assert!(common::validity_apart_from_the_machine(&run).is_empty(), "{arm}: {:?}", run.validity);
        for (name, pid) in [(TierName::Caller, tier_process.ready.pid), (TierName::Downstream, downstream.ready.pid)] {
            let info = &run.tiers[&name];
            assert_eq!(info.pid, Some(pid), "{arm} {name}: the pid the tier reports");
            assert!(info.hostname.as_deref().is_some_and(|h| !h.is_empty()), "{arm} {name}: {info:?}");
            assert!(info.sampled_via.as_ref().is_some_and(|v| v.reachable), "{arm} {name}: {info:?}");
            let r = &run.rounds[0].resources[&name];
            assert!(r.cpu_seconds.is_some_and(|c| c > 0.0), "{arm} {name}: {r:?}");
            assert!(r.rss_mib_mean.is_some_and(|m| m > 0.0) && r.samples > 0, "{arm} {name}: {r:?}");
            let sampled = run.samples.iter().filter(|s| s.tier == name);
            assert!(sampled.clone().any(|s| s.cpu_percent.is_some()), "{arm} {name}: no CPU % sampled");
        }
        assert_eq!(run.tiers[&TierName::Caller].settings["transport"], arm);
        let hop = &run.rounds[0].bytes.internal;
        assert!(hop.response_wire_bytes.is_some_and(|b| b > 0), "{arm}: {hop:?}");
        // Both sides of the hop, counted by each tier on its own sockets.
        let (c, d) = (stats(&tier_process.url("admin")), stats(&downstream.url("admin")));
        let (client, listener) = (&c.clients[arm], &d.listeners[arm]);
        // Message bytes count "in" towards the server on both sides; wire
        // bytes count what each socket read and wrote.
        assert_eq!(client.message_bytes_in, listener.message_bytes_in, "{arm}: request bodies");
        assert_eq!(client.message_bytes_out, listener.message_bytes_out, "{arm}: response bodies");
        assert!(listener.message_bytes_out > 0);
        if let (Some(sent), Some(received)) = (client.bytes_out, client.bytes_in) {
            assert_eq!((sent, received), (listener.bytes_in.unwrap(), listener.bytes_out.unwrap()), "{arm}: wire");
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// An admin endpoint that cannot be read: null figures and a validity note,
/// never zeros.
fn an_unreadable_admin_endpoint_gives_nulls_and_a_note(grpc: &TierProcess) {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let out = out_dir("remote-unread");
    let o = short_run(&out)
        .args(&["--caller-url", &grpc.url("front"), "--caller-admin", &grpc.url("admin")])
        .args(&["--downstream-admin", &format!("http://{closed}")])
        .flags("--delay 5ms")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let run = load(&run_folder(&out));
    let d = &run.tiers[&TierName::Downstream];
    assert_eq!((d.pid, d.sampled_via.as_ref().map(|v| v.reachable)), (None, Some(false)));
    let r = &run.rounds[0].resources[&TierName::Downstream];
    assert_eq!((r.cpu_seconds, r.rss_mib_mean, r.cpu_percent_mean), (None, None, None));
    let hop = &run.rounds[0].bytes.internal;
    assert_eq!((hop.request_wire_bytes, hop.response_message_bytes), (None, None), "no downstream counters: {hop:?}");
    assert!(
        run.validity.iter().any(|v| v.contains("admin endpoint") && v.contains("not measured")),
        "{:?}",
        run.validity
    );
    assert!(run.rounds[0].resources[&TierName::Caller].cpu_seconds.is_some());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn remote_flags_are_checked_before_anything_starts() {
    for (args, flag) in [
        (&["--transport", "both", "--caller-url", "http://127.0.0.1:1"][..], "--caller-url"),
        (&["--caller-admin", "http://127.0.0.1:1"], "--caller-admin"),
        (&["--caller-url", "http://127.0.0.1:1", "--proxy", "nginx"], "--proxy"),
        (&["--tier-cpus", "caller=1"], "--tier-cpus"),
        (&["--isolation", "containers", "--tier-cpus", "harness=1"], "--tier-cpus"),
        (&["--isolation", "containers", "--caller-url", "http://127.0.0.1:1"], "--caller-url"),
    ] {
        let o = harness_cmd(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
}
