//! The caller tier: what a team's gateway or backend-for-frontend does when it
//! calls an internal service.
//!
//! * [`front`]: the JSON front door (`POST /v1/call`), identical whatever the
//!   transport, so the front hop is the same between runs;
//! * [`outbound`]: the transport vocabulary: [`Transport`], the one small
//!   trait in front of the two clients and the error categories both map
//!   onto;
//! * [`clients`]: the one factory that builds any arm's client from one
//!   settings struct, and [`balanced`]: one client per address in turn,
//!   when the downstream is several replicas balanced by the caller;
//! * [`grpc`] and [`rest`]: the two clients, every fairness-relevant setting
//!   explicit and reported, and [`hop`]: their TLS and compression options;
//! * [`relay`]: the streaming arms' front door (`POST /v1/stream`, NDJSON,
//!   the same for every arm), and [`items`]: their receiving side (`bench.v1.Items`), on the
//!   same clients, Connect's streaming call in [`connect_stream`];
//! * [`server`] and [`cli`]: start-up, listeners and flags.

pub mod balanced;
pub mod cli;
pub mod clients;
pub mod connect_stream;
pub mod front;
pub mod grpc;
pub mod grpcweb;
pub mod hop;
pub mod items;
pub mod outbound;
pub mod relay;
pub mod rest;
pub mod server;

pub use outbound::Transport;
pub use server::{Config, Handle, start};
