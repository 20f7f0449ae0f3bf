//! The run's configuration in words: one renderer for `report.md`,
//! `comparison.md` and the terminal summary. The load says whether it was an
//! open loop at a rate or a closed loop over connections, never "0 req/s";
//! how the internal hop carried its bytes (HTTP version, encoding, TLS,
//! compression) is read from what the tiers reported in their settings, and
//! a tier that reported something else than was asked for is shown as such.

use std::collections::BTreeSet;
use std::fmt::Write;

use serde_json::Value;

use crate::config::{Compression, Config, TargetTier, TlsMode, hd};
use crate::export::numbers::num;
use crate::result::{RunResult, TierName};

/// `100 req/s open loop` or `closed loop over 8 connections`.
pub fn load_text(c: &Config) -> String {
    if c.load.closed_loop {
        format!("closed loop over {} connections", c.load.connections)
    } else if let Some(s) = c.generators.segment.filter(|s| s.count > 1) {
        let share = c.generators.share_of(c.load.qps);
        let (r, unit) = (rate(share), unit(c));
        format!("{r} {unit} open loop (segment {}/{} of {})", s.index, s.count, rate(c.load.qps))
    } else {
        format!("{} {} open loop", rate(c.load.qps), unit(c))
    }
}

/// What the rate counts: requests, or streams started.
fn unit(c: &Config) -> &'static str {
    if c.streams.is_some() { "streams/s" } else { "req/s" }
}

/// `100 items per stream, one every 10ms, pages of 10`.
pub fn stream_text(s: &crate::config::Streams, paged: bool) -> String {
    format!("{} items per stream{}", s.items, stream_detail(s, paged))
}

/// What [`stream_text`] says after the count: `, one every 10ms, pages of 10`.
pub fn stream_detail(s: &crate::config::Streams, paged: bool) -> String {
    let mut t = String::new();
    if s.item_bytes > 0 {
        let _ = write!(t, " of one record and {} B", s.item_bytes);
    }
    if s.interval.is_zero() {
        t.push_str(", each as soon as asked for");
    } else {
        let _ = write!(t, ", one every {}", hd(s.interval));
    }
    if paged {
        let _ = write!(t, ", pages of {}", s.page_size);
    }
    if !s.consumer_delay.is_zero() {
        let _ = write!(t, ", the harness taking each {} late", hd(s.consumer_delay));
    }
    t
}

fn rate(qps: f64) -> String {
    num(Some(qps), if qps.fract() == 0.0 { 0 } else { 2 })
}

/// `gRPC at 100 req/s open loop, 500 ms delay, 10 items`.
pub fn title(run: &RunResult) -> String {
    format!("{} at {}", run.config.transport.title(), setup(run))
}

/// `100 req/s open loop, 500 ms delay, 10 items` (and fan-out and label when set).
pub fn setup(run: &RunResult) -> String {
    let from = match run.generators.len() {
        n if n > 1 => format!(" from {n} generators"),
        _ => String::new(),
    };
    format!("{}{from}, {}", load_text(&run.config), shape(run))
}

/// The setup without the load: `500 ms delay, 10 items` (and the target,
/// fan-out and label when set).
pub fn shape(run: &RunResult) -> String {
    let c = &run.config;
    let paged = c.transport.delivery() == Some(caller::outbound::Delivery::Pages);
    let mut t = match (&c.contract, &c.streams) {
        (Some(contract), _) => format!("{} ms delay, {}", c.work.delay.as_millis(), contract.call),
        (None, Some(s)) => format!("{} ms delay, {}", c.work.delay.as_millis(), stream_text(s, paged)),
        (None, None) => format!("{} ms delay, {} items", c.work.delay.as_millis(), c.work.items),
    };
    if !c.work.shape.is_order() {
        let _ = write!(t, " ({} shape)", c.work.shape);
    }
    if c.work.request_bytes > 0 {
        let _ = write!(t, ", {} B uploaded per call", c.work.request_bytes);
    }
    if c.deploy.target == TargetTier::Downstream {
        t.push_str(", straight to the downstream");
    }
    if c.work.fanout > 1 {
        let _ = write!(t, ", fan-out {}", c.work.fanout);
    }
    let r = &c.replicas;
    if r.downstream_replicas > 1 || r.balance != crate::config::Balance::None {
        let _ = write!(t, ", {} downstream replicas ({} balancing)", r.downstream_replicas, r.balance.as_str());
    }
    if let Some(age) = r.grpc_max_connection_age {
        let _ = write!(t, ", gRPC connections aged at {}", hd(age));
    }
    if let Some(label) = &c.output.label {
        let _ = write!(t, " ({label})");
    }
    t
}

