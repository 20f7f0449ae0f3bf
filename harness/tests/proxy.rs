//! A real nginx and caddy between tiers: both transports, both hops. CI
//! installs both from Debian's packages (`.ci/run`).

mod common;

use harness::result::TierName;
use std::time::Duration;

use common::*;

#[test]
fn nginx_and_caddy_on_either_hop_carry_both_transports() {
    for proxy in ["nginx", "caddy"] {
        for transport in ["grpc", "rest"] {
            for hop in ["internal", "front"] {
                let case = format!("{proxy}-{transport}-{hop}");
                let out = out_dir(&format!("proxy-{case}"));
                let mark = format!("proxy-{case}-{}", std::process::id());
                let o = harness_cmd(&[
                    "--proxy",
                    proxy,
                    "--proxy-hop",
                    hop,
                    "--transport",
                    transport,
                    "--qps",
                    "40",
                    "--duration",
                    "1s",
                    "--warmup",
                    "300ms",
                    "--delay",
                    "20ms",
                    "--quiet",
                    "--out",
                    out.to_str().unwrap(),
                ])
                .env(MARK_VAR, &mark)
                .output()
                .unwrap();
                let err = String::from_utf8_lossy(&o.stderr);
                assert!(
                    !err.contains("is not installed"),
                    "{case}: {err}\n(the proxy tests need nginx and caddy: apt-get install nginx caddy)"
                );
                assert_eq!(o.status.code(), Some(0), "{case}: {err}");
                assert_none_left(&mark, Duration::from_secs(5));

                let folder = run_folder(&out);
                let run = load(&folder);
                let r = &run.rounds[0];
                // Every response was verified end to end by the harness.
                assert_eq!((r.requests.sent, r.requests.ok), (40, 40), "{case}: {:?}", r.requests);
                let p = &r.resources[&TierName::Proxy];
                assert!(p.samples > 0 && p.rss_mib_mean.unwrap() > 0.0, "{case}: proxy not sampled: {p:?}");
                let info = &run.tiers[&TierName::Proxy];
                assert_eq!(info.settings["kind"], proxy);
                assert!(info.settings["version"].is_string(), "{case}: no version");
                assert!(info.settings["worker_processes"].as_u64().unwrap_or(0) >= 1, "{case}: no worker count");
                let file = if proxy == "nginx" { "nginx.conf" } else { "Caddyfile" };
                let conf = std::fs::read_to_string(folder.join(file)).unwrap();
                assert_eq!(conf, info.settings["config"].as_str().unwrap());
                // The tiers' own counters still see the traffic on both sides of the proxy.
                assert!(r.bytes.internal.requests >= 35 && r.bytes.front.requests >= 35, "{case}: {:?}", r.bytes);
                let report = std::fs::read_to_string(folder.join("report.md")).unwrap();
                assert!(report.contains("| proxy memory mean (MiB) |"), "{case}");
                let _ = std::fs::remove_dir_all(&out);
            }
        }
    }
}
