//! The JSON codec a hop encodes and decodes its bodies with
//! (`--json-codec`): [`JsonCodec`], the one place that maps the choice onto
//! a library. Every JSON-bodied call site of the internal hop (the REST arm
//! at both ends, `grpc-json`'s messages, the streaming JSON arms, a team's
//! own contract) asks it, never a library directly; the front door stays
//! `serde_json` so the generator and its check never change.
//!
//! All three libraries implement serde's traits, so the same derived
//! `Serialize` / `Deserialize` (and prost-reflect's dynamic messages, through
//! a [`DeserializeSeed`]) go through each: what differs is the parser and
//! the writer. `simd-json` parses in place, so a body is copied into a
//! buffer of its own first: that copy is part of its cost, as it is for any
//! service that uses it on a shared request buffer.
//!
//! [`compare`] encodes one value with every codec and says where the bytes
//! differ from `serde_json`'s, for the report.

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

use serde::de::{DeserializeOwned, DeserializeSeed};
use serde::{Deserialize, Serialize};

/// The library a hop's JSON goes through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum JsonCodec {
    /// `serde_json`, the default of axum's and reqwest's `Json`.
    #[default]
    #[serde(rename = "serde_json")]
    SerdeJson,
    /// `sonic-rs` (SIMD parsing and writing, serde's traits).
    #[serde(rename = "sonic-rs")]
    SonicRs,
    /// `simd-json` (a port of simdjson; parses in place, serde's traits).
    #[serde(rename = "simd-json")]
    SimdJson,
}

/// A body a codec could not read or a value it could not write: the
/// library's own reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JsonError(pub String);

impl JsonCodec {
    /// Every codec, the default first.
    pub const ALL: [JsonCodec; 3] = [JsonCodec::SerdeJson, JsonCodec::SonicRs, JsonCodec::SimdJson];

    /// The flag value and the name reported in settings.
    pub fn as_str(self) -> &'static str {
        match self {
            JsonCodec::SerdeJson => "serde_json",
            JsonCodec::SonicRs => "sonic-rs",
            JsonCodec::SimdJson => "simd-json",
        }
    }

    /// The library and the version this build links, for a tier's settings.
    pub fn library(self) -> &'static str {
        match self {
            JsonCodec::SerdeJson => "serde_json 1",
            JsonCodec::SonicRs => "sonic-rs 0.5",
            JsonCodec::SimdJson => "simd-json 0.19",
        }
    }

    /// `value` as compact JSON.
    pub fn encode<T: Serialize + ?Sized>(self, value: &T) -> Result<Vec<u8>, JsonError> {
        match self {
            JsonCodec::SerdeJson => serde_json::to_vec(value).map_err(error),
            JsonCodec::SonicRs => sonic_rs::to_vec(value).map_err(error),
            JsonCodec::SimdJson => simd_json::serde::to_vec(value).map_err(error),
        }
    }

    /// A whole body as a `T`; trailing bytes other than whitespace are refused.
    pub fn decode<T: DeserializeOwned>(self, bytes: &[u8]) -> Result<T, JsonError> {
        self.decode_seed(PhantomData::<T>, bytes)
    }

    /// A whole body through `seed` (a dynamic message's descriptor, say).
    pub fn decode_seed<S, V>(self, seed: S, bytes: &[u8]) -> Result<V, JsonError>
    where
        S: for<'de> DeserializeSeed<'de, Value = V>,
    {
        match self {
            JsonCodec::SerdeJson => {
                let mut de = serde_json::Deserializer::from_slice(bytes);
                let value = seed.deserialize(&mut de).map_err(error)?;
                de.end().map_err(error)?;
                Ok(value)
            }
            JsonCodec::SonicRs => {
                let mut de = sonic_rs::Deserializer::from_slice(bytes);
                let value = seed.deserialize(&mut de).map_err(error)?;
                de.end().map_err(error)?;
                Ok(value)
            }
            JsonCodec::SimdJson => {
                // simd-json rewrites the buffer it parses (strings are
                // unescaped in place): a copy of the body, as any caller
                // holding a shared buffer makes.
                let mut owned = bytes.to_vec();
                let mut de = simd_json::Deserializer::from_slice(&mut owned).map_err(error)?;
                seed.deserialize(&mut de).map_err(error)
            }
        }
    }
}

fn error(e: impl fmt::Display) -> JsonError {
    JsonError(e.to_string())
}

impl fmt::Display for JsonCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JsonCodec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        JsonCodec::ALL.into_iter().find(|c| c.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = JsonCodec::ALL.iter().map(|c| c.as_str()).collect();
            format!("unknown JSON codec {s:?} (these are: {})", names.join(", "))
        })
    }
}

/// How one codec's encoding of a value compares with `serde_json`'s.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agreement {
    pub codec: JsonCodec,
    /// Its bytes' length; `None` where it could not encode the value.
    pub bytes: Option<usize>,
    /// `None`: the same bytes as `serde_json`; otherwise where and how they
    /// first differ (`at byte 41: serde_json "1.5e-7", sonic-rs "1.5e-07"`),
    /// and whether both still decode to the same value.
    pub differs: Option<String>,
}

