//! A team's own contract, at run time: `.proto` files compiled with protox
//! (no `protoc`), the one unary method a run calls, and the messages its
//! calls carry, read from JSON Lines in the proto3 JSON mapping or generated
//! from the schema alone.
//!
//! Every tier and the harness build the same [`Contract`] from the same
//! files, and refuse to start on a mismatch: the descriptor set's SHA-256
//! names what was compiled. A call's number picks its messages: call *n*
//! sends request *i* mod R and is answered with answer *i* mod A, *i* its
//! place in its load segment ([`pick`]); the number travels as the request's [`CALL_HEADER`], the
//! request id every production hop propagates, so the downstream answers
//! without looking the request up.
//!
//! It knows no listener and no client; the tonic codec for dynamic messages
//! is here ([`codec`]) so the caller and the downstream share it.

mod args;
pub mod codec;
mod data;
mod generate;
pub mod http;
pub mod input;

use std::path::{Path, PathBuf};

use payload::JsonCodec;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, MethodDescriptor, ReflectMessage};

pub use args::{ArgsError, ContractArgs, Loaded, MessagesReport, Report, Side};
pub use data::{DataError, Messages, Source, Spread, load_jsonl, sha256_hex};
pub use generate::{GenerateSpec, generate};

/// The request header that carries a call's number on the internal hop
/// (gRPC metadata, an HTTP header): the request id a production hop
/// propagates, here the number that picks the answer.
pub const CALL_HEADER: &str = "x-request-id";

/// The bit a call number's load segment starts at: the harness numbers
/// call *i* of its *s*-th segment (a warm-up or a round) `s·2^40 + i`, so a
/// tier can tell which segment a call belongs to ([`call_segment`]) and
/// count its bytes there, however late it ends.
pub const SEGMENT_SHIFT: u32 = 40;

/// The load segment call `n` belongs to (0 for a number without one).
pub fn call_segment(n: u64) -> u64 {
    n >> SEGMENT_SHIFT
}

/// Call `n`'s place in its segment.
pub fn call_index(n: u64) -> u64 {
    n & ((1 << SEGMENT_SHIFT) - 1)
}

/// The index of call `n`'s message in a list of `count`: its place in its
/// segment mod `count`, so every segment sends the same messages in the
/// same order (every round of every arm the same mix).
pub fn pick(n: u64, count: usize) -> usize {
    (call_index(n) % count.max(1) as u64) as usize
}

