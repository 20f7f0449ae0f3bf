//! A team's own contract through the harness: data that does not fit the
//! schema is refused before anything starts, naming the file, the line and
//! the field (exit 2); a run over every arm verifies each answer against
//! the data, carries the data's own message bytes per request, and names
//! the contract in run.json, comparison.md and decision.md.

use std::path::{Path, PathBuf};

use crate::common;

use common::*;
use harness::result::{PerRequestBasis, RunResult};

const SHOP: &str = r#"syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
service Orders {
  rpc Get(GetRequest) returns (Order);
  rpc Watch(GetRequest) returns (stream Order);
}
message GetRequest { int64 id = 1; repeated string fields = 2; }
message Order {
  int64 id = 1;
  string customer = 2;
  repeated Line lines = 3;
  map<string, string> labels = 4;
  google.protobuf.Timestamp placed_at = 5;
  bytes signature = 6;
}
message Line { string sku = 1; uint32 qty = 2; }
"#;

/// One request and one answer, each written as the proto3 JSON mapping
/// prints it, so its length is its JSON message size.
const REQUEST: &str = r#"{"id":"1234567890123","fields":["lines","labels"]}"#;
pub(crate) const ANSWER: &str = r#"{"id":"1234567890123","customer":"Ada Lovelace","lines":[{"sku":"A-1","qty":2},{"sku":"B-22","qty":1}],"labels":{"channel":"web"},"placedAt":"2026-12-04T09:30:00Z","signature":"AAECAwQFBgc="}"#;

/// The sizes of [`REQUEST`] and [`ANSWER`] in protobuf, worked out by hand
/// from the wire format (their JSON sizes are their lengths).
const REQUEST_PB: usize = 7 /* id: tag + 6-byte varint */ + 7 /* "lines" */ + 8 /* "labels" */;
const ANSWER_PB: usize = 7 + 14 /* "Ada Lovelace" */ + 2 * 2 + 7 + 8 /* two lines */
    + 2 + 14 /* labels entry: "channel" → "web" */ + 8 /* placed_at: seconds */ + 10 /* signature */;

pub(crate) fn shop(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("shop.proto");
    std::fs::write(&file, SHOP).unwrap();
    file
}

