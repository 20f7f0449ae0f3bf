//! A sequence of items (`bench.v1.Items`): the request, an item, a page and
//! its token, their checks, and when each item is due. Item *i* is a pure
//! function of the stream's id and *i* (its record by
//! [`crate::item_record`], its filler by [`crate::upload_body`]), so every
//! tier can make or check any item alone, in any delivery pattern.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::{Record, base64_bytes};
use crate::validate::{Limits, PayloadError};

/// What a client asks the downstream to stream (a field it does not
/// know is refused, not ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamRequest {
    /// Opaque id chosen by the client: the seed of every item.
    pub request_id: String,
    /// How many items the stream carries.
    pub items: u32,
    /// Opaque bytes added to each item; absent in JSON for none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub item_bytes: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One item of a stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamItem {
    /// Its place in the sequence, from 0.
    pub index: u32,
    /// When it was due on its stream's schedule, in nanoseconds since the
    /// Unix epoch on the downstream's clock (a string in JSON, as below).
    /// Its delay runs from here: `produced_unix_nanos` minus this is how
    /// late the source made it, the arrival minus `produced_unix_nanos` its
    /// transit. 0 (absent) from a source that does not say: the item's
    /// delay is then not measured, its transit is.
    #[serde(default, with = "i64_text")]
    pub due_unix_nanos: i64,
    /// When the downstream produced it, in nanoseconds since the Unix
    /// epoch on its clock; a decimal string in JSON, as the proto3 JSON
    /// mapping writes an int64 (a JavaScript number would round it).
    #[serde(with = "i64_text")]
    pub produced_unix_nanos: i64,
    pub record: Record,
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "base64_bytes")]
    pub filler: Vec<u8>,
}

/// One page of a stream's items.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageRequest {
    pub stream: StreamRequest,
    pub page_size: u32,
    /// Empty (or absent) for the first page.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub page_token: String,
}

/// A page and where the next one starts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageResponse {
    pub items: Vec<StreamItem>,
    /// Empty (absent in JSON) after the last page.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub next_page_token: String,
}

impl StreamItem {
    /// Item `index` of `req`, due at `due_unix_nanos` and produced at
    /// `produced_unix_nanos`.
    pub fn new(req: &StreamRequest, index: u32, due_unix_nanos: i64, produced_unix_nanos: i64) -> StreamItem {
        let filler = if req.item_bytes == 0 {
            Vec::new()
        } else {
            crate::upload_body(&format!("{}/{index}", req.request_id), req.item_bytes as usize)
        };
        let record = crate::item_record(&req.request_id, index);
        StreamItem { index, due_unix_nanos, produced_unix_nanos, record, filler }
    }
}

/// Checks a stream request against `limits`: an id, at most `max_items`
/// items, fillers no larger than the largest body.
pub fn validate_stream(req: &StreamRequest, limits: &Limits) -> Result<(), PayloadError> {
    crate::validate::validate_sizes(&req.request_id, req.items, req.item_bytes as usize, limits)
}

/// Why a received item is not the one expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ItemError {
    #[error("item {got} arrived where item {expected} was due (items must arrive whole and in order)")]
    OutOfOrder { expected: u32, got: u32 },
    #[error("item {0} differs from the one generated for its stream")]
    Differs(u32),
}

/// Checks that `item` is item `expected` of `req`, as generated.
pub fn verify_item(req: &StreamRequest, item: &StreamItem, expected: u32) -> Result<(), ItemError> {
    if item.index != expected {
        return Err(ItemError::OutOfOrder { expected, got: item.index });
    }
    let want = StreamItem::new(req, expected, item.due_unix_nanos, item.produced_unix_nanos);
    if *item != want {
        return Err(ItemError::Differs(expected));
    }
    Ok(())
}

/// Where a page starts: the stream's origin (when its first page was
/// asked for, on the downstream's clock) and the next item's index. The
/// token is opaque to clients; the downstream alone reads it, so every page
/// follows the schedule of the stream it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageToken {
    pub origin_unix_nanos: i64,
    pub next: u32,
}

impl PageToken {
    pub fn encode(&self) -> String {
        format!("{}.{}", self.origin_unix_nanos, self.next)
    }

