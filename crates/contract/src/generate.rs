//! Messages made from the schema alone (`--generate-data`), deterministically:
//! the same spec and schema make the same messages on every machine.

use std::collections::HashMap;

use payload::SplitMix64;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, Value};

/// How generated messages are made: `count` messages; `repeated` elements
/// in every repeated field and entries in every map; strings of `string`
/// characters and bytes fields of `bytes` bytes; `seed` for the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenerateSpec {
    pub count: usize,
    pub repeated: usize,
    pub string: usize,
    pub bytes: usize,
    pub seed: u64,
}

impl Default for GenerateSpec {
    fn default() -> Self {
        GenerateSpec { count: 16, repeated: 3, string: 12, bytes: 16, seed: 1 }
    }
}

/// Nested messages below this depth are left unset, so a recursive message
/// (a tree, `google.protobuf.Struct`) ends.
const MAX_DEPTH: usize = 4;

impl std::fmt::Display for GenerateSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "count={},repeated={},string={},bytes={},seed={}",
            self.count, self.repeated, self.string, self.bytes, self.seed
        )
    }
}

impl std::str::FromStr for GenerateSpec {
    type Err = String;

    /// `repeated=50,string=24,bytes=64,seed=1` (any subset, any order;
    /// `count=N` for how many messages).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut spec = GenerateSpec::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| format!("{part:?}: expected key=number"))?;
            let n: u64 = value.trim().parse().map_err(|_| format!("{part:?}: {value:?} is not a whole number"))?;
            let small = |limit: u64| {
                if n <= limit { Ok(n as usize) } else { Err(format!("{part:?}: at most {limit}")) }
            };
            match key.trim() {
                "count" if n == 0 => return Err("count=0: at least one message".to_owned()),
                "count" => spec.count = small(crate::input::MAX_MESSAGES as u64)?,
                "repeated" => spec.repeated = small(100_000)?,
                "string" => spec.string = small(1 << 20)?,
                "bytes" => spec.bytes = small(16 << 20)?,
                "seed" => spec.seed = n,
                other => {
                    return Err(format!(
                        "{other:?}: not a setting; the settings are count, repeated, string, bytes, seed"
                    ));
                }
            }
        }
        Ok(spec)
    }
}

/// `spec.count` messages of type `desc`, made from `spec.seed` alone.
pub fn generate(desc: &MessageDescriptor, spec: &GenerateSpec) -> Vec<DynamicMessage> {
    let mut rng = SplitMix64(spec.seed);
    (0..spec.count.max(1)).map(|_| crate::canonical(&message(desc, spec, &mut rng, 0))).collect()
}

/// What one message [`generate`] makes of `desc` holds, worked out from the
/// schema alone before any is made: its field values (as
/// `data::values` counts them) and its protobuf bytes, each no less than
/// what the message holds (a map's keys may repeat, a default is dropped,
/// a varint may be shorter).
/// Floats, so a schema whose repeated fields nest past any integer still
/// gives a number.
pub fn estimate(desc: &MessageDescriptor, spec: &GenerateSpec) -> (f64, f64) {
    Estimate { spec, known: HashMap::new() }.message(desc, 0)
}

/// [`estimate`]'s walk, mirroring [`message`] and [`field_value`]; each
/// message type's weight at each depth is worked out once.
struct Estimate<'a> {
    spec: &'a GenerateSpec,
    known: HashMap<(String, usize), (f64, f64)>,
}

/// A field's tag and a length prefix, at most.
const FRAME: f64 = 6.0;
/// A scalar's tag and value, at most (a ten-byte varint).
const SCALAR: f64 = 11.0;

