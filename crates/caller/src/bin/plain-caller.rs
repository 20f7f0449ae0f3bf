//! The caller's plain twin, for `bench/run.sh` (issue 36): the same front
//! door (`POST /v1/call`, JSON through axum's `Json`) making the same
//! downstream call (`payload::fanout_requests` with a fan-out of one) over
//! the same client, built the plainest way: one tonic channel for gRPC,
//! reqwest's default client for REST, and the answer returned as JSON. No
//! byte counting, counters, limits, work budget, timeout, shape check,
//! `server-timing` header, admin listener or shutdown drain: what `caller`
//! adds on the measured path is what its CPU per request ÷ this one's shows.
//! The `grpc`, `rest`, `connect`, `connect-pb` and `grpc-web` arms only; no uploads, fan-out or TLS. Not a tier the
//! harness starts; a bench drives it as a remote caller.
//!
//! `--json-codec sonic-rs|simd-json` writes the REST request and reads the
//! answer with that library (`payload::JsonCodec`, the caller's own
//! mapping); serde_json keeps reqwest's `json`. The front door stays axum's
//! `Json`, as the caller's does.
//!
//! `connect` and `connect-pb` POST the message as the whole body to the
//! downstream's REST listener at `/bench.v1.Downstream/Fetch` with
//! `Connect-Protocol-Version: 1` (reqwest's default client, as REST);
//! `grpc-web` is the same tonic client through tonic-web's
//! `GrpcWebClientLayer` over hyper-util's HTTP/1.1 client, as tonic-web's
//! documentation builds it.
//!
//! Prints the same ready line as `caller` (`{"service": "plain-caller",
//! "pid": …, "listeners": {"front": …}}`), then serves until killed.

use std::net::SocketAddr;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use clap::Parser;
use payload::{CallRequest, FetchResponse, JsonCodec};
use prost::Message;
use proto::downstream_client::DownstreamClient;
use tonic::transport::Channel;

/// The same allocator as `caller` (its default feature), so the two differ
/// only in what they do per request.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Transport {
    Grpc,
    Rest,
    Connect,
    ConnectPb,
    GrpcWeb,
}

#[derive(Debug, Parser)]
#[command(about = "The caller built the plainest way (a bench's reference, not a tier)")]
struct Args {
    /// The front door (HTTP/1.1 JSON).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The internal hop.
    #[arg(long, value_enum, default_value_t = Transport::Grpc)]
    transport: Transport,
    /// The downstream's gRPC address (for --transport grpc).
    #[arg(long)]
    downstream_grpc: Option<String>,
    /// The downstream's REST address (for --transport rest, connect, connect-pb, grpc-web).
    #[arg(long)]
    downstream_rest: Option<String>,
    /// The JSON library of the REST hop's bodies: serde_json, sonic-rs or simd-json.
    #[arg(long, default_value_t = JsonCodec::SerdeJson)]
    json_codec: JsonCodec,
}

#[derive(Debug, Clone)]
enum Outbound {
    Grpc(DownstreamClient<Channel>),
    Rest { client: reqwest::Client, url: String, codec: JsonCodec },
    Connect { client: reqwest::Client, url: String, codec: Option<JsonCodec> },
    GrpcWeb(DownstreamClient<WebChannel>),
}

type WebChannel = tonic_web::GrpcWebClientService<
    hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        tonic_web::GrpcWebCall<tonic::body::Body>,
    >,
>;

/// One Connect unary call: the message is the body (`codec`'s JSON, or
/// protobuf for `None`), the answer the response's body.
async fn connect(
    client: reqwest::Client,
    url: &str,
    codec: Option<JsonCodec>,
    req: &payload::FetchRequest,
) -> Result<FetchResponse, String> {
    let (media, body) = match codec {
        Some(codec) => ("application/json", codec.encode(req).map_err(|e| e.to_string())?),
        None => ("application/proto", proto::FetchRequest::from(req.clone()).encode_to_vec()),
    };
    let request = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, media)
        .header("connect-protocol-version", "1")
        .body(body);
    let resp = request.send().await.map_err(|e| e.to_string())?;
    let bytes = resp.error_for_status().map_err(|e| e.to_string())?.bytes().await.map_err(|e| e.to_string())?;
    match codec {
        Some(codec) => codec.decode(&bytes).map_err(|e| e.to_string()),
        None => proto::FetchResponse::decode(bytes)
            .map_err(|e| e.to_string())
            .and_then(|r| FetchResponse::try_from(r).map_err(|e| e.to_string())),
    }
}