/// Encodes `value` with every codec and compares each with `serde_json`.
pub fn compare<T: Serialize + ?Sized>(value: &T) -> Vec<Agreement> {
    let reference = JsonCodec::SerdeJson.encode(value).ok();
    JsonCodec::ALL
        .into_iter()
        .map(|codec| {
            let ours = codec.encode(value);
            let differs = match (&reference, &ours) {
                (Some(a), Ok(b)) if a == b => None,
                (Some(a), Ok(b)) => Some(difference(codec, a, b)),
                (_, Err(e)) => Some(format!("could not encode: {e}")),
                (None, Ok(_)) => Some("serde_json could not encode the value".to_owned()),
            };
            Agreement { codec, bytes: ours.ok().map(|b| b.len()), differs }
        })
        .collect()
}

/// Where `b` (the codec's) first departs from `a` (serde_json's), with a
/// few bytes of each from there, and whether the values are still equal.
fn difference(codec: JsonCodec, a: &[u8], b: &[u8]) -> String {
    let at = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
    let start = at.saturating_sub(8);
    let piece = |s: &[u8]| String::from_utf8_lossy(&s[start.min(s.len())..(at + 16).min(s.len())]).into_owned();
    let same_value = matches!(
        (serde_json::from_slice::<serde_json::Value>(a), serde_json::from_slice::<serde_json::Value>(b)),
        (Ok(x), Ok(y)) if x == y
    );
    let value = if same_value { "the same value" } else { "a different value" };
    format!(
        "{} B vs {} B, first at byte {at}: serde_json {:?}, {codec} {:?} ({value})",
        a.len(),
        b.len(),
        piece(a),
        piece(b)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FetchRequest, FetchResponse, Shape, respond};

    fn request(items: u32, shape: Shape) -> FetchRequest {
        FetchRequest { request_id: "req-\"7\"\u{e9}\u{1F600}".into(), items, shape, ..FetchRequest::default() }
    }

    #[test]
    fn every_codec_writes_the_built_in_answers_as_serde_json_does() {
        for shape in [Shape::Order, Shape::Timeseries] {
            for items in [0, 1, 100] {
                let resp = respond(&request(items, shape));
                let reference = JsonCodec::SerdeJson.encode(&resp).unwrap();
                for codec in JsonCodec::ALL {
                    let bytes = codec.encode(&resp).unwrap();
                    // Where a codec's bytes differ, compare() says so and the
                    // report carries it; the built-in answers must not.
                    assert_eq!(String::from_utf8(bytes).unwrap(), String::from_utf8(reference.clone()).unwrap());
                    assert_eq!(codec.decode::<FetchResponse>(&reference).unwrap(), resp, "{codec} × {items}");
                }
                assert!(compare(&resp).iter().all(|a| a.differs.is_none()), "{:?}", compare(&resp));
            }
        }
    }

    #[test]
    fn where_codecs_write_other_bytes_compare_says_where_and_keeps_the_value() {
        // Floats are where writers' formatting choices show, if anywhere.
        let awkward = serde_json::json!({ "tiny": 1.5e-7, "big": 1e21, "third": 0.1 + 0.2, "s": "\u{7f}</" });
        let agreements = compare(&awkward);
        assert_eq!(agreements.len(), 3);
        assert_eq!(agreements[0].differs, None, "serde_json agrees with itself");
        for a in &agreements[1..] {
            if let Some(text) = &a.differs {
                assert!(text.contains("first at byte") && text.contains("the same value"), "{text}");
            }
            let back: serde_json::Value = a.codec.decode(&a.codec.encode(&awkward).unwrap()).unwrap();
            assert_eq!(back, awkward, "{}", a.codec);
        }
    }

    #[test]
    fn every_codec_refuses_what_serde_json_refuses() {
        let cases: [&[u8]; 6] = [
            b"{\"requestId\":\"a\",\"items\":1",
            b"{\"requestId\":\"a\"} trailing",
            b"{\"requestId\":7}",
            b"not json",
            b"",
            b"{\"requestId\":\"\xff\"}",
        ];
        for bytes in cases {
            for codec in JsonCodec::ALL {
                let got = codec.decode::<FetchRequest>(bytes);
                assert!(got.is_err(), "{codec} took {:?}", String::from_utf8_lossy(bytes));
                assert!(!got.unwrap_err().0.is_empty());
            }
        }
        for codec in JsonCodec::ALL {
            let ok: FetchRequest = codec.decode(b" {\"requestId\":\"a\",\"items\":3} \n").unwrap();
            assert_eq!((ok.request_id.as_str(), ok.items), ("a", 3), "{codec}");
        }
    }

    #[test]
    fn names_round_trip_through_the_flag_and_serde() {
        for codec in JsonCodec::ALL {
            assert_eq!(codec.as_str().parse::<JsonCodec>(), Ok(codec));
            assert_eq!(serde_json::to_string(&codec).unwrap(), format!("\"{codec}\""));
        }
        assert!("simdjson".parse::<JsonCodec>().unwrap_err().contains("serde_json, sonic-rs, simd-json"));
    }
}