/// The call number a [`CALL_HEADER`] value carries; `0` for one that
/// carries none (a client outside the harness still gets an answer).
pub fn call_number(value: Option<&[u8]>) -> u64 {
    value.and_then(|v| std::str::from_utf8(v).ok()).and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// Why a contract could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ContractError {
    #[error("--proto: {0}: no such file")]
    NoSuchFile(String),
    #[error("compiling the .proto files: {0}")]
    Compile(String),
    #[error("--call {0:?}: expected package.Service/Method (or package.Service.Method)")]
    CallName(String),
    #[error("--call {call}: no such method in the .proto files; they define {available}")]
    NoMethod { call: String, available: String },
    #[error("--call {call}: a {kind} method; only unary methods can be measured")]
    Streaming { call: String, kind: &'static str },
    #[error("--call {call}: its google.api.http rule: {reason}")]
    Http { call: String, reason: String },
}

/// A compile error as protox gives it, the file at fault named by the path
/// given (protox names it relative to its include folder); for a file or
/// import not found, where it was looked for and the flag that adds a place.
fn compile_error(e: &protox::Error, files: &[PathBuf], includes: &[PathBuf]) -> ContractError {
    let mut text = format!("{e:?}").replace('\n', " ");
    if let Some(name) = e.file()
        && let Some(given) = files.iter().find(|f| f.ends_with(name) && f.as_os_str() != name)
    {
        text = text.replacen(name, &given.display().to_string(), 1);
    }
    if e.is_file_not_found() {
        let dirs: Vec<String> = includes.iter().map(|p| p.display().to_string()).collect();
        text.push_str(&format!(
            "; imports are looked for in {}, then among the well-known types, google/api and grpc-gateway's protoc-gen-openapiv2/options: give the folder \
             that holds the import's path with --import-path DIR",
            dirs.join(", ")
        ));
    }
    ContractError::Compile(text)
}

/// A compiled contract and the one method a run calls.
#[derive(Debug, Clone, PartialEq)]
pub struct Contract {
    /// The `.proto` files as given.
    pub files: Vec<PathBuf>,
    /// Where imports were looked for: `--import-path`s, then each file's folder.
    pub import_paths: Vec<PathBuf>,
    pub method: MethodDescriptor,
    /// The encoded `FileDescriptorSet` (imports included), for reflection.
    pub descriptor_set: Vec<u8>,
    /// SHA-256 of [`Contract::descriptor_set`], hex.
    pub sha256: String,
    /// The method's `google.api.http` rule: where the REST arm calls it.
    pub http: Option<http::HttpRule>,
}

impl Contract {
    /// Compiles `files` (imports resolved in `import_paths`, then in each
    /// file's own folder; the well-known types need none) and finds `call`.
    pub fn compile(files: &[PathBuf], import_paths: &[PathBuf], call: &str) -> Result<Contract, ContractError> {
        // A file given that is not there is said so, with the path given,
        // before protox looks for it among the include folders.
        if let Some(f) = files.iter().find(|f| std::fs::symlink_metadata(f).is_err()) {
            return Err(ContractError::NoSuchFile(f.display().to_string()));
        }
        let mut includes: Vec<PathBuf> = import_paths.to_vec();
        for f in files {
            let folder = f.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
            if !includes.contains(&folder) {
                includes.push(folder);
            }
        }
        let mut resolver = protox::file::ChainFileResolver::new();
        for include in &includes {
            resolver.add(Bounded(protox::file::IncludeFileResolver::new(include.clone()), include.clone()));
        }
        resolver.add(protox::file::GoogleFileResolver::new());
        resolver.add(BuiltIn);
        let mut compiler = protox::Compiler::with_file_resolver(resolver);
        compiler.include_imports(true).include_source_info(false);
        compiler.open_files(files).map_err(|e| compile_error(&e, files, &includes))?;
        let descriptor_set = compiler.file_descriptor_set().encode_to_vec();
        let pool = compiler.descriptor_pool();
        let method = find_method(&pool, call)?;
        let http =
            http::HttpRule::of(&method).map_err(|reason| ContractError::Http { call: call.to_owned(), reason })?;
        Ok(Contract {
            http,
            files: files.to_vec(),
            import_paths: includes,
            method,
            sha256: sha256_hex(&descriptor_set),
            descriptor_set,
        })
    }

    /// `package.Service/Method`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.method.parent_service().full_name(), self.method.name())
    }

    /// The gRPC path: `/package.Service/Method`.
    pub fn grpc_path(&self) -> String {
        format!("/{}", self.name())
    }

    /// The REST route of the protobuf arm, and of the JSON arm without a
    /// `google.api.http` rule: `POST /v1/package.Service/Method`.
    pub fn rest_path(&self) -> String {
        format!("/v1/{}", self.name())
    }

    /// Where the REST arms call the method, in words: the `google.api.http`
    /// rule's verb and path (the JSON arm) and the protobuf arm's route, or
    /// the one route both take without a rule.
    pub fn rest_route(&self) -> String {
        match &self.http {
            Some(rule) => format!(
                "{} {} (google.api.http, {}); REST+protobuf: POST {}",
                rule.verb,
                rule.template,
                rule.body,
                self.rest_path()
            ),
            None => format!("POST {} (no google.api.http rule)", self.rest_path()),
        }
    }

    pub fn input(&self) -> MessageDescriptor {
        self.method.input()
    }

    pub fn output(&self) -> MessageDescriptor {
        self.method.output()
    }

    /// What `/stats` and run.json say of the contract.
    pub fn settings(&self) -> serde_json::Value {
        serde_json::json!({
            "method": self.name(),
            "request_message": self.input().full_name(),
            "response_message": self.output().full_name(),
            "files": self.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "descriptor_sha256": self.sha256,
            "grpc_path": self.grpc_path(),
            "rest_route": self.rest_route(),
            "call_header": CALL_HEADER,
            "messages": "dynamic (prost-reflect), compiled at run time with protox",
        })
    }
}