async fn call(
    State(out): State<Outbound>,
    Json(call): Json<CallRequest>,
) -> Result<Json<FetchResponse>, (StatusCode, String)> {
    let bad_gateway = |e: String| (StatusCode::BAD_GATEWAY, e);
    let req = payload::fanout_requests(&call, 1).remove(0);
    let answer: FetchResponse = match out {
        Outbound::Grpc(mut client) => {
            let resp = client.fetch(proto::FetchRequest::from(req)).await.map_err(|e| bad_gateway(e.to_string()))?;
            FetchResponse::try_from(resp.into_inner()).map_err(|e| bad_gateway(e.to_string()))?
        }
        Outbound::Rest { client, url, codec: JsonCodec::SerdeJson } => {
            let resp = client.post(&url).json(&req).send().await.map_err(|e| bad_gateway(e.to_string()))?;
            resp.error_for_status()
                .map_err(|e| bad_gateway(e.to_string()))?
                .json()
                .await
                .map_err(|e| bad_gateway(e.to_string()))?
        }
        Outbound::Rest { client, url, codec } => {
            let body = codec.encode(&req).map_err(|e| bad_gateway(e.to_string()))?;
            let request = client.post(&url).header(reqwest::header::CONTENT_TYPE, "application/json").body(body);
            let resp = request.send().await.map_err(|e| bad_gateway(e.to_string()))?;
            let bytes = resp
                .error_for_status()
                .map_err(|e| bad_gateway(e.to_string()))?
                .bytes()
                .await
                .map_err(|e| bad_gateway(e.to_string()))?;
            codec.decode(&bytes).map_err(|e| bad_gateway(e.to_string()))?
        }
        Outbound::Connect { client, url, codec } => connect(client, &url, codec, &req).await.map_err(bad_gateway)?,
        Outbound::GrpcWeb(mut client) => {
            let resp = client.fetch(proto::FetchRequest::from(req)).await.map_err(|e| bad_gateway(e.to_string()))?;
            FetchResponse::try_from(resp.into_inner()).map_err(|e| bad_gateway(e.to_string()))?
        }
    };
    Ok(Json(FetchResponse { request_id: call.request_id, ..answer }))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let out = match (args.transport, args.downstream_grpc, args.downstream_rest) {
        (Transport::Grpc, Some(url), _) => {
            Outbound::Grpc(DownstreamClient::new(Channel::from_shared(url)?.connect_lazy()))
        }
        (Transport::Rest, _, Some(url)) => {
            let url = format!("{}/v1/fetch", url.trim_end_matches('/'));
            Outbound::Rest { client: reqwest::Client::new(), url, codec: args.json_codec }
        }
        (t @ (Transport::Connect | Transport::ConnectPb), _, Some(url)) => {
            let url = format!("{}/bench.v1.Downstream/Fetch", url.trim_end_matches('/'));
            let codec = (t == Transport::Connect).then_some(args.json_codec);
            Outbound::Connect { client: reqwest::Client::new(), url, codec }
        }
        (Transport::GrpcWeb, _, Some(url)) => {
            let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
            let web = tower::ServiceBuilder::new().layer(tonic_web::GrpcWebClientLayer::new()).service(http);
            Outbound::GrpcWeb(DownstreamClient::with_origin(web, url.parse()?))
        }
        (t, _, _) => {
            anyhow::bail!("--transport {t:?} needs its downstream address (--downstream-grpc or --downstream-rest)")
        }
    };
    let front = tokio::net::TcpListener::bind(args.listen).await?;
    let ready = service::ReadyLine::new("plain-caller", [("front", front.local_addr()?)]);
    let app = axum::Router::new().route("/v1/call", axum::routing::post(call)).with_state(out);
    println!("{}", serde_json::to_string(&ready)?);
    axum::serve(front, app).await?;
    Ok(())
}
