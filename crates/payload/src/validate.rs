//! Validation of requests against named limits, and verification of responses.

use crate::generate::{point_words, points_digest, records_digest, respond, upload_body};
use crate::model::{CallRequest, FetchRequest, FetchResponse};

/// Named limits every service enforces on a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most records one request may ask for.
    pub max_items: u32,
    /// Largest opaque body, in decoded bytes.
    pub max_body_bytes: usize,
    /// Longest request id, in bytes.
    pub max_request_id_bytes: usize,
}

impl Limits {
    pub const DEFAULT_MAX_ITEMS: u32 = 10_000;
    pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
    pub const DEFAULT_MAX_REQUEST_ID_BYTES: usize = 256;

    /// Upper bound of an encoded request (JSON, with the body in base64, or
    /// protobuf) that can still be valid: what a server may read before it
    /// rejects a body as too large without decoding it.
    pub fn max_encoded_request_bytes(&self) -> usize {
        self.max_body_bytes.div_ceil(3) * 4 + self.max_request_id_bytes * 6 + 1024
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_items: Self::DEFAULT_MAX_ITEMS,
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
            max_request_id_bytes: Self::DEFAULT_MAX_REQUEST_ID_BYTES,
        }
    }
}

/// Why a request or a decoded message is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("requestId must not be empty")]
    EmptyRequestId,
    #[error("requestId is {len} bytes; the limit is {max}")]
    RequestIdTooLong { len: usize, max: usize },
    #[error("items is {requested}; the limit is {max} (start the service with a larger --max-items)")]
    TooManyItems { requested: u32, max: u32 },
    #[error("body is {len} bytes; the limit is {max}")]
    BodyTooLarge { len: usize, max: usize },
    #[error("field {0} is missing")]
    MissingField(&'static str),
    #[error("field {0} is out of range")]
    InvalidField(&'static str),
}

impl PayloadError {
    /// True when the request is refused for its size (HTTP 413,
    /// gRPC RESOURCE_EXHAUSTED) rather than for its content (400, INVALID_ARGUMENT).
    pub fn is_too_large(&self) -> bool {
        matches!(self, PayloadError::BodyTooLarge { .. })
    }
}

/// Checks `req` against `limits`.
pub fn validate(req: &FetchRequest, limits: &Limits) -> Result<(), PayloadError> {
    validate_sizes(&req.request_id, req.items, req.body.len(), limits)
}

/// The checks every request shares: an id of at most `max_request_id_bytes`,
/// at most `max_items` items, and `bytes` of opaque body no larger than
/// `max_body_bytes`.
pub(crate) fn validate_sizes(request_id: &str, items: u32, bytes: usize, limits: &Limits) -> Result<(), PayloadError> {
    if request_id.is_empty() {
        return Err(PayloadError::EmptyRequestId);
    }
    if request_id.len() > limits.max_request_id_bytes {
        return Err(PayloadError::RequestIdTooLong { len: request_id.len(), max: limits.max_request_id_bytes });
    }
    if items > limits.max_items {
        return Err(PayloadError::TooManyItems { requested: items, max: limits.max_items });
    }
    if bytes > limits.max_body_bytes {
        return Err(PayloadError::BodyTooLarge { len: bytes, max: limits.max_body_bytes });
    }
    Ok(())
}

/// Why a response is not the one that was asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("response echoes request id {got:?}, expected {expected:?}")]
    WrongId { expected: String, got: String },
    #[error("response carries {got} records, expected {expected}")]
    WrongCount { expected: usize, got: usize },
    #[error(
        "response records differ from the ones generated for the request (digest {got:016x}, expected {expected:016x})"
    )]
    WrongContent { expected: u64, got: u64 },
    #[error("response is not the JSON of a fetch response: {0}")]
    NotJson(String),
}

/// Checks that `resp` is exactly what the downstream must answer to `req`:
/// the id echoed, the record (or point) count, and the content, field by
/// field (doubles by their bits); a difference is named by both digests. This
/// regenerates every record: a test's or the harness's end-to-end check, never
/// a measured tier's (a real caller does not recompute its downstream's answer).
pub fn verify(req: &FetchRequest, resp: &FetchResponse) -> Result<(), VerifyError> {
    check(&respond(req), resp)
}