impl Estimate<'_> {
    fn message(&mut self, desc: &MessageDescriptor, depth: usize) -> (f64, f64) {
        let key = (desc.full_name().to_owned(), depth);
        if let Some(known) = self.known.get(&key) {
            return *known;
        }
        let (repeated, string) = (self.spec.repeated as f64, self.spec.string as f64);
        let weight = match desc.full_name() {
            "google.protobuf.Timestamp" | "google.protobuf.Duration" => (2.0, 2.0 * SCALAR),
            "google.protobuf.Any" => (0.0, 0.0),
            "google.protobuf.FieldMask" => (repeated, repeated * (string.max(1.0) + FRAME)),
            "google.protobuf.Value" => (1.0, string + FRAME),
            _ => {
                // A oneof sets one of its fields: the heaviest counts.
                let mut oneofs: HashMap<String, (f64, f64)> = HashMap::new();
                let mut sum = (0.0, 0.0);
                for field in desc.fields() {
                    let w = self.field(&field, depth);
                    match field.containing_oneof().filter(|o| !o.is_synthetic()) {
                        Some(o) => {
                            let max = oneofs.entry(o.name().to_owned()).or_default();
                            *max = (max.0.max(w.0), max.1.max(w.1));
                        }
                        None => sum = (sum.0 + w.0, sum.1 + w.1),
                    }
                }
                oneofs.values().fold(sum, |acc, w| (acc.0 + w.0, acc.1 + w.1))
            }
        };
        self.known.insert(key, weight);
        weight
    }

    fn field(&mut self, field: &FieldDescriptor, depth: usize) -> (f64, f64) {
        let repeated = self.spec.repeated as f64;
        if field.is_map() {
            let Kind::Message(entry) = field.kind() else { return (0.0, 0.0) };
            let key = self.single(&entry.map_entry_key_field().kind(), depth + 1);
            let value = self.single(&entry.map_entry_value_field().kind(), depth + 1);
            return (1.0 + repeated * (1.0 + key.0 + value.0), repeated * (FRAME + key.1 + value.1));
        }
        if field.is_list() {
            let one = self.single(&field.kind(), depth + 1);
            return (1.0 + repeated * one.0, repeated * one.1);
        }
        self.single(&field.kind(), depth)
    }

    fn single(&mut self, kind: &Kind, depth: usize) -> (f64, f64) {
        match kind {
            Kind::String => (1.0, self.spec.string as f64 + FRAME),
            Kind::Bytes => (1.0, self.spec.bytes as f64 + FRAME),
            Kind::Message(m) if depth < MAX_DEPTH => {
                let inner = self.message(m, depth + 1);
                (1.0 + inner.0, FRAME + inner.1)
            }
            Kind::Message(_) => (0.0, 0.0),
            _ => (1.0, SCALAR),
        }
    }
}

fn message(desc: &MessageDescriptor, spec: &GenerateSpec, rng: &mut SplitMix64, depth: usize) -> DynamicMessage {
    let mut m = DynamicMessage::new(desc.clone());
    match desc.full_name() {
        // Well-known types whose JSON form has rules of its own.
        "google.protobuf.Timestamp" => {
            m.set_field_by_name("seconds", Value::I64(1_600_000_000 + rng.below(300_000_000) as i64));
            m.set_field_by_name("nanos", Value::I32(rng.below(1000) as i32 * 1_000_000));
            return m;
        }
        "google.protobuf.Duration" => {
            m.set_field_by_name("seconds", Value::I64(rng.below(100_000) as i64));
            m.set_field_by_name("nanos", Value::I32(rng.below(1000) as i32 * 1_000_000));
            return m;
        }
        // A type URL that names nothing would not print as JSON.
        "google.protobuf.Any" => return m,
        "google.protobuf.FieldMask" => {
            let paths = (0..spec.repeated).map(|_| Value::String(letters(spec.string.max(1), rng))).collect();
            m.set_field_by_name("paths", Value::List(paths));
            return m;
        }
        "google.protobuf.Value" => {
            m.set_field_by_name("string_value", Value::String(letters(spec.string, rng)));
            return m;
        }
        _ => {}
    }
    let mut chosen = HashMap::new();
    for oneof in desc.oneofs().filter(|o| !o.is_synthetic()) {
        let fields: Vec<_> = oneof.fields().collect();
        chosen.insert(oneof.name().to_owned(), fields[rng.below(fields.len() as u64) as usize].number());
    }
    for field in desc.fields() {
        if let Some(oneof) = field.containing_oneof().filter(|o| !o.is_synthetic())
            && chosen.get(oneof.name()) != Some(&field.number())
        {
            continue;
        }
        if let Some(value) = field_value(&field, spec, rng, depth) {
            m.set_field(&field, value);
        }
    }
    m
}

fn field_value(field: &FieldDescriptor, spec: &GenerateSpec, rng: &mut SplitMix64, depth: usize) -> Option<Value> {
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else { return None };
        let (key, value) = (entry.map_entry_key_field(), entry.map_entry_value_field());
        let mut map = HashMap::new();
        for _ in 0..spec.repeated {
            let k = map_key(&key.kind(), spec, rng)?;
            let v = single(&value.kind(), spec, rng, depth + 1)?;
            map.insert(k, v);
        }
        return Some(Value::Map(map));
    }
    if field.is_list() {
        let items: Option<Vec<_>> = (0..spec.repeated).map(|_| single(&field.kind(), spec, rng, depth + 1)).collect();
        return items.map(Value::List);
    }
    single(&field.kind(), spec, rng, depth)
}

