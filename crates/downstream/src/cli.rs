//! The `downstream` binary's flags and entry point (also run by the harness in
//! its hidden service role).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use payload::{JsonCodec, Limits};
use service::Compression;
use service::tls::ServerTlsFiles;
use tokio_util::sync::CancellationToken;

use crate::server::{Config, start};

/// The downstream tier: answers `Fetch` over gRPC and `POST /v1/fetch` over REST
/// after a simulated service time.
#[derive(Debug, Parser)]
#[command(name = "downstream", version)]
pub struct Args {
    /// gRPC listener address (HTTP/2 cleartext).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub grpc_addr: SocketAddr,
    /// REST listener address (HTTP/1.1, and HTTP/2 cleartext with prior knowledge).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub rest_addr: SocketAddr,
    /// Admin listener address (/healthz, /metrics, /stats).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub admin_addr: SocketAddr,
    /// Simulated service time of every request (e.g. 500ms, 2s).
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    pub delay: Duration,
    /// Extra service time in [0, jitter], derived from the request id.
    #[arg(long, default_value = "0ms", value_parser = humantime::parse_duration)]
    pub jitter: Duration,
    /// The time between two items of a stream (bench.v1.Items), after
    /// --delay before the first; 0: each item as soon as it is asked for.
    #[arg(long, default_value = "0ms", value_parser = humantime::parse_duration)]
    pub stream_interval: Duration,
    /// Most records one request may ask for.
    #[arg(long, default_value_t = Limits::DEFAULT_MAX_ITEMS)]
    pub max_items: u32,
    /// Largest opaque request body, in bytes.
    #[arg(long, default_value_t = Limits::DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// Most concurrent HTTP/2 streams per client connection (gRPC and h2c REST).
    #[arg(long, default_value_t = service::ServerSettings::DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS)]
    pub http2_max_streams: u32,
    /// Close a connection with no request in flight (HTTP/2: no open stream,
    /// PINGs do not count) after this long.
    #[arg(long, default_value = "30s", value_parser = service::parse_positive_duration)]
    pub idle_timeout: Duration,
    /// Most requests worked on at once, gRPC and REST together; more are
    /// answered 503 / RESOURCE_EXHAUSTED. Default: the larger of the
    /// open-files limit and 65536.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_in_flight: Option<u64>,
    /// Most bytes of work held at once: each request weighs its records
    /// (256 bytes each) and its upload, from admission until its answer is
    /// sent; more is shed (503 / RESOURCE_EXHAUSTED).
    #[arg(long, default_value_t = service::DEFAULT_MAX_WORK_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_work_bytes: u64,
    /// End gRPC connections older than this (±10%) with a GOAWAY, letting
    /// their calls finish; the client reconnects, and a balancer in front
    /// may send the new connection elsewhere (grpc-go's MaxConnectionAge).
    /// Default: connections live as long as they are used.
    #[arg(long, value_parser = service::parse_positive_duration)]
    pub grpc_max_connection_age: Option<Duration>,
    /// How long shutdown waits for in-flight requests.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub drain_timeout: Duration,
    /// Serve gRPC and REST over TLS with this PEM certificate chain (with
    /// --tls-key). ALPN: h2 on the gRPC listener, h2 and http/1.1 on REST.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates issued by this PEM CA (mTLS; needs --tls-cert).
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Compression both listeners accept and answer with: gRPC message
    /// compression (grpc-encoding) and HTTP Content-Encoding.
    #[arg(long, value_enum, default_value_t = Compression::None)]
    pub compression: Compression,
    /// The JSON library every JSON body is read and written with:
    /// serde_json, sonic-rs or simd-json (REST fetch, pages, NDJSON, events;
    /// gRPC+JSON; a team's own method).
    #[arg(long, default_value_t = JsonCodec::SerdeJson)]
    pub json_codec: JsonCodec,
    /// A team's own method, served beside the built-in one.
    #[command(flatten)]
    pub contract: contract::ContractArgs,
    /// Transparent huge pages: off (the default: memory counted in 4 KiB
    /// pages, not the allocator's 2 MiB rounding) or machine (as a plain
    /// service on this machine runs; see service::huge_pages).
    #[arg(long, value_enum, default_value_t = service::huge_pages::HugePages::Off)]
    pub huge_pages: service::huge_pages::HugePages,
}

impl Args {
    /// The configuration, with a team's own contract compiled and its
    /// answers loaded (a file or line that does not fit is an error here).
    pub fn into_config(self) -> anyhow::Result<Config> {
        let custom = self.contract.load()?;
        let limits = Limits { max_items: self.max_items, max_body_bytes: self.max_body_bytes, ..Limits::default() };
        if let Some(loaded) = &custom {
            // A request it could never read, refused at start, not on every call.
            loaded.check_request_sizes(limits.max_encoded_request_bytes())?;
        }
        Ok(Config {
            grpc_addr: self.grpc_addr,
            rest_addr: self.rest_addr,
            admin_addr: self.admin_addr,
            delay: self.delay,
            jitter: self.jitter,
            stream_interval: self.stream_interval,
            limits,
            http2_max_concurrent_streams: self.http2_max_streams,
            idle_timeout: self.idle_timeout,
            max_in_flight: self.max_in_flight.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            drain_timeout: self.drain_timeout,
            tls: self.tls_cert.zip(self.tls_key).map(|(cert, key)| ServerTlsFiles {
                cert,
                key,
                client_ca: self.tls_client_ca,
            }),
            compression: self.compression,
            json_codec: self.json_codec,
            max_work_bytes: self.max_work_bytes,
            grpc_max_connection_age: self.grpc_max_connection_age,
            custom,
            ..Config::default()
        })
    }
}

/// Starts the downstream, prints the ready line, serves until SIGINT/SIGTERM,
/// drains and returns.
pub async fn run(args: Args) -> anyhow::Result<()> {
    // Before any request's buffers; whatever the process inherited (the
    // settings state what the kernel then reports).
    if let Err(e) = service::huge_pages::set(args.huge_pages) {
        tracing::warn!("transparent huge pages stay as they were: {e}");
    }
    let shutdown = CancellationToken::new();
    service::cancel_on_signal(shutdown.clone());
    let handle = start(args.into_config()?, shutdown).await.context("starting the downstream")?;
    service::print_ready(&handle.ready_line()).context("writing the ready line to stdout")?;
    handle.wait().await;
    Ok(())
}
