//! The contract's flags, the same on every tier and on the harness, which
//! hands them on unchanged (names follow ghz where it has one).

use std::path::PathBuf;

use prost::Message;

use crate::{Contract, ContractError, DataError, GenerateSpec, Messages};

/// A team's own contract instead of the built-in `bench.v1.Downstream/Fetch`.
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
#[command(next_help_heading = "Your own contract (docs/contract.md)")]
pub struct ContractArgs {
    /// A .proto file of your contract (repeatable); compiled at start-up
    /// with protox, no protoc needed.
    #[arg(long = "proto", value_name = "FILE")]
    pub proto: Vec<PathBuf>,
    /// Where the .proto files' imports are found (repeatable).
    ///
    /// each file's own folder is searched after these, and the well-known types need none.
    #[arg(long = "import-path", value_name = "DIR", requires = "proto")]
    pub import_path: Vec<PathBuf>,
    /// The unary method every call makes: package.Service/Method (or package.Service.Method).
    ///
    /// Needs --proto.
    #[arg(long, value_name = "METHOD", requires = "proto")]
    pub call: Option<String>,
    /// Request messages, one per line in the proto3 JSON mapping (JSON Lines).
    ///
    /// call n sends message n mod their count. Default: made by --generate-data. The harness takes a list
    /// (a.jsonl,b.jsonl): a payload sweep, one step per file.
    #[arg(long, value_name = "FILE", value_delimiter = ',', requires = "proto")]
    pub request_data: Vec<PathBuf>,
    /// Answers the downstream gives, like --request-data; call n is answered with message n mod their
    /// count.
    ///
    /// A list makes a payload sweep, as for --request-data.
    #[arg(long, value_name = "FILE", value_delimiter = ',', requires = "proto")]
    pub response_data: Vec<PathBuf>,
    /// How messages without a data file are made from the schema alone.
    ///
    /// count, elements per repeated field and map, string and bytes lengths, seed (e.g.
    /// repeated=50,string=24,bytes=64,seed=1).
    #[arg(long, value_name = "SPEC", default_value_t = GenerateSpec::default(), requires = "proto")]
    pub generate_data: GenerateSpec,
}

/// A contract and the messages of both sides of its calls.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub contract: Contract,
    pub requests: Messages,
    pub answers: Messages,
}

/// Why the contract's flags could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    #[error(transparent)]
    Contract(#[from] ContractError),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error("--proto needs --call package.Service/Method: which method to measure")]
    NoCall,
    #[error("{0}: one file here; a list of files is a payload sweep, which the harness runs one file at a time")]
    Several(&'static str),
    /// A request message every call carrying it would fail with.
    #[error("request message {number} of {origin}: {reason}")]
    Request { number: usize, origin: String, reason: String },
}

/// Where a side's messages came from, in an error's words.
fn source_text(source: &crate::Source) -> String {
    match source {
        crate::Source::File { path, .. } => path.clone(),
        crate::Source::Generated { spec } => format!("--generate-data {spec}"),
    }
}

impl ContractArgs {
    /// Whether a contract of the team's own was given.
    pub fn is_set(&self) -> bool {
        !self.proto.is_empty()
    }

    /// The contract and both sides' messages, or `None` without `--proto`.
    pub fn load(&self) -> Result<Option<Loaded>, ArgsError> {
        if !self.is_set() {
            return Ok(None);
        }
        let call = self.call.as_deref().ok_or(ArgsError::NoCall)?;
        let one = |files: &[PathBuf], flag| match files {
            [] => Ok(None),
            [file] => Ok(Some(file.clone())),
            _ => Err(ArgsError::Several(flag)),
        };
        let (request_data, response_data) =
            (one(&self.request_data, "--request-data")?, one(&self.response_data, "--response-data")?);
        let contract = Contract::compile(&self.proto, &self.import_path, call)?;
        // Requests and answers are made from different seeds, so a request
        // and its answer of the same type differ.
        let answers_spec = GenerateSpec { seed: self.generate_data.seed.wrapping_add(1), ..self.generate_data };
        let requests = Messages::load(request_data.as_deref(), &self.generate_data, &contract.input())?;
        let answers = Messages::load(response_data.as_deref(), &answers_spec, &contract.output())?;
        if let Some(rule) = &contract.http {
            for (i, m) in requests.messages.iter().enumerate() {
                rule.request(m).map_err(|reason| ArgsError::Request {
                    number: i + 1,
                    origin: source_text(&requests.source),
                    reason: format!("its google.api.http route: {reason}"),
                })?;
            }
        }
        Ok(Some(Loaded { contract, requests, answers }))
    }

    /// These flags as a command line, for a tier or a rerun.
    pub fn to_args(&self) -> Vec<String> {
        if !self.is_set() {
            return Vec::new();
        }
        let mut out = Vec::new();
        let path = |p: &PathBuf| p.display().to_string();
        for p in &self.proto {
            out.extend(["--proto".to_owned(), path(p)]);
        }
        for p in &self.import_path {
            out.extend(["--import-path".to_owned(), path(p)]);
        }
        if let Some(c) = &self.call {
            out.extend(["--call".to_owned(), c.clone()]);
        }
        let list = |files: &[PathBuf]| files.iter().map(path).collect::<Vec<_>>().join(",");
        if !self.request_data.is_empty() {
            out.extend(["--request-data".to_owned(), list(&self.request_data)]);
        }
        if !self.response_data.is_empty() {
            out.extend(["--response-data".to_owned(), list(&self.response_data)]);
        }
        out.extend(["--generate-data".to_owned(), self.generate_data.to_string()]);
        out
    }
}

/// What run.json and the reports say of a contract and its data.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// `package.Service/Method`.
    pub method: String,
    pub request_message: String,
    pub response_message: String,
    /// The `.proto` files as given.
    pub files: Vec<String>,
    /// SHA-256 of the compiled descriptor set (imports included).
    pub descriptor_sha256: String,
    /// Where the REST arms call the method ([`Contract::rest_route`]);
    /// absent from a run written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rest_route: Option<String>,
    pub requests: MessagesReport,
    pub answers: MessagesReport,
}

