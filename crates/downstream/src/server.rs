//! Binds the downstream's three listeners and runs them until shutdown.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use payload::{JsonCodec, Limits};
use service::tls::ServerTlsFiles;
use service::{
    Compression, InFlightLimit, Protocols, ReadyLine, Served, ServerSettings, WorkBudget, bind, serve, serve_tls,
};
use telemetry::{Counters, Registry, admin_router};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::connect::WebFirst;
use crate::core::Core;
use crate::custom::Custom;
use crate::{grpc, hop, rest};

/// Everything the downstream needs to start; built once from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    pub grpc_addr: SocketAddr,
    pub rest_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub delay: Duration,
    pub jitter: Duration,
    /// The time between two items of a stream (`--stream-interval`).
    pub stream_interval: Duration,
    pub limits: Limits,
    pub http2_max_concurrent_streams: u32,
    /// A client must send a complete request head within this time, and the
    /// request body within this time after it (REST 408, gRPC DEADLINE_EXCEEDED).
    pub header_read_timeout: Duration,
    /// A connection with no request in flight for this long is closed.
    pub idle_timeout: Duration,
    /// HTTP/2 PINGs after this long without a frame from the peer.
    pub http2_keep_alive_interval: Option<Duration>,
    /// Most requests the tier works on at once (both listeners together);
    /// `None`: [`InFlightLimit::default_max`] (`--max-in-flight`).
    pub max_in_flight: Option<usize>,
    pub drain_timeout: Duration,
    /// TLS on the gRPC and REST listeners (`--tls-cert`, `--tls-key`,
    /// `--tls-client-ca`); `None`: plaintext.
    pub tls: Option<ServerTlsFiles>,
    /// Compression both listeners accept and answer with (`--compression`).
    pub compression: Compression,
    /// What every JSON body is read and written with (`--json-codec`).
    pub json_codec: JsonCodec,
    /// Bytes of records and uploads the tier holds at once (`--max-work-bytes`).
    pub max_work_bytes: u64,
    /// Request-body bytes one connection may hold at once.
    pub max_connection_body_bytes: usize,
    /// gRPC connections older than this are ended with a GOAWAY
    /// (`--grpc-max-connection-age`).
    pub grpc_max_connection_age: Option<Duration>,
    /// A team's own method, served beside the built-in one (`--proto`).
    pub custom: Option<contract::Loaded>,
}

impl Default for Config {
    fn default() -> Self {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        Config {
            grpc_addr: any,
            rest_addr: any,
            admin_addr: any,
            delay: Duration::from_millis(500),
            jitter: Duration::ZERO,
            stream_interval: Duration::ZERO,
            limits: Limits::default(),
            http2_max_concurrent_streams: ServerSettings::DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: ServerSettings::DEFAULT_IDLE_TIMEOUT,
            http2_keep_alive_interval: ServerSettings::new(Protocols::Auto).http2_keep_alive_interval,
            max_in_flight: None,
            drain_timeout: Duration::from_secs(5),
            tls: None,
            compression: Compression::None,
            json_codec: JsonCodec::SerdeJson,
            max_work_bytes: service::DEFAULT_MAX_WORK_BYTES,
            max_connection_body_bytes: ServerSettings::DEFAULT_MAX_CONNECTION_BODY_BYTES,
            grpc_max_connection_age: None,
            custom: None,
        }
    }
}

/// A running downstream: its bound addresses, its registry, and its tasks.
#[derive(Debug)]
pub struct Handle {
    pub grpc_addr: SocketAddr,
    pub rest_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub registry: Arc<Registry>,
    served: Served,
}

impl Handle {
    pub fn ready_line(&self) -> ReadyLine {
        ReadyLine::new("downstream", [("grpc", self.grpc_addr), ("rest", self.rest_addr), ("admin", self.admin_addr)])
    }

    /// Waits until every listener has stopped (after the shutdown token fires
    /// and in-flight requests drained).
    pub async fn wait(self) {
        self.served.wait().await;
    }

