//! The JSON codec row of a run's setup: the codec asked for
//! (`--json-codec`), what each end of the hop reported using, and whether
//! the codecs write this run's own sample answer byte for byte as
//! `serde_json` does (computed here from the run's configuration, so a
//! difference in key order, number formatting or escapes is said, never
//! assumed).

use serde_json::Value;

use crate::result::RunResult;

/// The codec a tier's settings name (`json_codec.name`), if it reported one.
fn reported(settings: Option<&Value>) -> Option<&str> {
    settings?["json_codec"]["name"].as_str()
}

/// `sonic-rs at both ends (as both tiers reported); on this run's sample
/// answer (10 records, 2467 B with serde_json) every codec writes
/// serde_json's bytes`. `None` for an arm whose hop carries no JSON and for
/// which no other codec than serde_json was asked.
pub fn json_codec_text(run: &RunResult) -> Option<String> {
    let caller = run.tiers.get(&crate::result::TierName::Caller).map(|t| &t.settings["client"]);
    let downstream = run.tiers.get(&crate::result::TierName::Downstream).map(|t| &t.settings);
    let asked = run.config.hop.json_codec;
    let client = reported(caller);
    if client.is_none() && asked == payload::JsonCodec::default() {
        return None;
    }
    let server = reported(downstream);
    let mut text = if client == Some(asked.as_str()) && server == Some(asked.as_str()) {
        format!("{asked} at both ends of the hop (as both tiers reported; the front door stays serde_json)")
    } else {
        let said = |r: Option<&str>| r.unwrap_or("nothing").to_owned();
        format!("asked for {asked}; the caller's client reported {}, the downstream {}", said(client), said(server))
    };
    if let Some(sample) = sample_agreement(run) {
        text.push_str("; ");
        text.push_str(&sample);
    }
    Some(text)
}

/// How every codec writes the run's own sample answer (the built-in
/// contract's, at the run's items and shape) against serde_json; `None`
/// for a team's own contract or a streaming arm, whose sample is not
/// rebuilt here.
pub fn sample_agreement(run: &RunResult) -> Option<String> {
    let c = &run.config;
    if c.contract.is_some() || c.streams.is_some() {
        return None;
    }
    let req = payload::FetchRequest {
        request_id: "sample-1".to_owned(),
        items: c.work.items,
        shape: c.work.shape,
        ..Default::default()
    };
    let answer = payload::respond(&req);
    let agreements = payload::json::compare(&answer);
    let size = agreements.first().and_then(|a| a.bytes).unwrap_or(0);
    let what = format!("on this run's sample answer ({} items, {size} B with serde_json)", c.work.items);
    let differing: Vec<String> = agreements
        .iter()
        .filter_map(|a| a.differs.as_ref().map(|d| format!("{} writes other bytes ({d})", a.codec)))
        .collect();
    Some(if differing.is_empty() {
        format!("{what} every codec writes serde_json's bytes, so message bytes compare across codecs")
    } else {
        format!("{what} {}", differing.join("; "))
    })
}

#[cfg(test)]
mod tests {
    use caller::Transport;
    use serde_json::json;

    use super::*;
    use crate::result::TierName;
    use crate::testing;

    fn run_with(asked: payload::JsonCodec, caller: Value, downstream: Value) -> RunResult {
        let mut run = testing::run(Transport::Rest, 1.0);
        run.config.hop.json_codec = asked;
        run.tiers.get_mut(&TierName::Caller).unwrap().settings = json!({ "client": caller });
        run.tiers.get_mut(&TierName::Downstream).unwrap().settings = downstream;
        run
    }

    #[test]
    fn the_row_says_what_both_ends_reported_and_how_the_sample_compares() {
        let sonic = json!({ "json_codec": { "name": "sonic-rs", "library": "sonic-rs 0.5" } });
        let run = run_with(payload::JsonCodec::SonicRs, sonic.clone(), sonic);
        let text = json_codec_text(&run).unwrap();
        assert!(text.starts_with("sonic-rs at both ends"), "{text}");
        assert!(text.contains("every codec writes serde_json's bytes"), "{text}");
        assert!(text.contains(&format!("({} items,", run.config.work.items)), "{text}");

        let run = run_with(payload::JsonCodec::SimdJson, json!({}), json!({}));
        let text = json_codec_text(&run).unwrap();
        assert!(text.starts_with("asked for simd-json; the caller's client reported nothing"), "{text}");
    }

    #[test]
    fn a_protobuf_arm_on_the_default_codec_has_no_row() {
        let run = run_with(payload::JsonCodec::SerdeJson, json!({ "encoding": "application/grpc" }), json!({}));
        assert_eq!(json_codec_text(&run), None);
    }
}
