//! The internal hop beyond its transport: TLS (`--tls`, `--mtls`; the run's
//! certificate files, once written, are [`TlsFiles`]), compression, the
//! caller's gRPC connections and REST over h2c, the JSON codec. Both tiers
//! are given the TLS files, the compression and the JSON codec; the caller
//! its connections and h2c.

use std::path::PathBuf;

use clap::Args;
use serde::{Deserialize, Serialize};

use payload::JsonCodec;

use super::{Compression, ConfigError, Deploy, Flags, TierRole, bad, is_default};

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "The internal hop (docs/measuring.md)")]
pub struct HopArgs {
    /// HTTP/2 connections the caller spreads gRPC calls over.
    #[arg(long, default_value_t = 1)]
    pub grpc_connections: u32,
    /// REST and Connect over HTTP/2 cleartext instead of HTTP/1.1 on the internal hop (a control arm).
    #[arg(long)]
    pub rest_http2: bool,
    /// TLS on the internal hop (caller → downstream) for every arm.
    ///
    /// rustls, certificates from a throwaway CA made for this run and written into the run folder; ALPN h2
    /// for gRPC (and --rest-http2), http/1.1 for REST.
    #[arg(long)]
    pub tls: bool,
    /// Mutual TLS on the internal hop: --tls, and the caller presents a client
    /// certificate the downstream requires.
    #[arg(long)]
    pub mtls: bool,
    /// Compression on the internal hop, requests and responses.
    ///
    /// gRPC message compression (grpc-encoding) or HTTP Content-Encoding.
    #[arg(long, value_enum, default_value_t = Compression::None)]
    pub compression: Compression,
    /// The JSON library of the JSON arms, both ends of the internal hop:
    /// serde_json, sonic-rs or simd-json.
    ///
    /// A list (`serde_json,sonic-rs`) measures every arm with each codec at
    /// every payload size (a payload sweep; one --items value is a sweep of
    /// one size). The front door stays serde_json.
    #[arg(long, value_delimiter = ',', default_value = "serde_json")]
    pub json_codec: Vec<JsonCodec>,
}

/// The internal hop's section of [`super::Config`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hop {
    pub grpc_connections: u32,
    pub rest_http2: bool,
    /// TLS on the internal hop (`--tls`, `--mtls`). Absent from run.json
    /// when off (and in runs made before it existed).
    #[serde(default, skip_serializing_if = "is_default")]
    pub tls: TlsMode,
    /// Compression on the internal hop (`--compression`). Absent from
    /// run.json when off.
    #[serde(default, skip_serializing_if = "is_default")]
    pub compression: Compression,
    /// The JSON arms' codec (`--json-codec`), at both ends of the hop.
    /// Absent from run.json for serde_json (and in runs made before it).
    #[serde(default, skip_serializing_if = "is_default")]
    pub json_codec: JsonCodec,
}

impl Hop {
    /// Validates the hop's flags against where the tiers run; the hop
    /// measures the first of `--json-codec`'s codecs ([`json_codecs`] gives
    /// them all).
    pub fn from_args(a: &HopArgs, deploy: &Deploy) -> Result<Hop, ConfigError> {
        if !(1..=1024).contains(&a.grpc_connections) {
            return Err(bad("--grpc-connections", "must be between 1 and 1024"));
        }
        let codecs = json_codecs(a)?;
        Ok(Hop {
            grpc_connections: a.grpc_connections,
            rest_http2: a.rest_http2,
            tls: tls_mode(a, deploy)?,
            compression: a.compression,
            json_codec: codecs[0],
        })
    }

    /// Refuses `--rest-http2` with the `grpc-web` arm: gRPC-Web is the
    /// HTTP/1.1 form of gRPC (HTTP/2 is gRPC itself), so there is no HTTP/2
    /// counterpart to measure.
    pub fn check_arms(&self, arms: &[caller::Transport]) -> Result<(), ConfigError> {
        if self.rest_http2 && arms.contains(&caller::Transport::GrpcWeb) {
            return Err(bad(
                "--rest-http2",
                "grpc-web is gRPC-Web over HTTP/1.1 (over HTTP/2 it would be the grpc arm); --rest-http2 applies to \
                 rest, rest-pb, connect and connect-pb: measure grpc-web without it",
            ));
        }
        Ok(())
    }