/// What a real caller checks of a decoded answer: it belongs to this request
/// (the id is echoed) and has the shape asked for (the count of records, or
/// of points for a time series, and none of the other kind). Costs no
/// allocation; the content is left to [`verify`], end to end.
pub fn check_shape(req: &FetchRequest, resp: &FetchResponse) -> Result<(), VerifyError> {
    if resp.request_id != req.request_id {
        return Err(VerifyError::WrongId { expected: req.request_id.clone(), got: resp.request_id.clone() });
    }
    let (asked, other) = match req.shape {
        crate::model::Shape::Order => (resp.records.len(), resp.points.len()),
        crate::model::Shape::Timeseries => (resp.points.len(), resp.records.len()),
    };
    if asked != req.items as usize || other != 0 {
        return Err(VerifyError::WrongCount { expected: req.items as usize, got: asked + other });
    }
    Ok(())
}

/// The downstream request ids one front request fans out to: the front id itself
/// without fan-out, `<id>/<k>` for k in 0..fanout otherwise.
pub fn fanout_request_ids(request_id: &str, fanout: u32) -> Vec<String> {
    if fanout <= 1 { vec![request_id.to_owned()] } else { (0..fanout).map(|k| format!("{request_id}/{k}")).collect() }
}

/// The downstream requests one front request makes: one per fan-out id, each
/// with the call's items and shape and, when it asks for an upload, a body of
/// `request_bytes` generated from the downstream request id.
pub fn fanout_requests(call: &CallRequest, fanout: u32) -> Vec<FetchRequest> {
    fanout_request_ids(&call.request_id, fanout)
        .into_iter()
        .map(|id| FetchRequest {
            body: upload_body(&id, call.request_bytes as usize),
            request_id: id,
            items: call.items,
            shape: call.shape,
        })
        .collect()
}

/// Checks a caller front response: the records (or points) of every fan-out
/// call, in order.
pub fn verify_call(call: &CallRequest, fanout: u32, resp: &FetchResponse) -> Result<(), VerifyError> {
    check(&expected_call(call, fanout), resp)
}

