//! The compact JSON that `serde_json` writes for a [`FetchResponse`], written
//! without serde's machinery: what the harness's end-to-end check compares an
//! answer's bytes with.
//!
//! The tiers write their JSON with serde, as a real service does; only the
//! check, which is the generator's own work and no tier's, writes it here.
//! Through serde the expected JSON would cost the check most of its time
//! (each key escaped byte by byte like any string, each timestamp through
//! `fmt`; bench/README.md has the profile). Here keys are literals,
//! strings that need no escape are copied as they are, timestamps are
//! written digit by digit, and numbers go through serde_json's own
//! formatter, so the bytes are serde_json's (`tests` hold them to
//! `serde_json::to_vec` on generated and on awkward values). Should they
//! ever differ, an answer only takes the check's slower path: it is parsed
//! and compared field by field.
//!
//! An order answer is written from the generator's draws without making its
//! records ([`write_drawn_answer`]): the same record writer reads either
//! through [`Fields`], a record's strings escaped as needed, a draw's words
//! copied (none needs an escape), so checking an answer makes no records
//! (the profile that says why is in bench/README.md).

use serde_json::ser::{CompactFormatter, Formatter};

use crate::generate::{Draw, draws};
use crate::model::{FetchResponse, Point, Record};

/// Appends to `out` the bytes `serde_json::to_vec(resp)` gives; `false` (with
/// `out` holding a part) where this writer has no form for a value: a
/// timestamp before 1970 (serde's fails there too) or after 9999.
pub(crate) fn write_response(out: &mut Vec<u8>, resp: &FetchResponse) -> bool {
    out.extend_from_slice(b"{\"requestId\":");
    string(out, &resp.request_id);
    if !resp.records.is_empty() {
        out.extend_from_slice(b",\"records\":");
        if !array(out, &resp.records, record) {
            return false;
        }
    }
    if !resp.points.is_empty() {
        out.extend_from_slice(b",\"points\":");
        array(out, &resp.points, |out, p| {
            point(out, p);
            true
        });
    }
    out.push(b'}');
    true
}

/// `[a,b,…]`, each item written by `write`; `false` as soon as one has no form.
fn array<T>(out: &mut Vec<u8>, items: &[T], mut write: impl FnMut(&mut Vec<u8>, &T) -> bool) -> bool {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if !write(out, item) {
            return false;
        }
    }
    out.push(b']');
    true
}

/// Appends the JSON serde_json writes for the caller's answer to an order
/// call: `request_id` echoed, then the records of each downstream request in
/// `downstream_ids` (`items` each), in order. The records are written from
/// the generator's draws, never made: the bytes [`write_response`] gives for
/// the same answer, at a fraction of the cost (no string of a record is
/// allocated, none is scanned for escapes). `false` where a value has no
/// form here, as there.
pub(crate) fn write_drawn_answer(out: &mut Vec<u8>, request_id: &str, downstream_ids: &[String], items: u32) -> bool {
    out.extend_from_slice(b"{\"requestId\":");
    string(out, request_id);
    if items > 0 && !downstream_ids.is_empty() {
        out.extend_from_slice(b",\"records\":[");
        for (i, draw) in downstream_ids.iter().flat_map(|id| draws(id, items)).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            if !record(out, &draw) {
                return false;
            }
        }
        out.push(b']');
    }
    out.push(b'}');
    true
}

/// What a record's JSON is written from: a [`Record`], or the generator's
/// [`Draw`] before any record is made. Each string field is written whole,
/// quotes included.
trait Fields {
    fn id(&self) -> u64;
    fn sku(&self, out: &mut Vec<u8>);
    fn name(&self, out: &mut Vec<u8>);
    fn email(&self, out: &mut Vec<u8>);
    fn price_cents(&self) -> i64;
    fn currency(&self, out: &mut Vec<u8>);
    fn quantity(&self) -> u32;
    fn tags(&self, out: &mut Vec<u8>);
    fn created_at_ms(&self) -> i64;
    fn active(&self) -> bool;
}

impl Fields for Record {
    fn id(&self) -> u64 {
        self.id
    }
    fn sku(&self, out: &mut Vec<u8>) {
        string(out, &self.sku);
    }
    fn name(&self, out: &mut Vec<u8>) {
        string(out, &self.name);
    }
    fn email(&self, out: &mut Vec<u8>) {
        string(out, &self.email);
    }
    fn price_cents(&self) -> i64 {
        self.price_cents
    }
    fn currency(&self, out: &mut Vec<u8>) {
        string(out, &self.currency);
    }
    fn quantity(&self) -> u32 {
        self.quantity
    }
    fn tags(&self, out: &mut Vec<u8>) {
        array(out, &self.tags, |out, t| {
            string(out, t);
            true
        });
    }
    fn created_at_ms(&self) -> i64 {
        self.created_at_ms
    }
    fn active(&self) -> bool {
        self.active
    }
}

