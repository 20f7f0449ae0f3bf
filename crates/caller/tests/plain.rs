//! The plain twin (`plain-caller`, the bench's reference for the caller's
//! CPU per request) answers at its front door what `caller` answers, over
//! each of the two arms it has, in front of the same downstream: only then
//! is one's CPU per request ÷ the other's a measure of what `caller` adds
//! around the same calls.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use downstream::Config as DsConfig;
use tokio_util::sync::CancellationToken;

/// A started binary and its front door; killed when dropped.
struct Started(Child, std::net::SocketAddr);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(exe: &str, args: &[String], service: &str) -> Started {
    let mut child = Command::new(exe).args(args).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let ready: service::ReadyLine = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    assert_eq!((ready.service.as_str(), ready.pid), (service, child.id()));
    Started(child, ready.listeners["front"])
}

#[test]
fn the_plain_twin_answers_what_the_caller_answers_on_both_arms() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let config = DsConfig { delay: Duration::from_millis(10), ..DsConfig::default() };
    let ds = rt.block_on(downstream::start(config, CancellationToken::new())).unwrap();
    for (transport, flag, addr) in
        [("grpc", "--downstream-grpc", ds.grpc_addr), ("rest", "--downstream-rest", ds.rest_addr)]
    {
        let args: Vec<String> =
            ["--transport", transport, flag, &format!("http://{addr}")].iter().map(|a| (*a).to_owned()).collect();
        let real = start(env!("CARGO_BIN_EXE_caller"), &args, "caller");
        let plain = start(env!("CARGO_BIN_EXE_plain-caller"), &args, "plain-caller");
        rt.block_on(async {
            let http = reqwest::Client::new();
            for body in [
                serde_json::json!({"requestId": "twin-1", "items": 4}),
                serde_json::json!({"requestId": "twin-2", "items": 25, "shape": "timeseries"}),
            ] {
                let mut answers = Vec::new();
                for front in [real.1, plain.1] {
                    let resp = http.post(format!("http://{front}/v1/call")).json(&body).send().await.unwrap();
                    assert_eq!(resp.status(), 200, "{transport}: {front}");
                    answers.push(resp.json::<serde_json::Value>().await.unwrap());
                }
                assert_eq!(answers[0], answers[1], "{transport}: {body}");
                let items = body["items"].as_u64().unwrap() as usize;
                let n = answers[0]["records"].as_array().or(answers[0]["points"].as_array()).map(Vec::len);
                assert_eq!(n, Some(items), "{transport}: {}", answers[0]);
            }
        });
    }
    rt.block_on(ds.stop());
}
