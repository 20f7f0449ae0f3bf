//! A team's own contract through every arm, over real sockets: a proto with
//! nested messages, repeated and map fields, a oneof, enums, 64-bit
//! integers, bytes and well-known types, its data from JSON Lines. Each
//! answer is the one its call number picks; each arm's message bytes are
//! the data's own: the JSON lines' lengths (the files are written in the
//! canonical proto3 JSON form), and for protobuf the encodings computed here.

use std::path::PathBuf;
use std::time::Duration;

use caller::{Config as CallerConfig, Transport};
use contract::{ContractArgs, Loaded};
use downstream::{Config as DsConfig, Handle as DsHandle};
use prost::Message;
use tokio_util::sync::CancellationToken;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn everything() -> Loaded {
    let args = ContractArgs {
        proto: vec![fixture("everything.proto")],
        call: Some("everything.v1.Catalog/Lookup".into()),
        request_data: vec![fixture("everything-requests.jsonl")],
        response_data: vec![fixture("everything-answers.jsonl")],
        ..ContractArgs::default()
    };
    args.load().unwrap().unwrap()
}

/// The lines of a data file, as written.
fn lines(name: &str) -> Vec<String> {
    std::fs::read_to_string(fixture(name)).unwrap().lines().map(str::to_owned).collect()
}

async fn downstream(loaded: &Loaded) -> DsHandle {
    let config = DsConfig { delay: Duration::from_millis(2), custom: Some(loaded.clone()), ..DsConfig::default() };
    downstream::start(config, CancellationToken::new()).await.unwrap()
}

