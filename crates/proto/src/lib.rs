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

/// Connect's streaming call of `bench.v1.Items/Stream`: its path, media
/// type and envelope, one definition for the caller that reads it and the
/// downstream that writes it. An envelope is a flag byte, the message's
/// length (4 bytes, big-endian) and the message.
pub mod connect {
    /// Where Connect calls `bench.v1.Items/Stream`.
    pub const STREAM_PATH: &str = "/bench.v1.Items/Stream";
    /// Connect's media type of a streaming call with protobuf messages.
    pub const MEDIA_TYPE: &str = "application/connect+proto";
    /// The envelope's flag of a compressed message.
    pub const COMPRESSED: u8 = 0x01;
    /// The envelope's flag of the end of the stream (its message JSON).
    pub const END_STREAM: u8 = 0x02;

    /// One envelope: `flags`, the message's length (big-endian), the message.
    pub fn envelope(flags: u8, message: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(5 + message.len());
        out.push(flags);
        out.extend_from_slice(&(message.len() as u32).to_be_bytes());
        out.extend_from_slice(message);
        out
    }
}

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
