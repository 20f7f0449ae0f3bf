//! Generated code for the `bench.v1` contract in `proto/`.
//!
//! This crate owns code generation and nothing else: every other crate imports
//! the messages and the tonic client/server from here.

#![allow(clippy::all, missing_docs)]

/// Messages, client and server of `bench.v1`.
pub mod bench {
    pub mod v1 {
        tonic::include_proto!("bench.v1");
    }
}

pub use bench::v1::*;

/// The encoded `FileDescriptorSet` of `proto/`, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("bench_descriptor");
