//! `--mtls --compression gzip` end to end: certificates made for the run and
//! written into its folder, both arms negotiating TLS 1.3 with their ALPN on
//! the internal hop, the settings in run.json and the reports, and `harness
//! rerun` measuring the same configuration again. Bad combinations are exit 2.

use crate::common;

use common::*;
use harness::result::{RunResult, TierName};

fn run_json(folder: &std::path::Path, arm: &str) -> RunResult {
    serde_json::from_slice(&std::fs::read(folder.join(arm).join("run.json")).unwrap()).unwrap()
}

#[test]
fn mtls_and_gzip_on_both_arms_are_measured_reported_and_rerun() {
    let out = out_dir("wire");
    let o = short_run(&out)
        .flags("--transport both --qps 30 --warmup 200ms --rounds 1 --delay 10ms --items 50 --mtls --compression gzip")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    for f in ["ca.pem", "server.pem", "server-key.pem", "client.pem", "client-key.pem"] {
        assert!(folder.join("tls").join(f).is_file(), "tls/{f}");
    }
    // Keys are readable by their owner only; run.json names the files where
    // they are now, relative to the run folder, not the hidden one written first.
    use std::os::unix::fs::PermissionsExt;
    for key in ["server-key.pem", "client-key.pem"] {
        let mode = std::fs::metadata(folder.join("tls").join(key)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "tls/{key}: {mode:o}");
    }
    for (arm, alpn) in [("grpc", "ALPN h2"), ("rest", "ALPN http/1.1")] {
        let run = run_json(&folder, arm);
        assert_eq!(run.config.hop.tls.as_str(), "mtls");
        assert_eq!(run.config.hop.compression.as_str(), "gzip");
        let r = &run.rounds[0];
        assert!(r.requests.ok > 0 && r.requests.ok == r.requests.sent, "{arm}: {:?}", r.requests);
        // Handshakes happen as connections open; the negotiation is recorded
        // wherever one fell inside the round, and the settings always.
        if let Some(tls) = r.bytes.internal.tls.as_ref().filter(|t| t.handshakes() > 0) {
            assert!(tls.negotiated.keys().all(|k| k.starts_with("TLSv1.3") && k.ends_with(alpn)), "{tls:?}");
        }
        let ds = &run.tiers[&TierName::Downstream].settings;
        assert_eq!(ds["tls"][arm]["client_auth"], "required (mTLS)", "{ds}");
        assert_eq!(ds["compression"]["encoding"], "gzip");
        let caller = &run.tiers[&TierName::Caller].settings["client"];
        assert_eq!(caller["compression"]["encoding"], "gzip", "{caller}");
        assert!(caller["tls"]["client_certificate"].is_string(), "{caller}");
        let saved = std::fs::read_to_string(folder.join(arm).join("run.json")).unwrap();
        assert!(!saved.contains(".tmp-"), "{arm}: run.json names the hidden folder");
        assert!(saved.contains("\"tls/client.pem\""), "{arm}: no relative certificate path");
        let report = std::fs::read_to_string(folder.join(arm).join("report.md")).unwrap();
        assert!(report.contains("| internal hop TLS | mutual TLS"), "{report}");
        assert!(report.contains("| internal hop compression | gzip"), "{report}");
    }
    let comparison = std::fs::read_to_string(folder.join("comparison.md")).unwrap();
    assert!(
        comparison.contains("| internal hop compression | gzip (")
            && comparison.contains("| internal hop TLS | mutual TLS")
    );

    let o = harness_cmd(&["rerun", folder.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let second = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir() && *p != folder && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .expect("the rerun's folder");
    for arm in ["grpc", "rest"] {
        assert_eq!(run_json(&second, arm).config, run_json(&folder, arm).config, "{arm}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn tls_with_a_proxy_and_unknown_compression_are_refused_naming_the_flag() {
    for (args, flag) in [(&["--tls", "--proxy", "nginx"][..], "--tls"), (&["--compression", "brotli"], "--compression")]
    {
        let o = harness_cmd(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
}
