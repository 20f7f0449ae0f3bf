//! What the layout and its launchers lifted, each run for real: TLS and
//! `--scale-at` in containers (certificates mounted, replicas started and
//! taken out as containers, the balancer on the host reloaded), a proxy in
//! front of replicas in containers, and replicas behind a proxy or a link
//! as processes. Each reports every replica's share.

use crate::common;
use crate::containers::{Sweeper, left_by, skipped};
use crate::replicas::{run, shares};

use std::process::Stdio;

use common::*;
use harness::result::{RunResult, TierName};

/// A containers run of `args` to its end: each arm's run by its folder's
/// name, after checking that it exited 0 and left no container or network.
fn containers_run(case: &str, args: &[&str]) -> Vec<(String, RunResult)> {
    let out = out_dir(&format!("launchers-{case}"));
    let all = [&["--isolation", "containers", "--quiet", "--out", out.to_str().unwrap()][..], args].concat();
    let child = harness_cmd(&all).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let sweeper = Sweeper(child.id());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{case}: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(left_by(sweeper.0), Vec::<String>::new(), "{case}: containers or networks left");
    let folder = run_folder(&out);
    let arms = if folder.join("run.json").exists() {
        vec![("one".to_owned(), load(&folder))]
    } else {
        ["grpc", "rest"].iter().map(|a| ((*a).to_owned(), load(&folder.join(a)))).collect()
    };
    let _ = std::fs::remove_dir_all(&out);
    arms
}

#[test]
fn tls_between_containers_negotiates_tls_1_3_on_both_arms() {
    if skipped() {
        return;
    }
    let args = ["--transport", "both", "--tls", "--qps", "40", "--delay", "5ms", "--duration", "1500ms"];
    // No warm-up: the connections open inside the round, so their
    // handshakes are counted there.
    let arms = containers_run("tls", &[&args[..], &["--warmup", "0s", "--rounds", "1"]].concat());
    assert_eq!(arms.len(), 2);
    for (arm, run) in &arms {
        let r = &run.rounds[0];
        // Every call crossed the internal hop over TLS: the caller was given
        // https URLs naming the downstream by the host name the run's
        // certificate was made for.
        assert!(r.requests.ok > 0 && r.requests.ok == r.requests.sent, "{arm}: {:?}", r.requests);
        let caller = &run.tiers[&TierName::Caller].settings;
        assert!(caller.to_string().contains("https://downstream:"), "{arm}: {caller}");
        let downstream = &run.tiers[&TierName::Downstream].settings;
        assert!(downstream["tls"].is_object(), "{arm}: {downstream}");
        assert!(downstream["container"]["name"].is_string(), "{arm}: {downstream}");
        let tls = r.bytes.internal.tls.as_ref().unwrap_or_else(|| panic!("{arm}: no TLS tally: {:?}", r.bytes));
        let alpn = if arm == "grpc" { "ALPN h2" } else { "ALPN http/1.1" };
        assert!(tls.handshakes() > 0, "{arm}: {tls:?}");
        assert!(tls.negotiated.keys().all(|k| k.starts_with("TLSv1.3") && k.ends_with(alpn)), "{arm}: {tls:?}");
    }
}

#[test]
fn replicas_scale_in_containers_behind_l4_and_each_reports_its_share() {
    if skipped() {
        return;
    }
    let args = [
        "--transport",
        "rest",
        "--qps",
        "100",
        "--delay",
        "20ms",
        "--duration",
        "4s",
        "--warmup",
        "1s",
        "--downstream-replicas",
        "3",
        "--balance",
        "l4",
        "--scale-at",
        "1s=5",
    ];
    let arms = containers_run("scale", &args);
    let set = arms[0].1.rounds[0].replicas.clone().expect("rounds[].replicas");
    assert_eq!(set.scaling.len(), 1, "{:?}", set.scaling);
    assert_eq!((set.scaling[0].added.clone(), set.scaling[0].replicas), (vec![3, 4], 5));
    let indexes: Vec<u32> = set.each.iter().map(|r| r.index).collect();
    assert_eq!(indexes, [0, 1, 2, 3, 4], "{:?}", set.each);
    // Every replica's counters were read through its container's admin
    // endpoint, the added ones' too, and the shares add up to the calls.
    let shares = shares(&arms[0].1, 0);
    assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-6, "{shares:?}");
    // L4 places connections, not calls: REST's pool reaches as many of the
    // first replicas as it holds connections, two at least with about two
    // calls in flight (gRPC's one connection would reach one).
    let reached = shares[..3].iter().filter(|s| **s > 0.0).count();
    assert!(reached >= 2, "REST's pool reaches more than one first replica: {shares:?}");
}

#[test]
fn a_proxy_in_front_of_replicas_in_containers_runs_on_the_host() {
    if skipped() {
        return;
    }
    let args = ["--transport", "grpc", "--qps", "60", "--delay", "5ms", "--duration", "2s", "--warmup", "500ms"];
    let more = ["--downstream-replicas", "2", "--balance", "l7", "--proxy", "nginx"];
    let arms = containers_run("proxy", &[&args[..], &more].concat());
    let run = &arms[0].1;
    assert!(run.tiers.contains_key(&TierName::Proxy) && run.tiers.contains_key(&TierName::Balancer));
    // l7 spreads gRPC's calls; the proxy in front does not pin them.
    let shares = shares(run, 0);
    assert!(shares.iter().all(|s| (0.3..=0.7).contains(s)), "{shares:?}");
}

#[test]
fn replicas_behind_an_nginx_proxy_each_take_a_share() {
    let runs =
        run("proxied", "--transport grpc --qps 100 --delay 10ms --downstream-replicas 2 --balance l7 --proxy nginx");
    let run = &runs[0].1;
    assert!(run.tiers.contains_key(&TierName::Proxy), "{:?}", run.tiers.keys());
    let shares = shares(run, 0);
    assert_eq!(shares.len(), 2);
    assert!(shares.iter().all(|s| (0.3..=0.7).contains(s)), "{shares:?}");
}

#[test]
fn replicas_behind_a_link_each_take_a_share_and_pay_its_round_trip() {
    let runs =
        run("linked", "--transport rest --qps 50 --delay 10ms --downstream-replicas 2 --balance l7 --link rtt=20ms");
    let run = &runs[0].1;
    assert!(run.tiers.contains_key(&TierName::Link), "{:?}", run.tiers.keys());
    let shares = shares(run, 0);
    assert!(shares.iter().all(|s| (0.3..=0.7).contains(s)), "{shares:?}");
    // Every call crossed the link: the caller's own measure of its
    // downstream calls is never under the service time and the link's
    // round trip.
    let hop = run.rounds[0].latency.downstream_hop.as_ref().expect("the caller timed its calls");
    assert!(hop.min_ms >= 30.0, "fastest downstream call {} ms with a 10 ms delay behind a 20 ms link", hop.min_ms);
}