    /// The token of a page request; a token this downstream did not write
    /// is an invalid `page_token`.
    pub fn decode(text: &str) -> Result<PageToken, PayloadError> {
        let bad = PayloadError::InvalidField("page_token");
        let (origin, next) = text.split_once('.').ok_or(bad.clone())?;
        Ok(PageToken {
            origin_unix_nanos: origin.parse().map_err(|_| bad.clone())?,
            next: next.parse().map_err(|_| bad)?,
        })
    }
}

/// When item `index` is due: `delay` after the stream's origin, then one
/// more every `interval`.
pub fn due_after_origin(delay: Duration, interval: Duration, index: u32) -> Duration {
    delay + interval * index
}

/// The range of items of page `page_size` starting at `next`, within a
/// stream of `items`; `page_size` 0 is refused.
pub fn page_range(items: u32, page_size: u32, next: u32) -> Result<std::ops::Range<u32>, PayloadError> {
    if page_size == 0 {
        return Err(PayloadError::InvalidField("page_size"));
    }
    if next > items {
        return Err(PayloadError::InvalidField("page_token"));
    }
    Ok(next..next.saturating_add(page_size).min(items))
}

/// `i64` <-> a decimal string (a number is read too).
mod i64_text {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(n: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(n)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either<'a> {
            Number(i64),
            Text(std::borrow::Cow<'a, str>),
        }
        match Either::deserialize(d)? {
            Either::Number(n) => Ok(n),
            Either::Text(t) => t.parse().map_err(D::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(items: u32, item_bytes: u32) -> StreamRequest {
        StreamRequest { request_id: "s-1".into(), items, item_bytes }
    }

    #[test]
    fn an_item_is_made_alone_and_checked_by_its_place() {
        let r = req(100, 64);
        let item = StreamItem::new(&r, 7, 1_733_000_000_100_000_000, 1_733_000_000_123_456_789);
        assert_eq!(item, StreamItem::new(&r, 7, 1_733_000_000_100_000_000, 1_733_000_000_123_456_789), "deterministic");
        assert_ne!(item.record, StreamItem::new(&r, 8, 0, 0).record, "each index its own record");
        assert_eq!(item.filler.len(), 64);
        assert_eq!(verify_item(&r, &item, 7), Ok(()));
        assert_eq!(verify_item(&r, &item, 6), Err(ItemError::OutOfOrder { expected: 6, got: 7 }));
        let mut changed = item.clone();
        changed.record.quantity += 1;
        assert_eq!(verify_item(&r, &changed, 7), Err(ItemError::Differs(7)));
        // JSON keeps the production time exact, as a string.
        let json = serde_json::to_string(&item).unwrap();
        assert!(json.contains("\"producedUnixNanos\":\"1733000000123456789\""), "{json}");
        assert!(json.contains("\"dueUnixNanos\":\"1733000000100000000\""), "{json}");
        assert_eq!(serde_json::from_str::<StreamItem>(&json).unwrap(), item);
    }

    #[test]
    fn pages_cover_the_stream_once_and_tokens_round_trip() {
        let mut covered = Vec::new();
        let mut next = 0;
        while next < 10 {
            let range = page_range(10, 4, next).unwrap();
            next = range.end;
            covered.extend(range);
        }
        assert_eq!(covered, (0..10).collect::<Vec<_>>());
        assert_eq!(page_range(10, 4, 10).unwrap(), 10..10);
        assert!(page_range(10, 0, 0).is_err() && page_range(10, 4, 11).is_err());
        let t = PageToken { origin_unix_nanos: 1_733_000_000_000_000_001, next: 40 };
        assert_eq!(PageToken::decode(&t.encode()), Ok(t));
        assert!(PageToken::decode("x.1").is_err() && PageToken::decode("12").is_err());
        assert_eq!(
            due_after_origin(Duration::from_millis(500), Duration::from_millis(10), 3),
            Duration::from_millis(530)
        );
    }

    #[test]
    fn a_stream_request_is_held_to_the_limits() {
        let limits = Limits { max_items: 100, max_body_bytes: 1024, max_request_id_bytes: 8 };
        assert_eq!(validate_stream(&req(100, 1024), &limits), Ok(()));
        assert!(matches!(validate_stream(&req(101, 0), &limits), Err(PayloadError::TooManyItems { .. })));
        assert!(matches!(validate_stream(&req(1, 1025), &limits), Err(PayloadError::BodyTooLarge { .. })));
        let unnamed = StreamRequest { request_id: String::new(), ..req(1, 0) };
        assert_eq!(validate_stream(&unnamed, &limits), Err(PayloadError::EmptyRequestId));
    }
}
