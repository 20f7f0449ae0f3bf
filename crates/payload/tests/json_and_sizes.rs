//! The JSON form a REST client sees, and the encoded sizes of both transports.

use payload::{FetchRequest, FetchResponse, Shape, respond};
use prost::Message;

fn shaped(items: u32, shape: Shape) -> FetchResponse {
    respond(&FetchRequest { request_id: format!("size-{items}"), items, shape, ..FetchRequest::default() })
}

fn response(items: u32) -> FetchResponse {
    shaped(items, Shape::Order)
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
fn time_series_points_are_numbers_in_json() {
    let json = serde_json::to_value(shaped(2, Shape::Timeseries)).unwrap();
    assert!(json.get("records").is_none(), "{json}");
    let point = &json["points"][0];
    for key in ["seriesId", "timestampMs", "value", "min", "max", "sum", "count"] {
        assert!(point[key].is_number(), "{key} in {point}");
    }
    let req = FetchRequest { request_id: "t".into(), items: 3, shape: Shape::Timeseries, ..FetchRequest::default() };
    assert_eq!(serde_json::to_string(&req).unwrap(), r#"{"requestId":"t","items":3,"shape":"timeseries"}"#);
}

/// Each shape comes back identical, field for field and bit for bit, through
/// JSON and through protobuf.
#[test]
fn every_shape_round_trips_identically_through_json_and_protobuf() {
    for shape in Shape::ALL {
        for items in [0u32, 1, 7, 300] {
            let resp = shaped(items, shape);
            let from_json: FetchResponse = serde_json::from_slice(&serde_json::to_vec(&resp).unwrap()).unwrap();
            assert_eq!(from_json, resp, "{shape} via JSON");
            let pb = proto::FetchResponse::from(resp.clone()).encode_to_vec();
            let from_pb = FetchResponse::try_from(proto::FetchResponse::decode(&pb[..]).unwrap()).unwrap();
            assert_eq!(from_pb, resp, "{shape} via protobuf");
            let digest = |r: &FetchResponse| (payload::records_digest(&r.records), payload::points_digest(&r.points));
            assert_eq!((digest(&from_json), digest(&from_pb)), (digest(&resp), digest(&resp)));
        }
    }
}

#[test]
fn json_round_trips_exactly() {
    let resp = response(50);
    let back: FetchResponse = serde_json::from_slice(&serde_json::to_vec(&resp).unwrap()).unwrap();
    assert_eq!(back, resp);
    let req = FetchRequest { request_id: "b".into(), items: 1, body: vec![0, 255, 7], ..FetchRequest::default() };
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
    println!("| shape | items | protobuf bytes | JSON bytes | JSON / protobuf |");
    println!("|---|---:|---:|---:|---:|");
    for shape in Shape::ALL {
        for items in [1u32, 10, 100, 1000] {
            let resp = shaped(items, shape);
            let pb = proto::FetchResponse::from(resp.clone()).encoded_len();
            let json = serde_json::to_vec(&resp).unwrap().len();
            println!("| {shape} | {items} | {pb} | {json} | {:.2} |", json as f64 / pb as f64);
            // A relation, not a tuned number: field names and decimal digits make
            // JSON larger than protobuf for these records.
            assert!(json > pb, "{shape}, {items} items: json {json} <= protobuf {pb}");
        }
    }
}