    /// Signals shutdown and waits for the drain.
    pub async fn stop(self) {
        self.served.stop().await;
    }
}

/// Binds all listeners (failing fast, naming the one that could not bind) and
/// starts serving. Cancel `shutdown` (or call [`Handle::stop`]) to stop.
pub async fn start(mut config: Config, shutdown: CancellationToken) -> io::Result<Handle> {
    let grpc_listener = bind("gRPC", config.grpc_addr).await?;
    let rest_listener = bind("REST", config.rest_addr).await?;
    let admin_listener = bind("admin", config.admin_addr).await?;
    let tls = hop::listener_tls(config.tls.as_ref())?;

    let limit = InFlightLimit::from_flag(config.max_in_flight);
    let settings = Settings::new(&config);
    let (registry, counters) = registry(&config, &limit, &settings);
    let registry = Arc::new(registry);

    let custom = config.custom.take().map(|c| Custom::new(c, config.json_codec));
    let (grpc_app, rest_app) = routers(&config, custom, &counters).await?;
    let grpc_app = grpc::edge(grpc_app, &limit, counters.grpc.clone(), config.header_read_timeout);
    let rest_app = service::rest_edge_over(
        rest_app,
        config.compression,
        &limit,
        counters.rest.clone(),
        rest::API,
        service::api::overloaded,
    );

    let handle_addrs = (grpc_listener.local_addr()?, rest_listener.local_addr()?, admin_listener.local_addr()?);
    let mut tasks = JoinSet::new();
    let (grpc_tls, rest_tls) = tls.unzip();
    let Counted { grpc: grpc_counters, rest: rest_counters, admin: admin_counters } = counters;
    tasks.spawn(serve_tls(grpc_listener, grpc_app, Some(grpc_counters), settings.grpc, grpc_tls, shutdown.clone()));
    tasks.spawn(serve_tls(rest_listener, rest_app, Some(rest_counters), settings.rest, rest_tls, shutdown.clone()));
    let admin_app = service::json_errors(admin_router(registry.clone()), Some(admin_counters), telemetry::ADMIN_API);
    tasks.spawn(serve(admin_listener, admin_app, None, settings.admin, shutdown.clone()));

    Ok(Handle {
        grpc_addr: handle_addrs.0,
        rest_addr: handle_addrs.1,
        admin_addr: handle_addrs.2,
        registry,
        served: Served::new(shutdown, tasks),
    })
}

/// The HTTP settings of the three listeners, from the flags.
struct Settings {
    grpc: ServerSettings,
    rest: ServerSettings,
    admin: ServerSettings,
}

impl Settings {
    fn new(config: &Config) -> Self {
        let server = |protocols| ServerSettings {
            http2_max_concurrent_streams: config.http2_max_concurrent_streams,
            header_read_timeout: config.header_read_timeout,
            idle_timeout: config.idle_timeout,
            http2_keep_alive_interval: config.http2_keep_alive_interval,
            drain_timeout: config.drain_timeout,
            max_connection_body_bytes: config.max_connection_body_bytes,
            ..ServerSettings::new(protocols)
        };
        Settings {
            grpc: ServerSettings { max_connection_age: config.grpc_max_connection_age, ..server(Protocols::Http2Only) },
            rest: server(Protocols::Auto),
            admin: server(Protocols::Auto),
        }
    }
}

/// The counters of the three listeners, kept in the registry.
struct Counted {
    grpc: Arc<Counters>,
    rest: Arc<Counters>,
    admin: Arc<Counters>,
}

