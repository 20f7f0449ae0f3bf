//! TLS on the internal hop, as every tier sees it: the listener side's rustls
//! configuration built from PEM files (ring as the one crypto provider), and
//! the PEM readers and provider the clients share. What each handshake
//! negotiated is counted by `telemetry::TlsTally`.
//!
//! It knows nothing of the contract: certificates come from files the
//! operator (or the harness, per run) made, and the protocols offered by ALPN
//! are passed in by the listener that serves them.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// ALPN protocol id of HTTP/2.
pub const ALPN_H2: &[u8] = b"h2";
/// ALPN protocol id of HTTP/1.1.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// The PEM files a TLS listener serves with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTlsFiles {
    /// The server's certificate chain (leaf first).
    pub cert: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// With it, clients must present a certificate issued by this CA (mTLS).
    pub client_ca: Option<PathBuf>,
}

impl ServerTlsFiles {
    /// What `/stats` reports of the listener's TLS: the files, and what it offers.
    pub fn settings(&self, alpn: &[&[u8]]) -> serde_json::Value {
        serde_json::json!({
            "library": "rustls 0.23 (ring) via tokio-rustls",
            "versions": ["TLSv1.3", "TLSv1.2"],
            "alpn_offered": alpn.iter().map(|p| String::from_utf8_lossy(p).into_owned()).collect::<Vec<_>>(),
            "client_auth": if self.client_ca.is_some() { "required (mTLS)" } else { "none" },
            "session_resumption": "rustls defaults: stateful session cache of 256, TLS 1.3 tickets",
            "cert": self.cert,
            "key": self.key,
            "client_ca": self.client_ca,
        })
    }
}

fn read_certs(path: &Path) -> io::Result<Vec<CertificateDer<'static>>> {
    let named = |e: rustls_pki_types::pem::Error| {
        io::Error::new(io::ErrorKind::InvalidData, format!("reading certificates from {}: {e}", path.display()))
    };
    let certs = CertificateDer::pem_file_iter(path).map_err(named)?.collect::<Result<Vec<_>, _>>().map_err(named)?;
    if certs.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{} holds no certificate", path.display())));
    }
    Ok(certs)
}

/// The certificates of a PEM file as a root store (the run's CA).
pub fn root_store(path: &Path) -> io::Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(path)? {
        roots.add(cert).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidData, format!("{} is not a usable CA: {e}", path.display()))
        })?;
    }
    Ok(roots)
}

/// A PEM certificate chain and its key, for either side of a handshake.
pub fn identity(cert: &Path, key: &Path) -> io::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        io::Error::new(io::ErrorKind::InvalidData, format!("reading the private key {}: {e}", key.display()))
    })?;
    Ok((read_certs(cert)?, key_der))
}

/// The ring provider: the one crypto provider every tier uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The listener's rustls configuration, offering `alpn` in order of preference.
pub fn server_config(files: &ServerTlsFiles, alpn: &[&[u8]]) -> io::Result<Arc<ServerConfig>> {
    let bad = |e: rustls::Error| io::Error::new(io::ErrorKind::InvalidData, format!("TLS configuration: {e}"));
    let builder = ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions().map_err(bad)?;
    let builder = match &files.client_ca {
        Some(ca) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(root_store(ca)?), provider()).build().map_err(
                    |e| io::Error::new(io::ErrorKind::InvalidData, format!("client CA {}: {e}", ca.display())),
                )?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let (chain, key) = identity(&files.cert, &files.key)?;
    let mut config = builder.with_single_cert(chain, key).map_err(bad)?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}
