//! The logical types and their JSON form.

use serde::{Deserialize, Serialize};

/// Which kind of record a response carries (`--shape`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    /// Order-like [`Record`]s: ids, strings, a price, tags, a timestamp, a flag.
    #[default]
    Order,
    /// A time-series point batch: numeric-heavy [`Point`]s.
    Timeseries,
}

impl Shape {
    pub const ALL: [Shape; 2] = [Shape::Order, Shape::Timeseries];

    /// The name in flags, JSON and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Shape::Order => "order",
            Shape::Timeseries => "timeseries",
        }
    }

    pub fn is_order(&self) -> bool {
        *self == Shape::Order
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl std::str::FromStr for Shape {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Shape::ALL
            .into_iter()
            .find(|shape| shape.as_str() == s.trim())
            .ok_or_else(|| format!("{s:?} is not a shape; use order or timeseries"))
    }
}

/// What a client asks the downstream for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchRequest {
    /// Opaque id chosen by the client; echoed back and used as the generation seed.
    pub request_id: String,
    /// How many records the response must carry.
    pub items: u32,
    /// Optional opaque payload (models an upload); base64 in JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "base64_bytes")]
    pub body: Vec<u8>,
    /// Which kind of record the response carries; absent in JSON for orders.
    #[serde(default, skip_serializing_if = "Shape::is_order")]
    pub shape: Shape,
}

/// What the downstream answers (and what the caller's front door answers, with the
/// records or points of every fan-out call concatenated in order). One list is
/// filled, the one of the request's shape; an empty list is left out of the JSON,
/// as protobuf leaves out an empty repeated field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchResponse {
    pub request_id: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<Record>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub points: Vec<Point>,
}

/// What the harness sends to the caller's front door (`POST /v1/call`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRequest {
    pub request_id: String,
    pub items: u32,
    /// The kind of record to fetch; absent for orders.
    #[serde(default, skip_serializing_if = "Shape::is_order")]
    pub shape: Shape,
    /// Bytes of opaque body the caller uploads with each downstream call
    /// (generated from the downstream request id); absent for none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub request_bytes: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
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

/// A numeric-heavy record: one point of a metric series (a sample and the
/// aggregates of its interval), as a monitoring or IoT service returns them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Point {
    pub series_id: u64,
    /// Milliseconds since the Unix epoch, as a number (`timestampMs`).
    pub timestamp_ms: i64,
    pub value: f64,
    pub min: f64,
    pub max: f64,
    pub sum: f64,
    pub count: u64,
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
pub(crate) mod base64_bytes {
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
