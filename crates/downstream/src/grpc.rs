//! The gRPC adapter: protobuf in, [`Core`], protobuf out.

use std::sync::Arc;

use prost::Message;
use proto::downstream_server::{Downstream, DownstreamServer};
use telemetry::Counters;
use tonic::{Request, Response, Status};

use crate::core::Core;
use payload::PayloadError;

/// Outcome labels counted on the gRPC listener.
pub const OUTCOMES: &[&str] = &["ok", "invalid_argument", "resource_exhausted", telemetry::SHED, "other"];

#[derive(Debug)]
pub struct GrpcService {
    core: Core,
    counters: Arc<Counters>,
}

impl GrpcService {
    pub fn new(core: Core, counters: Arc<Counters>) -> Self {
        GrpcService { core, counters }
    }

    /// The tonic server with explicit message limits.
    pub fn into_server(self) -> DownstreamServer<Self> {
        let max_request = self.core.limits.max_encoded_request_bytes();
        DownstreamServer::new(self).max_decoding_message_size(max_request).max_encoding_message_size(usize::MAX)
    }
}

/// The answer to a request shed by the in-flight limit.
pub fn overloaded(max_in_flight: usize) -> axum::response::Response {
    Status::resource_exhausted(format!(
        "this service is at its limit of {max_in_flight} requests in flight; retry later"
    ))
    .into_http()
}

/// Size limits are RESOURCE_EXHAUSTED (HTTP 413 on REST); every other
/// validation failure is INVALID_ARGUMENT (HTTP 400).
pub fn status_of(e: &PayloadError) -> Status {
    if e.is_too_large() { Status::resource_exhausted(e.to_string()) } else { Status::invalid_argument(e.to_string()) }
}

#[tonic::async_trait]
impl Downstream for GrpcService {
    async fn fetch(&self, request: Request<proto::FetchRequest>) -> Result<Response<proto::FetchResponse>, Status> {
        let req = request.into_inner();
        let request_bytes = req.encoded_len() as u64;
        match self.core.fetch(req.into()).await {
            Ok(resp) => {
                let resp = proto::FetchResponse::from(resp);
                self.counters.add_message_bytes(request_bytes, resp.encoded_len() as u64);
                self.counters.record("ok");
                Ok(Response::new(resp))
            }
            Err(e) => {
                let status = status_of(&e);
                self.counters.add_message_bytes(request_bytes, 0);
                self.counters.record(if e.is_too_large() { "resource_exhausted" } else { "invalid_argument" });
                Err(status)
            }
        }
    }
}
