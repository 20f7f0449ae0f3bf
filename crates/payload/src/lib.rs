//! The one logical message model both transports carry.
//!
//! This crate owns:
//! * the request/response/record types and their JSON form (camelCase, RFC 3339
//!   timestamps, base64 for the opaque body), as a typical REST API emits them;
//! * deterministic generation of the answer from a request ([`respond`]): the
//!   same request always yields the same records (order shape) or points
//!   (time-series shape), in both encodings; and of an upload body ([`upload_body`]);
//! * [`json::JsonCodec`]: the JSON library a hop's bodies go through, the
//!   one place every JSON call site of the internal hop asks;
//! * conversion to and from the protobuf types of the `proto` crate;
//! * validation against named [`Limits`]; [`check_shape`], what a real client
//!   checks of an answer (its id and record count); and [`verify`], the full
//!   end-to-end check of its content that tests and the harness run.
//!
//! It does not know about sockets, servers or clients.

mod canonical;
mod generate;
pub mod json;
mod model;
mod pb;
mod stream;
mod validate;

pub use generate::{
    SplitMix64, generate, generate_points, item_record, points_digest, records_digest, respond, upload_body,
};
pub use json::JsonCodec;
pub use model::{CallRequest, FetchRequest, FetchResponse, Point, Record, Shape};
pub use stream::{
    ItemError, PageRequest, PageResponse, PageToken, StreamItem, StreamRequest, due_after_origin, page_range,
    validate_stream, verify_item,
};
pub use validate::{
    Limits, PayloadError, VerifyError, check_shape, fanout_request_ids, fanout_requests, validate, verify, verify_call,
    verify_call_json,
};
