//! Builds the chosen outbound client, binds the front and admin listeners and
//! runs them until shutdown.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use payload::Limits;
use service::{InFlightLimit, Protocols, ReadyLine, Served, ServerSettings, api::API_OUTCOMES, bind, serve};
use telemetry::{Counters, Registry, admin_router};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::clients::{ClientSettings, build};
use crate::front::{self, Front};
use crate::hop::HopOptions;
use crate::outbound::{Outbound, Transport};

/// What the caller does for each front request, as its settings state it.
pub const PER_REQUEST: &str = "parse the front JSON; per downstream call: encode, send, decode, check the status, \
the echoed request id and the record count; re-encode every record as JSON. The records' content is not \
recomputed (the harness verifies it end to end, off the timed path)";

/// What the caller does per front request for a team's own method (`--proto`).
pub const PER_REQUEST_CUSTOM: &str = "parse the front JSON (the call's number); per downstream call: encode the \
    request message (protobuf, or the proto3 JSON mapping), send it with the number as x-request-id, decode the \
    answer into the method's output type (a prost-reflect dynamic message), check the status; write every answer \
    in the proto3 JSON mapping, in one JSON array. The answers' content is not compared here (the harness verifies \
    it end to end, off the timed path)";

/// Everything the caller needs to start; built once from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub admin_addr: SocketAddr,
    pub transport: Transport,
    /// `http://host:port` of the downstream's gRPC listener.
    pub downstream_grpc: Option<String>,
    /// `http://host:port` of the downstream's REST listener.
    pub downstream_rest: Option<String>,
    pub grpc_connections: usize,
    pub rest_http2: bool,
    pub fanout: u32,
    pub downstream_timeout: Duration,
    pub limits: Limits,
    /// Most records one front request may ask for in total (items × fan-out).
    pub max_records: u64,
    /// A front connection with no request in flight for this long is closed.
    pub idle_timeout: Duration,
    /// HTTP/2 PINGs after this long without a frame from the peer.
    pub http2_keep_alive_interval: Option<Duration>,
    /// Most front requests worked on at once; `None`:
    /// [`InFlightLimit::default_max`] (`--max-in-flight`).
    pub max_in_flight: Option<usize>,
    pub drain_timeout: Duration,
    /// A client must send a complete request head within this time, and the
    /// body within this time after it.
    pub header_read_timeout: Duration,
    /// TLS and compression on the internal hop (`--tls-ca`, `--compression`, …).
    pub hop: HopOptions,
    /// Bytes of records and uploads the caller holds at once (`--max-work-bytes`).
    pub max_work_bytes: u64,
    /// Resolve the downstream's host name to every address it has, once at
    /// start, and take them in turn (`--downstream-all-addresses`: the
    /// replicas behind a headless Service).
    pub all_addresses: bool,
    /// A team's own method, called instead of `Fetch` (`--proto`).
    pub custom: Option<contract::Loaded>,
    /// Items per page for the paging arms (`--page-size`).
    pub page_size: u32,
}

impl Default for Config {
    fn default() -> Self {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        Config {
            listen: any,
            admin_addr: any,
            transport: Transport::Grpc,
            downstream_grpc: None,
            downstream_rest: None,
            grpc_connections: 1,
            rest_http2: false,
            fanout: 1,
            downstream_timeout: Duration::from_secs(30),
            limits: Limits::default(),
            max_records: front::DEFAULT_MAX_RECORDS,
            idle_timeout: ServerSettings::DEFAULT_IDLE_TIMEOUT,
            http2_keep_alive_interval: ServerSettings::new(Protocols::Auto).http2_keep_alive_interval,
            max_in_flight: None,
            drain_timeout: Duration::from_secs(5),
            header_read_timeout: Duration::from_secs(10),
            hop: HopOptions::default(),
            max_work_bytes: service::DEFAULT_MAX_WORK_BYTES,
            all_addresses: false,
            custom: None,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }
}

/// Items per page for the paging arms, unless `--page-size` says otherwise.
pub const DEFAULT_PAGE_SIZE: u32 = 10;

/// A running caller: its bound addresses, its registry, and its tasks.
#[derive(Debug)]
pub struct Handle {
    pub front_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub registry: Arc<Registry>,
    served: Served,
}

impl Handle {
    pub fn ready_line(&self) -> ReadyLine {
        ReadyLine::new("caller", [("front", self.front_addr), ("admin", self.admin_addr)])
    }

    pub async fn wait(self) {
        self.served.wait().await;
    }

