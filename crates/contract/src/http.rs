//! The REST shape a method's `google.api.http` annotation gives it, as
//! gRPC-JSON transcoding exposes it: the verb and path, fields bound to
//! path variables, the `body` rule (the whole message, one field, or none),
//! and the fields left over as query parameters. The caller builds each
//! request from the message this way; the downstream reads the message back
//! from the path, the query and the body.
//!
//! Supported: the five verbs, path variables naming a top-level scalar
//! field (`{id}`), `body: "*"`, `body: "field"` and no body. Refused at
//! start-up, with the reason: `custom` verbs, variables with a pattern
//! (`{name=shelves/*}`) or a nested field, a message field left for the
//! query string, and a template no request could reach: a variable used
//! twice, an empty, `.` or `..` segment, a character a URL path does not
//! carry as it is, a segment starting with `:`; a path another route of the
//! listener already is ([`HttpRule::clash`]), and a request whose path
//! variable is empty. `additional_bindings` are not served.

use payload::JsonCodec;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, MethodDescriptor, ReflectMessage};
use serde_json::{Map, Value};

/// How a message travels in the body of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyRule {
    /// `body` absent: no body; every field not in the path is a query parameter.
    None,
    /// `body: "*"`: every field not in the path.
    Whole,
    /// `body: "field"`: that field; the others not in the path are query parameters.
    Field(String),
}

impl std::fmt::Display for BodyRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyRule::None => f.write_str("no body"),
            BodyRule::Whole => f.write_str("body \"*\""),
            BodyRule::Field(field) => write!(f, "body {field:?}"),
        }
    }
}

/// One segment of a path template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    /// A variable: the JSON name of the field it binds.
    Field(String),
}

/// A method's `google.api.http` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRule {
    /// `GET`, `PUT`, `POST`, `DELETE` or `PATCH`.
    pub verb: String,
    /// The path template as written (`/v1/orders/{id}`).
    pub template: String,
    pub body: BodyRule,
    segments: Vec<Segment>,
}

impl HttpRule {
    /// The rule `method` carries, `None` without one; a rule this module
    /// cannot serve is an error that says why.
    pub fn of(method: &MethodDescriptor) -> Result<Option<HttpRule>, String> {
        let Some(ext) = method.parent_pool().get_extension_by_name("google.api.http") else { return Ok(None) };
        let options = method.options();
        if !options.has_extension(&ext) {
            return Ok(None);
        }
        let value = options.get_extension(&ext);
        let rule = value.as_message().ok_or("google.api.http is not an HttpRule")?;
        let text = |name: &str| rule.get_field_by_name(name).and_then(|v| v.as_str().map(str::to_owned));
        if rule.has_field_by_name("custom") {
            return Err("a custom verb in google.api.http is not supported".to_owned());
        }
        let (verb, template) = ["get", "put", "post", "delete", "patch"]
            .iter()
            .find(|v| rule.has_field_by_name(v))
            .map(|v| (v.to_ascii_uppercase(), text(v).unwrap_or_default()))
            .ok_or("google.api.http names no verb")?;
        let input = method.input();
        let segments = parse_template(&template, &input)?;
        let body = match text("body").unwrap_or_default().as_str() {
            "" => BodyRule::None,
            "*" => BodyRule::Whole,
            name => {
                let f = input.get_field_by_name(name).ok_or_else(|| format!("body {name:?}: no such field"))?;
                BodyRule::Field(f.json_name().to_owned())
            }
        };
        let rule = HttpRule { verb, template, body, segments };
        for field in input.fields() {
            let in_path = rule.segments.contains(&Segment::Field(field.json_name().to_owned()));
            let in_body = match &rule.body {
                BodyRule::Whole => true,
                BodyRule::Field(f) => f == field.json_name(),
                BodyRule::None => false,
            };
            if !in_path && !in_body && (field.is_map() || matches!(field.kind(), Kind::Message(_))) {
                return Err(format!(
                    "field {} would travel in the query string, and a message or map field cannot",
                    field.name()
                ));
            }
        }
        Ok(Some(rule))
    }

