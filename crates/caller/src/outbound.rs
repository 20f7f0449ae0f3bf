//! The transport vocabulary shared by the caller and the harness: which
//! transport the internal hop uses ([`Transport`]: gRPC, REST, and the two
//! arms that split encoding from transport, protobuf over HTTP/1.1 and JSON
//! over gRPC), the one trait in front of their clients ([`Outbound`]), the
//! error categories all map onto. The one factory that builds a client is
//! [`crate::clients::build`]; this module names no client, so the clients can
//! name it.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use payload::{FetchRequest, FetchResponse, StreamItem, StreamRequest};
use prost_reflect::{DynamicMessage, MessageDescriptor};
use telemetry::Counters;

/// The largest answer message any outbound client reads (tonic's default
/// is 4 MiB; 10,000 records fan out well past that): the gRPC clients'
/// decoding limit and the REST client's body limit, so an answer without
/// end fails the call (`bad_response`) instead of filling the caller.
pub const MAX_ANSWER_BYTES: usize = 256 * 1024 * 1024;

/// Outcome labels counted on an outbound client.
pub const OUTCOMES: &[&str] = &["ok", "connect", "timeout", "status", "bad_response", "other"];

/// Which transport the internal hop uses. `grpc` and `rest` are what teams
/// choose between; `rest-pb` (protobuf bodies over the REST listener's
/// HTTP/1.1) and `grpc-json` (the REST arm's JSON in gRPC frames) complete the
/// 2×2 of encoding × transport, so a difference can be split between the two.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum Transport {
    #[serde(rename = "grpc")]
    Grpc,
    #[serde(rename = "rest")]
    Rest,
    /// Protobuf (`application/x-protobuf`) over the REST listener.
    #[serde(rename = "rest-pb")]
    RestPb,
    /// JSON (`application/grpc+json`) over the gRPC listener.
    #[serde(rename = "grpc-json")]
    GrpcJson,
    /// Connect's unary protocol with JSON bodies (`application/json`,
    /// `POST /bench.v1.Downstream/Fetch`) over the REST listener.
    #[serde(rename = "connect")]
    Connect,
    /// Connect's unary protocol with protobuf bodies (`application/proto`).
    #[serde(rename = "connect-pb")]
    ConnectPb,
    /// gRPC-Web (`application/grpc-web+proto`: gRPC's frames, trailers in a
    /// last frame) over the REST listener's HTTP/1.1.
    #[serde(rename = "grpc-web")]
    GrpcWeb,
    /// A sequence of items as one server-streaming RPC (`bench.v1.Items/Stream`).
    #[serde(rename = "grpc-stream")]
    GrpcStream,
    /// The same sequence in pages of a unary RPC (`bench.v1.Items/Page`).
    #[serde(rename = "grpc-pages")]
    GrpcPages,
    /// Pages over REST (`GET /v1/items`), the next asked for when one arrives.
    #[serde(rename = "rest-pages")]
    RestPages,
    /// One HTTP response streaming one JSON object per line (`GET /v1/items/stream`).
    #[serde(rename = "rest-ndjson")]
    RestNdjson,
    /// Server-sent events, one per item (`text/event-stream`).
    #[serde(rename = "rest-sse")]
    RestSse,
    /// The same sequence as one Connect server-streaming call
    /// (`application/connect+proto` at `/bench.v1.Items/Stream` on the REST
    /// listener): enveloped messages, the end in a last envelope.
    #[serde(rename = "connect-stream")]
    ConnectStream,
}

/// How an arm's internal hop delivers a sequence of items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// One server-streaming RPC.
    Stream,
    /// Pages of `--page-size` items, the next asked for when one arrives.
    Pages,
    /// NDJSON in one HTTP response.
    Ndjson,
    /// Server-sent events.
    Sse,
}

/// The encoding of the internal hop's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    Protobuf,
    Json,
}

impl Transport {
    /// Every unary arm, in the order of the 2×2 (gRPC, REST, then the two
    /// halves), then the protocols teams weigh besides them (Connect with
    /// either encoding, gRPC-Web).
    pub const ALL: [Transport; 7] = [
        Transport::Grpc,
        Transport::Rest,
        Transport::RestPb,
        Transport::GrpcJson,
        Transport::Connect,
        Transport::ConnectPb,
        Transport::GrpcWeb,
    ];

    /// The streaming arms: a sequence of items (`bench.v1.Items`) instead of one answer.
    pub const STREAMING: [Transport; 6] = [
        Transport::GrpcStream,
        Transport::RestPages,
        Transport::RestNdjson,
        Transport::RestSse,
        Transport::GrpcPages,
        Transport::ConnectStream,
    ];

