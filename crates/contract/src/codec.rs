//! Tonic codecs for dynamic messages: each encodes whatever message it is
//! given and decodes the type it was made for, counting each message's
//! bytes where it is written or read, so no tier measures a message twice.

use std::sync::Arc;

use bytes::{Buf, BufMut};
use prost::Message;
use prost_reflect::{DynamicMessage, MessageDescriptor};
use telemetry::Counters;
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// The client's codec: encodes requests and decodes answers of `decodes`,
/// counting both as they are written and read.
#[derive(Debug, Clone)]
pub struct DynamicCodec {
    pub decodes: MessageDescriptor,
    pub counters: Arc<Counters>,
}

impl Codec for DynamicCodec {
    type Encode = DynamicMessage;
    type Decode = DynamicMessage;
    type Encoder = DynamicCodec;
    type Decoder = DynamicCodec;

    fn encoder(&mut self) -> DynamicCodec {
        self.clone()
    }

    fn decoder(&mut self) -> DynamicCodec {
        self.clone()
    }
}

impl Encoder for DynamicCodec {
    type Item = DynamicMessage;
    type Error = Status;

    fn encode(&mut self, item: DynamicMessage, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        let before = buf.remaining_mut();
        item.encode(buf).map_err(|e| Status::internal(format!("encoding a message: {e}")))?;
        self.counters.add_message_bytes((before - buf.remaining_mut()) as u64, 0);
        Ok(())
    }
}

impl Decoder for DynamicCodec {
    type Item = DynamicMessage;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<DynamicMessage>, Status> {
        // A decode buffer holds exactly one whole message.
        let bytes = buf.remaining() as u64;
        self.counters.add_message_bytes(0, bytes);
        let message = DynamicMessage::decode(self.decodes.clone(), buf)
            .map_err(|e| Status::internal(format!("malformed protobuf response: {e}")))?;
        Ok(Some(message))
    }
}

/// A request as the server's codec decoded it, with the bytes it came in:
/// counted by the handler as the request ends, as every listener counts
/// its requests' message bytes (a request's bytes and its count then fall
/// in the same measured round).
#[derive(Debug)]
pub struct Received {
    pub message: DynamicMessage,
    pub bytes: u64,
}

/// The server's codec: decodes requests of `decodes` into [`Received`]
/// (counting nothing), encodes answers counting their bytes as written.
#[derive(Debug, Clone)]
pub struct ServerCodec {
    pub decodes: MessageDescriptor,
    pub counters: Arc<Counters>,
}

impl Codec for ServerCodec {
    type Encode = DynamicMessage;
    type Decode = Received;
    type Encoder = ServerCodec;
    type Decoder = ServerCodec;

    fn encoder(&mut self) -> ServerCodec {
        self.clone()
    }

    fn decoder(&mut self) -> ServerCodec {
        self.clone()
    }
}

impl Encoder for ServerCodec {
    type Item = DynamicMessage;
    type Error = Status;

    fn encode(&mut self, item: DynamicMessage, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        let before = buf.remaining_mut();
        item.encode(buf).map_err(|e| Status::internal(format!("encoding a message: {e}")))?;
        self.counters.add_message_bytes(0, (before - buf.remaining_mut()) as u64);
        Ok(())
    }
}

impl Decoder for ServerCodec {
    type Item = Received;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Received>, Status> {
        let bytes = buf.remaining() as u64;
        let message = DynamicMessage::decode(self.decodes.clone(), buf)
            .map_err(|e| Status::invalid_argument(format!("malformed protobuf request: {e}")))?;
        Ok(Some(Received { message, bytes }))
    }
}