/// One row of the configuration table.
pub type Row = (&'static str, String);

/// The rows every arm of a comparison shares: the load, the work and the
/// deployment, from the configuration.
pub fn shared_rows(c: &Config) -> Vec<Row> {
    let mut rows: Vec<Row> = vec![
        ("load", load_text(c)),
        (
            "target",
            match (&c.deploy.target, &c.deploy.downstream_url) {
                (TargetTier::Caller, _) => "caller (three tiers)".to_owned(),
                (_, Some(url)) => format!("downstream at {url} (two tiers, not started by the harness)"),
                (_, None) => "downstream (two tiers)".to_owned(),
            },
        ),
        ("rounds × duration", format!("{} × {}", c.load.rounds, hd(c.load.duration))),
        (
            "warm-up",
            if c.load.warmup_ramp.is_zero() {
                hd(c.load.warmup).to_string()
            } else {
                format!("{}, the rate rising from zero over the first {}", hd(c.load.warmup), hd(c.load.warmup_ramp))
            },
        ),
        ("service delay / jitter", format!("{} / {}", hd(c.work.delay), hd(c.work.jitter))),
        match (&c.contract, &c.streams) {
            (Some(contract), _) => ("method (your own contract)", contract.call.clone()),
            (None, Some(s)) => ("items per stream", s.items.to_string()),
            (None, None) => ("items per response", c.work.items.to_string()),
        },
        ("fan-out", c.work.fanout.to_string()),
        ("timeout", hd(c.load.timeout).to_string()),
        ("max in flight", c.load.max_in_flight.to_string()),
        (
            "front connections",
            if c.load.connections == 0 { "one per request in flight".into() } else { c.load.connections.to_string() },
        ),
        ("gRPC connections (caller)", c.hop.grpc_connections.to_string()),
        ("REST over HTTP/2", c.hop.rest_http2.to_string()),
        ("sample interval", hd(c.load.sample_interval).to_string()),
    ];
    // Rows added with the payload options appear only when set, so the
    // report of a default run keeps its shape.
    rows.extend(
        [
            (!c.work.shape.is_order()).then(|| ("record shape", c.work.shape.as_str().to_owned())),
            (c.work.request_bytes > 0)
                .then(|| ("request body bytes per downstream call", c.work.request_bytes.to_string())),
            c.load.load_threads.map(|n| ("harness runtime worker threads (--load-threads)", n.to_string())),
            (!c.load.send_precision.is_zero())
                .then(|| ("send precision (--send-precision)", hd(c.load.send_precision).to_string())),
            (c.deploy.huge_pages != Default::default()).then(|| {
                (
                    "transparent huge pages in the tiers (--huge-pages)",
                    "the machine's mode: resident sets in whole 2 MiB pages where the kernel grants them".to_owned(),
                )
            }),
            (c.replicas.downstream_replicas > 1 || c.replicas.balance != crate::config::Balance::None).then(|| {
                (
                    "downstream replicas",
                    format!("{}, reached by {}", c.replicas.downstream_replicas, c.replicas.balance.describe()),
                )
            }),
            c.replicas
                .grpc_max_connection_age
                .map(|d| ("gRPC max connection age (downstream)", format!("{} (±10%)", hd(d)))),
            c.replicas.replica_capacity.map(|n| ("replica capacity (requests in flight each)", n.to_string())),
            c.streams.as_ref().map(|s| ("item interval (downstream)", hd(s.interval).to_string())),
            c.streams.as_ref().map(|s| ("page size (paging arms)", s.page_size.to_string())),
            c.streams.as_ref().map(|s| ("consumer delay per item (harness)", hd(s.consumer_delay).to_string())),
        ]
        .into_iter()
        .flatten(),
    );
    rows
}

/// How one arm's internal hop carried its bytes, as its tiers reported it:
/// the client's protocol and encoding, TLS, compression. TLS and
/// compression rows appear when asked for or reported.
pub fn hop_rows(run: &RunResult) -> Vec<Row> {
    let client = run.tiers.get(&TierName::Caller).map(|t| &t.settings["client"]);
    let server = run.tiers.get(&TierName::Downstream).map(|t| &t.settings);
    let mut rows = Vec::new();
    if let Some(client) = client.filter(|c| c.is_object()) {
        let mut text = client["http_version"].as_str().unwrap_or("protocol not reported").to_owned();
        if let Some(encoding) = client["encoding"].as_str() {
            let _ = write!(text, ", {encoding}");
        }
        rows.push(("internal hop (as the caller reported it)", text));
    }
    rows.push(("internal hop framing", run.config.transport.framing().to_owned()));
    rows.extend(tls_text(run, client, server).map(|t| ("internal hop TLS", t)));
    rows.extend(compression_text(run.config.hop.compression, client, server).map(|t| ("internal hop compression", t)));
    rows.extend(crate::export::codec::json_codec_text(run).map(|t| ("internal hop JSON codec", t)));
    rows
}

/// What a contract's JSON sizes are, in the Contract section and README.
pub const JSON_SIZES: &str = "JSON sizes are those of the compact proto3 JSON mapping the tiers write and \
     send (no spaces, lowerCamelCase names, default values left out), whatever the data file's own spelling; \
     protobuf sizes are the messages' encoding.";

/// `## Contract`: the team's own method, the files it was compiled from
/// and the SHA-256 of what they compiled to, each side's data (its file
/// and SHA-256, or how it was generated), the REST route the REST arms
/// take, and its messages' sizes in both encodings. Empty for the built-in
/// contract.
pub fn contract_section(run: &RunResult) -> String {
    let Some(c) = &run.contract else { return String::new() };
    let mut out = String::from("\n## Contract\n\n");
    let _ = writeln!(
        out,
        "Every call is `{}` ({} → {}), compiled at run time from the files below. Call *n* sends request \
         *n* mod their count and is answered with answer *n* mod theirs. The messages are prost-reflect \
         dynamic messages on every tier, which cost more CPU than generated code: the built-in contract run \
         both ways (bench/README.md, \"Your own contract\") cost the caller about 3% more per request on gRPC \
         and 37% more on REST, the downstream 22% and 31% more. The CPU rows here include that cost, more on \
         REST's side; bytes, latency and memory do not depend on it. {JSON_SIZES}\n",
        c.method, c.request_message, c.response_message
    );
    let source = |m: &contract::MessagesReport| match &m.source {
        contract::Source::File { path, sha256 } => format!("{path} (SHA-256 `{sha256}`), {} messages", m.count),
        contract::Source::Generated { spec } => format!("generated from the schema (`{spec}`), {} messages", m.count),
    };
    let spread = |s: Option<contract::Spread>| {
        s.map_or_else(|| "not measured".to_owned(), |s| format!("{} / {} / {}", s.min, s.median, s.max))
    };
    let rows: Vec<Row> = vec![
        ("method", c.method.clone()),
        ("files", c.files.join(", ")),
        ("descriptor set SHA-256", format!("`{}`", c.descriptor_sha256)),
        ("REST route", c.rest_route.clone().unwrap_or_else(|| "not recorded (a run written before it was)".to_owned())),
        ("requests", source(&c.requests)),
        ("answers", source(&c.answers)),
        ("request bytes, protobuf (min / median / max)", spread(c.requests.protobuf_bytes)),
        ("request bytes, JSON (min / median / max)", spread(c.requests.json_bytes)),
        ("answer bytes, protobuf (min / median / max)", spread(c.answers.protobuf_bytes)),
        ("answer bytes, JSON (min / median / max)", spread(c.answers.json_bytes)),
    ];
    out.push_str(&table(&rows));
    out
}

/// One side of a contract's data in words: `name (8 messages, median
/// 2124 B protobuf / 6025.5 B JSON)`, `name` its file's (`whole_path`: as
/// given, else only its name) or how it was generated.
pub fn data_text(m: &contract::MessagesReport, whole_path: bool) -> String {
    let name = match &m.source {
        contract::Source::File { path, sha256 } if whole_path => format!("{path} (SHA-256 `{sha256}`)"),
        contract::Source::File { path, .. } => {
            std::path::Path::new(path).file_name().map_or(path.clone(), |n| n.to_string_lossy().into_owned())
        }
        contract::Source::Generated { spec } => format!("generated (`{spec}`)"),
    };
    let median = |s: Option<contract::Spread>| s.map_or_else(|| "not measured".to_owned(), |s| s.median.to_string());
    format!(
        "{name} ({} messages, median {} B protobuf / {} B JSON)",
        m.count,
        median(m.protobuf_bytes),
        median(m.json_bytes)
    )
}

/// What a run called, to tell two runs' contracts apart: the method, its
/// compiled descriptor set and each side's data (by content, not by path).
pub fn contract_identity(run: &RunResult) -> String {
    let Some(c) = &run.contract else { return "the built-in bench.v1.Downstream/Fetch".to_owned() };
    let data = |m: &contract::MessagesReport| match &m.source {
        contract::Source::File { sha256, .. } => format!("file SHA-256 {}", &sha256[..sha256.len().min(12)]),
        contract::Source::Generated { spec } => format!("generated ({spec})"),
    };
    let sha = &c.descriptor_sha256;
    format!(
        "{} (descriptor {}), requests {}, answers {}",
        c.method,
        &sha[..sha.len().min(12)],
        data(&c.requests),
        data(&c.answers)
    )
}

/// A table of `rows` under a `setting | value` header.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from("| setting | value |\n|---|---|\n");
    for (k, v) in rows {
        let _ = writeln!(out, "| {k} | {v} |");
    }
    out
}

