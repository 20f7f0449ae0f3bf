//! Deterministic generation of records from a request, and the content digest.
//!
//! The generator is a SplitMix64 stream seeded with the FNV-1a hash of the request
//! id (Steele, Lea, Flood: "Fast splittable pseudorandom number generators", 2014),
//! so any tier can regenerate, and so verify, the exact records of a request.

use crate::model::{FetchRequest, FetchResponse, Point, Record, Shape};

const FIRST_NAMES: &[&str] = &[
    "Ada",
    "Grace",
    "Alan",
    "Edsger",
    "Barbara",
    "Donald",
    "Margaret",
    "Ken",
    "Radia",
    "Leslie",
    "Frances",
    "John",
    "Katherine",
    "Dennis",
    "Sophie",
    "Linus",
];
const LAST_NAMES: &[&str] = &[
    "Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Hamilton", "Thompson", "Perlman", "Lamport",
    "Allen", "Backus", "Johnson", "Ritchie", "Wilson", "Torvalds",
];
/// [`FIRST_NAMES`] and [`LAST_NAMES`] as they appear in e-mail addresses.
const FIRST_NAMES_LOWER: [&str; 16] = [
    "ada",
    "grace",
    "alan",
    "edsger",
    "barbara",
    "donald",
    "margaret",
    "ken",
    "radia",
    "leslie",
    "frances",
    "john",
    "katherine",
    "dennis",
    "sophie",
    "linus",
];
const LAST_NAMES_LOWER: [&str; 16] = [
    "lovelace", "hopper", "turing", "dijkstra", "liskov", "knuth", "hamilton", "thompson", "perlman", "lamport",
    "allen", "backus", "johnson", "ritchie", "wilson", "torvalds",
];
const PRODUCTS: &[&str] = &[
    "Widget", "Gadget", "Sprocket", "Gizmo", "Bracket", "Flange", "Valve", "Bearing", "Coupler", "Spindle", "Actuator",
    "Sensor",
];
const DOMAINS: &[&str] = &["example.com", "example.org", "example.net", "corp.example"];
const CURRENCIES: &[&str] = &["EUR", "USD", "GBP", "CHF"];
const TAGS: &[&str] = &["new", "sale", "bulk", "fragile", "eco", "imported", "limited", "gift", "premium", "clearance"];

/// 2024-01-01T00:00:00Z in milliseconds: the base of generated timestamps.
const EPOCH_2024_MS: i64 = 1_704_067_200_000;
/// Ids stay below 2^53 so JavaScript clients read them exactly.
const MAX_SAFE_ID: u64 = (1 << 53) - 1;

/// FNV-1a, 64 bit (Fowler, Noll, Vo).
fn fnv1a(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = seed;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// SplitMix64 (Steele, Lea, Flood): small, fast, and the same everywhere;
/// every deterministic generator of the workspace draws from it.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A draw in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A uniform double in [0, 1) with all 53 bits of precision.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick<'a>(&mut self, list: &[&'a str]) -> &'a str {
        // `below(len)` is always < len, so the index is in range.
        list[self.below(list.len() as u64) as usize]
    }
}

/// The order records of `req`: `req.items` of them, a pure function of
/// `req.request_id` and the index (whatever `req.shape` says; [`respond`] picks
/// the shape).
pub fn generate(req: &FetchRequest) -> Vec<Record> {
    draws(&req.request_id, req.items).map(|d| d.record()).collect()
}

/// The time-series points of `req`: `req.items` of them, a pure function of
/// `req.request_id`.
pub fn generate_points(req: &FetchRequest) -> Vec<Point> {
    let mut rng = SplitMix64(fnv1a(FNV_OFFSET, req.request_id.as_bytes()));
    // A batch interleaves the points of a few series, one every 10 s each.
    let series: Vec<u64> = (0..1 + rng.below(4)).map(|_| rng.next_u64() & MAX_SAFE_ID).collect();
    let start_ms = EPOCH_2024_MS + rng.below(63_072_000_000) as i64;
    (0..u64::from(req.items))
        .map(|i| {
            let n = series.len() as u64;
            // Full-precision doubles, as measurements come: 53 random bits scaled.
            let value = rng.unit() * 1000.0;
            let (below, above) = (rng.unit() * 50.0, rng.unit() * 50.0);
            let count = 1 + rng.below(600);
            Point {
                series_id: series[(i % n) as usize],
                timestamp_ms: start_ms + (i / n) as i64 * 10_000,
                value,
                min: value - below,
                max: value + above,
                sum: value * count as f64,
                count,
            }
        })
        .collect()
}

/// The whole answer the downstream must give to `req`: the id echoed and the
/// records or points of its shape.
pub fn respond(req: &FetchRequest) -> FetchResponse {
    let mut resp = FetchResponse { request_id: req.request_id.clone(), ..FetchResponse::default() };
    match req.shape {
        Shape::Order => resp.records = generate(req),
        Shape::Timeseries => resp.points = generate_points(req),
    }
    resp
}