    /// The route on the REST listener, in axum's syntax (`/v1/orders/{id}`).
    pub fn route(&self) -> String {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Literal(l) => format!("/{l}"),
                Segment::Field(f) => format!("/{{{f}}}"),
            })
            .collect()
    }

    /// The first of `routes` (other routes of the same listener, in axum's
    /// syntax) that this rule's route is, whatever the variables are named:
    /// the router refuses to hold both (the listener would not start), so
    /// such a rule is refused before anything starts.
    pub fn clash<'a>(&self, routes: &[&'a str]) -> Option<&'a str> {
        let shape = |route: &str| -> Vec<String> {
            route.split('/').map(|s| if s.starts_with('{') { "{}".to_owned() } else { s.to_owned() }).collect()
        };
        let ours = shape(&self.route());
        routes.iter().copied().find(|r| shape(r) == ours)
    }

    /// The path and query (`/v1/orders/42?view=FULL`) and the JSON body
    /// (`None` for none) that carry `message`.
    pub fn request(&self, message: &DynamicMessage) -> Result<(String, Option<Vec<u8>>), String> {
        self.request_with(JsonCodec::SerdeJson, message)
    }

    /// [`HttpRule::request`] with the body written by `codec`.
    pub fn request_with(
        &self,
        codec: JsonCodec,
        message: &DynamicMessage,
    ) -> Result<(String, Option<Vec<u8>>), String> {
        let mut fields = match serde_json::to_value(message).map_err(|e| e.to_string())? {
            Value::Object(map) => map,
            _ => return Err("a message is not a JSON object".to_owned()),
        };
        let mut path = String::new();
        for s in &self.segments {
            path.push('/');
            match s {
                Segment::Literal(l) => path.push_str(l),
                Segment::Field(f) => {
                    let value = fields.remove(f);
                    let default = message.descriptor().fields().find(|d| d.json_name() == f).map(|d| default_text(&d));
                    let text = value.map_or_else(|| default.unwrap_or_default(), |v| scalar_text(&v));
                    if text.is_empty() || text == "." || text == ".." {
                        return Err(format!(
                            "path variable {{{f}}} is {text:?}: a request path cannot carry it as a segment of its own"
                        ));
                    }
                    path.push_str(&escape(&text));
                }
            }
        }
        let body = match &self.body {
            BodyRule::Whole => Some(codec.encode(&Value::Object(std::mem::take(&mut fields)))),
            BodyRule::Field(f) => Some(codec.encode(&fields.remove(f).unwrap_or(Value::Object(Map::new())))),
            BodyRule::None => None,
        };
        let body = body.transpose().map_err(|e| e.to_string())?;
        let mut query = Vec::new();
        for (key, value) in &fields {
            match value {
                Value::Array(items) => query.extend(items.iter().map(|v| format!("{key}={}", escape(&scalar_text(v))))),
                Value::Object(_) => return Err(format!("field {key} is a message and cannot travel in the query")),
                v => query.push(format!("{key}={}", escape(&scalar_text(v)))),
            }
        }
        if !query.is_empty() {
            path.push('?');
            path.push_str(&query.join("&"));
        }
        Ok((path, body))
    }

    /// The message a request carries: the body as the rule says, the path
    /// variables and the query parameters, each read as its field's type.
    pub fn message(
        &self,
        desc: &MessageDescriptor,
        path: &[(String, String)],
        query: Option<&str>,
        body: &[u8],
    ) -> Result<DynamicMessage, String> {
        self.message_with(JsonCodec::SerdeJson, desc, path, query, body)
    }

    /// [`HttpRule::message`] with the body read by `codec`.
    pub fn message_with(
        &self,
        codec: JsonCodec,
        desc: &MessageDescriptor,
        path: &[(String, String)],
        query: Option<&str>,
        body: &[u8],
    ) -> Result<DynamicMessage, String> {
        let parse_body = || -> Result<Value, String> {
            if body.iter().all(u8::is_ascii_whitespace) {
                return Ok(Value::Object(Map::new()));
            }
            codec.decode::<Value>(body).map_err(|e| format!("malformed JSON request: {e}"))
        };
        let mut fields = match &self.body {
            BodyRule::None => Map::new(),
            BodyRule::Whole => match parse_body()? {
                Value::Object(map) => map,
                _ => return Err("malformed JSON request: the body must be a JSON object".to_owned()),
            },
            BodyRule::Field(f) => Map::from_iter([(f.clone(), parse_body()?)]),
        };
        let pairs = query.unwrap_or("").split('&').filter(|p| !p.is_empty()).map(|p| match p.split_once('=') {
            Some((k, v)) => (unescape(k), unescape(v)),
            None => (unescape(p), String::new()),
        });
        for (key, text) in path.iter().cloned().chain(pairs) {
            let field = desc
                .fields()
                .find(|f| f.json_name() == key || f.name() == key)
                .ok_or_else(|| format!("{key}: no such field in {}", desc.full_name()))?;
            let value = typed(&field, text);
            let name = field.json_name().to_owned();
            if field.is_list() {
                match fields.entry(name).or_insert_with(|| Value::Array(Vec::new())) {
                    Value::Array(items) => items.push(value),
                    _ => return Err(format!("{key}: given twice")),
                }
            } else {
                fields.insert(name, value);
            }
        }
        DynamicMessage::deserialize(desc.clone(), Value::Object(fields)).map_err(|e| format!("malformed request: {e}"))
    }
}

