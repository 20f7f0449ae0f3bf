//! The JSON form a REST client sees, and the encoded sizes of both transports.

use payload::{FetchRequest, FetchResponse, generate};
use prost::Message;

fn response(items: u32) -> FetchResponse {
    let req = FetchRequest { request_id: format!("size-{items}"), items, body: Vec::new() };
    FetchResponse { request_id: req.request_id.clone(), records: generate(&req) }
}

#[test]
fn json_is_camel_case_with_rfc3339_timestamps() {
    let json = serde_json::to_value(response(1)).unwrap();
    let rec = &json["records"][0];
    for key in ["id", "sku", "name", "email", "priceCents", "currency", "quantity", "tags", "createdAt", "active"] {
        assert!(rec.get(key).is_some(), "missing {key} in {rec}");
    }
    let ts = rec["createdAt"].as_str().unwrap();
    assert!(ts.ends_with('Z') && ts.contains('T') && ts.len() == "2024-01-01T00:00:00.000Z".len(), "{ts}");
    assert_eq!(json["requestId"], "size-1");
}

#[test]
fn json_round_trips_exactly() {
    let resp = response(50);
    let back: FetchResponse = serde_json::from_slice(&serde_json::to_vec(&resp).unwrap()).unwrap();
    assert_eq!(back, resp);
    let req = FetchRequest { request_id: "b".into(), items: 1, body: vec![0, 255, 7] };
    let text = serde_json::to_string(&req).unwrap();
    assert_eq!(text, r#"{"requestId":"b","items":1,"body":"AP8H"}"#);
    assert_eq!(serde_json::from_str::<FetchRequest>(&text).unwrap(), req);
    let no_body: FetchRequest = serde_json::from_str(r#"{"requestId":"c","items":2}"#).unwrap();
    assert!(no_body.body.is_empty());
}

/// Prints the encoded response sizes of both transports; run with
/// `cargo test -p payload --test json_and_sizes -- --nocapture`.
#[test]
fn encoded_sizes_table() {
    println!("| items | protobuf bytes | JSON bytes | JSON / protobuf |");
    println!("|---:|---:|---:|---:|");
    for items in [1u32, 10, 100, 1000] {
        let resp = response(items);
        let pb = proto::FetchResponse::from(resp.clone()).encoded_len();
        let json = serde_json::to_vec(&resp).unwrap().len();
        println!("| {items} | {pb} | {json} | {:.2} |", json as f64 / pb as f64);
        // A relation, not a tuned number: field names and decimal digits make
        // JSON larger than protobuf for these records.
        assert!(json > pb, "{items} items: json {json} <= protobuf {pb}");
    }
}
