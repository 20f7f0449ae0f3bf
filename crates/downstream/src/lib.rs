//! The downstream tier: the internal service a team is choosing a transport for.
//!
//! One [`core::Core`] does the work (validate, wait the simulated service time,
//! build the response); [`grpc`] and [`rest`] are thin adapters that only convert
//! types and map errors, so the two transports differ in one file each.
//! [`server`] binds the gRPC, REST and admin listeners and runs them;
//! [`timer`] is the service-time wait; [`hop`] adds TLS and compression to
//! both listeners when asked; [`custom`] serves a team's own method beside
//! the built-in one (`--proto`); [`cli`] is the binary's flags.

pub mod cli;
pub mod connect;
pub mod connect_stream;
pub mod core;
pub mod custom;
pub mod grpc;
pub mod hop;
pub mod items;
pub mod rest;
pub mod server;
pub mod timer;

pub use server::{Config, Handle, start};