fn parse_template(template: &str, input: &MessageDescriptor) -> Result<Vec<Segment>, String> {
    let path = template.strip_prefix('/').ok_or_else(|| format!("path {template:?} does not start with /"))?;
    let mut segments: Vec<Segment> = Vec::new();
    for s in path.split('/') {
        let segment = parse_segment(s, input).map_err(|why| format!("path {template:?}: {why}"))?;
        if let Segment::Field(name) = &segment
            && segments.contains(&segment)
        {
            return Err(format!("path {template:?}: variable {{{name}}} appears twice; a field fills one segment"));
        }
        segments.push(segment);
    }
    Ok(segments)
}

/// One segment of a template: a literal made of the characters a URL
/// carries as they are (any other would be percent-encoded on its way and
/// match no route), or `{field}` naming a top-level scalar field.
fn parse_segment(s: &str, input: &MessageDescriptor) -> Result<Segment, String> {
    let Some(var) = s.strip_prefix('{').and_then(|v| v.strip_suffix('}')) else {
        if s.is_empty() {
            return Err("an empty segment (a doubled or trailing /) matches no request the clients send".to_owned());
        }
        if s == "." || s == ".." {
            return Err(format!("segment {s:?} is removed from a URL by every HTTP client"));
        }
        if s.contains(['{', '}', '*']) {
            return Err(format!("segment {s:?} is not supported"));
        }
        if let Some(c) = s.chars().find(|c| !c.is_ascii_alphanumeric() && !"-._~!$&'()+,;=:@".contains(*c)) {
            return Err(format!(
                "segment {s:?} holds {c:?}, which a URL path cannot carry as it is: clients would send it \
                 percent-encoded and no route would match"
            ));
        }
        if s.starts_with(':') {
            return Err(format!("segment {s:?} starts with ':', which the REST listener's router refuses"));
        }
        return Ok(Segment::Literal(s.to_owned()));
    };
    if var.contains(['=', '.']) {
        return Err(format!("variable {{{var}}} has a pattern or a nested field; only {{field}} is supported"));
    }
    let field = input.get_field_by_name(var).ok_or_else(|| format!("no field {var}"))?;
    if field.is_list() || field.is_map() || matches!(field.kind(), Kind::Message(_)) {
        return Err(format!("{var} is not a single scalar field"));
    }
    Ok(Segment::Field(field.json_name().to_owned()))
}

