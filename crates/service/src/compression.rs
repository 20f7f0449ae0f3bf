//! The content codings a hop may be compressed with ([`Compression`]).

use serde::{Deserialize, Serialize};

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

impl Compression {
    /// The flag value and the coding's name on the wire (`gzip`, `zstd`).
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}
