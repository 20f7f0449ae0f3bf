//! The arms of a run: `--transport` (which internal-hop transports are
//! measured, in the order of their first round) and `--baseline` (the arm
//! every other is judged against). The caller of each arm is told its
//! transport (`Config::tier_flags`).

use caller::Transport;
use clap::Args;

use super::{ConfigError, Flags, bad};

/// Rounds of a run that compares arms when `--rounds` is not given: enough
/// for a confidence interval (`judge::inference::MIN_ROUNDS`).
pub const DEFAULT_COMPARED_ROUNDS: u32 = 3;

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Arms (docs/comparing.md)")]
pub struct ArmsArgs {
    /// Transport of the internal hop (caller → downstream).
    ///
    /// grpc, rest, rest-pb (protobuf bodies over REST's HTTP/1.1), grpc-json (REST's JSON over gRPC), connect and
    /// connect-pb (Connect's unary protocol, JSON or protobuf bodies), grpc-web (gRPC-Web over HTTP/1.1), or a
    /// list of arms (grpc,rest,rest-pb,grpc-json) measured with the same configuration in counterbalanced
    /// rounds and compared; `both` is grpc,rest; `grpc,grpc` or `rest,rest` runs one transport as two arms
    /// (an A/A check: how often the comparison calls a difference that is not there).
    #[arg(long, value_parser = parse_transport, default_value = "grpc")]
    pub transport: TransportArg,
    /// The arm every other arm is judged against (default: the first of --transport).
    ///
    /// It must be one of the arms.
    #[arg(long, value_parser = parse_baseline)]
    pub baseline: Option<Transport>,
}

/// Which transports a run measures, in the order of their first round:
/// one arm, `both` (gRPC and REST), an A/A pair of one transport, or a list of
/// distinct arms (`grpc,rest,rest-pb,grpc-json`), each on fresh tier
/// processes, rounds counterbalanced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportArg(Vec<Transport>);

impl TransportArg {
    /// The arms, in the order of their first round.
    pub fn arms(&self) -> Vec<Transport> {
        self.0.clone()
    }

    /// The value of `--transport` that gives these arms.
    pub fn from_arms(arms: &[Transport]) -> Option<TransportArg> {
        let distinct = arms.iter().enumerate().all(|(i, a)| !arms[..i].contains(a));
        let a_a = matches!(arms, [a, b] if a == b);
        (!arms.is_empty() && (distinct || a_a)).then(|| TransportArg(arms.to_vec()))
    }

    pub fn as_arg(&self) -> String {
        match self.0.as_slice() {
            [Transport::Grpc, Transport::Rest] => "both".into(),
            arms => arms.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(","),
        }
    }

    /// True for an A/A pair (one transport as two arms).
    pub fn is_a_a(&self) -> bool {
        matches!(self.0.as_slice(), [a, b] if a == b)
    }
}

/// `--transport`: one arm (`grpc`, `rest`, `rest-pb`, `grpc-json`), `both`
/// (= `grpc,rest`), a list of distinct arms, or an A/A pair `grpc,grpc`.
pub(super) fn parse_transport(text: &str) -> Result<TransportArg, String> {
    let text = text.trim();
    let names = if text == "both" { "grpc,rest" } else { text };
    let arms = names
        .split(',')
        .map(|name| {
            Transport::from_name(name.trim()).ok_or_else(|| {
                format!(
                    "{:?} in {text:?} is not an arm{}: use grpc, rest, rest-pb (protobuf over HTTP/1.1), grpc-json \
                     (JSON over gRPC), connect, connect-pb (Connect unary), grpc-web, both (= grpc,rest), a list such as grpc,rest,rest-pb,grpc-json, \
                     grpc,grpc / rest,rest for an A/A check of the statistics, or the streaming arms \
                     grpc-stream, grpc-pages, rest-pages, rest-ndjson, rest-sse, connect-stream",
                    name.trim(),
                    did_you_mean(name.trim())
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    TransportArg::from_arms(&arms).ok_or_else(|| {
        format!("{text:?} names an arm twice: list distinct arms, or exactly two of one (grpc,grpc) for an A/A check")
    })
}

/// ` (did you mean grpc?)` for a name one or two edits from an arm's (or
/// `both`), else nothing.
fn did_you_mean(name: &str) -> String {
    let names = Transport::ALL.iter().chain(&Transport::STREAMING).map(|t| t.as_str()).chain(["both"]);
    let nearest = names.map(|n| (edits(name, n), n)).min();
    match nearest {
        Some((d, n)) if d <= 2 && d < name.len() => format!(" (did you mean {n}?)"),
        _ => String::new(),
    }
}

/// The Levenshtein distance between `a` and `b`, counting a swap of two
/// neighbours (`grcp` for `grpc`) as one edit.
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    d[0] = (0..=b.len()).collect();
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

/// `--baseline`: an arm's name.
fn parse_baseline(text: &str) -> Result<Transport, String> {
    Transport::from_name(text.trim()).ok_or_else(|| {
        format!(
            "{text:?}{}: use grpc, rest, rest-pb, grpc-json, connect, connect-pb, grpc-web or a streaming arm (grpc-stream, rest-pages, …)",
            did_you_mean(text.trim())
        )
    })
}

impl ArmsArgs {
    /// The arms, and the baseline to record (see `recorded_baseline`);
    /// `sweep`: the run has several rates or payload sizes.
    pub fn check(&self, sweep: bool) -> Result<(Vec<Transport>, Option<Transport>), ConfigError> {
        let arms = self.transport.arms();
        if self.transport.is_a_a() && sweep {
            return Err(bad("--transport", "an A/A pair (grpc,grpc or rest,rest) goes with one rate, not a sweep"));
        }
        let baseline = match self.baseline {
            Some(b) if !arms.contains(&b) => {
                return Err(bad(
                    "--baseline",
                    format!("{b} is not one of the arms of --transport {}", self.transport.as_arg()),
                ));
            }
            Some(b) => b,
            None => arms[0],
        };
        let recorded = if arms.len() > 1 { super::recorded_baseline(&arms, baseline) } else { None };
        Ok((arms, recorded))
    }
}

/// The arms' part of the command line `harness rerun` replays.
pub fn replay(transport: &TransportArg, baseline: Option<Transport>, flags: &mut Flags) {
    flags.flag("--transport", transport.as_arg());
    if let Some(b) = baseline {
        flags.flag("--baseline", b.as_str());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_arm_gets_the_nearest_name() {
        let e = parse_transport("grcp").unwrap_err();
        assert!(e.starts_with("\"grcp\" in \"grcp\" is not an arm (did you mean grpc?): use grpc"), "{e}");
        assert!(parse_transport("grpc,rset").unwrap_err().contains("did you mean rest?"));
        assert!(parse_transport("bothh").unwrap_err().contains("did you mean both?"));
        assert!(!parse_transport("soap").unwrap_err().contains("did you mean"));
        assert!(parse_baseline("rest-pd").unwrap_err().starts_with("\"rest-pd\" (did you mean rest-pb?): use"));
        assert_eq!(edits("grcp", "grpc"), 1);
        assert_eq!(edits("", "rest"), 4);
    }
}
