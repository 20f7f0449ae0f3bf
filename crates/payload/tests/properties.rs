//! Property tests: decoding and validation never panic on any input, and every
//! valid message round-trips through both encodings.

use payload::{FetchRequest, FetchResponse, Limits, Shape, respond, validate, verify};
use proptest::prelude::*;
use prost::Message;

fn valid_request() -> impl Strategy<Value = FetchRequest> {
    ("[ -~]{1,64}", 0u32..200, proptest::collection::vec(any::<u8>(), 0..512), any::<bool>()).prop_map(
        |(request_id, items, body, points)| FetchRequest {
            request_id,
            items,
            body,
            shape: if points { Shape::Timeseries } else { Shape::Order },
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_any_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        if let Ok(req) = serde_json::from_slice::<FetchRequest>(&bytes) {
            let _ = validate(&req, &Limits::default());
        }
        let _ = serde_json::from_slice::<FetchResponse>(&bytes);
        if let Ok(req) = proto::FetchRequest::decode(&bytes[..]).map(FetchRequest::try_from) {
            let _ = req.map(|req| validate(&req, &Limits::default()));
        }
        if let Ok(pb) = proto::FetchResponse::decode(&bytes[..]) {
            let _ = FetchResponse::try_from(pb);
        }
    }

    #[test]
    fn arbitrary_json_shapes_never_panic(id in ".{0,300}", items in any::<i64>(), body in ".{0,64}") {
        let text = serde_json::json!({"requestId": id, "items": items, "body": body}).to_string();
        if let Ok(req) = serde_json::from_str::<FetchRequest>(&text) {
            let _ = validate(&req, &Limits::default());
        }
    }

    #[test]
    fn valid_requests_round_trip_and_validate(req in valid_request()) {
        prop_assert_eq!(validate(&req, &Limits::default()), Ok(()));
        let json = serde_json::to_vec(&req).unwrap();
        prop_assert_eq!(serde_json::from_slice::<FetchRequest>(&json).unwrap(), req.clone());
        let pb = proto::FetchRequest::from(req.clone()).encode_to_vec();
        prop_assert_eq!(FetchRequest::try_from(proto::FetchRequest::decode(&pb[..]).unwrap()).unwrap(), req);
    }

    #[test]
    fn generated_responses_round_trip_and_verify(req in valid_request()) {
        let resp = respond(&req);
        let json = serde_json::to_vec(&resp).unwrap();
        let from_json: FetchResponse = serde_json::from_slice(&json).unwrap();
        prop_assert_eq!(&from_json, &resp);
        let pb = proto::FetchResponse::from(resp.clone()).encode_to_vec();
        let from_pb = FetchResponse::try_from(proto::FetchResponse::decode(&pb[..]).unwrap()).unwrap();
        prop_assert_eq!(&from_pb, &resp);
        prop_assert_eq!(verify(&req, &from_json), Ok(()));
        prop_assert_eq!(verify(&req, &from_pb), Ok(()));
    }
}
