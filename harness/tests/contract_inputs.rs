//! A team's own contract that cannot work is refused before any load, with
//! the reason and exit 2: inputs past their bounds or not regular files, a
//! request the downstream could never read, a message nested deeper than
//! the tiers decode, a `google.api.http` rule no request could reach or
//! that a built-in route already is.

use std::path::Path;

use crate::common;
use crate::contract::{shop, write};

use common::*;

/// The harness's exit code and stderr for a contract run with `args`.
fn refused(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = dir.join("out");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--transport", "grpc,rest", "--qps", "20", "--out", out.to_str().unwrap()]);
    let o = harness_cmd(&all).output().unwrap();
    assert!(!out.exists(), "{args:?}: refused before anything was written");
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

const TREE: &str = "syntax = \"proto3\";\npackage t;\nservice S { rpc M(Node) returns (Node); }\n\
                    message Node { Node child = 1; int32 v = 2; string text = 3; }\n";

fn nested(depth: usize) -> String {
    format!("{}{{\"v\":1}}{}\n", "{\"child\":".repeat(depth), "}".repeat(depth))
}

#[test]
fn contract_inputs_past_a_bound_are_refused_before_any_load() {
    let dir = out_dir("contract-inputs");
    let proto = shop(&dir).display().to_string();
    let tree = write(&dir, "tree.proto", TREE);
    let get = ["--proto", proto.as_str(), "--call", "shop.v1.Orders/Get"];
    let fifo = dir.join("fifo.jsonl");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let fifo = fifo.display().to_string();
    let deep = write(&dir, "deep.jsonl", &nested(110));
    let huge_request = write(&dir, "huge.jsonl", &format!("{{\"text\":\"{}\"}}\n", "x".repeat(2 << 20)));
    let cases: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
        (
            "/dev/zero as --proto",
            vec!["--proto", "/dev/zero", "--call", "a.B/C"],
            vec!["/dev/zero", "not a regular file"],
        ),
        ("a FIFO as data", [&get[..], &["--response-data", &fifo]].concat(), vec!["fifo.jsonl", "not a regular file"]),
        ("/dev/zero as data", [&get[..], &["--request-data", "/dev/zero"]].concat(), vec!["not a regular file"]),
        (
            "generated past the bound",
            [&get[..], &["--generate-data", "repeated=100000"]].concat(),
            vec!["--generate-data", "field values", "at most 2000000"],
        ),
        (
            "110 levels deep",
            vec!["--proto", &tree, "--call", "t.S/M", "--response-data", &deep],
            vec!["deep.jsonl:1", "100 levels"],
        ),
        (
            "a request over the body limit",
            vec!["--proto", &tree, "--call", "t.S/M", "--request-data", &huge_request],
            vec!["request message 1 of", "huge.jsonl", "body limit"],
        ),
    ];
    for (case, args, said) in cases {
        let (code, err) = refused(&dir, &args);
        assert_eq!(code, Some(2), "{case}: {err}");
        for s in said {
            assert!(err.contains(s), "{case}: {s:?} not in {err}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An API whose one method's rule is a GET on `path` (`{text}` its variable).
fn annotated(dir: &Path, name: &str, path: &str) -> String {
    let text = format!(
        "syntax = \"proto3\";\npackage t;\nimport \"google/api/annotations.proto\";\n\
         service S {{ rpc M(Req) returns (Req) {{ option (google.api.http) = {{ get: \"{path}\" }}; }} }}\n\
         message Req {{ string text = 1; int32 v = 2; }}\n"
    );
    write(dir_made(dir), name, &text)
}

#[test]
fn an_http_rule_no_request_could_reach_is_refused_before_any_load() {
    let dir = out_dir("contract-rules");
    for (path, said) in [
        ("/v1/items/stream", "a route the downstream's REST listener already serves"),
        ("/v1/fetch", "already serves"),
        ("/v1/{text}/{text}", "appears twice"),
        ("/v1/größe/{text}", "a URL path cannot carry"),
        ("//v1//{text}", "an empty segment"),
    ] {
        let proto = annotated(&dir, "rule.proto", path);
        let (code, err) = refused(&dir, &["--proto", &proto, "--call", "t.S/M"]);
        assert_eq!(code, Some(2), "{path}: {err}");
        assert!(err.contains(said) && !err.contains("panicked"), "{path}: {said:?} not in {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn dir_made(dir: &Path) -> &Path {
    std::fs::create_dir_all(dir).unwrap();
    dir
}