fn single(kind: &Kind, spec: &GenerateSpec, rng: &mut SplitMix64, depth: usize) -> Option<Value> {
    Some(match kind {
        Kind::Double => Value::F64(rng.below(10_000_000) as f64 / 100.0),
        // Quarters are exact in a float and print the same in every language.
        Kind::Float => Value::F32(rng.below(100_000) as f32 / 4.0),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(rng.next_u64() as i32),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(rng.next_u64() as i64),
        Kind::Uint32 | Kind::Fixed32 => Value::U32(rng.next_u64() as u32),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(rng.next_u64()),
        Kind::Bool => Value::Bool(rng.next_u64() & 1 == 1),
        Kind::String => Value::String(letters(spec.string, rng)),
        Kind::Bytes => Value::Bytes((0..spec.bytes).map(|_| rng.next_u64() as u8).collect::<Vec<u8>>().into()),
        Kind::Enum(e) => {
            let values: Vec<_> = e.values().collect();
            Value::EnumNumber(values[rng.below(values.len() as u64) as usize].number())
        }
        Kind::Message(m) if depth < MAX_DEPTH => Value::Message(message(m, spec, rng, depth + 1)),
        Kind::Message(_) => return None,
    })
}

fn map_key(kind: &Kind, spec: &GenerateSpec, rng: &mut SplitMix64) -> Option<MapKey> {
    Some(match kind {
        Kind::Bool => MapKey::Bool(rng.next_u64() & 1 == 1),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => MapKey::I32(rng.next_u64() as i32),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => MapKey::I64(rng.next_u64() as i64),
        Kind::Uint32 | Kind::Fixed32 => MapKey::U32(rng.next_u64() as u32),
        Kind::Uint64 | Kind::Fixed64 => MapKey::U64(rng.next_u64()),
        Kind::String => MapKey::String(letters(spec.string.max(1), rng)),
        _ => return None,
    })
}

/// `n` lowercase ASCII letters: the same length in bytes, in JSON and in
/// protobuf, and no escaping.
fn letters(n: usize, rng: &mut SplitMix64) -> String {
    (0..n).map(|_| (b'a' + rng.below(26) as u8) as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Contract, testing};

    #[test]
    fn a_spec_reads_and_prints_back_and_refuses_what_it_does_not_know() {
        let spec: GenerateSpec = "repeated=50,string=24,bytes=64,seed=1".parse().unwrap();
        assert_eq!(spec, GenerateSpec { repeated: 50, string: 24, bytes: 64, ..GenerateSpec::default() });
        assert_eq!(spec.to_string().parse::<GenerateSpec>(), Ok(spec));
        assert!("colour=3".parse::<GenerateSpec>().unwrap_err().contains("count, repeated"));
        assert!("string=x".parse::<GenerateSpec>().is_err());
        assert!("count=0".parse::<GenerateSpec>().is_err());
    }

    #[test]
    fn generated_messages_follow_the_spec_and_survive_json() {
        let (_dir, file) = testing::shop();
        let order = Contract::compile(&[file], &[], "shop.v1.Orders/Get").unwrap().output();
        let spec = GenerateSpec { count: 5, repeated: 4, string: 7, bytes: 9, seed: 3 };
        let messages = generate(&order, &spec);
        assert_eq!(messages, generate(&order, &spec), "deterministic");
        assert_ne!(messages, generate(&order, &GenerateSpec { seed: 4, ..spec }));
        assert_eq!(messages.len(), 5);
        for m in &messages {
            let lines = m.get_field_by_name("lines").unwrap();
            assert_eq!(lines.as_list().unwrap().len(), 4);
            assert_eq!(m.get_field_by_name("name").unwrap().as_str().unwrap().len(), 7);
            assert_eq!(m.get_field_by_name("blob").unwrap().as_bytes().unwrap().len(), 9);
            let set = ["card", "account"].iter().filter(|f| m.has_field_by_name(f)).count();
            assert_eq!(set, 1, "one member of a oneof");
            let back = crate::from_json(order.clone(), &crate::to_json(m)).unwrap();
            assert_eq!(&crate::canonical(&back), m, "{}", String::from_utf8_lossy(&crate::to_json(m)));
        }
    }
}
