//! The `caller` binary's flags and entry point (also run by the harness in its
//! hidden service role).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use payload::{JsonCodec, Limits};
use service::Compression;
use tokio_util::sync::CancellationToken;

use crate::Transport;
use crate::hop::{ClientTls, HopOptions};
use crate::server::{Config, start};

/// The caller tier: a JSON front door (`POST /v1/call`) that fetches from the
/// downstream over gRPC or REST.
#[derive(Debug, Parser)]
#[command(name = "caller", version)]
pub struct Args {
    /// Front listener address (HTTP/1.1 JSON).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Admin listener address (/healthz, /metrics, /stats).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub admin_addr: SocketAddr,
    /// Transport of the internal hop: grpc, rest, rest-pb (protobuf over the
    /// REST listener), grpc-json (JSON over the gRPC listener), connect and
    /// connect-pb (Connect unary, JSON or protobuf) or grpc-web (gRPC-Web over
    /// HTTP/1.1), the last three on the REST listener.
    #[arg(long, value_enum, default_value_t = Transport::Grpc)]
    pub transport: Transport,
    /// The downstream's gRPC address, e.g. http://127.0.0.1:50051 (for
    /// --transport grpc and grpc-json); several, comma-separated, are taken
    /// in turn (client-side balancing over replicas).
    #[arg(long)]
    pub downstream_grpc: Option<String>,
    /// The downstream's REST address, e.g. http://127.0.0.1:8080 (for
    /// --transport rest, rest-pb, connect, connect-pb and grpc-web); several, comma-separated, are taken in
    /// turn.
    #[arg(long)]
    pub downstream_rest: Option<String>,
    /// Resolve the downstream's host name to every address it has, once at
    /// start, and take them in turn: client-side balancing over the
    /// replicas behind a headless Service (gRPC's dns resolver with
    /// round_robin).
    #[arg(long)]
    pub downstream_all_addresses: bool,
    /// Spread gRPC calls over this many HTTP/2 connections.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub grpc_connections: u32,
    /// REST (and Connect) over HTTP/2 cleartext (prior knowledge) instead of
    /// HTTP/1.1: a control arm that separates framing from serialisation.
    #[arg(long)]
    pub rest_http2: bool,
    /// Concurrent downstream calls per front request (the aggregation pattern).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub fanout: u32,
    /// Items per page for the paging arms (grpc-pages, rest-pages).
    #[arg(long, default_value_t = crate::server::DEFAULT_PAGE_SIZE, value_parser = clap::value_parser!(u32).range(1..))]
    pub page_size: u32,
    /// A downstream call slower than this is answered 504 (for a streaming
    /// arm: the wait for each next item).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub downstream_timeout: Duration,
    /// Most records one front request may ask for (per downstream call).
    #[arg(long, default_value_t = Limits::DEFAULT_MAX_ITEMS)]
    pub max_items: u32,
    /// Most records one front request may ask for in total (items × fan-out);
    /// more is answered 400.
    #[arg(long, default_value_t = crate::front::DEFAULT_MAX_RECORDS, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_records: u64,
    /// Close a front connection with no request in flight (HTTP/2: no open
    /// stream, PINGs do not count) after this long.
    #[arg(long, default_value = "30s", value_parser = service::parse_positive_duration)]
    pub idle_timeout: Duration,
    /// Most front requests worked on at once; more are answered 503.
    /// Default: the larger of the open-files limit and 65536.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_in_flight: Option<u64>,
    /// Most bytes of work held at once: each front request weighs its
    /// records (items × fan-out, 512 bytes each) and its uploads, from
    /// admission until its answer is sent; more is answered 503.
    #[arg(long, default_value_t = service::DEFAULT_MAX_WORK_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_work_bytes: u64,
    /// How long shutdown waits for in-flight requests.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub drain_timeout: Duration,
    /// TLS to the downstream (give https:// addresses): trust only this PEM
    /// CA. Verification is never disabled.
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// mTLS: present this PEM certificate chain to the downstream (with
    /// --tls-client-key and --tls-ca).
    #[arg(long, requires_all = ["tls_client_key", "tls_ca"])]
    pub tls_client_cert: Option<PathBuf>,
    /// The PEM private key of --tls-client-cert.
    #[arg(long, requires = "tls_client_cert")]
    pub tls_client_key: Option<PathBuf>,
    /// Compress the internal hop: gRPC message compression (grpc-encoding)
    /// or HTTP Content-Encoding, requests and responses.
    #[arg(long, value_enum, default_value_t = Compression::None)]
    pub compression: Compression,
    /// The JSON library the JSON arms (rest, grpc-json, the REST streams, a
    /// team's own method) write requests and read answers with: serde_json,
    /// sonic-rs or simd-json. The front door stays serde_json.
    #[arg(long, default_value_t = JsonCodec::SerdeJson)]
    pub json_codec: JsonCodec,
    /// A team's own method, called instead of `Fetch`.
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
    /// requests loaded (a file or line that does not fit is an error here).
    pub fn into_config(self) -> anyhow::Result<Config> {
        let custom = self.contract.load()?;
        Ok(Config {
            listen: self.listen,
            admin_addr: self.admin_addr,
            transport: self.transport,
            downstream_grpc: self.downstream_grpc,
            downstream_rest: self.downstream_rest,
            grpc_connections: self.grpc_connections as usize,
            rest_http2: self.rest_http2,
            fanout: self.fanout,
            downstream_timeout: self.downstream_timeout,
            limits: Limits { max_items: self.max_items, ..Limits::default() },
            max_records: self.max_records,
            max_work_bytes: self.max_work_bytes,
            all_addresses: self.downstream_all_addresses,
            idle_timeout: self.idle_timeout,
            max_in_flight: self.max_in_flight.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            drain_timeout: self.drain_timeout,
            hop: HopOptions {
                tls: self.tls_ca.map(|ca| ClientTls { ca, identity: self.tls_client_cert.zip(self.tls_client_key) }),
                compression: self.compression,
                json_codec: self.json_codec,
            },
            custom,
            page_size: self.page_size,
            ..Config::default()
        })
    }
}

/// Starts the caller, prints the ready line, serves until SIGINT/SIGTERM,
/// drains and returns.
pub async fn run(args: Args) -> anyhow::Result<()> {
    // Before any request's buffers; whatever the process inherited (the
    // settings state what the kernel then reports).
    if let Err(e) = service::huge_pages::set(args.huge_pages) {
        tracing::warn!("transparent huge pages stay as they were: {e}");
    }
    let shutdown = CancellationToken::new();
    service::cancel_on_signal(shutdown.clone());
    let handle = start(args.into_config()?, shutdown).await.context("starting the caller")?;
    service::print_ready(&handle.ready_line()).context("writing the ready line to stdout")?;
    handle.wait().await;
    Ok(())
}