/// [`verify_call`] on an answer still in its JSON bytes. An answer that is,
/// byte for byte, the JSON serde writes for the expected records (what the
/// caller sends) is verified by writing that JSON (`canonical.rs`, into a
/// buffer this thread keeps) and comparing the two, without parsing the
/// answer; any other body is parsed and checked field by field, so an
/// equivalent encoding still passes and a wrong one is named.
pub fn verify_call_json(call: &CallRequest, fanout: u32, body: &[u8]) -> Result<(), VerifyError> {
    thread_local! {
        static EXPECTED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    // An order answer's expected JSON is written from the generator's draws
    // (no record made); a time series' from its points.
    let mut expected = None;
    let same = EXPECTED.with_borrow_mut(|buf| {
        buf.clear();
        let written = if call.shape.is_order() {
            let ids = fanout_request_ids(&call.request_id, fanout);
            crate::canonical::write_drawn_answer(buf, &call.request_id, &ids, call.items)
        } else {
            crate::canonical::write_response(buf, expected.insert(expected_call(call, fanout)))
        };
        written && buf[..] == *body
    });
    if same {
        return Ok(());
    }
    let expected = expected.unwrap_or_else(|| expected_call(call, fanout));
    let resp: FetchResponse = serde_json::from_slice(body).map_err(|e| VerifyError::NotJson(e.to_string()))?;
    check(&expected, &resp)
}

/// The caller's answer to `call`: every fanned-out call's records, in order.
fn expected_call(call: &CallRequest, fanout: u32) -> FetchResponse {
    let mut expected = FetchResponse { request_id: call.request_id.clone(), ..FetchResponse::default() };
    for id in fanout_request_ids(&call.request_id, fanout) {
        let part = respond(&FetchRequest { request_id: id, items: call.items, shape: call.shape, body: Vec::new() });
        expected.records.extend(part.records);
        expected.points.extend(part.points);
    }
    expected
}

fn check(expected: &FetchResponse, resp: &FetchResponse) -> Result<(), VerifyError> {
    if resp.request_id != expected.request_id {
        return Err(VerifyError::WrongId { expected: expected.request_id.clone(), got: resp.request_id.clone() });
    }
    let count = |r: &FetchResponse| r.records.len() + r.points.len();
    if count(resp) != count(expected) {
        return Err(VerifyError::WrongCount { expected: count(expected), got: count(resp) });
    }
    // Field by field (strings by memcmp): cheaper than hashing both sides
    // byte by byte, and exact. The digests only name a difference.
    let same = expected.records == resp.records
        && expected.points.iter().map(point_words).eq(resp.points.iter().map(point_words));
    if !same {
        let digest = |r: &FetchResponse| records_digest(&r.records) ^ points_digest(&r.points).rotate_left(1);
        return Err(VerifyError::WrongContent { expected: digest(expected), got: digest(resp) });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::generate::generate;
    use crate::model::Shape;

    fn req(items: u32) -> FetchRequest {
        FetchRequest { request_id: "v-1".into(), items, ..FetchRequest::default() }
    }

    #[test]
    fn limits_are_enforced_by_name() {
        let limits = Limits { max_items: 10, max_body_bytes: 4, max_request_id_bytes: 8 };
        assert_eq!(validate(&req(10), &limits), Ok(()));
        assert_eq!(validate(&req(11), &limits), Err(PayloadError::TooManyItems { requested: 11, max: 10 }));
        let mut r = req(1);
        r.body = vec![0; 5];
        let err = validate(&r, &limits).unwrap_err();
        assert!(err.is_too_large());
        r.body.clear();
        r.request_id = "123456789".into();
        assert_eq!(validate(&r, &limits), Err(PayloadError::RequestIdTooLong { len: 9, max: 8 }));
        r.request_id.clear();
        assert_eq!(validate(&r, &limits), Err(PayloadError::EmptyRequestId));
    }

    #[test]
    fn verify_accepts_the_right_response_and_names_what_is_wrong() {
        let r = req(3);
        let good = FetchResponse { request_id: r.request_id.clone(), records: generate(&r), points: vec![] };
        assert_eq!(verify(&r, &good), Ok(()));

        let mut bad = good.clone();
        bad.request_id = "other".into();
        assert!(matches!(verify(&r, &bad), Err(VerifyError::WrongId { .. })));

        let mut bad = good.clone();
        bad.records.pop();
        assert!(matches!(verify(&r, &bad), Err(VerifyError::WrongCount { expected: 3, got: 2 })));

        let mut bad = good.clone();
        bad.records[1].quantity += 1;
        assert!(matches!(verify(&r, &bad), Err(VerifyError::WrongContent { .. })));

        // The same number of items in the other shape is not the answer.
        let ts = FetchRequest { shape: Shape::Timeseries, ..r.clone() };
        assert!(matches!(verify(&ts, &good), Err(VerifyError::WrongContent { .. })));
        let mut points = crate::respond(&ts);
        assert_eq!(verify(&ts, &points), Ok(()));
        points.points[0].value += 1e-9;
        assert!(matches!(verify(&ts, &points), Err(VerifyError::WrongContent { expected, got }) if expected != got));
        // Doubles compare by their bits: -0.0 is not 0.0.
        let mut zero = crate::respond(&ts);
        zero.points[0].min = 0.0;
        let mut negative = zero.clone();
        negative.points[0].min = -0.0;
        assert!(check(&zero, &negative).is_err() && check(&zero, &zero.clone()).is_ok());
    }

    #[test]
    fn the_shape_check_sees_id_and_count_but_not_content() {
        let r = req(3);
        let good = FetchResponse { request_id: r.request_id.clone(), records: generate(&r), points: vec![] };
        assert_eq!(check_shape(&r, &good), Ok(()));
        let mut other_content = good.clone();
        other_content.records[0].quantity += 1;
        assert_eq!(check_shape(&r, &other_content), Ok(()), "content is verify's job");
        let mut bad = good.clone();
        bad.request_id = "other".into();
        assert!(matches!(check_shape(&r, &bad), Err(VerifyError::WrongId { .. })));
        let mut bad = good.clone();
        bad.records.push(bad.records[0].clone());
        assert!(matches!(check_shape(&r, &bad), Err(VerifyError::WrongCount { expected: 3, got: 4 })));
        // A time series is counted in points; records in its place are the wrong shape.
        let ts = FetchRequest { shape: Shape::Timeseries, ..req(3) };
        assert_eq!(check_shape(&ts, &crate::generate::respond(&ts)), Ok(()));
        assert!(matches!(check_shape(&ts, &good), Err(VerifyError::WrongCount { expected: 3, got: 3 })));
    }

    #[test]
    fn verify_call_checks_every_fanout_chunk_in_order() {
        let call = CallRequest { request_id: "c".into(), items: 2, ..CallRequest::default() };
        let ids = fanout_request_ids("c", 3);
        assert_eq!(ids, ["c/0", "c/1", "c/2"]);
        let mut records = Vec::new();
        for id in &ids {
            records.extend(generate(&FetchRequest { request_id: id.clone(), items: 2, ..FetchRequest::default() }));
        }
        let resp = FetchResponse { request_id: "c".into(), records: records.clone(), points: vec![] };
        assert_eq!(verify_call(&call, 3, &resp), Ok(()));
        records.swap(0, 2);
        let resp = FetchResponse { request_id: "c".into(), records, points: vec![] };
        assert!(verify_call(&call, 3, &resp).is_err());
        assert_eq!(fanout_request_ids("solo", 1), ["solo"]);

        let upload = CallRequest { request_bytes: 100, shape: Shape::Timeseries, ..call };
        let reqs = fanout_requests(&upload, 2);
        assert_eq!(reqs.iter().map(|r| r.request_id.as_str()).collect::<Vec<_>>(), ["c/0", "c/1"]);
        assert!(reqs.iter().all(|r| r.body.len() == 100 && r.items == 2 && r.shape == Shape::Timeseries));
        assert_ne!(reqs[0].body, reqs[1].body);
    }

    /// The JSON path gives the verdict the parsed path gives, whatever the
    /// bytes: the caller's own JSON, the same content spelled otherwise, a
    /// changed record, a short body, and bytes that are not JSON.
    #[test]
    fn verify_call_json_agrees_with_verify_call_on_any_body() {
        for shape in [Shape::Order, Shape::Timeseries] {
            let call = CallRequest { request_id: "j".into(), items: 3, shape, ..CallRequest::default() };
            let good = expected_call(&call, 2);
            let json = serde_json::to_vec(&good).unwrap();
            assert_eq!(verify_call_json(&call, 2, &json), Ok(()));
            // Pretty-printed: other bytes, the same content.
            assert_eq!(verify_call_json(&call, 2, &serde_json::to_vec_pretty(&good).unwrap()), Ok(()));
            // One field changed: the parsed check names the difference.
            let mut bad = good.clone();
            match shape {
                Shape::Order => bad.records[4].quantity += 1,
                Shape::Timeseries => bad.points[4].count += 1,
            }
            let bad_json = serde_json::to_vec(&bad).unwrap();
            assert_eq!(verify_call_json(&call, 2, &bad_json), verify_call(&call, 2, &bad));
            assert!(matches!(verify_call_json(&call, 2, &bad_json), Err(VerifyError::WrongContent { .. })));
            // A prefix of the right answer, and a right answer with more after it.
            assert!(matches!(verify_call_json(&call, 2, &json[..json.len() - 1]), Err(VerifyError::NotJson(_))));
            let mut longer = json.clone();
            longer.extend_from_slice(b" x");
            assert!(matches!(verify_call_json(&call, 2, &longer), Err(VerifyError::NotJson(_))));
            assert!(matches!(verify_call_json(&call, 2, b"SSH-2.0"), Err(VerifyError::NotJson(_))));
            // Another call's answer.
            let other = CallRequest { request_id: "k".into(), ..call.clone() };
            assert!(matches!(verify_call_json(&other, 2, &json), Err(VerifyError::WrongId { .. })));
        }
    }
}