    /// The machine name: flags, JSON, folder names.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Grpc => "grpc",
            Transport::Rest => "rest",
            Transport::RestPb => "rest-pb",
            Transport::GrpcJson => "grpc-json",
            Transport::Connect => "connect",
            Transport::ConnectPb => "connect-pb",
            Transport::GrpcWeb => "grpc-web",
            Transport::GrpcStream => "grpc-stream",
            Transport::GrpcPages => "grpc-pages",
            Transport::RestPages => "rest-pages",
            Transport::RestNdjson => "rest-ndjson",
            Transport::RestSse => "rest-sse",
            Transport::ConnectStream => "connect-stream",
        }
    }

    /// The name people read in reports: `gRPC`, `REST`, `REST+protobuf`,
    /// `gRPC+JSON`.
    pub fn title(self) -> &'static str {
        match self {
            Transport::Grpc => "gRPC",
            Transport::Rest => "REST",
            Transport::RestPb => "REST+protobuf",
            Transport::GrpcJson => "gRPC+JSON",
            Transport::Connect => "Connect",
            Transport::ConnectPb => "Connect+protobuf",
            Transport::GrpcWeb => "gRPC-Web",
            Transport::GrpcStream => "gRPC stream",
            Transport::GrpcPages => "gRPC pages",
            Transport::RestPages => "REST pages",
            Transport::RestNdjson => "REST NDJSON",
            Transport::RestSse => "REST SSE",
            Transport::ConnectStream => "Connect stream",
        }
    }

    /// The arm named `name` (`grpc`, `rest`, `rest-pb`, `grpc-json`, or a
    /// streaming arm).
    pub fn from_name(name: &str) -> Option<Transport> {
        Transport::ALL.into_iter().chain(Transport::STREAMING).find(|t| t.as_str() == name)
    }

    /// How a streaming arm delivers its items; `None` for a unary arm.
    pub fn delivery(self) -> Option<Delivery> {
        match self {
            Transport::GrpcStream | Transport::ConnectStream => Some(Delivery::Stream),
            Transport::GrpcPages | Transport::RestPages => Some(Delivery::Pages),
            Transport::RestNdjson => Some(Delivery::Ndjson),
            Transport::RestSse => Some(Delivery::Sse),
            Transport::Grpc
            | Transport::Rest
            | Transport::RestPb
            | Transport::GrpcJson
            | Transport::Connect
            | Transport::ConnectPb
            | Transport::GrpcWeb => None,
        }
    }

    /// How this arm frames a message and its outcome on the internal hop, in
    /// the words a report shows beside the encoding and the codec.
    pub fn framing(self) -> &'static str {
        match self {
            Transport::Grpc | Transport::GrpcJson | Transport::GrpcPages => {
                "gRPC: each message behind a 5-byte length prefix, the status in HTTP/2 trailers"
            }
            Transport::GrpcStream => {
                "gRPC server streaming: each item behind a 5-byte length prefix, the status in HTTP/2 trailers"
            }
            Transport::Rest | Transport::RestPb | Transport::RestPages => {
                "REST: the message is the HTTP body, the outcome the HTTP status"
            }
            Transport::Connect | Transport::ConnectPb => {
                "Connect unary: the message is the whole HTTP body, no length prefix and no trailers; an error is \
                 the HTTP status with {code, message}"
            }
            Transport::GrpcWeb => {
                "gRPC-Web: gRPC's 5-byte length prefix in an HTTP/1.1 body, the status in a last frame flagged 0x80 \
                 instead of HTTP/2 trailers"
            }
            Transport::RestNdjson => "one HTTP response, an item per line (NDJSON)",
            Transport::RestSse => "one HTTP response, an item per server-sent event",
            Transport::ConnectStream => {
                "Connect server streaming: each item in a 5-byte envelope, the outcome in a last envelope flagged \
                 0x02 (JSON) instead of trailers"
            }
        }
    }

    /// True for the arms that deliver a sequence of items.
    pub fn is_streaming(self) -> bool {
        self.delivery().is_some()
    }

    /// The downstream listener this arm's calls arrive on, and whose counters
    /// hold its internal hop's bytes: `grpc` or `rest`. Connect and gRPC-Web
    /// arrive on the REST listener (HTTP/1.1, or h2c with `--rest-http2`),
    /// routed by Content-Type at the gRPC path, so the gRPC listener stays
    /// HTTP/2-only and the other arms' measurements unchanged.
    pub fn listener(self) -> &'static str {
        if self.is_grpc() { "grpc" } else { "rest" }
    }

    /// True for the arms carried by gRPC over HTTP/2 (tonic).
    pub fn is_grpc(self) -> bool {
        matches!(self, Transport::Grpc | Transport::GrpcJson | Transport::GrpcStream | Transport::GrpcPages)
    }

    /// The encoding of this arm's messages.
    pub fn encoding(self) -> Encoding {
        match self {
            Transport::Grpc
            | Transport::RestPb
            | Transport::ConnectPb
            | Transport::GrpcWeb
            | Transport::GrpcStream
            | Transport::GrpcPages
            | Transport::ConnectStream => Encoding::Protobuf,
            Transport::Rest
            | Transport::GrpcJson
            | Transport::Connect
            | Transport::RestPages
            | Transport::RestNdjson
            | Transport::RestSse => Encoding::Json,
        }
    }

    /// True for the arms framed as gRPC-Web or Connect: the protocols at the
    /// gRPC path of the REST listener.
    pub fn is_rpc_over_http1(self) -> bool {
        matches!(self, Transport::Connect | Transport::ConnectPb | Transport::GrpcWeb | Transport::ConnectStream)
    }

    /// The counters a client of this transport keeps. reqwest owns its
    /// sockets (the REST, Connect and gRPC-Web clients), so those count
    /// connections, not wire bytes.
    pub fn client_counters(self, name: &'static str) -> Counters {
        if self.is_grpc() { Counters::new(name, OUTCOMES) } else { Counters::connections_only(name, OUTCOMES) }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
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

/// A team's own method (`--proto`, `--call`) as every client calls it.
#[derive(Debug, Clone)]
pub struct Method {
    /// `/package.Service/Method`, on the gRPC listener.
    pub grpc_path: http::uri::PathAndQuery,
    /// `/v1/package.Service/Method`, on the REST listener.
    pub rest_path: String,
    /// The answer's type.
    pub output: MessageDescriptor,
    /// Where the JSON REST arm calls it when the method has a
    /// `google.api.http` rule (the protobuf arm keeps [`Method::rest_path`]).
    pub http: Option<contract::http::HttpRule>,
}

impl Method {
    pub fn of(contract: &contract::Contract) -> Arc<Method> {
        Arc::new(Method {
            // A method's full name is letters, digits, '_', '.' and one '/'.
            grpc_path: http::uri::PathAndQuery::try_from(contract.grpc_path())
                .unwrap_or_else(|_| http::uri::PathAndQuery::from_static("/")),
            rest_path: contract.rest_path(),
            output: contract.output(),
            http: contract.http.clone(),
        })
    }
}

/// The items of one stream as a client receives them.
pub type ItemStream = BoxStream<'static, Result<StreamItem, CallError>>;

/// One downstream call over one transport. Implementations only move bytes and
/// convert types; timeouts, verification and counting of outcomes happen once,
/// in [`crate::front`], for both.
pub trait Outbound: Send + Sync + 'static {
    fn fetch(&self, req: FetchRequest) -> BoxFuture<'static, Result<FetchResponse, CallError>>;
    /// Call `n` of a team's own `method`, sending `message` with `n` as its
    /// [`contract::CALL_HEADER`]; the answer decoded into the method's output.
    fn call(
        &self,
        method: &Arc<Method>,
        n: u64,
        message: DynamicMessage,
    ) -> BoxFuture<'static, Result<DynamicMessage, CallError>>;
    /// The items of `req`, delivered as `delivery` (pages of `page_size`),
    /// each as it arrives. A client that cannot deliver that way yields one
    /// error.
    fn items(&self, req: StreamRequest, delivery: Delivery, page_size: u32) -> ItemStream {
        let _ = (req, page_size);
        let target = self.target().to_owned();
        Box::pin(futures::stream::once(async move {
            Err(CallError::Status { target, status: format!("{delivery:?} is not delivered by this client") })
        }))
    }
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
        for t in Transport::ALL.into_iter().chain(Transport::STREAMING) {
            assert_eq!(serde_json::to_string(&t).unwrap(), format!("\"{}\"", t.as_str()));
            assert_eq!(<Transport as clap::ValueEnum>::from_str(t.as_str(), false), Ok(t));
            assert_eq!(Transport::from_name(t.as_str()), Some(t));
        }
        assert_eq!((Transport::RestPb.listener(), Transport::GrpcJson.listener()), ("rest", "grpc"));
        assert_eq!(
            (Transport::RestPb.encoding(), Transport::GrpcJson.encoding()),
            (Encoding::Protobuf, Encoding::Json)
        );
    }
}
