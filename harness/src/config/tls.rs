//! TLS on the internal hop as a run is asked for it ([`TlsMode`]), and where
//! a run's certificate files are once written ([`TlsFiles`]): the flags each
//! tier gets to find them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// TLS on the internal hop (caller → downstream).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// Plaintext (HTTP/2 cleartext or HTTP/1.1).
    #[default]
    None,
    /// The downstream presents a certificate from the run's CA (`--tls`).
    Tls,
    /// Both sides present one (`--mtls`).
    Mtls,
}

impl TlsMode {
    pub fn is_on(self) -> bool {
        self != TlsMode::None
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::None => "none",
            TlsMode::Tls => "tls",
            TlsMode::Mtls => "mtls",
        }
    }
}

/// The names of the files in the run folder's `tls/` (see `results/README.md`).
pub const CA_CERT: &str = "ca.pem";
pub const SERVER_CERT: &str = "server.pem";
pub const SERVER_KEY: &str = "server-key.pem";
pub const CLIENT_CERT: &str = "client.pem";
pub const CLIENT_KEY: &str = "client-key.pem";

/// Where a run's certificate files are, once written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub dir: PathBuf,
    pub mutual: bool,
}

impl TlsFiles {
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The downstream's flags: its certificate and key, and for mTLS the CA
    /// client certificates must chain to.
    pub fn downstream_args(&self) -> Vec<String> {
        let mut args = vec![
            "--tls-cert".to_owned(),
            self.path(SERVER_CERT).display().to_string(),
            "--tls-key".to_owned(),
            self.path(SERVER_KEY).display().to_string(),
        ];
        if self.mutual {
            args.extend(["--tls-client-ca".to_owned(), self.path(CA_CERT).display().to_string()]);
        }
        args
    }

    /// The caller's flags: the CA it trusts, and for mTLS its own certificate.
    pub fn caller_args(&self) -> Vec<String> {
        let mut args = vec!["--tls-ca".to_owned(), self.path(CA_CERT).display().to_string()];
        if self.mutual {
            args.extend([
                "--tls-client-cert".to_owned(),
                self.path(CLIENT_CERT).display().to_string(),
                "--tls-client-key".to_owned(),
                self.path(CLIENT_KEY).display().to_string(),
            ]);
        }
        args
    }

    /// The outbound client's TLS, for the harness's own client (`--target downstream`).
    pub fn client_tls(&self) -> caller::wire::ClientTls {
        caller::wire::ClientTls {
            ca: self.path(CA_CERT),
            identity: self.mutual.then(|| (self.path(CLIENT_CERT), self.path(CLIENT_KEY))),
        }
    }
}
