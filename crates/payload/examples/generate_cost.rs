//! What building one answer costs the downstream (records generated) and the
//! harness (the same records generated again, their JSON checked against the
//! bytes): `cargo run --release -p payload --example generate_cost [N]`
//! prints ns per answer of 10 records (bench/README.md, "Building an
//! answer's records").

use std::time::Instant;

use payload::{CallRequest, FetchRequest};

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let req = |i: u64| FetchRequest { request_id: i.to_string(), items: 10, ..FetchRequest::default() };
    let started = Instant::now();
    let mut records = 0usize;
    for i in 0..n {
        records += std::hint::black_box(payload::respond(&req(i))).records.len();
    }
    let generate_ns = started.elapsed().as_nanos() as f64 / n as f64;

    let bodies: Vec<(CallRequest, Vec<u8>)> = (0..1000u64)
        .map(|i| {
            let call = CallRequest { request_id: i.to_string(), items: 10, ..CallRequest::default() };
            let body = serde_json::to_vec(&payload::respond(&req(i))).expect("JSON");
            (call, body)
        })
        .collect();
    let started = Instant::now();
    let mut ok = 0u64;
    for i in 0..n {
        let (call, body) = &bodies[(i % 1000) as usize];
        ok += u64::from(payload::verify_call_json(call, 1, body).is_ok());
    }
    let verify_ns = started.elapsed().as_nanos() as f64 / n as f64;
    assert_eq!((records as u64, ok), (10 * n, n), "every answer generated whole and verified");
    println!("respond (10 records): {generate_ns:.0} ns; verify_call_json: {verify_ns:.0} ns  ({n} answers each)");
}
