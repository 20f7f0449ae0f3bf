//! Pass/fail gates for CI (`--fail-if`, `--fail-on-invalid`): a small
//! grammar, parsed before anything starts, and evaluated on the finished
//! runs. Pure: text and results in, breach lines out.
//!
//! ```text
//! gate    = subject op bound
//! subject = [arm "."] key         arm: grpc | rest | rest-pb | grpc-json; without one, every arm measured
//! op      = "<" | "<=" | ">" | ">="
//! bound   = number [unit]         unit: us | ms | s, on latency keys only (default ms)
//!         | [number "*"] arm      the same key on that arm, times the number
//! ```
//!
//! `key` is a report row's key (`p99`, `throughput`, `errors`,
//! `cpu_us_per_request.caller`, `internal.response_wire_bytes`, …; README
//! lists them), its value the mean over the arm's rounds. A gate is breached
//! when its comparison holds: `--fail-if 'p99>505ms'` fails a run whose p99
//! is over 505 ms.

use caller::Transport;

use super::metrics::{Metric, by_key};
use super::stats::mean;
use crate::result::RunResult;

/// A comparison in a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn holds(self, x: f64, y: f64) -> bool {
        match self {
            Op::Lt => x < y,
            Op::Le => x <= y,
            Op::Gt => x > y,
            Op::Ge => x >= y,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// What a subject is compared with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// A number in the metric's unit.
    Value(f64),
    /// `factor` times the same key on `arm`.
    Arm { factor: f64, arm: Transport },
}

/// One parsed `--fail-if`.
#[derive(Debug, Clone)]
pub struct Gate {
    pub text: String,
    pub arm: Option<Transport>,
    pub metric: &'static Metric,
    pub op: Op,
    pub bound: Bound,
}

/// Bad gate text: the token at fault and what would be right.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--fail-if {text:?}: bad token {token:?}: {problem}")]
pub struct GateError {
    pub text: String,
    pub token: String,
    pub problem: String,
}

fn arm_of(word: &str) -> Option<Transport> {
    Transport::from_name(word)
}

/// Every arm's name, for a message: `grpc, rest, rest-pb or grpc-json`.
fn arm_names() -> String {
    let names: Vec<&str> = Transport::ALL.iter().chain(&Transport::STREAMING).map(|t| t.as_str()).collect();
    let (last, rest) = names.split_last().unwrap_or((&"", &[]));
    format!("{} or {last}", rest.join(", "))
}

/// Splits gate text into words, numbers (with their unit), operators and `*`.
fn tokens(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '<' | '>' => {
                let mut t = c.to_string();
                if chars.peek() == Some(&'=') {
                    t.push('=');
                    chars.next();
                }
                out.push(t);
            }
            c if c.is_ascii_alphanumeric() || "._%".contains(c) => {
                // A hyphen inside a word belongs to it (`rest-pb`, `grpc-json`).
                let mut t = c.to_string();
                while let Some(&d) = chars.peek().filter(|d| d.is_ascii_alphanumeric() || "._%-".contains(**d)) {
                    t.push(d);
                    chars.next();
                }
                out.push(t);
            }
            other => out.push(other.to_string()),
        }
    }
    out
}

/// Parses one gate; the error names the first token that does not fit.
pub fn parse(text: &str) -> Result<Gate, GateError> {
    let err = |token: &str, problem: &str| GateError {
        text: text.to_owned(),
        token: token.to_owned(),
        problem: problem.to_owned(),
    };
    let t = tokens(text);
    let subject = t.first().ok_or_else(|| err("", "empty; e.g. --fail-if 'p99>505ms'"))?;
    let (arm, key) = match subject.split_once('.') {
        Some((a, k)) if arm_of(a).is_some() => (arm_of(a), k),
        _ => (None, subject.as_str()),
    };
    let metric = by_key(key)
        .ok_or_else(|| err(subject, "not a metric key (docs/comparing.md, \"Gates for CI\", lists them)"))?;
    let op_token = t.get(1).map_or("", String::as_str);
    let op = match op_token {
        "<" => Op::Lt,
        "<=" => Op::Le,
        ">" => Op::Gt,
        ">=" => Op::Ge,
        _ => return Err(err(op_token, "expected <, <=, > or >=")),
    };
    let rest: Vec<&str> = t[2..].iter().map(String::as_str).collect();
    let bound = match rest.as_slice() {
        [a] if arm_of(a).is_some() => Bound::Arm { factor: 1.0, arm: arm_of(a).unwrap_or(Transport::Grpc) },
        [n, "*", a] => {
            let factor = n.parse::<f64>().map_err(|_| err(n, "expected a number before '*'"))?;
            let arm = arm_of(a).ok_or_else(|| err(a, &format!("expected {} after '*'", arm_names())))?;
            Bound::Arm { factor, arm }
        }
        [v] => Bound::Value(value(v, metric).map_err(|p| err(v, &p))?),
        [] => return Err(err("", "expected a bound after the comparison; e.g. 505ms or 1.2 * grpc")),
        [_, extra, ..] => {
            return Err(err(extra, &format!("unexpected; a bound is a number or [number *] an arm ({})", arm_names())));
        }
    };
    Ok(Gate { text: text.to_owned(), arm, metric, op, bound })
}

