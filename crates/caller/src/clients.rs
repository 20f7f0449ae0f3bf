//! The one factory that makes any arm's outbound client ([`build`]) from one
//! settings struct ([`ClientSettings`]): the caller's flags and the harness's
//! direct target alike. It names the clients ([`crate::grpc`],
//! [`crate::rest`]); they name only the trait in [`crate::outbound`], so the
//! imports run one way.

use std::sync::Arc;

use telemetry::Counters;

use crate::balanced::{RoundRobin, addresses};
use crate::grpc::{GrpcClient, GrpcJsonClient};
use crate::hop::HopOptions;
use crate::outbound::{Outbound, Transport};
use crate::rest::{RestClient, RestEncoding};

/// Everything that shapes an outbound client: one struct for the caller's
/// flags and the harness's direct target alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSettings {
    pub transport: Transport,
    /// `http://host:port` of the downstream's listener for the transport
    /// ([`Transport::listener`]).
    pub target: String,
    /// HTTP/2 connections gRPC calls are spread over.
    pub grpc_connections: usize,
    /// REST over HTTP/2 cleartext instead of HTTP/1.1.
    pub rest_http2: bool,
    /// TLS and compression on the hop (default: plaintext, uncompressed).
    pub hop: HopOptions,
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("building the {transport} client for {target}: {reason}")]
pub struct BuildError {
    pub transport: &'static str,
    pub target: String,
    pub reason: String,
}

/// The client for `settings.transport`, counting on `counters`: with several
/// addresses in the target (comma-separated), one client per address taken
/// in turn ([`RoundRobin`]).
pub fn build(settings: &ClientSettings, counters: Arc<Counters>) -> Result<Arc<dyn Outbound>, BuildError> {
    let each = addresses(&settings.target);
    if each.len() < 2 {
        return build_one(settings, counters);
    }
    let clients = each
        .iter()
        .map(|a| build_one(&ClientSettings { target: (*a).to_owned(), ..settings.clone() }, counters.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Arc::new(RoundRobin::new(&settings.target, clients)))
}

fn build_one(settings: &ClientSettings, counters: Arc<Counters>) -> Result<Arc<dyn Outbound>, BuildError> {
    let fail =
        |reason: String| BuildError { transport: settings.transport.title(), target: settings.target.clone(), reason };
    Ok(match settings.transport {
        Transport::Grpc | Transport::GrpcStream | Transport::GrpcPages => Arc::new(
            GrpcClient::with_hop(&settings.target, settings.grpc_connections, &settings.hop, counters)
                .map_err(|e| fail(e.to_string()))?,
        ),
        Transport::GrpcJson => Arc::new(
            GrpcJsonClient::with_hop(&settings.target, settings.grpc_connections, &settings.hop, counters)
                .map_err(|e| fail(e.to_string()))?,
        ),
        t @ (Transport::Connect | Transport::ConnectPb | Transport::ConnectStream) => {
            let encoding = if t == Transport::Connect { RestEncoding::Json } else { RestEncoding::Protobuf };
            let client = RestClient::connect(&settings.target, settings.rest_http2, encoding, &settings.hop, counters)
                .map_err(|e| fail(e.to_string()))?;
            Arc::new(if t == Transport::ConnectStream { client.connect_stream() } else { client })
        }
        Transport::GrpcWeb => Arc::new(
            crate::grpcweb::GrpcWebClient::with_hop(&settings.target, &settings.hop, counters)
                .map_err(|e| fail(e.to_string()))?,
        ),
        t @ (Transport::Rest
        | Transport::RestPb
        | Transport::RestPages
        | Transport::RestNdjson
        | Transport::RestSse) => {
            let encoding = if t == Transport::RestPb { RestEncoding::Protobuf } else { RestEncoding::Json };
            Arc::new(
                RestClient::with_encoding(&settings.target, settings.rest_http2, encoding, &settings.hop, counters)
                    .map_err(|e| fail(e.to_string()))?,
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // A runtime: the clients of the addresses that can be built spawn their
    // connections' tasks.
    #[tokio::test]
    async fn the_factory_names_what_it_could_not_build() {
        let settings = ClientSettings {
            transport: Transport::Grpc,
            target: "not a uri".into(),
            grpc_connections: 1,
            rest_http2: false,
            hop: HopOptions::default(),
        };
        let err = build(&settings, Arc::new(Transport::Grpc.client_counters("grpc"))).err().unwrap().to_string();
        assert!(err.starts_with("building the gRPC client for not a uri"), "{err}");
        // Of several addresses, the one that failed is named.
        let several = ClientSettings { target: "http://127.0.0.1:1,bad uri".into(), ..settings };
        let err = build(&several, Arc::new(Transport::Grpc.client_counters("grpc"))).err().unwrap().to_string();
        assert!(err.starts_with("building the gRPC client for bad uri"), "{err}");
    }
}