/// One side's messages: where they came from, how many, how large.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MessagesReport {
    pub source: crate::Source,
    pub count: usize,
    pub protobuf_bytes: Option<crate::Spread>,
    pub json_bytes: Option<crate::Spread>,
}

impl Loaded {
    /// Refuses a request message larger, in either encoding, than the
    /// `max_request_bytes` a downstream reads of one request (its body
    /// limit, `payload::Limits::max_encoded_request_bytes`): every call
    /// carrying it would fail on every arm.
    pub fn check_request_sizes(&self, max_request_bytes: usize) -> Result<(), ArgsError> {
        for (i, m) in self.requests.messages.iter().enumerate() {
            let (protobuf, json) = (m.encoded_len(), crate::to_json(m).len());
            if protobuf.max(json) > max_request_bytes {
                return Err(ArgsError::Request {
                    number: i + 1,
                    origin: source_text(&self.requests.source),
                    reason: format!(
                        "{protobuf} bytes as protobuf and {json} as JSON; the downstream reads at most \
                         {max_request_bytes} bytes of one request (its body limit, --max-body-bytes), so \
                         every call carrying it would fail"
                    ),
                });
            }
        }
        Ok(())
    }

    pub fn report(&self) -> Report {
        let side = |m: &crate::Messages| MessagesReport {
            source: m.source.clone(),
            count: m.messages.len(),
            protobuf_bytes: m.protobuf_sizes(),
            json_bytes: m.json_sizes(),
        };
        Report {
            method: self.contract.name(),
            request_message: self.contract.input().full_name().to_owned(),
            response_message: self.contract.output().full_name().to_owned(),
            files: self.contract.files.iter().map(|f| f.display().to_string()).collect(),
            descriptor_sha256: self.contract.sha256.clone(),
            rest_route: Some(self.contract.rest_route()),
            requests: side(&self.requests),
            answers: side(&self.answers),
        }
    }

    /// What `/stats` says of the contract and its data.
    pub fn describe(&self) -> serde_json::Value {
        let mut v = self.contract.settings();
        v["requests"] = self.requests.describe();
        v["answers"] = self.answers.describe();
        v
    }

