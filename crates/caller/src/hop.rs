//! How the caller's outbound clients put their bytes on the internal hop
//! beyond the contract: TLS towards the downstream (trusting the run's CA, never
//! skipping verification; a client certificate for mTLS) and compression by
//! each ecosystem's own mechanism (tonic's `grpc-encoding`, HTTP
//! `Content-Encoding` with reqwest; the mapping is `service::compression`'s).
//! Both are off unless asked. The JSON arms' codec (`payload::JsonCodec`)
//! travels with them.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use payload::JsonCodec;
use service::Compression;
use service::tls::{ALPN_H2, ALPN_HTTP1, identity, provider, root_store};

/// TLS towards the downstream: the CA its certificate must chain to, and for
/// mTLS the client's own certificate and key (PEM files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientTls {
    pub ca: PathBuf,
    /// `(certificate chain, private key)` presented to a server that asks (mTLS).
    pub identity: Option<(PathBuf, PathBuf)>,
}

/// TLS, compression and JSON codec of one outbound client; the default is
/// plaintext, uncompressed, serde_json.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HopOptions {
    pub tls: Option<ClientTls>,
    pub compression: Compression,
    /// The library a JSON-bodied arm encodes its requests and decodes its
    /// answers with (`--json-codec`); protobuf arms never use it.
    pub json_codec: JsonCodec,
}

impl HopOptions {
    /// tonic's client TLS: the run's CA as the only root, the client identity
    /// for mTLS. tonic offers ALPN h2 and requires it.
    pub fn grpc_tls(&self) -> io::Result<Option<tonic::transport::ClientTlsConfig>> {
        let Some(tls) = &self.tls else { return Ok(None) };
        let read = |p: &PathBuf| {
            std::fs::read(p).map_err(|e| io::Error::new(e.kind(), format!("reading {}: {e}", p.display())))
        };
        let mut config = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(read(&tls.ca)?));
        if let Some((cert, key)) = &tls.identity {
            config = config.identity(tonic::transport::Identity::from_pem(read(cert)?, read(key)?));
        }
        Ok(Some(config))
    }

    /// reqwest's rustls configuration: the run's CA as the only root, the
    /// client identity for mTLS, ALPN for the HTTP version spoken.
    pub fn rest_tls(&self, http2: bool) -> io::Result<Option<rustls::ClientConfig>> {
        let Some(tls) = &self.tls else { return Ok(None) };
        let bad = |e: rustls::Error| io::Error::new(io::ErrorKind::InvalidData, format!("TLS configuration: {e}"));
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(bad)?
            .with_root_certificates(Arc::new(root_store(&tls.ca)?));
        let mut config = match &tls.identity {
            Some((cert, key)) => {
                let (chain, key) = identity(cert, key)?;
                builder.with_client_auth_cert(chain, key).map_err(bad)?
            }
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![if http2 { ALPN_H2.to_vec() } else { ALPN_HTTP1.to_vec() }];
        Ok(Some(config))
    }

    /// The `json_codec` field of a JSON-bodied client's reported settings.
    pub fn json_settings(&self) -> serde_json::Value {
        serde_json::json!({ "json_codec": json_codec_settings(self.json_codec) })
    }

    /// The `tls` and `compression` fields of a client's reported settings.
    pub fn settings(&self, alpn: &str) -> serde_json::Value {
        serde_json::json!({
            "tls": self.tls.as_ref().map(|t| serde_json::json!({
                "library": "rustls 0.23 (ring)",
                "verification": "the server's certificate must chain to the run's CA",
                "ca": t.ca,
                "client_certificate": t.identity.as_ref().map(|(c, _)| c),
                "alpn": alpn,
            })),
            "compression": match self.compression.level() {
                None => serde_json::json!("none"),
                Some(level) => serde_json::json!({
                    "encoding": self.compression.as_str(),
                    "requests": "compressed",
                    "responses": "accepted and decompressed",
                    "level": level,
                }),
            },
        })
    }
}

/// How a tier reports the JSON codec it uses: the flag's name and the library.
pub fn json_codec_settings(codec: JsonCodec) -> serde_json::Value {
    serde_json::json!({ "name": codec.as_str(), "library": codec.library() })
}

/// The rustls configuration of a reqwest client that speaks plain HTTP only:
/// it trusts no certificate authority, so an `https://` URL fails to verify
/// rather than being trusted. Given to every plaintext client, so that none
/// looks for the system's certificate store, which a `scratch` container
/// does not have (reqwest's own default fails to build without one).
pub fn plaintext_only() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth()
}

/// `settings` with the fields of `more` added (both objects).
pub fn merged(mut settings: serde_json::Value, more: serde_json::Value) -> serde_json::Value {
    if let (Some(map), serde_json::Value::Object(more)) = (settings.as_object_mut(), more) {
        map.extend(more);
    }
    settings
}
