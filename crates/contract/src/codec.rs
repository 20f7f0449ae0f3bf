//! A tonic codec for dynamic messages: encodes whatever message it is given
//! and decodes the type it was made for, counting each message's bytes as
//! they are written and read (the request on one side, the answer on the
//! other), so no tier measures a message twice.

use std::sync::Arc;

use bytes::{Buf, BufMut};
use prost::Message;
use prost_reflect::{DynamicMessage, MessageDescriptor};
use telemetry::Counters;
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// Which end of a call a codec serves: the client encodes requests and
/// decodes answers, the server the other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// Encodes [`DynamicMessage`]s; decodes `decodes`.
#[derive(Debug, Clone)]
pub struct DynamicCodec {
    pub decodes: MessageDescriptor,
    pub counters: Arc<Counters>,
    pub side: Side,
}

impl DynamicCodec {
    fn count(&self, encoded: u64, decoded: u64) {
        match self.side {
            Side::Client => self.counters.add_message_bytes(encoded, decoded),
            Side::Server => self.counters.add_message_bytes(decoded, encoded),
        }
    }
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
        self.count((before - buf.remaining_mut()) as u64, 0);
        Ok(())
    }
}

impl Decoder for DynamicCodec {
    type Item = DynamicMessage;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<DynamicMessage>, Status> {
        // A decode buffer holds exactly one whole message.
        let bytes = buf.remaining() as u64;
        self.count(0, bytes);
        let message = DynamicMessage::decode(self.decodes.clone(), buf).map_err(|e| {
            let what = if self.side == Side::Server { "request" } else { "response" };
            let status = format!("malformed protobuf {what}: {e}");
            if self.side == Side::Server { Status::invalid_argument(status) } else { Status::internal(status) }
        })?;
        Ok(Some(message))
    }
}
