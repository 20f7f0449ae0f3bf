//! Four arms end to end: `--transport grpc,rest,rest-pb,grpc-json` runs every
//! arm counterbalanced on its own tiers, counts each arm's internal-hop bytes
//! on the downstream listener it reaches, writes a comparison against the
//! baseline with the attribution paragraph, and `harness compare` on the
//! folder reproduces it byte for byte.

use crate::common;

use common::*;
use harness::result::RunResult;

#[test]
fn four_arms_compare_against_the_baseline_and_attribute_the_difference() {
    let out = out_dir("arms-run");
    let o = short_run(&out)
        .flags("--transport grpc,rest,rest-pb,grpc-json --qps 40 --warmup 300ms --rounds 2 --delay 20ms --items 50")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    assert!(folder.file_name().unwrap().to_string_lossy().ends_with("-grpc+rest+rest-pb+grpc-json-40qps"));
    let mut wire = Vec::new();
    for (arm, listener) in [("grpc", "grpc"), ("rest", "rest"), ("rest-pb", "rest"), ("grpc-json", "grpc")] {
        let run: RunResult =
            serde_json::from_slice(&std::fs::read(folder.join(arm).join("run.json")).unwrap()).unwrap();
        assert_eq!((run.config.transport.as_str(), run.config.baseline), (arm, None));
        assert_eq!(run.rounds.len(), 2);
        for r in &run.rounds {
            assert!(r.complete && r.requests.ok == r.requests.sent && r.requests.sent >= 39, "{arm}: {:?}", r.requests);
            let hop = &r.bytes.internal;
            assert_eq!(hop.listener, listener, "{arm}");
            assert!(hop.requests >= 39, "{arm}: the downstream's {listener} listener counted {}", hop.requests);
            let (sent, got) =
                (hop.request_wire_bytes_per_request.unwrap(), hop.response_wire_bytes_per_request.unwrap());
            assert!(got > hop.response_message_bytes_per_request.unwrap(), "{arm}: {hop:?}");
            wire.push((arm, r.index, sent + got, hop.response_message_bytes_per_request.unwrap()));
        }
    }
    // Encoding sets the message bytes: rest-pb's answers are gRPC's protobuf,
    // grpc-json's are REST's JSON, round for round. An answer's size varies
    // by a few bytes with its request's id, and a round counts the answers
    // that finish between its reads: each read is 12.5 ms after a request
    // whose answer takes the 20-ms delay, so that answer lands on either side
    // of it. The sizes agree to 0.1%, not to the byte; JSON is 20% larger or more.
    let msg = |arm: &str| wire.iter().filter(|w| w.0 == arm).map(|w| w.3).collect::<Vec<_>>();
    let same = |a: &str, b: &str| msg(a).iter().zip(msg(b)).all(|(x, y)| (x / y - 1.0).abs() < 0.001);
    assert!(same("rest-pb", "grpc") && same("grpc-json", "rest"), "{wire:?}");
    assert!(msg("rest")[0] > msg("grpc")[0] * 1.2, "{wire:?}");

    let comparison = std::fs::read_to_string(folder.join("comparison.md")).unwrap();
    assert!(comparison.starts_with("# grpc-vs-rest comparison: gRPC vs REST vs REST+protobuf vs gRPC+JSON"));
    assert!(comparison.contains("REST+protobuf against gRPC:") && comparison.contains("gRPC+JSON against gRPC:"));
    assert!(comparison.contains("## Attribution: encoding or transport"), "{comparison}");
    for figure in ["internal hop wire bytes per request", "caller CPU per request", "downstream CPU per request"] {
        assert!(comparison.contains(&format!("- **{figure}")), "no attribution of {figure}: {comparison}");
    }

    let again = out_dir("arms-compare");
    let o = harness_cmd(&["compare", folder.to_str().unwrap(), "--out", again.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(again.join("comparison.md")).unwrap(), comparison);
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&again);
}