    /// Why a tier that reports `served` (its `/stats` settings' `contract`,
    /// `None` when it has none) does not serve this contract: another
    /// method, another compiled descriptor set, or other messages on the
    /// `side` it sends. `None` when it serves the same.
    pub fn differs_from(&self, served: Option<&serde_json::Value>, side: Side) -> Option<String> {
        let Some(served) = served.filter(|v| v.is_object()) else {
            return Some(format!(
                "serves no contract of its own (it was started without --proto), not {}",
                self.contract.name()
            ));
        };
        let text = |key: &str| served.get(key).and_then(|v| v.as_str()).unwrap_or("nothing");
        let method = self.contract.name();
        if text("method") != method {
            return Some(format!("serves {}, not {method}", text("method")));
        }
        if text("descriptor_sha256") != self.contract.sha256 {
            return Some(format!(
                "compiled other .proto files: its descriptor set's SHA-256 is {}, this run's {}",
                text("descriptor_sha256"),
                self.contract.sha256
            ));
        }
        let (name, ours) = match side {
            Side::Requests => ("requests", &self.requests),
            Side::Answers => ("answers", &self.answers),
        };
        let theirs =
            served.get(name).and_then(|m| serde_json::from_value::<crate::Source>(m.get("source")?.clone()).ok());
        let same = match (&theirs, &ours.source) {
            (Some(crate::Source::File { sha256: a, .. }), crate::Source::File { sha256: b, .. }) => a == b,
            (Some(a), b) => a == b,
            (None, _) => false,
        };
        (!same).then(|| {
            let say = |s: Option<&crate::Source>| match s {
                Some(crate::Source::File { path, sha256 }) => format!("{path} (SHA-256 {sha256})"),
                Some(crate::Source::Generated { spec }) => format!("generated ({spec})"),
                None => "not reported".to_owned(),
            };
            format!("sends other {name}: {}, this run's {}", say(theirs.as_ref()), say(Some(&ours.source)))
        })
    }
}

/// One side of a call: what the caller sends, or what the downstream answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Requests,
    Answers,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        contract: ContractArgs,
    }

    #[test]
    fn the_flags_hand_on_unchanged() {
        let (_dir, file) = crate::testing::shop();
        let file = file.display().to_string();
        let cli =
            Cli::try_parse_from(["x", "--proto", &file, "--call", "shop.v1.Orders/Get", "--generate-data", "count=3"])
                .unwrap();
        let again = Cli::try_parse_from(std::iter::once("x".to_owned()).chain(cli.contract.to_args())).unwrap();
        assert_eq!(again.contract, cli.contract);
        let loaded = cli.contract.load().unwrap().unwrap();
        assert_eq!((loaded.requests.messages.len(), loaded.answers.messages.len()), (3, 3));
        assert_eq!(Cli::try_parse_from(["x"]).unwrap().contract.load().unwrap().map(|l| l.contract.name()), None);
        let no_call = Cli::try_parse_from(["x", "--proto", &file]).unwrap().contract.load().unwrap_err();
        assert!(matches!(no_call, ArgsError::NoCall), "{no_call}");
        assert!(Cli::try_parse_from(["x", "--call", "a.B/C"]).is_err(), "--call without --proto");
    }

    #[test]
    fn a_tier_serving_another_method_descriptor_or_data_is_told_apart() {
        let (dir, file) = crate::testing::shop();
        let file = file.display().to_string();
        let answers = dir.join("answers.jsonl");
        std::fs::write(&answers, "{\"id\":\"7\"}\n").unwrap();
        let answers = answers.display().to_string();
        let load = |extra: &[&str]| {
            let mut args = vec!["x", "--proto", &file, "--call", "shop.v1.Orders/Get"];
            args.extend_from_slice(extra);
            Cli::try_parse_from(args).unwrap().contract.load().unwrap().unwrap()
        };
        let ours = load(&["--response-data", &answers]);
        let same = ours.describe();
        assert_eq!(ours.differs_from(Some(&same), Side::Requests), None);
        assert_eq!(ours.differs_from(Some(&same), Side::Answers), None);
        // The same file's bytes at another path serve the same answers.
        let mut moved = same.clone();
        moved["answers"]["source"]["path"] = "/elsewhere/answers.jsonl".into();
        assert_eq!(ours.differs_from(Some(&moved), Side::Answers), None);

        let generated = load(&[]).describe();
        let why = ours.differs_from(Some(&generated), Side::Answers).unwrap();
        assert!(why.contains("other answers") && why.contains("generated"), "{why}");
        assert_eq!(ours.differs_from(Some(&generated), Side::Requests), None, "the requests are the same");
        let seeded = load(&["--generate-data", "seed=9"]).describe();
        assert!(ours.differs_from(Some(&seeded), Side::Requests).unwrap().contains("seed=9"));

        let mut other = same.clone();
        other["descriptor_sha256"] = "00ff".into();
        assert!(ours.differs_from(Some(&other), Side::Answers).unwrap().contains("00ff"));
        other["method"] = "shop.v1.Orders/Put".into();
        assert!(ours.differs_from(Some(&other), Side::Answers).unwrap().contains("serves shop.v1.Orders/Put"));
        let none = ours.differs_from(None, Side::Requests).unwrap();
        assert!(none.contains("without --proto"), "{none}");
    }
}
