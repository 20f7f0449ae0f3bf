//! The one logical message model both transports carry.
//!
//! This crate owns:
//! * the request/response/record types and their JSON form (camelCase, RFC 3339
//!   timestamps, base64 for the opaque body), as a typical REST API emits them;
//! * deterministic generation of the records from a request ([`generate`]): the
//!   same request always yields the same records, in both encodings;
//! * conversion to and from the protobuf types of the `proto` crate;
//! * validation against named [`Limits`]; [`check_shape`], what a real client
//!   checks of an answer (its id and record count); and [`verify`], the full
//!   end-to-end check of its content that tests and the harness run.
//!
//! It does not know about sockets, servers or clients.

mod generate;
mod model;
mod pb;
mod validate;

pub use generate::{generate, records_digest};
pub use model::{CallRequest, FetchRequest, FetchResponse, Record};
pub use validate::{Limits, PayloadError, VerifyError, check_shape, fanout_request_ids, validate, verify, verify_call};
