//! How the downstream's two listeners carry the internal hop beyond the
//! contract: TLS (rustls, served by the shared accept loop under the byte
//! counter) and compression by each ecosystem's own mechanism — tonic's
//! `grpc-encoding` for gRPC, tower-http's `Content-Encoding` layers for REST
//! (the mapping is `service::compression`'s). Both are off unless the flags
//! ask; the listeners' adapters stay unchanged.

use std::io;
use std::sync::Arc;

use payload::JsonCodec;
use service::Compression;
use service::tls::{ALPN_H2, ALPN_HTTP1, ServerTlsFiles, server_config};

/// ALPN offered by the gRPC listener: HTTP/2 only.
pub const GRPC_ALPN: &[&[u8]] = &[ALPN_H2];
/// ALPN offered by the REST listener: HTTP/2 first, then HTTP/1.1 (the client
/// picks what it speaks).
pub const REST_ALPN: &[&[u8]] = &[ALPN_H2, ALPN_HTTP1];

/// The rustls configurations of the gRPC and REST listeners, or `None` for both
/// without TLS.
pub type ListenerTls = Option<(Arc<rustls::ServerConfig>, Arc<rustls::ServerConfig>)>;

/// Builds both listeners' TLS configuration from `files`, naming the file that
/// could not be used.
pub fn listener_tls(files: Option<&ServerTlsFiles>) -> io::Result<ListenerTls> {
    let Some(files) = files else { return Ok(None) };
    Ok(Some((server_config(files, GRPC_ALPN)?, server_config(files, REST_ALPN)?)))
}

/// What `/stats` reports of the listeners' TLS, compression and JSON codec.
pub fn settings(files: Option<&ServerTlsFiles>, c: Compression, codec: JsonCodec) -> serde_json::Value {
    serde_json::json!({
        "tls": files.map(|f| serde_json::json!({
            "grpc": f.settings(GRPC_ALPN),
            "rest": f.settings(REST_ALPN),
        })),
        "compression": match c {
            Compression::None => serde_json::json!("none"),
            c => serde_json::json!({
                "encoding": c.as_str(),
                "grpc": "tonic: accept_compressed and send_compressed (grpc-encoding), when the client accepts it",
                "rest": "tower-http: RequestDecompressionLayer and CompressionLayer (Content-Encoding; responses over 32 bytes)",
            }),
        },
        "json_codec": {
            "name": codec.as_str(),
            "library": codec.library(),
            "used_by": "REST JSON bodies (fetch, pages, NDJSON, events), gRPC+JSON messages, a team's own method's JSON",
        },
    })
}
