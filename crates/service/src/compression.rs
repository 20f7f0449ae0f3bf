//! The content codings a hop may be compressed with ([`Compression`]), and
//! the one place that maps a coding onto each library's own type: tonic's
//! `grpc-encoding`, tower-http's `Content-Encoding` layers (the downstream's
//! REST listener), reqwest's accepted codings and the request bodies the
//! caller's REST client compresses itself.
//!
//! Every side compresses at the codec's default level, as tonic and
//! tower-http do, so the two transports pay for the same work.

use std::io::{self, Write};

use axum::Router;
use serde::{Deserialize, Serialize};
use tonic::codec::CompressionEncoding;
use tower_http::compression::CompressionLayer;
use tower_http::decompression::RequestDecompressionLayer;

/// How a hop's messages are compressed: gRPC message compression
/// (`grpc-encoding`) or HTTP `Content-Encoding`, by each ecosystem's own
/// mechanism. The message bytes a tier counts stay the uncompressed payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Zstd,
}

/// gzip at flate2's default level, as tonic and tower-http use it.
pub const GZIP_LEVEL: u32 = 6;
/// zstd's default level, as tonic and tower-http use it.
pub const ZSTD_LEVEL: i32 = zstd::DEFAULT_COMPRESSION_LEVEL;

impl Compression {
    /// The flag value and the coding's name on the wire (`gzip`, `zstd`).
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }

    /// The `Content-Encoding` (and `grpc-encoding`) name, `None` uncompressed.
    pub fn content_coding(self) -> Option<&'static str> {
        (self != Compression::None).then(|| self.as_str())
    }

    /// The level a body is compressed at, `None` uncompressed.
    pub fn level(self) -> Option<i32> {
        match self {
            Compression::None => None,
            Compression::Gzip => Some(GZIP_LEVEL as i32),
            Compression::Zstd => Some(ZSTD_LEVEL),
        }
    }

    /// tonic's encoding, for a client's or a server's `send_compressed` and
    /// `accept_compressed`.
    pub fn grpc_encoding(self) -> Option<CompressionEncoding> {
        match self {
            Compression::None => None,
            Compression::Gzip => Some(CompressionEncoding::Gzip),
            Compression::Zstd => Some(CompressionEncoding::Zstd),
        }
    }

    /// `router` with request bodies in this coding decompressed (a body in
    /// another coding is answered 415) and responses compressed in it for a
    /// client that accepts it (tower-http); without compression, `router`
    /// as it is: the listener's edge then answers a coded body 415
    /// ([`IdentityOnly`], [`crate::rest_edge`]), as tower-http answers a
    /// coding it was not given.
    pub fn rest_layers(self, router: Router) -> Router {
        if self == Compression::None {
            return router;
        }
        let (gzip, zstd) = (self == Compression::Gzip, self == Compression::Zstd);
        router
            .layer(CompressionLayer::new().gzip(gzip).zstd(zstd))
            .layer(RequestDecompressionLayer::new().gzip(gzip).zstd(zstd))
    }

    /// A reqwest client that offers (`Accept-Encoding`) and decompresses this
    /// coding only: reqwest would otherwise offer every coding it was built
    /// with.
    pub fn reqwest_accept(self, builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        builder.gzip(self == Compression::Gzip).zstd(self == Compression::Zstd)
    }

    /// A request body in this coding (unchanged without).
    pub fn compress(self, body: &[u8]) -> io::Result<Vec<u8>> {
        match self {
            Compression::None => Ok(body.to_vec()),
            Compression::Gzip => {
                let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(GZIP_LEVEL));
                enc.write_all(body)?;
                enc.finish()
            }
            Compression::Zstd => zstd::encode_all(body, ZSTD_LEVEL),
        }
    }

    /// A message in this coding, decoded to at most `max` bytes: a message
    /// that decodes to more is refused, never held.
    pub fn decompress(self, coded: &[u8], max: usize) -> io::Result<Vec<u8>> {
        use std::io::Read;
        let mut out = Vec::new();
        let limit = max as u64 + 1;
        match self {
            Compression::None => out.extend_from_slice(coded),
            Compression::Gzip => {
                flate2::read::GzDecoder::new(coded).take(limit).read_to_end(&mut out)?;
            }
            Compression::Zstd => {
                zstd::stream::read::Decoder::new(coded)?.take(limit).read_to_end(&mut out)?;
            }
        }
        if out.len() > max {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a message decodes to over {max} bytes")));
        }
        Ok(out)
    }

    /// The coding named `name` (`gzip`, `zstd`, `identity`), if one of these.
    pub fn from_coding(name: &str) -> Option<Compression> {
        match name.trim().to_ascii_lowercase().as_str() {
            "identity" | "" => Some(Compression::None),
            "gzip" => Some(Compression::Gzip),
            "zstd" => Some(Compression::Zstd),
            _ => None,
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// The edge of a listener that decodes no coding: a request whose body
/// says it is compressed (`Content-Encoding` other than `identity`) is
/// answered a bare 415 (`json_errors` gives it its reason and counts it),
/// never read as if it were plain. A header check, no body wrapper: an
/// uncompressed request pays one header lookup.
pub struct IdentityOnly;

impl crate::around::Around for IdentityOnly {
    type Carry = ();

    fn before(&self, req: &mut axum::extract::Request) -> crate::around::Before<()> {
        let coded = req.headers().get_all(http::header::CONTENT_ENCODING).iter().any(|v| {
            v.to_str().map_or(true, |v| {
                v.split(',').any(|c| !c.trim().is_empty() && !c.trim().eq_ignore_ascii_case("identity"))
            })
        });
        if coded {
            let refused = axum::response::IntoResponse::into_response(http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
            return crate::around::Before::Answer(refused);
        }
        crate::around::Before::Pass(())
    }

    fn after(&self, resp: axum::response::Response, (): ()) -> axum::response::Response {
        resp
    }
}

/// A streamed body compressed piece by piece, each piece flushed (gzip's
/// sync flush, zstd's flush) so a client decodes every item as it
/// arrives. tower-http's layer holds a streamed body until it ends
/// (tower-rs/tower-http#292), so a stream compresses itself and says so in
/// its `Content-Encoding`, which that layer leaves alone.
pub enum StreamEncoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

impl StreamEncoder {
    /// An encoder for `coding`; `None` uncompressed.
    pub fn new(coding: Compression) -> io::Result<Option<StreamEncoder>> {
        Ok(match coding {
            Compression::None => None,
            Compression::Gzip => Some(StreamEncoder::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::new(GZIP_LEVEL),
            ))),
            Compression::Zstd => Some(StreamEncoder::Zstd(zstd::stream::write::Encoder::new(Vec::new(), ZSTD_LEVEL)?)),
        })
    }

    /// `piece` compressed and flushed: every byte a decoder needs for it.
    pub fn piece(&mut self, piece: &[u8]) -> io::Result<Vec<u8>> {
        match self {
            StreamEncoder::Gzip(e) => {
                e.write_all(piece)?;
                e.flush()?;
                Ok(std::mem::take(e.get_mut()))
            }
            StreamEncoder::Zstd(e) => {
                e.write_all(piece)?;
                e.flush()?;
                Ok(std::mem::take(e.get_mut()))
            }
        }
    }

    /// The coding's end (gzip's trailer, zstd's last block).
    pub fn finish(self) -> io::Result<Vec<u8>> {
        match self {
            StreamEncoder::Gzip(e) => e.finish(),
            StreamEncoder::Zstd(e) => e.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn request_bodies_round_trip_through_each_coding() {
        let body = b"{\"id\":\"x\",\"items\":10}".repeat(20);
        let gzip = Compression::Gzip.compress(&body).unwrap();
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&gzip[..]).read_to_end(&mut back).unwrap();
        assert_eq!(back, body);
        assert!(gzip.len() < body.len());
        let zstd = Compression::Zstd.compress(&body).unwrap();
        assert_eq!(zstd::decode_all(&zstd[..]).unwrap(), body);
        assert_eq!(Compression::None.compress(&body).unwrap(), body);
    }

    #[test]
    fn each_coding_keeps_its_serialized_name() {
        for c in [Compression::None, Compression::Gzip, Compression::Zstd] {
            assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"{}\"", c.as_str()));
            assert_eq!(<Compression as clap::ValueEnum>::from_str(c.as_str(), false), Ok(c));
        }
        assert_eq!(Compression::None.content_coding(), None);
        assert_eq!(Compression::Zstd.content_coding(), Some("zstd"));
    }

    #[test]
    fn a_streamed_body_decodes_piece_by_piece_as_it_is_flushed() {
        for coding in [Compression::Gzip, Compression::Zstd] {
            let mut enc = StreamEncoder::new(coding).unwrap().unwrap();
            let mut wire = Vec::new();
            for (i, piece) in ["{\"index\":0}\n", "{\"index\":1}\n"].iter().enumerate() {
                wire.extend(enc.piece(piece.as_bytes()).unwrap());
                // What arrived so far decodes to every piece sent so far.
                let mut out = Vec::new();
                let mut partial: Box<dyn io::Read> = match coding {
                    Compression::Gzip => Box::new(flate2::read::GzDecoder::new(&wire[..])),
                    _ => Box::new(zstd::stream::read::Decoder::new(&wire[..]).unwrap()),
                };
                let _ = io::Read::read_to_end(&mut partial, &mut out);
                assert_eq!(out.iter().filter(|b| **b == b'\n').count(), i + 1, "{coding:?}");
            }
            wire.extend(enc.finish().unwrap());
            let whole = match coding {
                Compression::Gzip => {
                    let mut out = String::new();
                    io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&wire[..]), &mut out).unwrap();
                    out
                }
                _ => String::from_utf8(zstd::decode_all(&wire[..]).unwrap()).unwrap(),
            };
            assert_eq!(whole, "{\"index\":0}\n{\"index\":1}\n", "{coding:?}");
        }
    }
}