/// A draw's words need no escape (`generate`'s tests hold its word lists to
/// that), so they are written between quotes as they are.
impl Fields for Draw {
    fn id(&self) -> u64 {
        self.id
    }
    fn sku(&self, out: &mut Vec<u8>) {
        quoted(out, |out| Draw::sku(self, out));
    }
    fn name(&self, out: &mut Vec<u8>) {
        quoted(out, |out| Draw::name(self, out));
    }
    fn email(&self, out: &mut Vec<u8>) {
        quoted(out, |out| Draw::email(self, out));
    }
    fn price_cents(&self) -> i64 {
        self.price_cents
    }
    fn currency(&self, out: &mut Vec<u8>) {
        quoted(out, |out| out.extend_from_slice(self.currency.as_bytes()));
    }
    fn quantity(&self) -> u32 {
        self.quantity
    }
    fn tags(&self, out: &mut Vec<u8>) {
        array(out, Draw::tags(self), |out, t| {
            quoted(out, |out| out.extend_from_slice(t.as_bytes()));
            true
        });
    }
    fn created_at_ms(&self) -> i64 {
        self.created_at_ms
    }
    fn active(&self) -> bool {
        self.active
    }
}

/// `"…"` around what `write` appends.
fn quoted(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
    out.push(b'"');
    write(out);
    out.push(b'"');
}

fn record(out: &mut Vec<u8>, r: &impl Fields) -> bool {
    let mut f = CompactFormatter;
    out.extend_from_slice(b"{\"id\":");
    let _ = f.write_u64(out, r.id());
    out.extend_from_slice(b",\"sku\":");
    r.sku(out);
    out.extend_from_slice(b",\"name\":");
    r.name(out);
    out.extend_from_slice(b",\"email\":");
    r.email(out);
    out.extend_from_slice(b",\"priceCents\":");
    let _ = f.write_i64(out, r.price_cents());
    out.extend_from_slice(b",\"currency\":");
    r.currency(out);
    out.extend_from_slice(b",\"quantity\":");
    let _ = f.write_u32(out, r.quantity());
    out.extend_from_slice(b",\"tags\":");
    r.tags(out);
    out.extend_from_slice(b",\"createdAt\":\"");
    if !rfc3339_millis(out, r.created_at_ms()) {
        return false;
    }
    out.extend_from_slice(if r.active() { b"\",\"active\":true}" } else { b"\",\"active\":false}" });
    true
}

fn point(out: &mut Vec<u8>, p: &Point) {
    let mut f = CompactFormatter;
    out.extend_from_slice(b"{\"seriesId\":");
    let _ = f.write_u64(out, p.series_id);
    out.extend_from_slice(b",\"timestampMs\":");
    let _ = f.write_i64(out, p.timestamp_ms);
    for (key, v) in
        [(&b",\"value\":"[..], p.value), (b",\"min\":", p.min), (b",\"max\":", p.max), (b",\"sum\":", p.sum)]
    {
        out.extend_from_slice(key);
        float(out, v);
    }
    out.extend_from_slice(b",\"count\":");
    let _ = f.write_u64(out, p.count);
    out.push(b'}');
}

/// As serde_json writes an `f64`: `null` unless finite.
fn float(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        let _ = CompactFormatter.write_f64(out, v);
    } else {
        out.extend_from_slice(b"null");
    }
}

/// A JSON string: copied between quotes when no byte of it needs an escape
/// (a quote, a backslash, a control character), else escaped by serde_json.
fn string(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for `ms` after the Unix epoch, as
/// `humantime::format_rfc3339_millis` writes it; `false` before 1970 or
/// after 9999.
fn rfc3339_millis(out: &mut Vec<u8>, ms: i64) -> bool {
    if ms < 0 {
        return false;
    }
    let (secs, millis) = (ms / 1000, ms % 1000);
    let (days, second_of_day) = (secs / 86_400, secs % 86_400);
    // Days to a civil date (Howard Hinnant, "chrono-Compatible Low-Level
    // Date Algorithms", civil_from_days), for days ≥ 0.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    if year > 9999 {
        return false;
    }
    // Written into its fixed form on the stack and appended at once, not a
    // byte at a time (a capacity check each); two digits at a time from a
    // table, not a division per digit (callgrind: 300 instructions a
    // timestamp before, ten timestamps an answer checked).
    let mut text = *b"0000-00-00T00:00:00.000Z";
    let pair = |text: &mut [u8; 24], at: usize, v: i64| {
        let i = 2 * v as usize;
        text[at..at + 2].copy_from_slice(&DIGIT_PAIRS[i..i + 2]);
    };
    pair(&mut text, 0, year / 100);
    pair(&mut text, 2, year % 100);
    pair(&mut text, 5, month);
    pair(&mut text, 8, day);
    pair(&mut text, 11, second_of_day / 3600);
    pair(&mut text, 14, second_of_day / 60 % 60);
    pair(&mut text, 17, second_of_day % 60);
    text[20] = b'0' + (millis / 100) as u8;
    pair(&mut text, 21, millis % 100);
    out.extend_from_slice(&text);
    true
}