/// Files a contract may import without an import path holding them, for a
/// contract that imports them when no import path does: googleapis'
/// `google/api/annotations.proto` and `http.proto` (the `google.api.http`
/// option), and grpc-gateway's `protoc-gen-openapiv2/options/annotations.proto`
/// and `openapiv2.proto` (its OpenAPI options), with the same packages,
/// names and field numbers. The tiers read only `google.api.http`.
struct BuiltIn;

impl BuiltIn {
    const FILES: [(&'static str, &'static str); 4] = [
        ("google/api/annotations.proto", include_str!("../proto/google/api/annotations.proto")),
        ("google/api/http.proto", include_str!("../proto/google/api/http.proto")),
        (
            "protoc-gen-openapiv2/options/annotations.proto",
            include_str!("../proto/protoc-gen-openapiv2/options/annotations.proto"),
        ),
        (
            "protoc-gen-openapiv2/options/openapiv2.proto",
            include_str!("../proto/protoc-gen-openapiv2/options/openapiv2.proto"),
        ),
    ];
}

impl protox::file::FileResolver for BuiltIn {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        match Self::FILES.iter().find(|(n, _)| *n == name) {
            Some((_, source)) => protox::file::File::from_source(name, source),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

/// An include folder whose files are opened only when regular and within
/// [`input::MAX_PROTO_FILE_BYTES`]: protox's own resolver would wait on a
/// FIFO and read a device such as `/dev/zero` for 2 GiB.
struct Bounded(protox::file::IncludeFileResolver, PathBuf);

/// Why a `.proto` file was not opened, as protox's error carries it (and
/// prints it, either way, as the reason alone).
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Debug for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

impl protox::file::FileResolver for Bounded {
    fn resolve_path(&self, path: &Path) -> Option<String> {
        self.0.resolve_path(path)
    }

    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        let path = self.1.join(name);
        if std::fs::symlink_metadata(&path).is_err() {
            return Err(protox::Error::file_not_found(name));
        }
        // Checked, then opened by protox itself, which keeps its check that
        // a file given is the one its name resolves to.
        input::check_bounded(&path, input::MAX_PROTO_FILE_BYTES, "a .proto file")
            .map_err(|why| protox::Error::new(Refused(format!("{}: {why}", path.display()))))?;
        self.0.open_file(name)
    }
}

fn find_method(pool: &DescriptorPool, call: &str) -> Result<MethodDescriptor, ContractError> {
    let (service, method) = match call.rsplit_once('/') {
        Some((s, m)) => (s.trim_start_matches('/'), m),
        None => call.rsplit_once('.').ok_or_else(|| ContractError::CallName(call.to_owned()))?,
    };
    if service.is_empty() || method.is_empty() {
        return Err(ContractError::CallName(call.to_owned()));
    }
    let found = pool.get_service_by_name(service).and_then(|s| s.methods().find(|m| m.name() == method));
    let Some(m) = found else {
        let mut all: Vec<String> = pool
            .services()
            .flat_map(|s| {
                s.methods().map(|m| format!("{}/{}", m.parent_service().full_name(), m.name())).collect::<Vec<_>>()
            })
            .collect();
        all.sort();
        let available = if all.is_empty() { "no service".to_owned() } else { all.join(", ") };
        return Err(ContractError::NoMethod { call: call.to_owned(), available });
    };
    let kind = match (m.is_client_streaming(), m.is_server_streaming()) {
        (false, false) => return Ok(m),
        (true, true) => "bidirectional streaming",
        (true, false) => "client-streaming",
        (false, true) => "server-streaming",
    };
    Err(ContractError::Streaming { call: call.to_owned(), kind })
}

/// A message in the proto3 JSON mapping (lowerCamelCase names, 64-bit
/// integers as strings, default values left out), written by serde_json:
/// data files and the front door.
pub fn to_json(message: &DynamicMessage) -> Vec<u8> {
    to_json_with(JsonCodec::SerdeJson, message)
}

/// [`to_json`] written by `codec`: the internal hop's JSON bodies.
pub fn to_json_with(codec: JsonCodec, message: &DynamicMessage) -> Vec<u8> {
    // Serialising a dynamic message into a Vec cannot fail: every value it
    // holds was checked against its field when it was set or decoded.
    codec.encode(message).unwrap_or_default()
}

/// `message` as its protobuf encoding decodes: fields set to their default
/// where presence is implicit are dropped, so two messages that encode the
/// same compare equal whichever encoding they were read from.
pub fn canonical(message: &DynamicMessage) -> DynamicMessage {
    // A message decodes from its own encoding.
    DynamicMessage::decode(message.descriptor(), message.encode_to_vec().as_slice()).unwrap_or_else(|_| message.clone())
}

/// A message from its proto3 JSON mapping, unknown fields refused, read by
/// serde_json.
pub fn from_json(desc: MessageDescriptor, bytes: &[u8]) -> Result<DynamicMessage, String> {
    from_json_with(JsonCodec::SerdeJson, desc, bytes)
}

/// [`from_json`] read by `codec`: the internal hop's JSON bodies.
pub fn from_json_with(codec: JsonCodec, desc: MessageDescriptor, bytes: &[u8]) -> Result<DynamicMessage, String> {
    codec.decode_seed(MessageSeed(desc), bytes).map_err(|e| e.to_string())
}

/// A dynamic message's descriptor as serde's seed, so any codec's
/// deserializer can read one.
struct MessageSeed(MessageDescriptor);

impl<'de> serde::de::DeserializeSeed<'de> for MessageSeed {
    type Value = DynamicMessage;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<DynamicMessage, D::Error> {
        DynamicMessage::deserialize(self.0, d)
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A fresh folder under the system's temporary folder.
    pub fn folder() -> PathBuf {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "contract-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    pub const SHOP: &str = r#"
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
service Orders {
  rpc Get(GetRequest) returns (Order);
  rpc Watch(GetRequest) returns (stream Order);
}
message GetRequest { int64 id = 1; }
message Order {
  int64 id = 1;
  string name = 2;
  repeated Line lines = 3;
  map<string, int32> counts = 4;
  google.protobuf.Timestamp at = 5;
  Kind kind = 6;
  bytes blob = 7;
  oneof pay { string card = 8; uint64 account = 9; }
}
message Line { string sku = 1; uint32 qty = 2; double price = 3; }
enum Kind { KIND_UNSPECIFIED = 0; KIND_RETAIL = 1; KIND_BULK = 2; }
"#;

    /// The shop contract written to a fresh folder.
    pub fn shop() -> (PathBuf, PathBuf) {
        let dir = folder();
        let file = dir.join("shop.proto");
        std::fs::write(&file, SHOP).unwrap();
        (dir, file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_is_found_by_either_spelling_and_a_streaming_one_is_refused() {
        let (_dir, file) = testing::shop();
        let c = Contract::compile(std::slice::from_ref(&file), &[], "shop.v1.Orders/Get").unwrap();
        assert_eq!(
            (c.name(), c.grpc_path(), c.rest_path()),
            ("shop.v1.Orders/Get".to_owned(), "/shop.v1.Orders/Get".to_owned(), "/v1/shop.v1.Orders/Get".to_owned())
        );
        assert_eq!(c.output().full_name(), "shop.v1.Order");
        let dotted = Contract::compile(std::slice::from_ref(&file), &[], "shop.v1.Orders.Get").unwrap();
        assert_eq!(dotted.sha256, c.sha256, "the same files compile to the same descriptor set");
        assert_eq!(c.sha256.len(), 64);

        let e = Contract::compile(std::slice::from_ref(&file), &[], "shop.v1.Orders/Watch").unwrap_err();
        assert!(matches!(e, ContractError::Streaming { kind: "server-streaming", .. }), "{e}");
        let e = Contract::compile(std::slice::from_ref(&file), &[], "shop.v1.Orders/Put").unwrap_err();
        assert!(e.to_string().contains("shop.v1.Orders/Get, shop.v1.Orders/Watch"), "{e}");
        let e = Contract::compile(std::slice::from_ref(&file), &[], "Get").unwrap_err();
        assert!(matches!(e, ContractError::CallName(_)), "{e}");
    }

    #[test]
    fn a_missing_file_is_no_such_file_with_the_path_given() {
        let dir = testing::folder();
        let missing = dir.join("nowhere").join("orders.proto");
        let e = Contract::compile(std::slice::from_ref(&missing), &[], "a.B/C").unwrap_err();
        assert_eq!(e.to_string(), format!("--proto: {}: no such file", missing.display()));
    }

    #[test]
    fn a_file_that_does_not_compile_is_named() {
        let dir = testing::folder();
        let file = dir.join("bad.proto");
        std::fs::write(&file, "syntax = \"proto3\";\nmessage A { strin x = 1; }\n").unwrap();
        let e = Contract::compile(&[file], &[], "a.B/C").unwrap_err();
        assert!(matches!(e, ContractError::Compile(_)) && e.to_string().contains("bad.proto"), "{e}");
    }

    #[test]
    fn a_missing_import_says_where_it_was_looked_for_and_which_flag_adds_a_place() {
        let dir = testing::folder();
        let file = dir.join("uses.proto");
        std::fs::write(&file, "syntax = \"proto3\";\nimport \"vendor/options.proto\";\nmessage A {}\n").unwrap();
        let e = Contract::compile(std::slice::from_ref(&file), &[], "a.B/C").unwrap_err().to_string();
        assert!(e.contains("vendor/options.proto") && e.contains("--import-path DIR"), "{e}");
        assert!(e.contains(&format!("{}:2:1", file.display())), "the file at fault by the path given: {e}");
        assert!(e.contains(&format!("looked for in {}", dir.display())), "{e}");
    }

    #[test]
    fn call_numbers_pick_messages_round_robin() {
        assert_eq!((pick(0, 3), pick(4, 3), pick(7, 1)), (0, 1, 0));
        // A segment's calls pick from its own first call on.
        let n = (5 << SEGMENT_SHIFT) + 4;
        assert_eq!((pick(n, 3), call_segment(n), call_index(n)), (1, 5, 4));
        assert_eq!(call_number(Some(b"42")), 42);
        assert_eq!((call_number(Some(b"x")), call_number(None)), (0, 0));
    }

    /// A gateway-annotated API as such files are usually written: grpc-gateway's
    /// OpenAPI options on the file, the service, the method, a message, an
    /// enum and a field, beside a `google.api.http` rule.
    pub(crate) const GATEWAY: &str = r#"
syntax = "proto3";
package echo.v1;
import "google/api/annotations.proto";
import "protoc-gen-openapiv2/options/annotations.proto";
option (grpc.gateway.protoc_gen_openapiv2.options.openapiv2_swagger) = {
  info: { title: "Echo API"; version: "1.0"; contact: { name: "ops"; email: "ops@example.com" }; license: { name: "MIT" } };
  schemes: HTTPS;
  consumes: "application/json";
  security_definitions: { security: { key: "bearer" value: { type: TYPE_API_KEY; in: IN_HEADER; name: "Authorization" } } };
  security: { security_requirement: { key: "bearer" value: {} } };
  responses: { key: "404" value: { description: "not found"; schema: { json_schema: { type: STRING } } } };
  external_docs: { url: "https://example.com/docs" };
};
service Echo {
  option (grpc.gateway.protoc_gen_openapiv2.options.openapiv2_tag) = { description: "Echoes"; name: "echo" };
  rpc Say(SayRequest) returns (SayReply) {
    option (google.api.http) = { get: "/v1/echo/{id}" };
    option (grpc.gateway.protoc_gen_openapiv2.options.openapiv2_operation) = {
      summary: "Echo one message"; operation_id: "say"; tags: "echo"; deprecated: false;
      responses: { key: "200" value: { description: "OK"; headers: { key: "X-Trace" value: { type: "string" } } } };
      parameters: { headers: { name: "X-Tenant"; type: STRING; required: true } };
    };
  }
}
message SayRequest {
  option (grpc.gateway.protoc_gen_openapiv2.options.openapiv2_schema) = {
    json_schema: { title: "SayRequest"; required: ["id"] }
    example: "{\"id\": \"7\"}"
  };
  string id = 1 [(grpc.gateway.protoc_gen_openapiv2.options.openapiv2_field) = {
    description: "what to echo"; max_length: 64; pattern: "^[a-z0-9]+$";
    field_configuration: { path_param_name: "echoId" }
  }];
  Tone tone = 2;
}
enum Tone {
  option (grpc.gateway.protoc_gen_openapiv2.options.openapiv2_enum) = { description: "how it is said" };
  TONE_UNSPECIFIED = 0;
  TONE_LOUD = 1;
}
message SayReply { string text = 1; }
"#;

    #[test]
    fn a_gateway_annotated_api_compiles_with_its_openapi_options_built_in() {
        let dir = testing::folder();
        let file = dir.join("echo.proto");
        std::fs::write(&file, GATEWAY).unwrap();
        let c = Contract::compile(std::slice::from_ref(&file), &[], "echo.v1.Echo/Say").unwrap();
        assert_eq!(c.http.as_ref().map(|r| r.route()), Some("/v1/echo/{id}".to_owned()));
        assert_eq!(
            c.rest_route(),
            "GET /v1/echo/{id} (google.api.http, no body); REST+protobuf: POST /v1/echo.v1.Echo/Say"
        );
        // The options are read as the interface says: names, numbers, types.
        let pool = c.method.parent_pool();
        let op = pool.get_extension_by_name("grpc.gateway.protoc_gen_openapiv2.options.openapiv2_operation").unwrap();
        assert_eq!(op.number(), 1042);
        let options = c.method.options();
        let operation = options.get_extension(&op);
        let operation = operation.as_message().unwrap();
        assert_eq!(operation.get_field_by_name("operation_id").unwrap().as_str(), Some("say"));
        assert_eq!(operation.descriptor().get_field_by_name("parameters").unwrap().number(), 14);
        for (name, extendee) in [
            ("openapiv2_swagger", "google.protobuf.FileOptions"),
            ("openapiv2_schema", "google.protobuf.MessageOptions"),
            ("openapiv2_enum", "google.protobuf.EnumOptions"),
            ("openapiv2_tag", "google.protobuf.ServiceOptions"),
            ("openapiv2_field", "google.protobuf.FieldOptions"),
        ] {
            let ext = pool.get_extension_by_name(&format!("grpc.gateway.protoc_gen_openapiv2.options.{name}")).unwrap();
            assert_eq!((ext.number(), ext.containing_message().full_name()), (1042, extendee), "{name}");
        }
    }

    #[test]
    fn a_proto_file_that_is_not_a_regular_file_or_too_large_is_refused_unread() {
        let e = Contract::compile(&[PathBuf::from("/dev/zero")], &[], "a.B/C").unwrap_err().to_string();
        assert!(e.contains("/dev/zero") && e.contains("not a regular file"), "{e}");
        let dir = testing::folder();
        let fifo = dir.join("api.proto");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        // Opening a FIFO would wait for a writer: the refusal returning is the test.
        let e = Contract::compile(&[fifo], &[], "a.B/C").unwrap_err().to_string();
        assert!(e.contains("api.proto") && e.contains("not a regular file"), "{e}");
        // An import past the bound, refused by the path it was found at.
        let big = dir.join("big.proto");
        let mut text = "syntax = \"proto3\";\n".to_owned();
        text.push_str(&"// padding\n".repeat((input::MAX_PROTO_FILE_BYTES / 11 + 1) as usize));
        std::fs::write(&big, text).unwrap();
        let uses = dir.join("uses.proto");
        std::fs::write(&uses, "syntax = \"proto3\";\nimport \"big.proto\";\n").unwrap();
        let e = Contract::compile(&[uses], &[], "a.B/C").unwrap_err().to_string();
        assert!(e.contains(&big.display().to_string()) && e.contains("at most 8 MiB"), "{e}");
    }
}
