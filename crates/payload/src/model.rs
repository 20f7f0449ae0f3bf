//! The logical types and their JSON form.

use serde::{Deserialize, Serialize};

/// What a client asks the downstream for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchRequest {
    /// Opaque id chosen by the client; echoed back and used as the generation seed.
    pub request_id: String,
    /// How many records the response must carry.
    pub items: u32,
    /// Optional opaque payload (models an upload); base64 in JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "base64_bytes")]
    pub body: Vec<u8>,
}

/// What the downstream answers (and what the caller's front door answers, with the
/// records of every fan-out call concatenated in order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchResponse {
    pub request_id: String,
    pub records: Vec<Record>,
}

/// What the harness sends to the caller's front door (`POST /v1/call`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRequest {
    pub request_id: String,
    pub items: u32,
}

/// A business-like record: what an order or catalogue service returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub id: u64,
    pub sku: String,
    pub name: String,
    pub email: String,
    pub price_cents: i64,
    pub currency: String,
    pub quantity: u32,
    pub tags: Vec<String>,
    /// Milliseconds since the Unix epoch; `createdAt`, RFC 3339, in JSON.
    #[serde(rename = "createdAt", with = "rfc3339_millis")]
    pub created_at_ms: i64,
    pub active: bool,
}

/// `i64` milliseconds since the epoch <-> RFC 3339 string with millisecond precision.
mod rfc3339_millis {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(ms: &i64, s: S) -> Result<S::Ok, S::Error> {
        let ms = u64::try_from(*ms).map_err(|_| serde::ser::Error::custom("timestamp before 1970"))?;
        let t = UNIX_EPOCH + Duration::from_millis(ms);
        s.collect_str(&humantime::format_rfc3339_millis(t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let t: SystemTime = humantime::parse_rfc3339(&s).map_err(D::Error::custom)?;
        let since = t.duration_since(UNIX_EPOCH).map_err(D::Error::custom)?;
        i64::try_from(since.as_millis()).map_err(D::Error::custom)
    }
}

/// Opaque bytes <-> standard base64 string.
mod base64_bytes {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        STANDARD.decode(s.as_bytes()).map_err(D::Error::custom)
    }
}
