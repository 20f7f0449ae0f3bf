//! `harness conform --proto`: a team's own method checked on each arm, as
//! the harness will call it: over gRPC at its path, over REST at its
//! `google.api.http` route (or `POST /v1/package.Service/Method`), and
//! through a caller's front door (`{"requestId": "0"}`). The answers'
//! content is the team's; what is checked is that each is the method's
//! output type, and that the refusals every JSON API shares hold.

use contract::Loaded;

use super::checks::{self, Check};
use super::probe::Probe;

/// The downstream's gRPC arm: the method called with the first request.
pub async fn grpc(probe: &Probe, base: &str, loaded: &Loaded) -> Vec<Check> {
    let c = &loaded.contract;
    let Some(request) = loaded.requests.messages.first() else { return Vec::new() };
    let seen = probe.grpc(base, &c.grpc_path(), prost::Message::encode_to_vec(request)).await;
    let what = format!("{} with request 0", c.name());
    vec![checks::custom_grpc_answer("grpc.call", &what, &seen, &c.output())]
}

/// The downstream's REST arm: the method's route with the first request,
/// and the shared refusals.
pub async fn rest(probe: &Probe, base: &str, loaded: &Loaded) -> Vec<Check> {
    let c = &loaded.contract;
    let Some(request) = loaded.requests.messages.first() else { return Vec::new() };
    let (verb, path, body) = match &c.http {
        Some(rule) => match rule.request(request) {
            Ok((path, body)) => (rule.verb.clone(), path, body.unwrap_or_default()),
            Err(e) => return vec![Check::fail("rest.call", format!("request 0: {e}"), "fix the request data")],
        },
        None => ("POST".to_owned(), c.rest_path(), contract::to_json(request)),
    };
    let Ok(method) = reqwest::Method::from_bytes(verb.as_bytes()) else { return Vec::new() };
    let seen = probe.http(method, &format!("{base}{path}"), "application/json", body).await;
    let what = format!("{verb} {path}");
    let mut out = vec![checks::custom_json_answer("rest.call", &what, &seen, &c.output(), None)];
    let route = path.split('?').next().unwrap_or(&path).to_owned();
    // The refusals of a JSON body are those of a POST route; any route
    // has its unknown neighbour.
    let refusals = probe.refusals(base, &route).await;
    out.extend(refusals.into_iter().filter(|c| verb == "POST" || c.name == "rest.unknown-route"));
    out
}

/// The caller's front door: one call, answered with its fan-out's answers.
pub async fn caller(probe: &Probe, base: &str, loaded: &Loaded, fanout: u32) -> Vec<Check> {
    let body = br#"{"requestId":"0"}"#.to_vec();
    let seen = probe.http(reqwest::Method::POST, &format!("{base}/v1/call"), "application/json", body).await;
    let c = &loaded.contract;
    let what = format!("POST /v1/call {} call 0", c.name());
    let mut out = vec![checks::custom_json_answer("caller.call", &what, &seen, &c.output(), Some(fanout))];
    out.extend(probe.refusals(base, "/v1/call").await);
    out
}