/// `len` bytes of opaque upload for the request `request_id`: deterministic,
/// and as incompressible as a photo or an encrypted blob.
pub fn upload_body(request_id: &str, len: usize) -> Vec<u8> {
    let mut rng = SplitMix64(fnv1a(FNV_OFFSET ^ 0x5bd1_e995, request_id.as_bytes()));
    let mut body = Vec::with_capacity(len + 8);
    while body.len() < len {
        body.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    body.truncate(len);
    body
}

/// Record `index` of the stream `request_id` (`bench.v1.Items`): a pure
/// function of the two, so a page or a single item can be made, and
/// checked, without the ones before it.
pub fn item_record(request_id: &str, index: u32) -> Record {
    let seed = fnv1a(FNV_OFFSET, request_id.as_bytes()) ^ u64::from(index).wrapping_mul(0xd6e8_feb8_6659_fd93);
    draw(&mut SplitMix64(seed), index).record()
}

/// The draws of the records of request `request_id`, one per item, in order:
/// what [`generate`] turns into records, and what the end-to-end check writes
/// its expected JSON from without making them (`canonical::write_drawn`).
pub(crate) fn draws(request_id: &str, items: u32) -> impl Iterator<Item = Draw> {
    let mut rng = SplitMix64(fnv1a(FNV_OFFSET, request_id.as_bytes()));
    (0..items).map(move |i| draw(&mut rng, i))
}

/// One record as the generator drew it: numbers and words from the lists
/// above, no string made yet. A [`Record`] ([`Draw::record`]) and the JSON the
/// check expects are both made from it, so the two cannot drift apart; every
/// word it holds is printable ASCII without a quote or a backslash (a test
/// holds the lists to that), so its JSON needs no escaping.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Draw {
    pub index: u32,
    pub id: u64,
    first: usize,
    last: usize,
    product: &'static str,
    tags: [&'static str; 3],
    tag_count: usize,
    sku_hex: u16,
    name_number: u64,
    domain: &'static str,
    pub price_cents: i64,
    pub currency: &'static str,
    pub quantity: u32,
    pub created_at_ms: i64,
    pub active: bool,
}

/// Where a record's strings are written: a `String` (a record) or a byte
/// buffer (the check's JSON). Everything written is ASCII.
pub(crate) trait Text {
    fn text(&mut self, s: &str);
    /// One ASCII byte.
    fn ascii(&mut self, b: u8);
}

impl Text for String {
    fn text(&mut self, s: &str) {
        self.push_str(s);
    }
    fn ascii(&mut self, b: u8) {
        self.push(char::from(b));
    }
}

impl Text for Vec<u8> {
    fn text(&mut self, s: &str) {
        self.extend_from_slice(s.as_bytes());
    }
    fn ascii(&mut self, b: u8) {
        self.push(b);
    }
}

/// The generator's draws for one record, in the order they have always been
/// made (changing it changes every record).
fn draw(rng: &mut SplitMix64, index: u32) -> Draw {
    let first = rng.below(FIRST_NAMES.len() as u64) as usize;
    let last = rng.below(LAST_NAMES.len() as u64) as usize;
    let product = rng.pick(PRODUCTS);
    let id = rng.next_u64() & MAX_SAFE_ID;
    let tag_count = rng.below(4) as usize;
    let mut tags = [""; 3];
    for t in &mut tags[..tag_count] {
        *t = rng.pick(TAGS);
    }
    Draw {
        index,
        id,
        first,
        last,
        product,
        tags,
        tag_count,
        sku_hex: rng.below(0x1_0000) as u16,
        name_number: rng.below(1000),
        domain: rng.pick(DOMAINS),
        price_cents: 99 + rng.below(500_000) as i64,
        currency: rng.pick(CURRENCIES),
        quantity: 1 + rng.below(250) as u32,
        // Up to about two years after 2024-01-01, millisecond precision.
        created_at_ms: EPOCH_2024_MS + rng.below(63_072_000_000) as i64,
        active: rng.below(4) != 0,
    }
}

// The strings are written straight into buffers of their final size rather
// than through `format!` (its machinery and the e-mail's two lower-cased
// temporaries were a fifth of generating a record); the
// `records_are_what_format_wrote` test holds them to the format strings they
// replace.
impl Draw {
    /// "SKU-{index:05}-{n:04X}"
    pub fn sku(&self, out: &mut impl Text) {
        out.text("SKU-");
        push_decimal(out, u64::from(self.index), 5);
        out.ascii(b'-');
        for shift in [12, 8, 4, 0] {
            out.ascii(b"0123456789ABCDEF"[usize::from(self.sku_hex >> shift) & 0xf]);
        }
    }

    /// "{product} {n}"
    pub fn name(&self, out: &mut impl Text) {
        out.text(self.product);
        out.ascii(b' ');
        push_decimal(out, self.name_number, 1);
    }

    /// "{first}.{last}@{domain}", the names lower-cased
    pub fn email(&self, out: &mut impl Text) {
        out.text(FIRST_NAMES_LOWER[self.first]);
        out.ascii(b'.');
        out.text(LAST_NAMES_LOWER[self.last]);
        out.ascii(b'@');
        out.text(self.domain);
    }

    pub fn tags(&self) -> &[&'static str] {
        &self.tags[..self.tag_count]
    }

    /// The record these draws make.
    pub fn record(&self) -> Record {
        let mut sku = String::with_capacity(15);
        self.sku(&mut sku);
        let mut name = String::with_capacity(self.product.len() + 4);
        self.name(&mut name);
        let (first, last) = (FIRST_NAMES_LOWER[self.first], LAST_NAMES_LOWER[self.last]);
        let mut email = String::with_capacity(first.len() + last.len() + self.domain.len() + 2);
        self.email(&mut email);
        Record {
            id: self.id,
            sku,
            name,
            email,
            price_cents: self.price_cents,
            currency: self.currency.to_owned(),
            quantity: self.quantity,
            tags: self.tags().iter().map(|t| (*t).to_owned()).collect(),
            created_at_ms: self.created_at_ms,
            active: self.active,
        }
    }
}

/// Appends `n` in decimal, zero-padded to at least `width` digits (as
/// `{n:0width$}`).
fn push_decimal(s: &mut impl Text, n: u64, width: usize) {
    let mut digits = [0u8; 20];
    let (mut n, mut len) = (n, 0);
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for _ in len..width {
        s.ascii(b'0');
    }
    for d in digits[..len].iter().rev() {
        s.ascii(*d);
    }
}

/// A 64-bit digest of the records' content, independent of the encoding they
/// travelled in. Fields are length-prefixed so no two records share a digest by
/// concatenation.
pub fn records_digest(records: &[Record]) -> u64 {
    let mut h = fnv1a(FNV_OFFSET, &(records.len() as u64).to_le_bytes());
    let field = |h: &mut u64, bytes: &[u8]| {
        *h = fnv1a(*h, &(bytes.len() as u64).to_le_bytes());
        *h = fnv1a(*h, bytes);
    };
    for r in records {
        field(&mut h, &r.id.to_le_bytes());
        field(&mut h, r.sku.as_bytes());
        field(&mut h, r.name.as_bytes());
        field(&mut h, r.email.as_bytes());
        field(&mut h, &r.price_cents.to_le_bytes());
        field(&mut h, r.currency.as_bytes());
        field(&mut h, &r.quantity.to_le_bytes());
        field(&mut h, &(r.tags.len() as u64).to_le_bytes());
        for t in &r.tags {
            field(&mut h, t.as_bytes());
        }
        field(&mut h, &r.created_at_ms.to_le_bytes());
        field(&mut h, &[u8::from(r.active)]);
    }
    h
}

/// A 64-bit digest of the points' content (the bits of every double), in the
/// manner of [`records_digest`].
pub fn points_digest(points: &[Point]) -> u64 {
    let mut h = fnv1a(FNV_OFFSET, &(points.len() as u64).to_le_bytes());
    for p in points {
        for word in point_words(p) {
            h = fnv1a(h, &word.to_le_bytes());
        }
    }
    h
}

/// A point's content as 64-bit words, doubles by their bits (so a NaN equals
/// itself and -0.0 differs from 0.0): what the digest hashes and what
/// verification compares.
pub fn point_words(p: &Point) -> [u64; 7] {
    [p.series_id, p.timestamp_ms as u64, p.value.to_bits(), p.min.to_bits(), p.max.to_bits(), p.sum.to_bits(), p.count]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: &str, items: u32) -> FetchRequest {
        FetchRequest { request_id: id.into(), items, ..FetchRequest::default() }
    }

    #[test]
    fn points_are_deterministic_numeric_and_follow_the_shape() {
        let r = FetchRequest { shape: Shape::Timeseries, ..req("ts", 40) };
        let points = generate_points(&r);
        assert_eq!(points, generate_points(&r));
        assert_eq!(points.len(), 40);
        assert!(points.iter().all(|p| p.min <= p.value && p.value <= p.max && p.series_id <= MAX_SAFE_ID));
        assert_ne!(points_digest(&points), points_digest(&generate_points(&req("ts2", 40))));
        let resp = respond(&r);
        assert!(resp.records.is_empty() && resp.points == points);
        let orders = respond(&req("ts", 40));
        assert!(orders.points.is_empty() && orders.records == generate(&r));
    }

    #[test]
    fn upload_bodies_are_deterministic_and_exact() {
        assert_eq!(upload_body("a", 1000), upload_body("a", 1000));
        assert_ne!(upload_body("a", 1000), upload_body("b", 1000));
        assert_eq!(upload_body("a", 13).len(), 13);
        assert!(upload_body("a", 0).is_empty());
    }

    #[test]
    fn same_request_same_records() {
        assert_eq!(generate(&req("a-1", 20)), generate(&req("a-1", 20)));
        assert_eq!(generate(&req("a-1", 20)).len(), 20);
    }

    #[test]
    fn different_ids_differ() {
        assert_ne!(generate(&req("a-1", 5)), generate(&req("a-2", 5)));
        assert_ne!(records_digest(&generate(&req("a-1", 5))), records_digest(&generate(&req("a-2", 5))));
    }

    #[test]
    fn prefix_is_stable_and_digest_sees_count() {
        let ten = generate(&req("x", 10));
        let five = generate(&req("x", 5));
        assert_eq!(&ten[..5], &five[..]);
        assert_ne!(records_digest(&ten), records_digest(&five));
    }

    #[test]
    fn digest_sees_every_field() {
        let base = generate(&req("d", 3));
        let d0 = records_digest(&base);
        let mut changed = base.clone();
        changed[2].active = !changed[2].active;
        assert_ne!(records_digest(&changed), d0);
        let mut changed = base.clone();
        changed[1].tags.push("x".into());
        assert_ne!(records_digest(&changed), d0);
        let mut changed = base;
        changed[0].created_at_ms += 1;
        assert_ne!(records_digest(&changed), d0);
    }

    /// The records as the `format!` strings wrote them before the strings
    /// were written by hand: the same RNG draws in the same order.
    fn reference_record(rng: &mut SplitMix64, index: u32) -> Record {
        let first = rng.pick(FIRST_NAMES);
        let last = rng.pick(LAST_NAMES);
        let product = rng.pick(PRODUCTS);
        let id = rng.next_u64() & MAX_SAFE_ID;
        let tag_count = rng.below(4) as usize;
        let tags = (0..tag_count).map(|_| rng.pick(TAGS).to_owned()).collect();
        Record {
            id,
            sku: format!("SKU-{:05}-{:04X}", index, rng.below(0x1_0000)),
            name: format!("{product} {}", rng.below(1000)),
            email: format!("{}.{}@{}", first.to_ascii_lowercase(), last.to_ascii_lowercase(), rng.pick(DOMAINS)),
            price_cents: 99 + rng.below(500_000) as i64,
            currency: rng.pick(CURRENCIES).to_owned(),
            quantity: 1 + rng.below(250) as u32,
            tags,
            created_at_ms: EPOCH_2024_MS + rng.below(63_072_000_000) as i64,
            active: rng.below(4) != 0,
        }
    }

    #[test]
    fn records_are_what_format_wrote() {
        assert_eq!(FIRST_NAMES.len(), FIRST_NAMES_LOWER.len());
        assert_eq!(LAST_NAMES.len(), LAST_NAMES_LOWER.len());
        for (names, lower) in [(FIRST_NAMES, &FIRST_NAMES_LOWER[..]), (LAST_NAMES, &LAST_NAMES_LOWER[..])] {
            assert!(names.iter().zip(lower).all(|(n, l)| n.to_ascii_lowercase() == *l));
        }
        // Indexes past five digits (no padding left) and many ids.
        for id in 0..300u32 {
            let request_id = format!("r-{id}");
            let mut rng = SplitMix64(fnv1a(FNV_OFFSET, request_id.as_bytes()));
            let mut oracle = SplitMix64(fnv1a(FNV_OFFSET, request_id.as_bytes()));
            for index in [0, 7, 42, 999, 12_345, 99_999, 100_000, 4_000_000_000].into_iter().chain(0..20) {
                assert_eq!(
                    draw(&mut rng, index).record(),
                    reference_record(&mut oracle, index),
                    "{request_id} #{index}"
                );
            }
        }
        let mut s = String::new();
        push_decimal(&mut s, u64::MAX, 1);
        assert_eq!(s, u64::MAX.to_string());
    }

    /// A draw's words are written into the check's JSON as they are
    /// (`canonical.rs`): none may need an escape.
    #[test]
    fn every_word_a_record_draws_needs_no_json_escape() {
        for list in [&FIRST_NAMES_LOWER[..], &LAST_NAMES_LOWER[..], PRODUCTS, DOMAINS, CURRENCIES, TAGS] {
            for word in list {
                assert_eq!(serde_json::to_string(word).unwrap(), format!("\"{word}\""), "{word:?}");
            }
        }
    }

    #[test]
    fn ids_are_javascript_safe() {
        assert!(generate(&req("js", 500)).iter().all(|r| r.id <= MAX_SAFE_ID));
    }
}