/// A number with an optional time unit, in the metric's unit.
fn value(token: &str, metric: &Metric) -> Result<f64, String> {
    let split = token.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(token.len());
    let (n, unit) = token.split_at(split);
    let n: f64 = n.parse().map_err(|_| format!("expected a number or an arm ({})", arm_names()))?;
    let scale = match (unit, metric.is_latency()) {
        ("", _) => 1.0,
        ("us" | "µs", true) => 0.001,
        ("ms", true) => 1.0,
        ("s", true) => 1000.0,
        (_, true) => return Err("the unit must be us, ms or s".into()),
        (_, false) => return Err(format!("{} takes a plain number, no unit", metric.key)),
    };
    Ok(n * scale)
}

/// Checks that every arm a gate names is among `arms`.
pub fn check_arms(gate: &Gate, arms: &[Transport]) -> Result<(), GateError> {
    let named = [gate.arm, if let Bound::Arm { arm, .. } = gate.bound { Some(arm) } else { None }];
    for arm in named.into_iter().flatten() {
        if !arms.contains(&arm) {
            return Err(GateError {
                text: gate.text.clone(),
                token: arm.as_str().to_owned(),
                problem: "this run does not measure that transport".into(),
            });
        }
    }
    Ok(())
}

fn value_of(m: &Metric, run: &RunResult) -> Option<f64> {
    mean(run.rounds.iter().filter_map(|r| (m.get)(r)))
}

/// One line per breached gate and arm.
pub fn breaches(gates: &[Gate], runs: &[(&str, &RunResult)]) -> Vec<String> {
    let mut out = Vec::new();
    for g in gates {
        let m = g.metric;
        for (name, run) in runs.iter().filter(|(_, r)| g.arm.is_none_or(|a| r.config.transport == a)) {
            let bound = match g.bound {
                Bound::Value(v) => Some(v),
                Bound::Arm { factor, arm } => runs
                    .iter()
                    .find(|(_, r)| r.config.transport == arm)
                    .and_then(|(_, r)| value_of(m, r))
                    .map(|v| factor * v),
            };
            let line = match (value_of(m, run), bound) {
                (Some(x), Some(y)) if g.op.holds(x, y) => {
                    format!("gate breached: {}: {name} {} = {x:.3} {} {y:.3}", g.text, m.key, g.op.as_str())
                }
                (Some(_), Some(_)) => continue,
                _ => format!("gate breached: {}: {name} {} could not be measured", g.text, m.key),
            };
            out.push(line);
        }
    }
    out
}

