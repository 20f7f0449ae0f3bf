//! `harness conform`'s verdicts: what a tier's answer to each check must be,
//! judged from what was seen on the wire. Pure: `probe.rs` sends and reads,
//! this file only says PASS, FAIL (with the fix) or SKIP.

use payload::{CallRequest, FetchRequest, FetchResponse};
use prost::Message;
use prost_reflect::MessageDescriptor;

/// How one check ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// What to change in the tier so that it passes.
    Fail {
        fix: String,
    },
    /// Not served, and not required: a tier need not serve health or reflection.
    Skip,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// A stable name (`rest.fetch.order`), what a test or a CI log greps for.
    pub name: &'static str,
    /// What was seen, or why the check failed.
    pub detail: String,
    pub verdict: Verdict,
}

impl Check {
    pub fn pass(name: &'static str, detail: impl Into<String>) -> Check {
        Check { name, detail: detail.into(), verdict: Verdict::Pass }
    }

    pub fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check { name, detail: detail.into(), verdict: Verdict::Fail { fix: fix.into() } }
    }

    pub fn failed(&self) -> bool {
        matches!(self.verdict, Verdict::Fail { .. })
    }

    /// `PASS  name  detail`, `FAIL  name  detail; fix: ...`, one line.
    pub fn line(&self) -> String {
        let detail = self.detail.replace(['\n', '\r'], " ");
        match &self.verdict {
            Verdict::Pass => format!("PASS  {:<24} {detail}", self.name),
            Verdict::Skip => format!("SKIP  {:<24} {detail}", self.name),
            Verdict::Fail { fix } => format!("FAIL  {:<24} {detail}; fix: {fix}", self.name),
        }
    }
}

/// An HTTP answer as read: its status, content type, `Server-Timing` and
/// body (read up to the check's limit).
#[derive(Debug, Clone, Default)]
pub struct HttpSeen {
    pub status: u16,
    pub content_type: Option<String>,
    pub server_timing: Option<String>,
    pub body: Vec<u8>,
}

/// A gRPC call as read off HTTP/2: where `grpc-status` came (the trailers,
/// or the headers of a trailers-only answer) and the messages of the body.
#[derive(Debug, Clone)]
pub struct GrpcSeen {
    pub http_status: u16,
    pub content_type: Option<String>,
    pub header_status: Option<i32>,
    pub trailer_status: Option<i32>,
    pub message: Option<String>,
    /// The length-prefixed messages, or why the body is not a gRPC body.
    pub messages: Result<Vec<Vec<u8>>, String>,
}

impl GrpcSeen {
    /// The call's status code, wherever it came.
    pub fn status(&self) -> Option<i32> {
        self.trailer_status.or(self.header_status)
    }
}

/// What a probe saw: an answer, or why there was none (refused, timed out,
/// larger than the limit).
pub type Seen<T> = Result<T, String>;

/// gRPC status codes the checks name.
pub const OK: i32 = 0;
pub const INVALID_ARGUMENT: i32 = 3;
pub const UNIMPLEMENTED: i32 = 12;

fn no_answer(name: &'static str, what: &str, e: &str) -> Check {
    Check::fail(name, format!("{what}: no answer ({e})"), "start the tier and listen on the address given")
}

/// The first bytes of a body, for a line of the report.
pub fn excerpt(body: &[u8]) -> String {
    if body.is_empty() {
        return "an empty body".into();
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(80)]);
    format!("{text:?}{}", if body.len() > 80 { "…" } else { "" })
}