    /// The hop's part of the command line `harness rerun` replays.
    pub fn replay(&self, flags: &mut Flags) {
        flags.flag("--grpc-connections", self.grpc_connections.to_string());
        if self.compression != Compression::None {
            flags.flag("--compression", self.compression.as_str());
        }
        if self.json_codec != JsonCodec::default() {
            flags.flag("--json-codec", self.json_codec.as_str());
        }
        flags.switch(self.rest_http2, "--rest-http2");
        flags.switch(self.tls == TlsMode::Tls, "--tls");
        flags.switch(self.tls == TlsMode::Mtls, "--mtls");
    }

    /// Both tiers get the compression and their TLS files; the caller its
    /// gRPC connections and h2c for REST.
    pub fn tier_flags(&self, role: TierRole, tls: Option<&TlsFiles>, flags: &mut Flags) {
        if role == TierRole::Caller {
            flags.flag("--grpc-connections", self.grpc_connections.to_string());
            flags.switch(self.rest_http2, "--rest-http2");
        }
        if let Some(files) = tls {
            files.tier_flags(role, flags);
        }
        if self.compression != Compression::None {
            flags.flag("--compression", self.compression.as_str());
        }
        if self.json_codec != JsonCodec::default() {
            flags.flag("--json-codec", self.json_codec.as_str());
        }
    }
}

/// `--json-codec`'s codecs, in the order given, each once.
pub fn json_codecs(a: &HopArgs) -> Result<Vec<JsonCodec>, ConfigError> {
    let codecs = &a.json_codec;
    if codecs.is_empty() {
        return Err(bad("--json-codec", "name at least one codec (serde_json, sonic-rs, simd-json)"));
    }
    if let Some(twice) = codecs.iter().enumerate().find_map(|(i, c)| codecs[..i].contains(c).then_some(c)) {
        return Err(bad("--json-codec", format!("{twice} is listed twice; name each codec once")));
    }
    Ok(codecs.clone())
}

/// `--tls` / `--mtls`, and the topologies TLS goes with.
fn tls_mode(a: &HopArgs, deploy: &Deploy) -> Result<TlsMode, ConfigError> {
    let (mode, flag) = match (a.tls, a.mtls) {
        (false, false) => return Ok(TlsMode::None),
        (_, true) => (TlsMode::Mtls, "--mtls"),
        (true, false) => (TlsMode::Tls, "--tls"),
    };
    if deploy.proxy.is_some() {
        return Err(bad(
            flag,
            "cannot be used with --proxy: the proxy would have to terminate and re-originate the hop's TLS, which \
             is not supported; leave out --proxy or measure without TLS",
        ));
    }
    if deploy.downstream_url.is_some() || !deploy.remote.caller_url.is_empty() {
        return Err(bad(
            flag,
            "cannot be used with --downstream-url or --caller-url: the run's certificates are made for the tiers \
             the harness starts; give tiers elsewhere their own certificates (the tiers' --tls-* flags) and leave \
             out --tls/--mtls",
        ));
    }
    Ok(mode)
}

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

    /// A tier's flags: the downstream's certificate and key (and for mTLS
    /// the CA client certificates must chain to); the caller's CA it trusts
    /// (and for mTLS its own certificate).
    fn tier_flags(&self, role: TierRole, flags: &mut Flags) {
        let path = |name| self.path(name).display().to_string();
        match role {
            TierRole::Downstream => {
                flags.flag("--tls-cert", path(SERVER_CERT));
                flags.flag("--tls-key", path(SERVER_KEY));
                if self.mutual {
                    flags.flag("--tls-client-ca", path(CA_CERT));
                }
            }
            TierRole::Caller => {
                flags.flag("--tls-ca", path(CA_CERT));
                if self.mutual {
                    flags.flag("--tls-client-cert", path(CLIENT_CERT));
                    flags.flag("--tls-client-key", path(CLIENT_KEY));
                }
            }
        }
    }

    /// The outbound client's TLS, for the harness's own client (`--target downstream`).
    pub fn client_tls(&self) -> caller::hop::ClientTls {
        caller::hop::ClientTls {
            ca: self.path(CA_CERT),
            identity: self.mutual.then(|| (self.path(CLIENT_CERT), self.path(CLIENT_KEY))),
        }
    }
}
