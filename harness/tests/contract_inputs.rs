//! A team's own contract that cannot work is refused before any load, with
//! the reason and exit 2: inputs past their bounds or not regular files, a
//! request the downstream could never read, a message nested deeper than
//! the tiers decode, a `google.api.http` rule no request could reach or
//! that a built-in route already is. A gateway-annotated API, its
//! grpc-gateway OpenAPI options built in, compiles and runs, and the
//! Contract section names the REST route it took.

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

/// A gateway-annotated API as such files are written: grpc-gateway's
/// OpenAPI options on the file, service, method, message, enum and field.
const GATEWAY: &str = r#"syntax = "proto3";
package echo.v1;
import "google/api/annotations.proto";
import "protoc-gen-openapiv2/options/annotations.proto";
option (grpc.gateway.protoc_gen_openapiv2.options.openapiv2_swagger) = {
  info: { title: "Echo API"; version: "1.0"; contact: { name: "ops" } };
  schemes: HTTPS;
  security_definitions: { security: { key: "key" value: { type: TYPE_API_KEY; in: IN_HEADER; name: "X-Key" } } };
};
service Echo {
  option (grpc.gateway.protoc_gen_openapiv2.options.openapiv2_tag) = { name: "echo"; description: "Echoes" };
  rpc Say(SayRequest) returns (SayReply) {
    option (google.api.http) = { get: "/v1/echo/{id}" };
    option (grpc.gateway.protoc_gen_openapiv2.options.openapiv2_operation) = {
      summary: "Echo one"; operation_id: "say"; tags: "echo";
      responses: { key: "404" value: { description: "no such id" } };
    };
  }
}
message SayRequest {
  option (grpc.gateway.protoc_gen_openapiv2.options.openapiv2_schema) = { json_schema: { required: ["id"] } };
  string id = 1 [(grpc.gateway.protoc_gen_openapiv2.options.openapiv2_field) = { description: "what"; max_length: 64 }];
  Tone tone = 2;
}
enum Tone {
  option (grpc.gateway.protoc_gen_openapiv2.options.openapiv2_enum) = { description: "how" };
  TONE_UNSPECIFIED = 0;
  TONE_LOUD = 1;
}
message SayReply { string text = 1; repeated string words = 2; }
"#;

#[test]
fn a_gateway_annotated_api_runs_and_the_contract_section_names_its_rest_route() {
    let dir = out_dir("contract-gateway");
    let proto = write(dir_made(&dir), "echo.proto", GATEWAY);
    let out = dir.join("out");
    let o = short_run(&out)
        .args(&["--proto", &proto, "--call", "echo.v1.Echo/Say"])
        .flags("--transport grpc,rest --qps 20 --warmup 300ms --rounds 1")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let folder = run_folder(&out);
    for arm in ["grpc", "rest"] {
        let run = load(&folder.join(arm));
        let r = &run.rounds[0];
        assert!(r.requests.sent >= 19 && r.requests.ok == r.requests.sent, "{arm}: {:?}", r.requests);
        let route = run.contract.as_ref().and_then(|c| c.rest_route.clone());
        assert_eq!(
            route.as_deref(),
            Some("GET /v1/echo/{id} (google.api.http, no body); REST+protobuf: POST /v1/echo.v1.Echo/Say")
        );
    }
    let comparison = std::fs::read_to_string(folder.join("comparison.md")).unwrap();
    assert!(comparison.contains("| REST route | GET /v1/echo/{id} (google.api.http, no body);"), "{comparison}");
    assert!(comparison.contains("whatever the data file's own spelling"), "{comparison}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn dir_made(dir: &Path) -> &Path {
    std::fs::create_dir_all(dir).unwrap();
    dir
}