/// The registry, holding the settings `/stats` reports and each listener's
/// counters.
fn registry(config: &Config, limit: &InFlightLimit, settings: &Settings) -> (Registry, Counted) {
    let mut registry = Registry::new("downstream");
    let max_request_bytes = config.limits.max_encoded_request_bytes();
    registry.set_settings(serde_json::json!({
        "delay_ms": config.delay.as_secs_f64() * 1e3,
        "jitter_ms": config.jitter.as_secs_f64() * 1e3,
        "stream_interval_ms": config.stream_interval.as_secs_f64() * 1e3,
        "service_time_wait": crate::timer::DESCRIPTION,
        "service_time_resolution_ms": crate::timer::RESOLUTION.as_secs_f64() * 1e3,
        "max_items": config.limits.max_items,
        "max_body_bytes": config.limits.max_body_bytes,
        "max_in_flight": limit.max(),
        "max_in_flight_source": limit.source(),
        "request_body_timeout_ms": config.header_read_timeout.as_millis() as u64,
        "max_request_message_bytes": max_request_bytes,
        // What one client can make the gRPC decoder reserve at once: every
        // stream it may open, each declaring the largest message.
        "grpc_max_reserved_bytes_per_connection":
            u64::from(config.http2_max_concurrent_streams) * max_request_bytes as u64,
        "grpc_server": settings.grpc,
        "rest_server": settings.rest,
    }));
    registry.extend_settings(WorkBudget::new(config.max_work_bytes).settings());
    registry.extend_settings(hop::settings(config.tls.as_ref(), config.compression, config.json_codec));
    registry.extend_settings(service::runtime_settings());
    registry.extend_settings(service::huge_pages::settings());
    if let Some(loaded) = &config.custom {
        registry.extend_settings(serde_json::json!({ "contract": loaded.describe() }));
    }
    let counted = Counted {
        grpc: registry.listener(Counters::new("grpc", grpc::OUTCOMES)),
        rest: registry.listener(Counters::new("rest", rest::OUTCOMES)),
        admin: registry.admin(Counters::new("admin", service::api::API_OUTCOMES)),
    };
    (registry, counted)
}

/// The gRPC and REST routers around one core: the built-in method, the
/// streamed and paged `Items`, and a team's own method if there is one;
/// gRPC also serves health and reflection. REST has its coding layers, and
/// gRPC-Web is sent past its routes ([`WebFirst`]); neither has its edge yet.
async fn routers(config: &Config, custom: Option<Arc<Custom>>, counters: &Counted) -> io::Result<(Router, WebFirst)> {
    let core = Core {
        delay: config.delay,
        jitter: config.jitter,
        limits: config.limits,
        budget: WorkBudget::new(config.max_work_bytes),
    };
    let producer = crate::items::Producer { core: core.clone(), interval: config.stream_interval };
    let grpc_app = grpc_routes(config, &core, producer.clone(), counters, custom.as_deref()).await?;
    let rpc = crate::connect::Settings {
        compression: config.compression.grpc_encoding(),
        body_read_timeout: config.header_read_timeout,
        json_codec: config.json_codec,
    };
    let body = service::api::BodyPolicy {
        limit_bytes: core.limits.max_encoded_request_bytes(),
        read_timeout: config.header_read_timeout,
    };
    // A team's own method at the same path keeps it (a Router would panic on two).
    let stream = match &custom {
        Some(c) if c.loaded.contract.grpc_path() == crate::connect_stream::STREAM_PATH => Router::new(),
        _ => crate::connect_stream::routes(producer.clone(), counters.rest.clone(), body, config.compression),
    };
    let rest_app = rest::router(core.clone(), counters.rest.clone(), config.header_read_timeout, config.json_codec)
        .merge(crate::items::rest_routes(producer, counters.rest.clone(), config.compression, config.json_codec))
        .merge(crate::connect::routes(&core, &counters.rest, &rpc, custom.as_ref()))
        .merge(stream);
    let (grpc_app, rest_app) = match &custom {
        None => (grpc_app, rest_app),
        Some(c) => with_custom(c, core.clone(), counters, config, grpc_app, rest_app)?,
    };
    let rest_app = config.compression.rest_layers(rest_app);
    Ok((grpc_app, WebFirst::new(rest_app, &core, &counters.rest, &rpc, custom.as_ref())))
}