/// "00" to "99", each number's two digits at twice its value.
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::model::{FetchRequest, Shape};

    fn written(resp: &FetchResponse) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        write_response(&mut out, resp).then_some(out)
    }

    #[test]
    fn generated_answers_are_written_as_serde_json_writes_them() {
        for shape in [Shape::Order, Shape::Timeseries] {
            for i in 0..300u32 {
                let req =
                    FetchRequest { request_id: format!("r{i}/{}", i % 7), items: i % 23, shape, ..Default::default() };
                let resp = crate::respond(&req);
                assert_eq!(written(&resp), Some(serde_json::to_vec(&resp).unwrap()), "{req:?}");
            }
        }
    }

    #[test]
    fn drawn_answers_are_the_bytes_serde_json_writes_for_their_records() {
        for i in 0..300u32 {
            // Ids that need escaping too, with and without fan-out.
            let id = if i % 5 == 0 { format!("q\"{i}\\\n") } else { format!("d{i}") };
            let (ids, items) = (crate::fanout_request_ids(&id, i % 4), i % 23);
            let mut resp = FetchResponse { request_id: id.clone(), ..Default::default() };
            for sub in &ids {
                resp.records.extend(crate::generate(&FetchRequest {
                    request_id: sub.clone(),
                    items,
                    ..Default::default()
                }));
            }
            let mut out = Vec::new();
            assert!(write_drawn_answer(&mut out, &id, &ids, items));
            assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&resp).unwrap(), "{id:?} × {items}");
        }
    }

    #[test]
    fn awkward_values_are_written_as_serde_json_writes_them() {
        let mut resp = crate::respond(&FetchRequest { request_id: "a".into(), items: 2, ..Default::default() });
        let r = &mut resp.records[0];
        r.sku = "quote \" backslash \\ tab \t nul \u{0} bell \u{7} é 東 \u{7f}".into();
        r.name = String::new();
        r.tags = vec![];
        r.price_cents = i64::MIN;
        r.id = u64::MAX;
        r.active = false;
        r.created_at_ms = 0;
        resp.records[1].created_at_ms = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
        resp.request_id = "line\nbreak".into();
        resp.points = crate::generate_points(&FetchRequest { request_id: "b".into(), items: 4, ..Default::default() });
        resp.points[0].value = f64::NAN;
        resp.points[1].min = f64::NEG_INFINITY;
        resp.points[2].max = -0.0;
        resp.points[3].sum = 1e300;
        resp.points[3].timestamp_ms = i64::MIN;
        assert_eq!(written(&resp), Some(serde_json::to_vec(&resp).unwrap()));
        let empty = FetchResponse { request_id: String::new(), ..Default::default() };
        assert_eq!(written(&empty), Some(serde_json::to_vec(&empty).unwrap()));
    }

    #[test]
    fn timestamps_without_a_form_say_so() {
        let mut resp = crate::respond(&FetchRequest { request_id: "a".into(), items: 1, ..Default::default() });
        resp.records[0].created_at_ms = -1;
        assert!(serde_json::to_vec(&resp).is_err());
        assert_eq!(written(&resp), None);
        resp.records[0].created_at_ms = 253_402_300_800_000; // year 10000
        assert_eq!(written(&resp), None);
    }

    proptest! {
        #[test]
        fn any_timestamp_is_written_as_humantime_writes_it(ms in 0i64..253_402_300_800_000) {
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms as u64);
            let mut out = Vec::new();
            prop_assert!(rfc3339_millis(&mut out, ms));
            prop_assert_eq!(String::from_utf8(out).unwrap(), humantime::format_rfc3339_millis(t).to_string());
        }

        #[test]
        fn any_string_is_written_as_serde_json_writes_it(s in any::<String>()) {
            let mut out = Vec::new();
            string(&mut out, &s);
            prop_assert_eq!(out, serde_json::to_vec(&s).unwrap());
        }
    }
}