pub(crate) fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn data_that_does_not_fit_the_schema_is_refused_with_its_file_line_and_field() {
    let dir = out_dir("contract-refusals");
    let proto = shop(&dir).display().to_string();
    let good = format!("{ANSWER}\n");
    let cases: Vec<(&str, String, &str, Vec<&str>)> = vec![
        (
            "unknown field",
            format!("{good}{{\"id\":\"1\",\"colour\":\"red\"}}\n"),
            "shop.v1.Orders/Get",
            vec![":2", "colour"],
        ),
        (
            "wrong type",
            format!("{good}{{\"lines\":[{{\"qty\":\"many\"}}]}}\n"),
            "shop.v1.Orders/Get",
            vec![":2", "lines[0].qty"],
        ),
        (
            "int64 out of range",
            "{\"id\":\"9223372036854775808\"}\n".to_owned(),
            "shop.v1.Orders/Get",
            vec![":1", "field `id`"],
        ),
        (
            "bad base64",
            format!("{good}{good}{{\"signature\":\"no base64!\"}}\n"),
            "shop.v1.Orders/Get",
            vec![":3", "signature"],
        ),
        ("missing method", good.clone(), "shop.v1.Orders/Put", vec!["no such method", "shop.v1.Orders/Get"]),
        ("streaming method", good.clone(), "shop.v1.Orders/Watch", vec!["server-streaming", "unary"]),
    ];
    for (case, data, call, said) in cases {
        let file = write(&dir, "answers.jsonl", &data);
        let o = harness_cmd(&[
            "--proto",
            &proto,
            "--call",
            call,
            "--response-data",
            &file,
            "--out",
            dir.join("out").to_str().unwrap(),
        ])
        .output()
        .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{case}: {err}");
        for s in said {
            assert!(err.contains(s), "{case}: {s:?} not in {err}");
        }
        if !call.ends_with("Put") && !call.ends_with("Watch") {
            assert!(err.contains("answers.jsonl:"), "{case}: the file is named: {err}");
        }
        assert!(!dir.join("out").exists(), "{case}: refused before anything was written");
    }
    let o = harness_cmd(&["--proto", &proto]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--call"));
    let o = harness_cmd(&["--proto", &proto, "--call", "shop.v1.Orders/Get", "--items", "50"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "--items sizes the built-in records only");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The decision record of the gRPC and REST arms of `folder`, made from
/// their two run.json files copied into `pair`.
fn decision_of_grpc_and_rest(folder: &Path, pair: &Path) -> String {
    for arm in ["grpc", "rest"] {
        std::fs::create_dir_all(pair.join(arm)).unwrap();
        std::fs::copy(folder.join(arm).join("run.json"), pair.join(arm).join("run.json")).unwrap();
    }
    let o = harness_cmd(&["adr", pair.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn every_arm_carries_the_contracts_messages_and_the_reports_name_it() {
    let dir = out_dir("contract-run");
    let proto = shop(&dir).display().to_string();
    let requests = write(&dir, "requests.jsonl", &format!("{REQUEST}\n"));
    let answers = write(&dir, "answers.jsonl", &format!("{ANSWER}\n"));
    let out = dir.join("out");
    // The method named with a dot here; run.json names it with a slash.
    let o = short_run(&out)
        .args(&["--proto", &proto, "--call", "shop.v1.Orders.Get", "--request-data", &requests])
        .args(&["--response-data", &answers])
        .flags("--transport grpc,rest,rest-pb,grpc-json --qps 40 --warmup 300ms --rounds 1")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    for (arm, request, answer) in [
        ("grpc", REQUEST_PB, ANSWER_PB),
        ("rest-pb", REQUEST_PB, ANSWER_PB),
        ("rest", REQUEST.len(), ANSWER.len()),
        ("grpc-json", REQUEST.len(), ANSWER.len()),
    ] {
        let run: RunResult =
            serde_json::from_slice(&std::fs::read(folder.join(arm).join("run.json")).unwrap()).unwrap();
        let contract = run.contract.as_ref().expect("run.json names the contract");
        assert_eq!(contract.method, "shop.v1.Orders/Get");
        assert_eq!((contract.requests.count, contract.answers.count), (1, 1));
        assert_eq!(contract.answers.json_bytes.map(|s| s.median), Some(ANSWER.len() as f64), "{arm}");
        assert_eq!(contract.answers.protobuf_bytes.map(|s| s.median), Some(ANSWER_PB as f64), "{arm}");
        for r in &run.rounds {
            assert!(r.requests.sent >= 39 && r.requests.ok == r.requests.sent, "{arm}: {:?}", r.requests);
            let hop = &r.bytes.internal;
            assert_eq!(
                (hop.request_message_bytes_per_request, hop.response_message_bytes_per_request),
                (Some(request as f64), Some(answer as f64)),
                "{arm}: message bytes per request"
            );
        }
    }
    let comparison = std::fs::read_to_string(folder.join("comparison.md")).unwrap();
    assert!(
        comparison.contains("## Contract") && comparison.contains("| method | shop.v1.Orders/Get |"),
        "{comparison}"
    );
    assert!(comparison.contains("descriptor set SHA-256"), "{comparison}");
    let decision = decision_of_grpc_and_rest(&folder, &dir.join("pair"));
    assert!(decision.contains("* Contract: `shop.v1.Orders/Get`"), "{decision}");
    assert!(decision.contains("this contract only (shop.v1.Orders/Get"), "{decision}");
    let report = std::fs::read_to_string(folder.join("grpc").join("report.md")).unwrap();
    assert!(report.contains("## Contract"), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Connect (either codec) and gRPC-Web carry the contract's own messages:
/// the message bytes per request are the sizes worked out by hand above.
#[test]
fn connect_and_grpc_web_carry_the_contracts_messages_to_the_byte() {
    let dir = out_dir("contract-protocols");
    let proto = shop(&dir).display().to_string();
    let requests = write(&dir, "requests.jsonl", &format!("{REQUEST}\n"));
    let answers = write(&dir, "answers.jsonl", &format!("{ANSWER}\n"));
    let out = dir.join("out");
    let o = short_run(&out)
        .args(&["--proto", &proto, "--call", "shop.v1.Orders.Get", "--request-data", &requests])
        .args(&["--response-data", &answers])
        .flags("--transport connect,connect-pb,grpc-web --qps 40 --warmup 300ms --rounds 1")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    for (arm, request, answer) in [
        ("connect", REQUEST.len(), ANSWER.len()),
        ("connect-pb", REQUEST_PB, ANSWER_PB),
        ("grpc-web", REQUEST_PB, ANSWER_PB),
    ] {
        let run: RunResult =
            serde_json::from_slice(&std::fs::read(folder.join(arm).join("run.json")).unwrap()).unwrap();
        for r in &run.rounds {
            assert!(r.requests.sent >= 39 && r.requests.ok == r.requests.sent, "{arm}: {:?}", r.requests);
            let hop = &r.bytes.internal;
            assert_eq!(hop.listener, "rest", "{arm}");
            assert_eq!(
                (hop.request_message_bytes_per_request, hop.response_message_bytes_per_request),
                (Some(request as f64), Some(answer as f64)),
                "{arm}: message bytes per request"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A list of answer files is a payload sweep: one measured step per file,
/// every file checked before the first starts, and payload.md names each
/// file by its number with its messages' sizes.
#[test]
fn a_list_of_data_files_is_a_payload_sweep_one_step_per_file() {
    let dir = out_dir("contract-sweep");
    let proto = shop(&dir).display().to_string();
    let small = write(&dir, "small.jsonl", &format!("{ANSWER}\n"));
    let lines = r#"{"id":"1","lines":[{"sku":"A","qty":1},{"sku":"B","qty":2},{"sku":"C","qty":3}]}"#;
    let large = write(&dir, "large.jsonl", &format!("{}\n", ANSWER.replace("Ada Lovelace", &"Ada ".repeat(200))));
    let bad = write(&dir, "bad.jsonl", &format!("{lines}\n{{\"qty\":1}}\n"));
    let out = dir.join("out");
    let refused =
        harness_cmd(&["--proto", &proto, "--call", "shop.v1.Orders/Get", "--response-data", &format!("{small},{bad}")])
            .output()
            .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("bad.jsonl:2"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let o = short_run(&out)
        .args(&contract_flags(&proto, &format!("{small},{large}")))
        .flags("--transport grpc --qps 40 --warmup 300ms")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    let answer_bytes = |step: &str| {
        let run: RunResult =
            serde_json::from_slice(&std::fs::read(folder.join(step).join("run.json")).unwrap()).unwrap();
        assert_eq!(run.contract.as_ref().map(|c| c.answers.count), Some(1), "{step}");
        run.rounds[0].bytes.internal.response_message_bytes_per_request.unwrap()
    };
    let (first, second) = (answer_bytes("step-answers-1"), answer_bytes("step-answers-2"));
    let longer = ("Ada ".repeat(200).len() - "Ada Lovelace".len()) as f64;
    assert_eq!(second - first, longer + 1.0, "the longer name, and one byte more for its length");
    let payload = std::fs::read_to_string(folder.join("payload.md")).unwrap();
    assert!(payload.contains("1 = small.jsonl (1 messages") && payload.contains("2 = large.jsonl"), "{payload}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A team's own contract over TLS, compressed, fanned out: every answer
/// still the one its number picks (no errors), each downstream call
/// carrying the data's message bytes (the counts are per call, uncompressed),
/// and less on the wire than the messages where gzip has work to do.
#[test]
fn a_contract_runs_over_tls_compressed_and_fanned_out() {
    let dir = out_dir("contract-hop");
    let proto = shop(&dir).display().to_string();
    let answers = write(&dir, "answers.jsonl", &format!("{}\n", ANSWER.replace("Ada Lovelace", &"Ada ".repeat(300))));
    let out = dir.join("out");
    let o = short_run(&out)
        .args(&contract_flags(&proto, &answers))
        .flags("--transport both --tls --compression gzip --fanout 2 --qps 40 --warmup 300ms --rounds 1")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    for arm in ["grpc", "rest"] {
        let run: RunResult =
            serde_json::from_slice(&std::fs::read(folder.join(arm).join("run.json")).unwrap()).unwrap();
        let contract = run.contract.as_ref().unwrap();
        let json = contract.answers.json_bytes.unwrap().median;
        let pb = contract.answers.protobuf_bytes.unwrap().median;
        for r in &run.rounds {
            assert!(r.requests.sent >= 39 && r.requests.ok == r.requests.sent, "{arm}: {:?}", r.requests);
            let hop = &r.bytes.internal;
            let expected = if arm == "grpc" { pb } else { json };
            assert_eq!(hop.response_message_bytes_per_request, Some(expected), "{arm}: per downstream call");
            let calls = hop.requests as f64 / r.requests.sent as f64;
            assert!((calls - 2.0).abs() < 0.1, "{arm}: two downstream calls a request: {hop:?}");
            assert!(
                hop.response_wire_bytes_per_request.unwrap() < expected,
                "{arm}: gzip shrinks 1,200 B of 'Ada ': {hop:?}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `harness rerun` of a run on a team's own contract repeats it on the
/// same files, and says when a file has changed since: here the answers.
#[test]
fn rerun_repeats_a_contract_run_and_says_what_changed_in_its_files() {
    let dir = out_dir("contract-rerun");
    let proto = shop(&dir).display().to_string();
    let answers = write(&dir, "answers.jsonl", &format!("{ANSWER}\n"));
    let out = dir.join("out");
    let o = short_run(&out)
        .args(&contract_flags(&proto, &answers))
        .flags("--transport grpc --qps 40 --warmup 300ms")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let first = run_folder(&out);
    let again = harness_cmd(&["rerun", first.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("has changed since the run"), "nothing changed: {stderr}");
    write(&dir, "answers.jsonl", &format!("{ANSWER}\n{ANSWER}\n"));
    let changed = harness_cmd(&["rerun", first.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&changed.stderr);
    assert_eq!(changed.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("the answer data has changed since the run"), "{stderr}");
    assert!(stderr.contains("(1 messages)") && stderr.contains("(2 messages)"), "{stderr}");
    let runs: Vec<RunResult> = run_folders(&out).iter().map(|f| load(f)).collect();
    assert_eq!(runs.len(), 3);
    assert!(
        runs.iter().any(|r| r.contract.as_ref().is_some_and(|c| c.answers.count == 2)),
        "the rerun used the files as they are now"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The contract's flags with `answers` as the answer data.
pub(crate) fn contract_flags(proto: &str, answers: &str) -> Vec<String> {
    ["--proto", proto, "--call", "shop.v1.Orders/Get", "--response-data", answers].map(String::from).into()
}

/// Tiers the harness did not start serve a contract when their admin
/// endpoints report the same method, descriptor set and data; a downstream
/// answering from other data is refused before the load starts (exit 1,
/// saying what differs), and without admin endpoints nothing starts (exit 2).
#[test]
fn tiers_started_elsewhere_must_serve_the_same_contract() {
    let dir = out_dir("contract-remote");
    let proto = shop(&dir).display().to_string();
    let answers = write(&dir, "answers.jsonl", &format!("{ANSWER}\n"));
    let other = write(&dir, "other.jsonl", &format!("{}\n", ANSWER.replace("Ada", "Bob")));
    let at = || "127.0.0.1:0".to_owned();
    let mut args = vec!["--grpc-addr".into(), at(), "--rest-addr".into(), at(), "--admin-addr".into(), at()];
    args.extend(["--delay".into(), "5ms".into()]);
    args.extend(contract_flags(&proto, &answers));
    let downstream = start_tier(None, "downstream", &args);
    let mut args = vec!["--transport".into(), "grpc".into(), "--downstream-grpc".into(), downstream.url("grpc")];
    args.extend(["--listen".into(), at(), "--admin-addr".into(), at()]);
    args.extend(contract_flags(&proto, &answers));
    let caller = start_tier(None, "caller", &args);
    let out = dir.join("out");
    let run = |answers: &str, admin: bool| {
        let mut run = short_run(&out).args(&["--caller-url".to_owned(), caller.url("front")]);
        if admin {
            run = run.args(&["--caller-admin".to_owned(), caller.url("admin")]);
            run = run.args(&["--downstream-admin".to_owned(), downstream.url("admin")]);
        }
        run.args(&contract_flags(&proto, answers)).flags("--qps 40 --delay 5ms").output()
    };
    let o = run(&answers, true);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r = &load(&run_folder(&out)).rounds[0];
    assert!(r.requests.sent >= 39 && r.requests.ok == r.requests.sent, "{:?}", r.requests);
    assert_eq!(r.bytes.internal.response_message_bytes_per_request, Some(ANSWER_PB as f64));
    let _ = std::fs::remove_dir_all(&out);

    let o = run(&other, true);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("downstream") && err.contains("sends other answers") && err.contains("other.jsonl"), "{err}");
    let o = run(&answers, false);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--caller-admin"), "{err}");
    let written: Vec<_> = std::fs::read_dir(&out).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    assert!(written.is_empty(), "neither refused run wrote a folder: {written:?}");
    drop((caller, downstream));
    let _ = std::fs::remove_dir_all(&dir);
}

/// nginx and caddy between the tiers carry a contract on both transports
/// (REST at its plain route: this contract has no google.api.http rule),
/// every answer verified; `harness compare` on the two folders names the
/// contract and warns when two runs called with other data.
#[test]
fn a_contract_goes_through_either_proxy_and_compare_tells_contracts_apart() {
    let dir = out_dir("contract-proxy");
    let proto = shop(&dir).display().to_string();
    let answers = write(&dir, "answers.jsonl", &format!("{ANSWER}\n"));
    let other = write(&dir, "other.jsonl", &format!("{}\n", ANSWER.replace("Ada", "Bob")));
    let mut folders = Vec::new();
    for (proxy, transport, data) in
        [("nginx", "grpc", &answers), ("caddy", "rest", &answers), ("nginx", "rest", &other)]
    {
        let out = dir.join(format!("{proxy}-{transport}-{}", folders.len()));
        let run =
            short_run(&out).args(&contract_flags(&proto, data)).args(&["--proxy", proxy, "--transport", transport]);
        let o = run.flags("--qps 40 --warmup 300ms").output();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("is not installed"), "{err}\n(apt-get install nginx caddy)");
        assert_eq!(o.status.code(), Some(0), "{proxy} {transport}: {err}");
        let folder = run_folder(&out);
        let r = &load(&folder).rounds[0];
        assert_eq!((r.requests.sent, r.requests.ok), (40, 40), "{proxy} {transport}: {:?}", r.requests);
        let answer = if transport == "grpc" { ANSWER_PB } else { ANSWER.len() };
        let per_request = r.bytes.internal.response_message_bytes_per_request;
        if data == &answers {
            assert_eq!(per_request, Some(answer as f64), "{proxy} {transport}");
        }
        folders.push(folder.display().to_string());
    }
    let compare = |a: &str, b: &str| harness_cmd(&["compare", a, b]).output().unwrap();
    let o = compare(&folders[0], &folders[1]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.contains("## Contract") && md.contains("| method | shop.v1.Orders/Get |"), "{md}");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("contract differs"), "the same contract and data");
    let o = compare(&folders[1], &folders[2]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("warning: contract differs") && err.contains("answers file SHA-256"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A rate sweep with a team's own contract: every step carries the data's
/// bytes with every answer verified, and capacity.md names the method.
#[test]
fn a_rate_sweep_measures_the_contract_at_every_step() {
    let dir = out_dir("contract-rates");
    let proto = shop(&dir).display().to_string();
    let answers = write(&dir, "answers.jsonl", &format!("{ANSWER}\n"));
    let out = dir.join("out");
    let run = short_run(&out).args(&contract_flags(&proto, &answers));
    let o = run.flags("--transport grpc --qps 20,40 --warmup 200ms --slo-p99 1s").output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    for (step, rate) in [("step-20qps", 20), ("step-40qps", 40)] {
        let run = load(&folder.join(step));
        assert_eq!(run.contract.as_ref().map(|c| c.method.as_str()), Some("shop.v1.Orders/Get"), "{step}");
        let r = &run.rounds[0];
        assert!(r.requests.sent >= rate - 1 && r.requests.ok == r.requests.sent, "{step}: {:?}", r.requests);
        assert_eq!(r.bytes.internal.response_message_bytes_per_request, Some(ANSWER_PB as f64), "{step}");
    }
    let md = std::fs::read_to_string(folder.join("capacity.md")).unwrap();
    assert!(md.contains("shop.v1.Orders/Get"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Eight answers of very different sizes: each round's message bytes per
/// request are its own calls' mean, to the byte, on every hop. A round's
/// counters window opens with the warm-up's last calls still in flight
/// (each is held 100 ms) and closes before its own last ones end; the
/// warm-up's and the round's lengths are chosen so those are other data
/// lines (12 calls of warm-up, 40 of round, 8 lines), so the window's mix
/// is not the round's.
#[test]
fn message_bytes_per_request_are_the_rounds_own_calls_mean_to_the_byte() {
    let dir = out_dir("contract-own-calls");
    let proto = shop(&dir).display().to_string();
    let sizes: [usize; 8] = [100, 3_000, 40_000, 1_000, 120_000, 10, 60_000, 7_000];
    let lines: Vec<String> = sizes
        .iter()
        .enumerate()
        .map(|(k, len)| {
            let signature = "A".repeat(len.div_ceil(3) * 4);
            format!(r#"{{"id":"{}","signature":"{signature}"}}"#, k + 1)
        })
        .collect();
    let varint_len = |v: usize| (usize::BITS - v.max(1).leading_zeros()).div_ceil(7) as usize;
    // Protobuf by hand: id (tag + one-byte varint), signature (tag, length, bytes).
    let pb: Vec<usize> =
        sizes.iter().map(|len| 2 + 1 + varint_len(len.div_ceil(3) * 3) + len.div_ceil(3) * 3).collect();
    // The proto3 JSON mapping prints each line exactly as written.
    let json: Vec<usize> = lines.iter().map(String::len).collect();
    let requests = write(&dir, "requests.jsonl", &format!("{REQUEST}\n"));
    let answers = write(&dir, "answers.jsonl", &(lines.join("\n") + "\n"));
    let out = dir.join("out");
    let o = short_run(&out)
        .args(&["--proto", &proto, "--call", "shop.v1.Orders.Get", "--request-data", &requests])
        .args(&["--response-data", &answers])
        .flags("--transport grpc,rest --qps 40 --warmup 300ms --warmup-ramp 0s --duration 1s --delay 100ms --rounds 2")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    for (arm, answer_sizes, request) in [("grpc", &pb, REQUEST_PB), ("rest", &json, REQUEST.len())] {
        let run = load(&folder.join(arm));
        assert_eq!(run.rounds.len(), 2, "{arm}");
        for r in &run.rounds {
            let n = r.requests.sent;
            assert!(n >= 39 && r.requests.ok == n && r.requests.scheduled == n, "{arm}: {:?}", r.requests);
            // Call i of a round answers line i mod 8, from its first call on.
            let own = |sizes: &[usize]| (0..n).map(|i| sizes[(i % 8) as usize] as u64).sum::<u64>() as f64 / n as f64;
            let hop = &r.bytes.internal;
            assert_eq!(hop.response_message_bytes_per_request, Some(own(answer_sizes)), "{arm} round {}", r.index);
            assert_eq!(hop.request_message_bytes_per_request, Some(request as f64), "{arm} round {}", r.index);
            // The front answer is the JSON array of the one answer.
            let front: Vec<usize> = json.iter().map(|j| j + 2).collect();
            assert_eq!(r.bytes.front.response_message_bytes_per_request, Some(own(&front)), "{arm} front");
            // Wire bytes are the same calls': the round started once the
            // warm-up's calls had ended and was read again after its own
            // last, so what the wire carried beyond the messages is each
            // call's framing (headers, frame and length prefixes: hundreds
            // of bytes), not a window's mix of 10 B to 120 kB answers.
            assert_eq!(r.per_request_basis, Some(PerRequestBasis::OwnCalls), "{arm} round {}", r.index);
            for (name, hop) in [("front", &r.bytes.front), ("internal", hop)] {
                assert_eq!(hop.requests, n, "{arm} {name}: the window's answers are the round's calls");
                assert_eq!(hop.requests_started, Some(n), "{arm} {name}");
                let framing = |wire: Option<f64>, message: Option<f64>| wire.unwrap() - message.unwrap();
                let back = framing(hop.response_wire_bytes_per_request, hop.response_message_bytes_per_request);
                let out = framing(hop.request_wire_bytes_per_request, hop.request_message_bytes_per_request);
                for (dir, f) in [("response", back), ("request", out)] {
                    assert!(f > 0.0 && f < 1_000.0, "{arm} {name} round {}: {dir} framing {f} B per call", r.index);
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