#[tokio::test]
async fn every_arm_carries_the_teams_own_messages_byte_for_byte() {
    let loaded = everything();
    let (requests, answers) = (lines("everything-requests.jsonl"), lines("everything-answers.jsonl"));
    assert_eq!((loaded.requests.messages.len(), loaded.answers.messages.len()), (requests.len(), answers.len()));
    let ds = downstream(&loaded).await;
    let calls: Vec<u64> = (0..6).collect();
    for transport in Transport::ALL {
        let config = CallerConfig {
            transport,
            downstream_grpc: Some(format!("http://{}", ds.grpc_addr)),
            downstream_rest: Some(format!("http://{}", ds.rest_addr)),
            custom: Some(loaded.clone()),
            ..CallerConfig::default()
        };
        let c = caller::start(config, CancellationToken::new()).await.unwrap();
        let before = ds.registry.snapshot().listeners[transport.listener()].clone();
        let http = reqwest::Client::new();
        for &n in &calls {
            let resp = http
                .post(format!("http://{}/v1/call", c.front_addr))
                .header("content-type", "application/json")
                .body(format!(r#"{{"requestId":"{n}"}}"#))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200, "{transport}, call {n}: {:?}", resp.text().await);
            let got: Vec<serde_json::Value> = resp.json().await.unwrap();
            assert_eq!(got.len(), 1, "{transport}: one answer per downstream call");
            let got = contract::from_json(loaded.contract.output(), got[0].to_string().as_bytes()).unwrap();
            assert_eq!(contract::canonical(&got), *loaded.answers.get(n), "{transport}, call {n}");
        }
        let d = ds.registry.snapshot().listeners[transport.listener()].since(&before);
        assert_eq!(d.requests["ok"], calls.len() as u64, "{transport}: {d:?}");
        let expected = match transport.encoding() {
            caller::outbound::Encoding::Json => (
                calls.iter().map(|&n| requests[n as usize % requests.len()].len() as u64).sum::<u64>(),
                calls.iter().map(|&n| answers[n as usize % answers.len()].len() as u64).sum::<u64>(),
            ),
            caller::outbound::Encoding::Protobuf => (
                calls.iter().map(|&n| loaded.requests.get(n).encoded_len() as u64).sum::<u64>(),
                calls.iter().map(|&n| loaded.answers.get(n).encoded_len() as u64).sum::<u64>(),
            ),
        };
        assert_eq!((d.message_bytes_in, d.message_bytes_out), expected, "{transport}: (request, answer) bytes");
        let client = c.registry.snapshot().clients.values().next().cloned().unwrap();
        assert_eq!(
            (client.message_bytes_in, client.message_bytes_out),
            expected,
            "{transport}: the caller counts (sent, read) as the downstream counts (read, sent)"
        );
        c.stop().await;
    }
    ds.stop().await;
}

/// The method is served where a team's own clients would call it: gRPC at
/// its path, REST at `POST /v1/package.Service/Method` in either encoding.
#[tokio::test]
async fn the_method_answers_at_its_own_paths_and_refuses_what_does_not_decode() {
    let loaded = everything();
    let ds = downstream(&loaded).await;
    let http = reqwest::Client::new();
    let url = format!("http://{}/v1/everything.v1.Catalog/Lookup", ds.rest_addr);
    let request = lines("everything-requests.jsonl")[0].clone();
    let resp = http
        .post(&url)
        .header("content-type", "application/json")
        .header("x-request-id", "2")
        .body(request.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let answer = resp.bytes().await.unwrap();
    assert_eq!(answer.len(), lines("everything-answers.jsonl")[2].len(), "answer 2 of 3 for call 2");
    let pb = http
        .post(&url)
        .header("content-type", "application/x-protobuf")
        .header("x-request-id", "0")
        .body(loaded.requests.get(0).encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(pb.headers()["content-type"], "application/x-protobuf");
    let decoded = prost_reflect::DynamicMessage::decode(loaded.contract.output(), pb.bytes().await.unwrap()).unwrap();
    assert_eq!(decoded, *loaded.answers.get(0));
    let bad =
        http.post(&url).header("content-type", "application/json").body(r#"{"accountId": "x"}"#).send().await.unwrap();
    assert_eq!(bad.status(), 400);
    let reason: serde_json::Value = bad.json().await.unwrap();
    assert!(reason["error"].as_str().unwrap().contains("malformed JSON request"), "{reason}");
    ds.stop().await;
}

/// A method with a `google.api.http` rule is reached over REST where the
/// rule puts it, `GET /v1/stores/{store}/orders/{id}`, its other fields in
/// the query and no body; the protobuf arm keeps `POST /v1/…`.
#[tokio::test]
async fn an_annotated_method_is_called_at_its_rest_path() {
    let args = ContractArgs {
        proto: vec![fixture("annotated.proto")],
        call: Some("annotated.v1.Orders/GetOrder".into()),
        generate_data: "count=3,repeated=2,string=6".parse().unwrap(),
        ..ContractArgs::default()
    };
    let loaded = args.load().unwrap().unwrap();
    assert_eq!(loaded.contract.http.as_ref().map(|r| r.route()), Some("/v1/stores/{store}/orders/{id}".to_owned()));
    let ds = downstream(&loaded).await;
    for transport in [Transport::Rest, Transport::RestPb] {
        let config = CallerConfig {
            transport,
            downstream_rest: Some(format!("http://{}", ds.rest_addr)),
            custom: Some(loaded.clone()),
            ..CallerConfig::default()
        };
        let c = caller::start(config, CancellationToken::new()).await.unwrap();
        let before = ds.registry.snapshot().listeners["rest"].clone();
        for n in 0..3u64 {
            let resp = reqwest::Client::new()
                .post(format!("http://{}/v1/call", c.front_addr))
                .header("content-type", "application/json")
                .body(format!(r#"{{"requestId":"{n}"}}"#))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200, "{transport}: {:?}", resp.text().await);
            let got: Vec<serde_json::Value> = resp.json().await.unwrap();
            let got = contract::from_json(loaded.contract.output(), got[0].to_string().as_bytes()).unwrap();
            assert_eq!(contract::canonical(&got), *loaded.answers.get(n), "{transport}");
        }
        let d = ds.registry.snapshot().listeners["rest"].since(&before);
        assert_eq!(d.requests["ok"], 3, "{transport}: {d:?}");
        let request_bytes: u64 = (0..3).map(|n| loaded.requests.get(n).encoded_len() as u64).sum();
        let expected = if transport == Transport::Rest { 0 } else { request_bytes };
        assert_eq!(d.message_bytes_in, expected, "{transport}: a GET carries its request in the path and query");
        c.stop().await;
    }
    let http = reqwest::Client::new();
    let url = format!("http://{}/v1/stores/berlin/orders/42?fields=a&fields=b", ds.rest_addr);
    assert_eq!(http.get(&url).header("x-request-id", "1").send().await.unwrap().status(), 200);
    assert_eq!(http.post(&url).send().await.unwrap().status(), 405, "the rule's verb only");
    let bad = http.get(format!("http://{}/v1/stores/berlin/orders/x", ds.rest_addr)).send().await.unwrap();
    assert_eq!(bad.status(), 400, "an id that is not an int64");
    ds.stop().await;
}

/// The built-in contract given as a team's own (`proto/bench/v1/bench.proto`,
/// its data the built-in path's own request and answer) costs the same
/// message bytes per call on the protobuf arms: the dynamic messages encode
/// what the generated ones do.
#[tokio::test]
async fn the_built_in_contract_through_the_own_contract_path_carries_the_same_bytes() {
    let proto = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto/bench/v1/bench.proto");
    let args =
        ContractArgs { proto: vec![proto], call: Some("bench.v1.Downstream/Fetch".into()), ..ContractArgs::default() };
    let generated = args.load().unwrap().unwrap();
    let req = payload::FetchRequest { request_id: "7".into(), items: 10, ..payload::FetchRequest::default() };
    let answer = payload::respond(&req);
    let dynamic = |desc: prost_reflect::MessageDescriptor, bytes: Vec<u8>| contract::Messages {
        messages: vec![prost_reflect::DynamicMessage::decode(desc, bytes.as_slice()).unwrap()],
        source: contract::Source::Generated { spec: "the built-in path's".into() },
    };
    let loaded = Loaded {
        requests: dynamic(generated.contract.input(), proto::FetchRequest::from(req.clone()).encode_to_vec()),
        answers: dynamic(generated.contract.output(), proto::FetchResponse::from(answer.clone()).encode_to_vec()),
        contract: generated.contract,
    };
    let plain = DsConfig { delay: Duration::from_millis(2), ..DsConfig::default() };
    let built_in = downstream::start(plain, CancellationToken::new()).await.unwrap();
    let own = downstream(&loaded).await;
    for transport in [Transport::Grpc, Transport::RestPb] {
        let mut counted = Vec::new();
        for ds in [&built_in, &own] {
            let addr = if transport.is_grpc() { ds.grpc_addr } else { ds.rest_addr };
            let settings = caller::clients::ClientSettings {
                transport,
                target: format!("http://{addr}"),
                grpc_connections: 1,
                rest_http2: false,
                hop: caller::hop::HopOptions::default(),
            };
            let client =
                caller::clients::build(&settings, std::sync::Arc::new(transport.client_counters("t"))).unwrap();
            let before = ds.registry.snapshot().listeners[transport.listener()].clone();
            for _ in 0..3 {
                if std::ptr::eq(ds, &built_in) {
                    assert_eq!(payload::verify(&req, &client.fetch(req.clone()).await.unwrap()), Ok(()));
                } else {
                    let method = caller::outbound::Method::of(&loaded.contract);
                    let got = client.call(&method, 7, loaded.requests.get(7).clone()).await.unwrap();
                    assert_eq!(contract::canonical(&got), *loaded.answers.get(7));
                }
            }
            let d = ds.registry.snapshot().listeners[transport.listener()].since(&before);
            counted.push((d.message_bytes_in, d.message_bytes_out));
        }
        assert_eq!(counted[0], counted[1], "{transport}: (built-in, own contract) message bytes of 3 calls");
        assert!(counted[0].1 > 3 * 500, "{transport}: ten records each: {counted:?}");
    }
    built_in.stop().await;
    own.stop().await;
}
