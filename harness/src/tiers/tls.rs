//! The certificates of one run's internal hop: a throwaway CA, a server
//! certificate for the downstream's addresses, and (for mTLS) a client
//! certificate for the caller, generated with rcgen for every run. Nothing is
//! ever trusted beyond the run: the caller trusts only this CA, the downstream
//! (with mTLS) only client certificates this CA issued. The PEM text is
//! written into the run folder by `export::files::write_tls`, private keys
//! included: they protect nothing once the run has ended.

use std::net::IpAddr;
use std::path::Path;

use crate::config::TlsFiles;
use crate::config::hop::{CA_CERT, CLIENT_CERT, CLIENT_KEY, SERVER_CERT, SERVER_KEY};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// The PEM text of one run's certificates and keys.
#[derive(Debug, Clone)]
pub struct TlsMaterial {
    pub ca_cert: String,
    pub server_cert: String,
    pub server_key: String,
    /// `(certificate, key)` of the caller, for mTLS.
    pub client: Option<(String, String)>,
}

/// Why certificates could not be made.
#[derive(Debug, thiserror::Error)]
#[error("generating the run's TLS certificates: {0}")]
pub struct TlsError(#[from] rcgen::Error);

/// A fresh CA, a server certificate for `localhost`, loopback, `bind` and
/// the host `names` peers call the downstream and its relays by (in
/// containers), and with `mutual` a client certificate.
pub fn generate(bind: IpAddr, peer_names: &[String], mutual: bool) -> Result<TlsMaterial, TlsError> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.distinguished_name.push(DnType::CommonName, "grpc-vs-rest throwaway run CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    if !bind.is_loopback() && !bind.is_unspecified() {
        names.push(bind.to_string());
    }
    names.extend(peer_names.iter().filter(|n| !names.contains(n)).cloned().collect::<Vec<_>>());
    let server_key = KeyPair::generate()?;
    let mut server = CertificateParams::new(names)?;
    server.distinguished_name.push(DnType::CommonName, "downstream");
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = server.signed_by(&server_key, &ca)?;

    let client = if mutual {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, "caller");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        Some((params.signed_by(&key, &ca)?.pem(), key.serialize_pem()))
    } else {
        None
    };
    Ok(TlsMaterial {
        ca_cert: ca.pem(),
        server_cert: server_cert.pem(),
        server_key: server_key.serialize_pem(),
        client,
    })
}

/// The files `material` is written to under `dir`, in `(name, text)` pairs.
pub fn files(material: &TlsMaterial) -> Vec<(&'static str, &str)> {
    let mut files =
        vec![(CA_CERT, &*material.ca_cert), (SERVER_CERT, &*material.server_cert), (SERVER_KEY, &*material.server_key)];
    if let Some((cert, key)) = &material.client {
        files.extend([(CLIENT_CERT, &**cert), (CLIENT_KEY, &**key)]);
    }
    files
}

/// The `TlsFiles` of material written under `dir`.
pub fn at(dir: &Path, material: &TlsMaterial) -> TlsFiles {
    TlsFiles { dir: dir.to_owned(), mutual: material.client.is_some() }
}