/// One line per arm that was not a valid measurement (`--fail-on-invalid`).
pub fn invalid(runs: &[(&str, &RunResult)]) -> Vec<String> {
    runs.iter()
        .filter(|(_, r)| !r.is_valid())
        .map(|(name, r)| {
            format!("gate breached: --fail-on-invalid: {name} is not a valid measurement: {}", r.validity.join("; "))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn the_grammar_reads_values_units_and_arms() {
        let g = parse("p99>505ms").unwrap();
        assert_eq!((g.arm, g.metric.key, g.op, g.bound), (None, "p99", Op::Gt, Bound::Value(505.0)));
        assert_eq!(parse("p99 >= 0.5s").unwrap().bound, Bound::Value(500.0));
        assert_eq!(parse("grpc.p50<900us").unwrap().bound, Bound::Value(0.9));
        let g = parse("rest.cpu_us_per_request.caller > 1.2 * grpc").unwrap();
        assert_eq!(g.arm, Some(Transport::Rest));
        assert_eq!(g.metric.key, "cpu_us_per_request.caller");
        assert_eq!(g.bound, Bound::Arm { factor: 1.2, arm: Transport::Grpc });
        assert_eq!(parse("throughput < rest").unwrap().bound, Bound::Arm { factor: 1.0, arm: Transport::Rest });
        assert_eq!(parse("errors<=0").unwrap().op, Op::Le);
    }

    #[test]
    fn every_arm_can_be_named_on_either_side() {
        for arm in Transport::ALL {
            let a = arm.as_str();
            let g = parse(&format!("{a}.p99>1")).unwrap_or_else(|e| panic!("{a}: {e}"));
            assert_eq!((g.arm, g.metric.key, g.bound), (Some(arm), "p99", Bound::Value(1.0)), "{a}");
            let g = parse(&format!("grpc.cpu_us_per_request.caller < 1.5*{a}")).unwrap();
            assert_eq!(g.bound, Bound::Arm { factor: 1.5, arm }, "{a}");
            assert_eq!(parse(&format!("throughput >= {a}")).unwrap().bound, Bound::Arm { factor: 1.0, arm });
        }
        // Every row key of the report, on the newest arm.
        for m in crate::judge::metrics::metrics() {
            let g = parse(&format!("grpc-json.{}>=0", m.key)).unwrap_or_else(|e| panic!("{}: {e}", m.key));
            assert_eq!((g.arm, g.metric.key), (Some(Transport::GrpcJson), m.key));
        }
        let (mut g, mut r) = testing::both(3, 1.0, 1.5);
        g.config.transport = Transport::RestPb;
        r.config.transport = Transport::GrpcJson;
        let runs = [("REST+protobuf", &g), ("gRPC+JSON", &r)];
        let line = breaches(&[parse("grpc-json.cpu_us_per_request.caller > 1.2 * rest-pb").unwrap()], &runs);
        assert_eq!(line.len(), 1, "{line:?}");
        assert!(check_arms(&parse("rest-pb.p99>1").unwrap(), &[Transport::Grpc]).is_err());
    }

    #[test]
    fn a_streaming_arm_is_gated_on_its_per_item_rows() {
        let g = parse("grpc-stream.first_item_p99>50ms").unwrap();
        assert_eq!((g.arm, g.metric.key, g.bound), (Some(Transport::GrpcStream), "first_item_p99", Bound::Value(50.0)));
        let mut run = testing::run(Transport::GrpcStream, 1.0);
        let summary = run.rounds[0].latency.corrected.clone().unwrap();
        let first = |p99_ms: f64| crate::result::Summary { p99_ms, ..summary.clone() };
        run.rounds[0].stream = Some(crate::result::StreamRound { first_item: Some(first(60.0)), ..Default::default() });
        let line = breaches(std::slice::from_ref(&g), &[("gRPC stream", &run)]);
        assert_eq!(line.len(), 1, "{line:?}");
        run.rounds[0].stream = Some(crate::result::StreamRound { first_item: Some(first(40.0)), ..Default::default() });
        assert!(breaches(&[g], &[("gRPC stream", &run)]).is_empty());
        // A unary run has no first item: the figure was not measured, which breaches.
        let unary = testing::run(Transport::Grpc, 1.0);
        assert_eq!(breaches(&[parse("first_item_p99>50ms").unwrap()], &[("gRPC", &unary)]).len(), 1);
    }

    #[test]
    fn bad_syntax_names_the_token() {
        for (text, token) in [
            ("p98>5ms", "p98"),
            ("p99=5ms", "="),
            ("p99>5parsecs", "5parsecs"),
            ("throughput>5ms", "5ms"),
            ("p99>", ""),
            ("rest.p99 > 1.2 * soap", "soap"),
            ("p99 > 5ms 6ms", "6ms"),
            ("", ""),
        ] {
            assert_eq!(parse(text).unwrap_err().token, token, "{text}");
        }
        let g = parse("rest.p99>grpc").unwrap();
        assert_eq!(check_arms(&g, &[Transport::Grpc]).unwrap_err().token, "rest");
        assert!(check_arms(&g, &[Transport::Grpc, Transport::Rest]).is_ok());
    }

    #[test]
    fn breaches_are_one_line_per_gate_and_arm() {
        let (g, r) = testing::both(3, 1.0, 1.5);
        let runs = [("gRPC", &g), ("REST", &r)];
        let gates = |text: &str| breaches(&[parse(text).unwrap()], &runs);
        // Latency is about 500.8 ms on both arms.
        assert_eq!(gates("p99>505ms"), Vec::<String>::new());
        assert_eq!(gates("p99>500ms").len(), 2);
        let line = gates("rest.cpu_us_per_request.caller > 1.2 * grpc");
        assert_eq!(line.len(), 1);
        assert!(line[0].starts_with("gate breached: rest.cpu_us_per_request.caller > 1.2 * grpc: REST "), "{line:?}");
        assert!(gates("rest.cpu_us_per_request.caller > 2 * grpc").is_empty());
        assert_eq!(
            gates("send_lag_p99 < 1s"),
            [
                "gate breached: send_lag_p99 < 1s: gRPC send_lag_p99 could not be measured",
                "gate breached: send_lag_p99 < 1s: REST send_lag_p99 could not be measured"
            ]
        );
        // REST at 1.5 times the costs sustains two thirds of the target: not valid.
        let invalid = invalid(&runs);
        assert_eq!(invalid.len(), 1);
        assert!(
            invalid[0]
                .starts_with("gate breached: --fail-on-invalid: REST is not a valid measurement: round 1: achieved")
        );
    }
}