#[test]
fn bad_arms_and_baselines_are_refused_naming_the_flag() {
    for (args, flag) in [
        (&["--transport", "grpc,soap"][..], "--transport"),
        (&["--transport", "grpc,rest,grpc"], "--transport"),
        (&["--transport", "both", "--baseline", "grpc-json"], "--baseline"),
    ] {
        let o = harness_cmd(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
    }
}

/// Connect (either codec) and gRPC-Web beside gRPC and REST: every answer
/// verified, each arm's bytes counted on the REST listener it reaches, and
/// the comparison judging each against gRPC.
#[test]
fn connect_and_grpc_web_arms_run_and_are_judged_against_grpc() {
    let out = out_dir("protocols-run");
    let o = short_run(&out)
        .flags("--transport grpc,connect,connect-pb,grpc-web,rest --qps 40 --warmup 300ms --rounds 2 --delay 20ms --items 50")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    let mut answers = Vec::new();
    for (arm, listener) in [("grpc", "grpc"), ("connect", "rest"), ("connect-pb", "rest"), ("grpc-web", "rest")] {
        let run: RunResult =
            serde_json::from_slice(&std::fs::read(folder.join(arm).join("run.json")).unwrap()).unwrap();
        assert_eq!(run.config.transport.as_str(), arm);
        for r in &run.rounds {
            assert!(r.complete && r.requests.ok == r.requests.sent && r.requests.sent >= 39, "{arm}: {:?}", r.requests);
            assert_eq!(r.requests.error_total(), 0, "{arm}: every answer verified: {:?}", r.requests.errors);
            let hop = &r.bytes.internal;
            assert_eq!(hop.listener, listener, "{arm}");
            assert!(hop.requests >= 39, "{arm}: the downstream's {listener} listener counted {}", hop.requests);
            answers.push((arm, hop.response_message_bytes_per_request.unwrap()));
        }
    }
    // Protobuf on Connect and gRPC-Web is gRPC's message, to 0.1% (see above).
    let msg = |arm: &str| answers.iter().filter(|w| w.0 == arm).map(|w| w.1).collect::<Vec<_>>();
    let same = |a: &str, b: &str| msg(a).iter().zip(msg(b)).all(|(x, y)| (x / y - 1.0).abs() < 0.001);
    assert!(same("connect-pb", "grpc") && same("grpc-web", "grpc"), "{answers:?}");
    assert!(msg("connect")[0] > msg("grpc")[0] * 1.2, "{answers:?}");
    let comparison = std::fs::read_to_string(folder.join("comparison.md")).unwrap();
    for arm in ["Connect", "Connect+protobuf", "gRPC-Web", "REST"] {
        assert!(comparison.contains(&format!("{arm} against gRPC:")), "{arm}: {comparison}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// The new arms go wherever REST goes: through nginx on the internal hop,
/// and over TLS with gzip to two replicas behind the L4 balancer, every
/// answer verified; with gzip, Connect's JSON answers are smaller on the
/// wire than as messages (Content-Encoding, as REST's).
#[test]
fn connect_and_grpc_web_cross_a_proxy_tls_compression_and_replicas() {
    let cases = [
        ("protocols-nginx", "--proxy nginx --proxy-hop internal"),
        ("protocols-tls-gzip-l4", "--tls --compression gzip --downstream-replicas 2 --balance l4"),
    ];
    for (name, flags) in cases {
        let out = out_dir(name);
        let o = short_run(&out)
            .flags("--transport connect,connect-pb,grpc-web --qps 20 --warmup 300ms --rounds 1 --delay 10ms")
            .flags(flags)
            .output();
        assert_eq!(o.status.code(), Some(0), "{name}: {}", String::from_utf8_lossy(&o.stderr));
        let folder = run_folder(&out);
        for arm in ["connect", "connect-pb", "grpc-web"] {
            let run: RunResult =
                serde_json::from_slice(&std::fs::read(folder.join(arm).join("run.json")).unwrap()).unwrap();
            let r = &run.rounds[0];
            assert!(r.requests.ok > 0 && r.requests.ok == r.requests.sent, "{name} {arm}: {:?}", r.requests);
            assert_eq!(r.requests.error_total(), 0, "{name} {arm}: {:?}", r.requests.errors);
            let hop = &r.bytes.internal;
            assert_eq!(hop.listener, "rest", "{name} {arm}");
            if name.contains("gzip") && arm == "connect" {
                let (wire, message) = (hop.response_wire_bytes.unwrap(), hop.response_message_bytes.unwrap());
                assert!(wire < message, "{name} {arm}: {wire} wire bytes for {message} of messages");
            }
        }
        let _ = std::fs::remove_dir_all(&out);
    }
}

#[test]
fn grpc_web_over_http2_is_refused_before_anything_starts() {
    let o = harness_cmd(&["--transport", "grpc,grpc-web", "--rest-http2"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--rest-http2") && err.contains("grpc-web"), "{err}");
}