/// A field's value as the text of a path segment or query parameter.
fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The text of a field left at its default (absent from the JSON mapping).
fn default_text(field: &FieldDescriptor) -> String {
    match field.kind() {
        Kind::String | Kind::Bytes => String::new(),
        Kind::Bool => "false".to_owned(),
        Kind::Enum(e) => e.default_value().name().to_owned(),
        _ => "0".to_owned(),
    }
}

/// Text from a path or query as the JSON value of `field`: a string for
/// strings, bytes, enums and numbers (the proto3 JSON mapping reads numbers
/// from strings), `true`/`false` for a bool.
fn typed(field: &FieldDescriptor, text: String) -> Value {
    match field.kind() {
        Kind::Bool => Value::Bool(text == "true"),
        _ => Value::String(text),
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Contract, testing};

    const ANNOTATED: &str = r#"
syntax = "proto3";
package shop.v1;
import "google/api/annotations.proto";
service Orders {
  rpc Get(GetOrder) returns (Order) { option (google.api.http) = { get: "/v1/stores/{store}/orders/{id}" }; }
  rpc Put(Order) returns (Order) { option (google.api.http) = { put: "/v1/orders/{id}" body: "*" }; }
  rpc Note(NoteRequest) returns (Order) { option (google.api.http) = { post: "/v1/orders/{id}/notes" body: "note" }; }
  rpc Bad(GetOrder) returns (Order) { option (google.api.http) = { get: "/v1/{name=shelves/*}" }; }
}
message GetOrder { string store = 1; int64 id = 2; repeated string fields = 3; bool deleted = 4; }
message Order { int64 id = 1; string customer = 2; }
message NoteRequest { int64 id = 1; Note note = 2; string by = 3; }
message Note { string text = 1; }
"#;

    fn compile(call: &str) -> Result<Contract, crate::ContractError> {
        let dir = testing::folder();
        let file = dir.join("annotated.proto");
        std::fs::write(&file, ANNOTATED).unwrap();
        Contract::compile(&[file], &[], call)
    }

    fn json(desc: &MessageDescriptor, text: &str) -> DynamicMessage {
        crate::canonical(&crate::from_json(desc.clone(), text.as_bytes()).unwrap())
    }

    #[test]
    fn path_variables_and_the_query_carry_a_get_and_read_back() {
        let c = compile("shop.v1.Orders/Get").unwrap();
        let rule = c.http.clone().expect("annotated");
        assert_eq!((rule.verb.as_str(), rule.route()), ("GET", "/v1/stores/{store}/orders/{id}".to_owned()));
        let m = json(&c.input(), r#"{"store":"Berlin Mitte","id":"42","fields":["a","b c"],"deleted":true}"#);
        let (path, body) = rule.request(&m).unwrap();
        assert_eq!(body, None);
        assert_eq!(path, "/v1/stores/Berlin%20Mitte/orders/42?deleted=true&fields=a&fields=b%20c");
        let (p, q) = path.split_once('?').unwrap();
        let vars: Vec<(String, String)> =
            vec![("store".into(), unescape(p.split('/').nth(3).unwrap())), ("id".into(), "42".into())];
        assert_eq!(crate::canonical(&rule.message(&c.input(), &vars, Some(q), b"").unwrap()), m);
    }

    #[test]
    fn a_body_rule_sends_the_whole_message_or_one_field() {
        let c = compile("shop.v1.Orders/Put").unwrap();
        let rule = c.http.clone().unwrap();
        let m = json(&c.input(), r#"{"id":"7","customer":"Ada"}"#);
        let (path, body) = rule.request(&m).unwrap();
        assert_eq!((path.as_str(), body.as_deref()), ("/v1/orders/7", Some(br#"{"customer":"Ada"}"#.as_slice())));
        let back = rule.message(&c.input(), &[("id".into(), "7".into())], None, &body.unwrap()).unwrap();
        assert_eq!(crate::canonical(&back), m);

        let c = compile("shop.v1.Orders/Note").unwrap();
        let rule = c.http.clone().unwrap();
        let m = json(&c.input(), r#"{"id":"7","note":{"text":"ring twice"},"by":"ops"}"#);
        let (path, body) = rule.request(&m).unwrap();
        assert_eq!(
            (path.as_str(), body.as_deref()),
            ("/v1/orders/7/notes?by=ops", Some(br#"{"text":"ring twice"}"#.as_slice()))
        );
        let back = rule.message(&c.input(), &[("id".into(), "7".into())], Some("by=ops"), &body.unwrap()).unwrap();
        assert_eq!(crate::canonical(&back), m);
    }

    #[test]
    fn a_rule_that_cannot_be_served_is_refused_with_the_reason() {
        let e = compile("shop.v1.Orders/Bad").unwrap_err();
        assert!(e.to_string().contains("{name=shelves/*}"), "{e}");
    }

    /// The reason the rule `get: template` on `GetOrder` is refused with.
    fn refusal(template: &str) -> String {
        let dir = testing::folder();
        let file = dir.join("r.proto");
        let text = ANNOTATED.replace("/v1/{name=shelves/*}", template);
        std::fs::write(&file, text).unwrap();
        Contract::compile(&[file], &[], "shop.v1.Orders/Bad").map(|_| ()).unwrap_err().to_string()
    }

    #[test]
    fn a_template_no_request_could_reach_is_refused_with_the_reason() {
        for (template, reason) in [
            ("/v1/{id}/{id}", "variable {id} appears twice"),
            ("/v1/bestellungen/{id}/größe", "a URL path cannot carry"),
            ("//v1//orders/{id}", "an empty segment"),
            ("/v1/orders/{id}/", "an empty segment"),
            ("/v1/../orders/{id}", "removed from a URL"),
            ("/v1/orders/{id}/a b", "a URL path cannot carry"),
            ("/v1/:orders/{id}", "starts with ':'"),
        ] {
            let e = refusal(template);
            assert!(e.contains(reason) && e.contains(template), "{template}: {e}");
        }
        // A custom method's usual literal (`:batchGet` inside a segment) is a path like any other.
        let dir = testing::folder();
        let file = dir.join("ok.proto");
        std::fs::write(&file, ANNOTATED.replace("/v1/{name=shelves/*}", "/v1/orders:batchGet/{id}")).unwrap();
        let rule = Contract::compile(&[file], &[], "shop.v1.Orders/Bad").unwrap().http.unwrap();
        assert_eq!(rule.route(), "/v1/orders:batchGet/{id}");
    }

    #[test]
    fn a_route_another_route_of_the_listener_already_is_clashes_whatever_its_variables_are_named() {
        let c = compile("shop.v1.Orders/Put").unwrap();
        let rule = c.http.clone().unwrap();
        assert_eq!(rule.clash(&["/v1/items/stream", "/v1/orders/{order}"]), Some("/v1/orders/{order}"));
        assert_eq!(rule.clash(&["/v1/orders", "/v1/orders/stream", "/v1/orders/{id}/x"]), None);
    }

    #[test]
    fn a_request_whose_path_variable_is_empty_cannot_be_sent() {
        let c = compile("shop.v1.Orders/Get").unwrap();
        let rule = c.http.clone().unwrap();
        let m = json(&c.input(), r#"{"id":"42"}"#);
        let e = rule.request(&m).unwrap_err();
        assert!(e.contains("{store}") && e.contains("\"\""), "{e}");
        let m = json(&c.input(), r#"{"store":"..","id":"42"}"#);
        assert!(rule.request(&m).is_err());
    }
}