/// The encoding a tier's `compression` setting names: `none` when it says
/// so, `None` when the tier did not report one.
fn reported_encoding(settings: Option<&Value>) -> Option<String> {
    match settings.map(|s| &s["compression"]) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(v) => v["encoding"].as_str().map(str::to_owned),
        None => None,
    }
}

/// `gzip (gRPC: grpc-encoding; …)` when both ends of the hop reported it;
/// what each end reported beside what was asked for when they differ;
/// `None` for an uncompressed hop that nothing contradicts.
fn compression_text(asked: Compression, client: Option<&Value>, server: Option<&Value>) -> Option<String> {
    let reported = [reported_encoding(client), reported_encoding(server)];
    let asked_name = asked.as_str();
    let agree = reported.iter().all(|r| r.as_deref() == Some(asked_name));
    // Off, as asked or as an older build that reports nothing: nothing to say.
    let off = reported.iter().all(|r| r.as_deref().is_none_or(|r| r == "none"));
    match (asked, agree) {
        (Compression::None, _) if off => return None,
        (_, true) => {
            return Some(format!(
                "{asked_name} (gRPC: grpc-encoding; REST: Content-Encoding; requests and responses, as both tiers \
                 reported); message bytes are the uncompressed payload, wire bytes what was sent"
            ));
        }
        _ => {}
    }
    let said = |r: &Option<String>| r.clone().unwrap_or_else(|| "not reported".to_owned());
    Some(format!(
        "asked for {asked_name}; the caller's client reported {}, the downstream {}",
        said(&reported[0]),
        said(&reported[1])
    ))
}

