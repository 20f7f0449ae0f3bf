//! The trait both outbound clients implement, and the error categories both
//! transports map onto.

use futures::future::BoxFuture;
use payload::{FetchRequest, FetchResponse};

/// Outcome labels counted on an outbound client.
pub const OUTCOMES: &[&str] = &["ok", "connect", "timeout", "status", "bad_response", "other"];

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