    pub async fn stop(self) {
        self.served.stop().await;
    }
}

fn need(url: &Option<String>, flag: &str) -> io::Result<String> {
    url.clone()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{flag} is required for this transport")))
}

/// Builds the outbound client, binds both listeners and starts serving.
pub async fn start(config: Config, shutdown: CancellationToken) -> io::Result<Handle> {
    let front_listener = bind("front", config.listen).await?;
    let admin_listener = bind("admin", config.admin_addr).await?;

    let mut registry = Registry::new("caller");
    let front_counters = registry.listener(Counters::new("front", API_OUTCOMES));
    let client_counters = registry.client(config.transport.client_counters(config.transport.as_str()));
    let client = client(&config, client_counters.clone()).await?;

    let front_settings = ServerSettings {
        drain_timeout: config.drain_timeout,
        header_read_timeout: config.header_read_timeout,
        idle_timeout: config.idle_timeout,
        http2_keep_alive_interval: config.http2_keep_alive_interval,
        ..ServerSettings::new(Protocols::Auto)
    };
    let limit = InFlightLimit::from_flag(config.max_in_flight);
    let budget = service::WorkBudget::new(config.max_work_bytes).per_record(front::WORK_BYTES_PER_RECORD);
    report_settings(&mut registry, &config, client.as_ref(), &limit, &front_settings, &budget);
    let admin_counters = registry.admin(Counters::new("admin", API_OUTCOMES));
    let registry = Arc::new(registry);

    let front = Arc::new(Front {
        client,
        fanout: config.fanout.max(1),
        timeout: config.downstream_timeout,
        limits: config.limits,
        max_records: config.max_records,
        front_counters: front_counters.clone(),
        client_counters,
        body: service::api::BodyPolicy {
            limit_bytes: front::MAX_FRONT_BODY_BYTES,
            read_timeout: config.header_read_timeout,
        },
        budget,
        custom: config.custom.as_ref().map(front::Custom::new),
        delivery: config.transport.delivery(),
        page_size: config.page_size,
    });

    let front_addr = front_listener.local_addr()?;
    let admin_addr = admin_listener.local_addr()?;
    let mut tasks = JoinSet::new();
    let front_app = crate::relay::router(front.clone()).merge(front::router(front));
    // The front door decodes no coding: a compressed body is a 415.
    let front_app = service::rest_edge(
        front_app,
        service::Compression::None,
        &limit,
        front_counters.clone(),
        front::API,
        service::api::overloaded,
    );
    tasks.spawn(serve(front_listener, front_app, Some(front_counters), front_settings, shutdown.clone()));
    let admin_app = service::json_errors(admin_router(registry.clone()), Some(admin_counters), telemetry::ADMIN_API);
    tasks.spawn(serve(admin_listener, admin_app, None, ServerSettings::new(Protocols::Auto), shutdown.clone()));
    Ok(Handle { front_addr, admin_addr, registry, served: Served::new(shutdown, tasks) })
}

/// The transport's client of the downstream (every address of its host with
/// `--downstream-all-addresses`), counted on `counters`.
async fn client(config: &Config, counters: Arc<Counters>) -> io::Result<Arc<dyn Outbound>> {
    let (url, flag) = if config.transport.is_grpc() {
        (&config.downstream_grpc, "--downstream-grpc")
    } else {
        (&config.downstream_rest, "--downstream-rest")
    };
    let mut target = need(url, flag)?;
    if config.all_addresses {
        target = crate::balanced::every_address(&target).await?;
    }
    let settings = ClientSettings {
        transport: config.transport,
        target,
        grpc_connections: config.grpc_connections,
        rest_http2: config.rest_http2,
        hop: config.hop.clone(),
    };
    build(&settings, counters)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{flag} {}: {e}", settings.target)))
}

/// What the caller runs with, as `/stats` reports it.
fn report_settings(
    registry: &mut Registry,
    config: &Config,
    client: &dyn Outbound,
    limit: &InFlightLimit,
    front_settings: &ServerSettings,
    budget: &service::WorkBudget,
) {
    registry.set_settings(serde_json::json!({
        "transport": config.transport.as_str(),
        "target": client.target(),
        "fanout": config.fanout,
        "page_size": config.transport.delivery().map(|_| config.page_size),
        "max_records_per_request": config.max_records,
        "max_in_flight": limit.max(),
        "max_in_flight_source": limit.source(),
        "request_body_timeout_ms": config.header_read_timeout.as_millis() as u64,
        "downstream_timeout_ms": config.downstream_timeout.as_millis() as u64,
        "per_request": if config.custom.is_some() { PER_REQUEST_CUSTOM } else { PER_REQUEST },
        "client": client.settings(),
        "front_server": front_settings,
    }));
    registry.extend_settings(budget.settings());
    registry.extend_settings(service::runtime_settings());
    registry.extend_settings(service::huge_pages::settings());
    if let Some(loaded) = &config.custom {
        registry.extend_settings(serde_json::json!({ "contract": loaded.describe() }));
    }
}