/// `mutual TLS (…): TLSv1.3 … ALPN h2; 2 handshakes inside the rounds (0
/// resumed, 0 failed)`, or `None` without TLS. The mode is what the
/// downstream's listener reported (client certificates required or not).
fn tls_text(run: &RunResult, client: Option<&Value>, server: Option<&Value>) -> Option<String> {
    let arm = run.config.transport.as_str();
    let listener = server.map(|s| &s["tls"]).filter(|t| t.is_object());
    let client_tls = client.map(|c| &c["tls"]).filter(|t| t.is_object());
    let asked = run.config.hop.tls;
    if asked == TlsMode::None && listener.is_none() && client_tls.is_none() {
        return None;
    }
    let mode = match listener.map(|l| &l[arm]["client_auth"]) {
        Some(Value::String(auth)) if auth.starts_with("required") => {
            "mutual TLS (server and client certificates from the run's CA)".to_owned()
        }
        Some(Value::String(_)) => "TLS (server certificate from the run's CA)".to_owned(),
        _ => format!("asked for {}; the downstream reported no TLS listener settings", asked.as_str()),
    };
    let tallies: Vec<_> = run.rounds.iter().filter_map(|r| r.bytes.internal.tls.as_ref()).collect();
    if tallies.is_empty() {
        return Some(format!("{mode}; negotiated parameters and handshakes not measured"));
    }
    let negotiated: BTreeSet<&str> = tallies.iter().flat_map(|t| t.negotiated.keys().map(String::as_str)).collect();
    let sum = |f: fn(&telemetry::TlsSnapshot) -> u64| tallies.iter().map(|t| f(t)).sum::<u64>();
    let (full, resumed, failed) =
        (sum(|t| t.handshakes_full), sum(|t| t.handshakes_resumed), sum(|t| t.handshakes_failed));
    let negotiated = if negotiated.is_empty() {
        "no handshake inside the rounds (connections made during warm-up)".to_owned()
    } else {
        negotiated.into_iter().collect::<Vec<_>>().join(", ")
    };
    Some(format!(
        "{mode}: {negotiated}; {} handshakes inside the rounds ({resumed} resumed, {failed} failed); wire bytes \
         include TLS records; certificates in `tls/`",
        full + resumed
    ))
}

