//! Generated code for the `bench.v1` contract in `proto/`.
//!
//! This crate owns code generation and the contract's wire constants (the
//! `grpc-json` arm's method and codec, `json`): every other crate imports the
//! messages and the tonic client/server from here.

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

/// The `grpc-json` arm's part of the contract: `FetchJson`, a sibling of
/// `Fetch` on the same gRPC listener whose messages are the REST API's JSON,
/// and the pass-through codec its client (caller) and server (downstream)
/// share.
pub mod json {
    use bytes::{Buf, BufMut, Bytes};
    use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

    /// The method the `grpc-json` arm calls.
    pub const FETCH_JSON_PATH: &str = "/bench.v1.Downstream/FetchJson";
    /// The content type of its requests and answers.
    pub const GRPC_JSON_CONTENT_TYPE: &str = "application/grpc+json";

    /// A gRPC codec that moves already-encoded message bytes: the JSON is
    /// made and read by the client and server themselves, so both count the
    /// message bytes they encoded, and a malformed message is theirs to answer.
    #[derive(Debug, Clone, Copy, Default)]
    pub struct RawCodec;

    impl Codec for RawCodec {
        type Encode = Bytes;
        type Decode = Bytes;
        type Encoder = RawCodec;
        type Decoder = RawCodec;

        fn encoder(&mut self) -> Self::Encoder {
            RawCodec
        }

        fn decoder(&mut self) -> Self::Decoder {
            RawCodec
        }
    }

    impl Encoder for RawCodec {
        type Item = Bytes;
        type Error = tonic::Status;

        fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
            dst.put(item);
            Ok(())
        }
    }

    impl Decoder for RawCodec {
        type Item = Bytes;
        type Error = tonic::Status;

        fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, tonic::Status> {
            Ok(Some(src.copy_to_bytes(src.remaining())))
        }
    }
}
