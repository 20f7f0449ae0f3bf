//! The plain twin (`plain-downstream`, the bench's reference for the
//! downstream's CPU per request) answers exactly what `downstream` answers:
//! the same records for the same request, over gRPC and REST, after the
//! same delay. Only then is one's CPU per request ÷ the other's a measure of
//! what `downstream` adds around the same work.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use proto::downstream_client::DownstreamClient;
use service::ReadyLine;

/// A started binary and its ready line; killed when dropped.
struct Started(Child, ReadyLine);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(exe: &str) -> Started {
    let mut child = Command::new(exe).args(["--delay", "30ms"]).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let ready = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    Started(child, ready)
}

#[test]
fn the_plain_twin_answers_what_the_downstream_answers() {
    let real = start(env!("CARGO_BIN_EXE_downstream"));
    let plain = start(env!("CARGO_BIN_EXE_plain-downstream"));
    assert_eq!(plain.1.service, "plain-downstream");
    assert_eq!(plain.1.pid, plain.0.id());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let http = reqwest::Client::new();
        for (request_id, items, shape) in [("twin-1", 3, 0), ("twin-2", 40, 1)] {
            let shape_name = ["order", "timeseries"][shape];
            let body = serde_json::json!({"requestId": request_id, "items": items, "shape": shape_name});
            let mut answers = Vec::new();
            for s in [&real, &plain] {
                let t0 = Instant::now();
                let resp =
                    http.post(format!("http://{}/v1/fetch", s.1.listeners["rest"])).json(&body).send().await.unwrap();
                assert_eq!(resp.status(), 200, "{}", s.1.service);
                let json: serde_json::Value = resp.json().await.unwrap();
                assert!(t0.elapsed() >= Duration::from_millis(30), "{} answered before its delay", s.1.service);
                answers.push(json);
            }
            assert_eq!(answers[0], answers[1], "REST, {request_id}");
            let records = answers[0]["records"].as_array().or(answers[0]["points"].as_array()).map(Vec::len);
            assert_eq!(records, Some(items), "{}", answers[0]);

            let mut grpc = Vec::new();
            for s in [&real, &plain] {
                let mut client = DownstreamClient::connect(format!("http://{}", s.1.listeners["grpc"])).await.unwrap();
                let req = proto::FetchRequest {
                    request_id: request_id.into(),
                    items: items as u32,
                    shape: [proto::Shape::Order, proto::Shape::Timeseries][shape] as i32,
                    ..Default::default()
                };
                grpc.push(client.fetch(req).await.unwrap().into_inner());
            }
            assert_eq!(grpc[0], grpc[1], "gRPC, {request_id}");
        }
    });
}