#[cfg(test)]
mod tests {
    use caller::Transport;
    use serde_json::json;

    use super::*;

    fn with_settings(compression: Compression, caller: Value, downstream: Value) -> RunResult {
        let mut run = crate::testing::run(Transport::Grpc, 1.0);
        run.config.hop.compression = compression;
        run.tiers.get_mut(&TierName::Caller).unwrap().settings = json!({ "client": caller });
        run.tiers.get_mut(&TierName::Downstream).unwrap().settings = downstream;
        run
    }

    fn row<'a>(rows: &'a [Row], key: &str) -> Option<&'a str> {
        rows.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str())
    }

    #[test]
    fn compression_is_what_the_tiers_reported() {
        let gzip = json!({ "encoding": "gzip" });
        let run = with_settings(
            Compression::Gzip,
            json!({ "http_version": "HTTP/2 cleartext", "compression": gzip }),
            json!({ "compression": gzip }),
        );
        let rows = hop_rows(&run);
        assert!(row(&rows, "internal hop compression").unwrap().starts_with("gzip ("), "{rows:?}");
        assert_eq!(row(&rows, "internal hop (as the caller reported it)"), Some("HTTP/2 cleartext"));

        // Asked for, but a tier served without it: the report says so.
        let run = with_settings(Compression::Gzip, json!({ "compression": gzip }), json!({ "compression": "none" }));
        let text = row(&hop_rows(&run), "internal hop compression").unwrap().to_owned();
        assert_eq!(text, "asked for gzip; the caller's client reported gzip, the downstream none");

        // Nothing asked, nothing reported: no row, as before compression existed.
        let run = with_settings(Compression::None, json!({ "compression": "none" }), json!({}));
        assert_eq!(row(&hop_rows(&run), "internal hop compression"), None);
    }

    #[test]
    fn tls_mode_is_the_listeners() {
        let run = with_settings(
            Compression::None,
            json!({ "tls": { "alpn": "h2" } }),
            json!({ "tls": { "grpc": { "client_auth": "required (mTLS)" } } }),
        );
        let rows = hop_rows(&run);
        assert!(row(&rows, "internal hop TLS").unwrap().starts_with("mutual TLS"), "{rows:?}");
        let run = with_settings(Compression::None, json!({}), json!({}));
        assert_eq!(row(&hop_rows(&run), "internal hop TLS"), None);
    }

    #[test]
    fn a_closed_loop_states_its_connections_never_a_rate() {
        let mut run = crate::testing::run(Transport::Rest, 1.0);
        run.config.load.closed_loop = true;
        run.config.load.qps = 0.0;
        run.config.load.connections = 8;
        assert_eq!(load_text(&run.config), "closed loop over 8 connections");
        assert!(title(&run).starts_with("REST at closed loop over 8 connections, "), "{}", title(&run));
        assert!(!table(&shared_rows(&run.config)).contains("req/s"));
    }

    #[test]
    fn the_contract_section_names_the_rest_route_and_what_json_sizes_are() {
        let side = |spec: &str| contract::MessagesReport {
            source: contract::Source::Generated { spec: spec.to_owned() },
            count: 1,
            protobuf_bytes: Some(contract::Spread { min: 5, median: 5.0, max: 5 }),
            json_bytes: Some(contract::Spread { min: 9, median: 9.0, max: 9 }),
        };
        let mut run = crate::testing::run(Transport::Rest, 1.0);
        run.contract = Some(contract::Report {
            method: "shop.v1.Orders/Get".to_owned(),
            request_message: "shop.v1.GetOrder".to_owned(),
            response_message: "shop.v1.Order".to_owned(),
            files: vec!["/api/shop.proto".to_owned()],
            descriptor_sha256: "ab".repeat(32),
            rest_route: Some("GET /v1/orders/{id} (google.api.http, no body); REST+protobuf: POST /v1/x".to_owned()),
            requests: side("count=1"),
            answers: side("count=2"),
        });
        let text = contract_section(&run);
        assert!(
            text.contains("| REST route | GET /v1/orders/{id} (google.api.http, no body); REST+protobuf: POST /v1/x |"),
            "{text}"
        );
        assert!(text.contains(JSON_SIZES) && JSON_SIZES.contains("whatever the data file's own spelling"), "{text}");
        // A run written before the route was recorded says so, never a blank.
        run.contract.as_mut().unwrap().rest_route = None;
        assert!(contract_section(&run).contains("| REST route | not recorded"), "{}", contract_section(&run));
    }
}
