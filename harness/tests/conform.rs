//! `harness conform` against real servers on 127.0.0.1:0: our own tiers pass
//! every check; a tier that answers one record short, and one that answers
//! an empty 404 to everything, fail by the check's name; bad flags exit 2.
//! The Python stack (`examples/stacks/python/`) is `python_stack.rs`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

use crate::common::{harness_cmd, start_tier};

/// `harness conform ARGS`, run to its end.
pub fn conform(args: &[&str]) -> Output {
    harness_cmd(&[&["conform"][..], args].concat()).output().unwrap()
}

/// The report's lines, and the exit code.
pub fn report(o: &Output) -> (Option<i32>, String) {
    (o.status.code(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

/// The line of check `name`, which must be there.
pub fn line<'a>(text: &'a str, name: &str) -> &'a str {
    text.lines().find(|l| l.split_whitespace().nth(1) == Some(name)).unwrap_or_else(|| panic!("no {name}:\n{text}"))
}

#[test]
fn our_own_tiers_pass_every_check_on_every_arm() {
    let downstream = start_tier(None, "downstream", &["--delay".into(), "1ms".into()]);
    let caller = start_tier(
        None,
        "caller",
        &["--transport".into(), "rest".into(), "--downstream-rest".into(), downstream.url("rest")],
    );
    let o = conform(&[
        "--downstream-grpc",
        &downstream.url("grpc"),
        "--downstream-rest",
        &downstream.url("rest"),
        "--caller-url",
        &caller.url("front"),
    ]);
    let (code, text) = report(&o);
    assert_eq!(code, Some(0), "{text}");
    for name in ["grpc.fetch.order", "grpc.fetch.timeseries", "grpc.invalid-request", "grpc.health", "grpc.reflection"]
        .into_iter()
        .chain([
            "rest.fetch.order",
            "rest.unknown-route",
            "rest.wrong-method",
            "caller.call.order",
            "caller.media-type",
        ])
    {
        assert!(line(&text, name).starts_with("PASS"), "{name}:\n{text}");
    }
    assert!(!text.contains("FAIL") && !text.contains("SKIP"), "{text}");
}

/// A REST downstream written in Python's standard library, answering with
/// `handler`'s body (the records come from the Python stack's generator, a
/// port of crates/payload's): its address and the process.
fn python_tier(handler: &str) -> (String, Child) {
    let stack = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/stacks/python");
    let program = format!(
        r#"
import json, sys
sys.path.insert(0, {stack:?})
import contract
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def answer(self):
        n = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(n)
{handler}
    do_GET = do_POST = answer
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"#
    );
    let mut child = Command::new("python3").args(["-c", &program]).stdout(Stdio::piped()).spawn().unwrap();
    let mut port = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut port).unwrap();
    (format!("127.0.0.1:{}", port.trim()), child)
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_record_short_and_an_empty_404_fail_by_name() {
    // One record fewer than asked for, otherwise the right ones.
    let short = r#"
        req = json.loads(body or b"{}")
        recs = [contract.record_json(r) for r in contract.records(req.get("requestId", ""), max(req.get("items", 1) - 1, 0))]
        out = json.dumps(contract.answer_json(req.get("requestId", ""), recs, [])).encode()
        self.send_response(200); self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out))); self.end_headers(); self.wfile.write(out)"#;
    let (addr, child) = python_tier(short);
    let _short = Killed(child);
    let (code, text) = report(&conform(&["--downstream-rest", &addr, "--items", "4"]));
    assert_eq!(code, Some(1), "{text}");
    let fetch = line(&text, "rest.fetch.order");
    assert!(
        fetch.starts_with("FAIL") && fetch.contains("carries 3 records, expected 4") && fetch.contains("fix:"),
        "{text}"
    );

    let empty = r#"
        self.send_response(404); self.send_header("content-length", "0"); self.end_headers()"#;
    let (addr, child) = python_tier(empty);
    let _empty = Killed(child);
    let (code, text) = report(&conform(&["--downstream-rest", &format!("http://{addr}")]));
    assert_eq!(code, Some(1), "{text}");
    for name in ["rest.fetch.order", "rest.unknown-route", "rest.invalid-request"] {
        let l = line(&text, name);
        assert!(l.starts_with("FAIL") && l.contains("404 with an empty body") && l.contains("fix:"), "{name}: {text}");
    }
    // A gRPC arm where nothing speaks gRPC: every gRPC check fails, none hangs.
    let (code, text) = report(&conform(&["--downstream-grpc", &addr, "--check-timeout", "3s"]));
    assert_eq!(code, Some(1), "{text}");
    assert!(line(&text, "grpc.fetch.order").starts_with("FAIL"), "{text}");
}

#[test]
fn bad_flags_exit_2_before_anything_is_sent() {
    for (args, says) in [
        (&[][..], "nothing to check"),
        (&["--downstream-rest", "https://127.0.0.1:1"][..], "cleartext"),
        (&["--caller-url", "localhost"][..], "--caller-url"),
        (&["--downstream-cmd", "true {grpc_addr}"][..], "{rest_addr}"),
        (&["--downstream-rest", "127.0.0.1:1", "--items", "0"][..], "--items"),
    ] {
        let (code, text) = report(&conform(args));
        assert_eq!(code, Some(2), "{args:?}: {text}");
        assert!(text.contains(says), "{args:?}: {text}");
    }
}

#[test]
fn a_command_that_never_listens_is_named_with_its_stderr() {
    // Split as a shell would and run without one, as a run's --downstream-cmd.
    let cmd = "sh -c 'echo no such port here >&2; exit 3' {grpc_addr} {rest_addr}";
    let (code, text) = report(&conform(&["--downstream-cmd", cmd, "--ready-timeout", "10s"]));
    assert_eq!(code, Some(1), "{text}");
    let start = line(&text, "start");
    assert!(start.starts_with("FAIL") && start.contains("exited") && text.contains("no such port here"), "{text}");
}

/// A team's own method (`--proto`, the shop example's `google.api.http`
/// GET route): our tiers serving it pass on every arm, and a tier that
/// serves only the built-in contract fails the method's checks by name.
#[test]
fn a_teams_own_method_is_checked_on_every_arm() {
    let proto = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/shop/shop.proto");
    let contract = ["--proto", proto, "--call", "shop.v1.OrderService/ListOrders"];
    let owned =
        |extra: &[&str]| -> Vec<String> { [extra, &contract[..]].concat().into_iter().map(String::from).collect() };
    let downstream = start_tier(None, "downstream", &owned(&["--delay", "1ms"]));
    let caller =
        start_tier(None, "caller", &owned(&["--transport", "rest", "--downstream-rest", &downstream.url("rest")]));
    let (grpc, rest, front) = (downstream.url("grpc"), downstream.url("rest"), caller.url("front"));
    let targets = ["--downstream-grpc", &grpc, "--downstream-rest", &rest, "--caller-url", &front];
    let (code, text) = report(&conform(&[&targets[..], &contract[..]].concat()));
    assert_eq!(code, Some(0), "{text}");
    for name in ["grpc.call", "rest.call", "rest.unknown-route", "caller.call", "caller.media-type"] {
        assert!(line(&text, name).starts_with("PASS"), "{name}:\n{text}");
    }
    let builtin = start_tier(None, "downstream", &["--delay".into(), "1ms".into()]);
    let (code, text) = report(&conform(&[&["--downstream-grpc", &builtin.url("grpc")][..], &contract[..]].concat()));
    assert_eq!(code, Some(1), "{text}");
    let call = line(&text, "grpc.call");
    assert!(call.starts_with("FAIL") && call.contains("grpc-status 12"), "{text}");
}