fn is_json(content_type: Option<&str>) -> bool {
    content_type.and_then(|c| c.split(';').next()).is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// The downstream's REST answer to `req`: 200, JSON, the records verified.
pub fn rest_answer(name: &'static str, what: &str, seen: &Seen<HttpSeen>, req: &FetchRequest) -> Check {
    let seen = match seen {
        Ok(s) => s,
        Err(e) => return no_answer(name, what, e),
    };
    if let Some(check) = not_a_json_success(name, what, seen, "POST /v1/fetch") {
        return check;
    }
    let verified = serde_json::from_slice::<FetchResponse>(&seen.body)
        .map_err(|e| payload::VerifyError::NotJson(e.to_string()))
        .and_then(|resp| payload::verify(req, &resp));
    match verified {
        Ok(()) => Check::pass(name, format!("{what}: 200, every one of {} items verified", req.items)),
        Err(e) => Check::fail(name, format!("{what}: {e}"), GENERATION_FIX),
    }
}

/// The caller's front answer to `call`: 200, JSON, every record verified,
/// and the hop timing the report splits latency with.
pub fn call_answer(name: &'static str, what: &str, seen: &Seen<HttpSeen>, call: &CallRequest, fanout: u32) -> Check {
    let seen = match seen {
        Ok(s) => s,
        Err(e) => return no_answer(name, what, e),
    };
    if let Some(check) = not_a_json_success(name, what, seen, "POST /v1/call") {
        return check;
    }
    if let Err(e) = payload::verify_call_json(call, fanout, &seen.body) {
        return Check::fail(name, format!("{what}: {e}"), GENERATION_FIX);
    }
    let timing = seen.server_timing.as_deref().and_then(crate::load::target::parse_server_timing_us);
    match timing {
        Some(us) => Check::pass(name, format!("{what}: 200, every record verified, downstream {us} µs")),
        None => Check::fail(
            name,
            format!("{what}: every record verified, but no Server-Timing: downstream;dur=<ms>"),
            "add the header `Server-Timing: downstream;dur=<ms>` (the time spent on the downstream call), \
             or the report cannot split latency by tier",
        ),
    }
}

const GENERATION_FIX: &str = "generate the records as crates/payload does (examples/stacks/python/contract.py \
                              is a port), echo requestId and answer exactly `items` of them";

fn not_a_json_success(name: &'static str, what: &str, seen: &HttpSeen, route: &str) -> Option<Check> {
    if seen.status != 200 {
        return Some(Check::fail(
            name,
            format!("{what}: answered {} with {}", seen.status, excerpt(&seen.body)),
            format!("serve {route} and answer a valid request 200 with the JSON of its records"),
        ));
    }
    if !is_json(seen.content_type.as_deref()) {
        return Some(Check::fail(
            name,
            format!("{what}: 200 with Content-Type {:?}", seen.content_type.as_deref().unwrap_or("(none)")),
            "answer with Content-Type: application/json",
        ));
    }
    None
}

/// A refusal of bad input: `status`, with the JSON error shape
/// `{"error": "<reason>"}`.
pub fn http_refusal(name: &'static str, what: &str, seen: &Seen<HttpSeen>, status: u16) -> Check {
    let seen = match seen {
        Ok(s) => s,
        Err(e) => return no_answer(name, what, e),
    };
    let shape = "{\"error\": \"<reason>\"}";
    if seen.status != status {
        return Check::fail(
            name,
            format!("{what}: answered {} with {}, expected {status}", seen.status, excerpt(&seen.body)),
            format!("answer {status} with the JSON error shape {shape}"),
        );
    }
    let reason = serde_json::from_slice::<serde_json::Value>(&seen.body)
        .ok()
        .and_then(|v| v.get("error")?.as_str().map(str::to_owned))
        .filter(|r| !r.trim().is_empty());
    match reason {
        Some(reason) if is_json(seen.content_type.as_deref()) => {
            Check::pass(name, format!("{what}: {status} {:?}", reason.chars().take(70).collect::<String>()))
        }
        _ => Check::fail(
            name,
            format!(
                "{what}: {status} with {} ({})",
                excerpt(&seen.body),
                seen.content_type.as_deref().unwrap_or("no Content-Type")
            ),
            format!("answer {status} with Content-Type application/json and the body {shape}, the reason said"),
        ),
    }
}

fn code_text(code: Option<i32>) -> String {
    code.map_or_else(|| "(none)".to_owned(), |c| c.to_string())
}

/// A gRPC answer's frame: HTTP 200, `application/grpc`, status OK in the
/// trailers; the messages of the body.
fn grpc_frame<'a>(name: &'static str, what: &str, seen: &'a GrpcSeen) -> Result<&'a [Vec<u8>], Check> {
    let grpc_type = seen.content_type.as_deref().is_some_and(|c| c.starts_with("application/grpc"));
    if seen.http_status != 200 || !grpc_type {
        return Err(Check::fail(
            name,
            format!(
                "{what}: HTTP {} with Content-Type {:?}",
                seen.http_status,
                seen.content_type.as_deref().unwrap_or("(none)")
            ),
            "serve gRPC over HTTP/2 cleartext (prior knowledge) on this address",
        ));
    }
    if seen.status() != Some(OK) {
        let message = seen.message.as_deref().unwrap_or("");
        return Err(Check::fail(
            name,
            format!("{what}: grpc-status {} {message:?}", code_text(seen.status())),
            "answer a valid request with status OK",
        ));
    }
    if seen.trailer_status.is_none() {
        return Err(Check::fail(
            name,
            format!("{what}: grpc-status in the headers only, no trailers"),
            "send the answer's grpc-status in the trailers, after the message",
        ));
    }
    seen.messages.as_deref().map_err(|e| Check::fail(name, format!("{what}: {e}"), "frame each message as gRPC does"))
}

/// The one message of a unary gRPC answer, or the check that fails it.
fn one_grpc_message<'a>(name: &'static str, what: &str, seen: &'a Seen<GrpcSeen>) -> Result<&'a Vec<u8>, Check> {
    let seen = seen.as_ref().map_err(|e| no_answer(name, what, e))?;
    match grpc_frame(name, what, seen)? {
        [message] => Ok(message),
        messages => Err(Check::fail(
            name,
            format!("{what}: {} messages", messages.len()),
            "answer a unary call with one message",
        )),
    }
}

/// The downstream's gRPC answer to `req`: status OK in the trailers, one
/// message, the records verified.
pub fn grpc_answer(name: &'static str, what: &str, seen: &Seen<GrpcSeen>, req: &FetchRequest) -> Check {
    let message = match one_grpc_message(name, what, seen) {
        Ok(m) => m,
        Err(check) => return check,
    };
    let decoded = proto::FetchResponse::decode(message.as_slice())
        .map_err(|e| e.to_string())
        .and_then(|pb| FetchResponse::try_from(pb).map_err(|e| e.to_string()));
    let resp = match decoded {
        Ok(r) => r,
        Err(e) => {
            return Check::fail(
                name,
                format!("{what}: not a bench.v1.FetchResponse: {e}"),
                "compile the stubs from proto/",
            );
        }
    };
    match payload::verify(req, &resp) {
        Ok(()) => Check::pass(name, format!("{what}: OK in the trailers, every one of {} items verified", req.items)),
        Err(e) => Check::fail(name, format!("{what}: {e}"), GENERATION_FIX),
    }
}

/// A refused call: the gRPC status `code` with a message saying why.
pub fn grpc_refusal(name: &'static str, what: &str, seen: &Seen<GrpcSeen>, code: i32, code_name: &str) -> Check {
    let seen = match seen {
        Ok(s) => s,
        Err(e) => return no_answer(name, what, e),
    };
    let message = seen.message.as_deref().unwrap_or("").trim();
    match seen.status() {
        // A method nobody serves needs no reason beyond its code (tonic's
        // router sends none); a refused request does.
        Some(c) if c == code && (!message.is_empty() || code == UNIMPLEMENTED) => {
            Check::pass(name, format!("{what}: {code_name} {message:?}"))
        }
        Some(c) if c == code => {
            Check::fail(name, format!("{what}: {code_name} without a message"), "say why in grpc-message")
        }
        other => Check::fail(
            name,
            format!(
                "{what}: grpc-status {} (HTTP {}), expected {code} {code_name}",
                code_text(other),
                seen.http_status
            ),
            format!("answer {code_name} ({code}) with grpc-status and grpc-message"),
        ),
    }
}

/// `grpc.health.v1.Health/Check` of the service: SERVING, or not served.
pub fn grpc_health(name: &'static str, what: &str, seen: &Seen<GrpcSeen>) -> Check {
    if let Ok(s) = seen
        && s.status() == Some(UNIMPLEMENTED)
    {
        return Check { name, detail: format!("{what}: not served"), verdict: Verdict::Skip };
    }
    let seen = match seen {
        Ok(s) => s,
        Err(e) => return no_answer(name, what, e),
    };
    let messages = match grpc_frame(name, what, seen) {
        Ok(m) => m,
        Err(check) => return check,
    };
    let serving = tonic_health::pb::health_check_response::ServingStatus::Serving as i32;
    match messages.first().map(|m| tonic_health::pb::HealthCheckResponse::decode(m.as_slice())) {
        Some(Ok(r)) if r.status == serving => Check::pass(name, format!("{what}: SERVING")),
        other => Check::fail(
            name,
            format!("{what}: {:?}", other.map(|r| r.map(|r| r.status))),
            "set the service's status to SERVING once it answers",
        ),
    }
}

/// Server reflection (v1, else v1alpha): it lists `service`, or is not served.
pub fn grpc_reflection(name: &'static str, service: &str, v1: &Seen<GrpcSeen>, v1alpha: &Seen<GrpcSeen>) -> Check {
    let unimplemented = |s: &Seen<GrpcSeen>| s.as_ref().is_ok_and(|s| s.status() == Some(UNIMPLEMENTED));
    if unimplemented(v1) && unimplemented(v1alpha) {
        return Check { name, detail: "reflection (v1, v1alpha): not served".into(), verdict: Verdict::Skip };
    }
    let (version, seen) = if unimplemented(v1) { ("v1alpha", v1alpha) } else { ("v1", v1) };
    let what = format!("grpc.reflection.{version} list services");
    let seen = match seen {
        Ok(s) => s,
        Err(e) => return no_answer(name, &what, e),
    };
    let messages = match grpc_frame(name, &what, seen) {
        Ok(m) => m,
        Err(check) => return check,
    };
    use tonic_reflection::pb::v1::{ServerReflectionResponse, server_reflection_response::MessageResponse};
    let listed: Vec<String> = messages
        .iter()
        .filter_map(|m| ServerReflectionResponse::decode(m.as_slice()).ok()?.message_response)
        .filter_map(|r| match r {
            MessageResponse::ListServicesResponse(l) => Some(l.service.into_iter().map(|s| s.name)),
            _ => None,
        })
        .flatten()
        .collect();
    if listed.iter().any(|s| s == service) {
        Check::pass(name, format!("{what}: {} services, {service} among them", listed.len()))
    } else {
        Check::fail(name, format!("{what}: {listed:?}"), format!("register {service} with the reflection service"))
    }
}

/// A gRPC answer of a team's own method (`--proto`): status OK in the
/// trailers and one message of the method's output type. Its content is the
/// team's: a decoded message is all the contract can ask of it.
pub fn custom_grpc_answer(name: &'static str, what: &str, seen: &Seen<GrpcSeen>, output: &MessageDescriptor) -> Check {
    let message = match one_grpc_message(name, what, seen) {
        Ok(m) => m,
        Err(check) => return check,
    };
    match prost_reflect::DynamicMessage::decode(output.clone(), message.as_slice()) {
        Ok(_) => Check::pass(
            name,
            format!("{what}: OK in the trailers, a {} of {} bytes", output.full_name(), message.len()),
        ),
        Err(e) => {
            Check::fail(name, format!("{what}: not a {}: {e}", output.full_name()), "answer the method's output type")
        }
    }
}

/// A JSON answer of a team's own method: 200 and `count` messages of the
/// output type in the proto3 JSON mapping (one, or the caller's array of
/// its fan-out's answers when `array`).
pub fn custom_json_answer(
    name: &'static str,
    what: &str,
    seen: &Seen<HttpSeen>,
    output: &MessageDescriptor,
    array: Option<u32>,
) -> Check {
    let seen = match seen {
        Ok(s) => s,
        Err(e) => return no_answer(name, what, e),
    };
    if let Some(check) = not_a_json_success(name, what, seen, "the method's route") {
        return check;
    }
    let parsed = match array {
        None => contract::from_json(output.clone(), &seen.body).map(|_| 1),
        Some(fanout) => serde_json::from_slice::<Vec<serde_json::Value>>(&seen.body)
            .map_err(|e| format!("not a JSON array: {e}"))
            .and_then(|items| {
                if items.len() != fanout as usize {
                    return Err(format!("{} answers, expected {fanout} (the fan-out)", items.len()));
                }
                for item in &items {
                    contract::from_json(output.clone(), item.to_string().as_bytes())?;
                }
                Ok(items.len())
            }),
    };
    match parsed {
        Ok(n) => Check::pass(name, format!("{what}: 200, {n} {} in the proto3 JSON mapping", output.full_name())),
        Err(e) => Check::fail(
            name,
            format!("{what}: {e}"),
            format!(
                "answer the JSON of a {} in the proto3 JSON mapping (lowerCamelCase, unknown fields refused)",
                output.full_name()
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(status: u16, body: &str) -> Seen<HttpSeen> {
        Ok(HttpSeen { status, content_type: Some("application/json".into()), body: body.into(), ..HttpSeen::default() })
    }

    fn req() -> FetchRequest {
        FetchRequest { request_id: "c-1".into(), items: 3, ..FetchRequest::default() }
    }

    #[test]
    fn a_verified_answer_passes_and_a_short_one_names_its_count() {
        let good = serde_json::to_string(&payload::respond(&req())).unwrap();
        assert_eq!(rest_answer("rest.fetch.order", "x", &json(200, &good), &req()).verdict, Verdict::Pass);
        let mut short = payload::respond(&req());
        short.records.pop();
        let check = rest_answer("rest.fetch.order", "x", &json(200, &serde_json::to_string(&short).unwrap()), &req());
        assert!(check.failed() && check.line().contains("carries 2 records, expected 3"), "{}", check.line());
        let plain = Ok(HttpSeen { status: 200, body: good.into(), ..HttpSeen::default() });
        assert!(rest_answer("n", "x", &plain, &req()).line().contains("Content-Type: application/json"));
    }

    #[test]
    fn a_refusal_needs_its_status_and_the_json_error_shape() {
        assert_eq!(http_refusal("n", "x", &json(404, r#"{"error":"no route"}"#), 404).verdict, Verdict::Pass);
        let empty = Ok(HttpSeen { status: 404, ..HttpSeen::default() });
        let check = http_refusal("rest.unknown-route", "x", &empty, 404);
        assert!(check.failed() && check.line().contains("an empty body"), "{}", check.line());
        assert!(http_refusal("n", "x", &json(200, "{}"), 400).line().contains("expected 400"));
        assert!(http_refusal("n", "x", &json(400, r#"{"error":""}"#), 400).failed(), "an empty reason says nothing");
        assert!(http_refusal("n", "x", &Err("connection refused".into()), 400).line().contains("no answer"));
    }

    fn grpc(status: Option<i32>, in_trailers: bool, messages: Vec<Vec<u8>>) -> Seen<GrpcSeen> {
        Ok(GrpcSeen {
            http_status: 200,
            content_type: Some("application/grpc".into()),
            header_status: if in_trailers { None } else { status },
            trailer_status: if in_trailers { status } else { None },
            message: Some("why".into()),
            messages: Ok(messages),
        })
    }

    #[test]
    fn grpc_answers_need_ok_in_the_trailers_and_the_records() {
        let good = proto::FetchResponse::from(payload::respond(&req())).encode_to_vec();
        assert_eq!(grpc_answer("n", "x", &grpc(Some(OK), true, vec![good.clone()]), &req()).verdict, Verdict::Pass);
        assert!(grpc_answer("n", "x", &grpc(Some(OK), false, vec![good]), &req()).line().contains("trailers"));
        assert!(grpc_answer("n", "x", &grpc(Some(OK), true, vec![]), &req()).line().contains("0 messages"));
        let refused = grpc(Some(INVALID_ARGUMENT), false, vec![]);
        assert_eq!(grpc_refusal("n", "x", &refused, INVALID_ARGUMENT, "INVALID_ARGUMENT").verdict, Verdict::Pass);
        assert!(grpc_refusal("n", "x", &grpc(Some(OK), true, vec![]), INVALID_ARGUMENT, "INVALID_ARGUMENT").failed());
        assert_eq!(grpc_health("n", "x", &grpc(Some(UNIMPLEMENTED), false, vec![])).verdict, Verdict::Skip);
    }
}
