//! The downstream's plain twin, for `bench/run.sh` (issue 36): the same gRPC
//! method (`bench.v1.Downstream/Fetch`, a tonic service) and REST route
//! (`POST /v1/fetch`, JSON through axum's `Json`), answering after the same
//! delay with the same records (`payload::respond`), built the plainest way:
//! tonic's and axum's defaults, a `tokio::time::sleep` for the service time,
//! and nothing else. No byte counting, counters, limits, work budget,
//! deadlines, admin listener or shutdown drain: what `downstream` adds on the
//! measured path is what its CPU per request ÷ this one's shows. Not a tier
//! the harness starts; a bench drives it as a remote downstream.
//!
//! `--json-codec sonic-rs|simd-json` reads and writes the REST bodies with
//! that library (`payload::JsonCodec`, the downstream's own mapping) in a
//! handler over the body's bytes, so a codec's tiers keep a twin of their
//! own; serde_json keeps axum's `Json`.
//!
//! Connect (`connect`, `connect-pb`) and gRPC-Web (`grpc-web`) are served
//! where the downstream serves them, on the REST listener at the method's
//! gRPC path (`POST /bench.v1.Downstream/Fetch`), told apart by
//! Content-Type: Connect unary as the protocol document has it (the whole
//! body is the message, `application/json` in the codec or
//! `application/proto`), gRPC-Web as tonic-web's documentation builds it
//! (`GrpcWebLayer` over the same tonic service).
//!
//! Prints the same ready line as `downstream` (`{"service":
//! "plain-downstream", "pid": …, "listeners": {"grpc": …, "rest": …}}`),
//! then serves until killed.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Request as HttpRequest, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response as HttpResponse};
use clap::Parser;
use payload::JsonCodec;
use prost::Message;
use proto::downstream_server::{Downstream, DownstreamServer};
use tonic::{Request, Response, Status};
use tower::{Layer, ServiceExt};

/// The same allocator as `downstream` (its default feature), so the two
/// differ only in what they do per request.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(about = "The downstream built the plainest way (a bench's reference, not a tier)")]
struct Args {
    /// The gRPC listener.
    #[arg(long, default_value = "127.0.0.1:0")]
    grpc_addr: SocketAddr,
    /// The REST listener.
    #[arg(long, default_value = "127.0.0.1:0")]
    rest_addr: SocketAddr,
    /// The simulated service time before each answer.
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    delay: Duration,
    /// The JSON library of the REST bodies: serde_json, sonic-rs or simd-json.
    #[arg(long, default_value_t = JsonCodec::SerdeJson)]
    json_codec: JsonCodec,
}

#[derive(Debug, Clone, Copy)]
struct Plain {
    delay: Duration,
    codec: JsonCodec,
}

#[tonic::async_trait]
impl Downstream for Plain {
    async fn fetch(&self, request: Request<proto::FetchRequest>) -> Result<Response<proto::FetchResponse>, Status> {
        let req = payload::FetchRequest::try_from(request.into_inner())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        tokio::time::sleep(self.delay).await;
        Ok(Response::new(payload::respond(&req).into()))
    }
}

async fn fetch(State(plain): State<Plain>, Json(req): Json<payload::FetchRequest>) -> Json<payload::FetchResponse> {
    tokio::time::sleep(plain.delay).await;
    Json(payload::respond(&req))
}

/// `fetch` with the bodies read and written by another codec than axum's.
async fn fetch_with_codec(State(plain): State<Plain>, body: Bytes) -> HttpResponse {
    let req: payload::FetchRequest = match plain.codec.decode(&body) {
        Ok(req) => req,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    tokio::time::sleep(plain.delay).await;
    match plain.codec.encode(&payload::respond(&req)) {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// What the Connect and gRPC-Web route shares: the twin, and tonic-web's
/// layer over its tonic service, built once.
#[derive(Clone)]
struct Rpc {
    plain: Plain,
    web: tonic_web::GrpcWebService<axum::Router>,
}

/// Connect unary (`application/json` or `application/proto`), or gRPC-Web
/// (`application/grpc-web*`) handed to tonic-web's layer over the tonic service.
async fn rpc(State(twin): State<Rpc>, req: HttpRequest) -> HttpResponse {
    let plain = twin.plain;
    let media = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    if media.starts_with("application/grpc-web") {
        return match twin.web.oneshot(req).await {
            Ok(resp) => resp.into_response(),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        };
    }
    let proto = media.starts_with("application/proto");
    let body = match axum::body::to_bytes(req.into_body(), 4 << 20).await {
        Ok(body) => body,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let req: Result<payload::FetchRequest, String> = if proto {
        proto::FetchRequest::decode(body)
            .map_err(|e| e.to_string())
            .and_then(|r| r.try_into().map_err(|e| format!("{e}")))
    } else {
        plain.codec.decode(&body).map_err(|e| e.to_string())
    };
    let req = match req {
        Ok(req) => req,
        Err(e) => return (StatusCode::BAD_REQUEST, e).into_response(),
    };
    tokio::time::sleep(plain.delay).await;
    let answer = payload::respond(&req);
    if proto {
        return ([(header::CONTENT_TYPE, "application/proto")], proto::FetchResponse::from(answer).encode_to_vec())
            .into_response();
    }
    match plain.codec.encode(&answer) {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let plain = Plain { delay: args.delay, codec: args.json_codec };
    let grpc = tokio::net::TcpListener::bind(args.grpc_addr).await?;
    let rest = tokio::net::TcpListener::bind(args.rest_addr).await?;
    let ready =
        service::ReadyLine::new("plain-downstream", [("grpc", grpc.local_addr()?), ("rest", rest.local_addr()?)]);
    let handler = match plain.codec {
        JsonCodec::SerdeJson => axum::routing::post(fetch),
        _ => axum::routing::post(fetch_with_codec),
    };
    let web = tonic_web::GrpcWebLayer::new()
        .layer(tonic::service::Routes::new(DownstreamServer::new(plain)).prepare().into_axum_router());
    let app = axum::Router::new()
        .route("/v1/fetch", handler)
        .with_state(plain)
        .route("/bench.v1.Downstream/Fetch", axum::routing::post(rpc).with_state(Rpc { plain, web }));
    let grpc_server = tonic::transport::Server::builder()
        .add_service(DownstreamServer::new(plain))
        // What `serve(addr)` does by default (`Server::tcp_nodelay(true)`),
        // which `serve_with_incoming` leaves to the incoming stream: without
        // it h2's separate frame writes wait on Nagle and delayed ACKs.
        .serve_with_incoming(tonic::transport::server::TcpIncoming::from(grpc).with_nodelay(Some(true)));
    println!("{}", serde_json::to_string(&ready)?);
    tokio::select! {
        served = axum::serve(rest, app) => served?,
        served = grpc_server => served?,
    }
    Ok(())
}
