//! The transport vocabulary shared by the caller and the harness: which
//! transport the internal hop uses ([`Transport`]), the one trait in front of
//! its two clients ([`Outbound`]), the error categories both map onto, and the
//! one factory that builds a client from one settings struct ([`build`]).

use std::sync::Arc;

use futures::future::BoxFuture;
use payload::{FetchRequest, FetchResponse};
use telemetry::Counters;

use crate::grpc::GrpcClient;
use crate::rest::RestClient;
use crate::wire::Wire;

/// Outcome labels counted on an outbound client.
pub const OUTCOMES: &[&str] = &["ok", "connect", "timeout", "status", "bad_response", "other"];

/// Which transport the internal hop uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Grpc,
    Rest,
}

impl Transport {
    /// The machine name: flags, JSON, folder names, listener names.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Grpc => "grpc",
            Transport::Rest => "rest",
        }
    }

    /// The name people read in reports: `gRPC`, `REST`.
    pub fn title(self) -> &'static str {
        match self {
            Transport::Grpc => "gRPC",
            Transport::Rest => "REST",
        }
    }

    /// The counters a client of this transport keeps. reqwest owns its
    /// sockets, so a REST client counts connections, not wire bytes.
    pub fn client_counters(self, name: &'static str) -> Counters {
        match self {
            Transport::Grpc => Counters::new(name, OUTCOMES),
            Transport::Rest => Counters::connections_only(name, OUTCOMES),
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Everything that shapes an outbound client: one struct for the caller's
/// flags and the harness's direct target alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSettings {
    pub transport: Transport,
    /// `http://host:port` of the downstream's listener for the transport.
    pub target: String,
    /// HTTP/2 connections gRPC calls are spread over.
    pub grpc_connections: usize,
    /// REST over HTTP/2 cleartext instead of HTTP/1.1.
    pub rest_http2: bool,
    /// TLS and compression on the hop (default: plaintext, uncompressed).
    pub wire: Wire,
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("building the {transport} client for {target}: {reason}")]
pub struct BuildError {
    pub transport: &'static str,
    pub target: String,
    pub reason: String,
}

/// The client for `settings.transport`, counting on `counters`.
pub fn build(settings: &ClientSettings, counters: Arc<Counters>) -> Result<Arc<dyn Outbound>, BuildError> {
    let fail =
        |reason: String| BuildError { transport: settings.transport.title(), target: settings.target.clone(), reason };
    Ok(match settings.transport {
        Transport::Grpc => Arc::new(
            GrpcClient::with_wire(&settings.target, settings.grpc_connections, &settings.wire, counters)
                .map_err(|e| fail(e.to_string()))?,
        ),
        Transport::Rest => Arc::new(
            RestClient::with_wire(&settings.target, settings.rest_http2, &settings.wire, counters)
                .map_err(|e| fail(e.to_string()))?,
        ),
    })
}

/// Why a downstream call failed, in categories shared by both transports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No connection could be made (refused, reset before an answer, DNS).
    #[error("downstream {target} unreachable: {reason}")]
    Connect { target: String, reason: String },
    /// No answer within the caller's downstream timeout.
    #[error("downstream {target} did not answer within {timeout_ms} ms")]
    Timeout { target: String, timeout_ms: u128 },
    /// The downstream answered with an error status (HTTP or gRPC).
    #[error("downstream {target} answered {status}")]
    Status { target: String, status: String },
    /// An answer that does not decode or is not the one asked for.
    #[error("bad downstream response from {target}: {reason}")]
    BadResponse { target: String, reason: String },
}

impl CallError {
    pub fn outcome(&self) -> &'static str {
        match self {
            CallError::Connect { .. } => "connect",
            CallError::Timeout { .. } => "timeout",
            CallError::Status { .. } => "status",
            CallError::BadResponse { .. } => "bad_response",
        }
    }
}

/// One downstream call over one transport. Implementations only move bytes and
/// convert types; timeouts, verification and counting of outcomes happen once,
/// in [`crate::front`], for both.
pub trait Outbound: Send + Sync + 'static {
    fn fetch(&self, req: FetchRequest) -> BoxFuture<'static, Result<FetchResponse, CallError>>;
    /// Where calls go, for error messages (`http://127.0.0.1:4000`).
    fn target(&self) -> &str;
    /// Every setting that affects fairness, for `/stats` and the report.
    fn settings(&self) -> serde_json::Value;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_name_each_for_machines_and_people() {
        assert_eq!((Transport::Grpc.as_str(), Transport::Grpc.title()), ("grpc", "gRPC"));
        assert_eq!((Transport::Rest.as_str(), Transport::Rest.title()), ("rest", "REST"));
        assert_eq!(serde_json::to_string(&Transport::Rest).unwrap(), "\"rest\"");
    }

    #[test]
    fn the_factory_names_what_it_could_not_build() {
        let settings = ClientSettings {
            transport: Transport::Grpc,
            target: "not a uri".into(),
            grpc_connections: 1,
            rest_http2: false,
            wire: Wire::default(),
        };
        let err = build(&settings, Arc::new(Transport::Grpc.client_counters("grpc"))).err().unwrap().to_string();
        assert!(err.starts_with("building the gRPC client for not a uri"), "{err}");
    }
}