/// The gRPC routes: the built-in service, `Items`, health, and reflection of
/// every descriptor served.
async fn grpc_routes(
    config: &Config,
    core: &Core,
    producer: crate::items::Producer,
    counters: &Counted,
    custom: Option<&Custom>,
) -> io::Result<Router> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter.set_serving::<proto::downstream_server::DownstreamServer<grpc::GrpcService>>().await;
    // Reflection in both versions stock tools speak: grpc.reflection.v1
    // (grpcurl, current clients) and v1alpha (grpcio-reflection, older
    // grpcurl and Postman).
    let reflection = || {
        let builder = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET);
        match custom {
            Some(c) => builder.register_encoded_file_descriptor_set(&c.loaded.contract.descriptor_set),
            None => builder,
        }
    };
    let reflection_err =
        |e: tonic_reflection::server::Error| io::Error::other(format!("building gRPC reflection: {e}"));
    Ok(tonic::service::Routes::new(
        grpc::GrpcService::new(core.clone(), counters.grpc.clone())
            .with_compression(config.compression.grpc_encoding())
            .with_json_codec(config.json_codec)
            .into_server(),
    )
    .add_service(
        crate::items::ItemsGrpc { producer, counters: counters.grpc.clone() }
            .into_server(config.compression.grpc_encoding(), core.limits.max_encoded_request_bytes()),
    )
    .add_service(health_service)
    .add_service(reflection().build_v1().map_err(reflection_err)?)
    .add_service(reflection().build_v1alpha().map_err(reflection_err)?)
    .prepare()
    .into_axum_router())
}

/// The routes of the REST listener besides a team's own: the built-in
/// method and `Items`' pages and stream.
/// The Connect and gRPC-Web route of the built-in method is there too.
pub const BUILT_IN_REST_ROUTES: [&str; 4] =
    [rest::API_PATH, crate::items::PAGES_PATH, crate::items::STREAM_PATH, crate::connect::FETCH_PATH];

/// Why a team's `google.api.http` route cannot be served beside the REST
/// listener's own (the built-in ones and the contract's `POST
/// /v1/package.Service/Method`): the router would refuse to start. The
/// harness asks before anything starts.
pub fn check_custom_route(contract: &contract::Contract) -> Result<(), String> {
    let Some(rule) = &contract.http else { return Ok(()) };
    let (own, rpc) = (contract.rest_path(), contract.grpc_path());
    let served: Vec<&str> = BUILT_IN_REST_ROUTES.iter().copied().chain([own.as_str(), rpc.as_str()]).collect();
    match rule.clash(&served) {
        None => Ok(()),
        Some(route) => Err(format!(
            "{}: its google.api.http path {} is {route}, a route the downstream's REST listener already serves; \
             give the method another path",
            contract.name(),
            rule.template
        )),
    }
}

/// Both routers with a team's own method (`--proto`) added: on gRPC at its
/// method path, on REST at its own path and at its `google.api.http` rule's,
/// which may not be a route already served.
fn with_custom(
    c: &Arc<Custom>,
    core: Core,
    counters: &Counted,
    config: &Config,
    grpc_app: Router,
    rest_app: Router,
) -> io::Result<(Router, Router)> {
    let contract = &c.loaded.contract;
    let grpc = crate::custom::CustomGrpc::new(
        c.clone(),
        core.clone(),
        counters.grpc.clone(),
        config.compression.grpc_encoding(),
    );
    let rest = crate::custom::rest_method(c.clone(), core.clone(), counters.rest.clone(), config.header_read_timeout);
    let mut rest_app = rest_app.route(&contract.rest_path(), rest);
    if let Some(rule) = &contract.http {
        check_custom_route(contract).map_err(io::Error::other)?;
        let route = rule.route();
        let annotated =
            crate::custom::rest_annotated(c.clone(), core, counters.rest.clone(), config.header_read_timeout)
                .ok_or_else(|| io::Error::other(format!("{}: verb {} is not served", contract.name(), rule.verb)))?;
        rest_app = rest_app.route(&route, annotated);
    }
    Ok((grpc_app.route_service(&contract.grpc_path(), grpc), rest_app))
}
