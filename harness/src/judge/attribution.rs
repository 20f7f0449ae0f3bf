//! Attribution over the 2×2 of encoding × transport: of the difference
//! between REST (JSON over HTTP/1.1) and gRPC (protobuf over gRPC/HTTP/2),
//! how much comes from the encoding and how much from the transport, measured
//! with the two arms that cross them: `rest-pb` (protobuf over HTTP/1.1) and
//! `grpc-json` (JSON over gRPC). The same square is drawn with Connect in
//! REST's place ([`SQUARES`]): `connect` and `connect-pb` against `grpc` and
//! `grpc-json` split Connect − gRPC into encoding and protocol.
//!
//! Per round k, with G, R, P, J the gRPC, REST, rest-pb and grpc-json figures
//! (R and P: Connect and Connect+protobuf in the Connect square):
//!
//! * encoding effect  E_k = ((R − P) + (J − G)) / 2: JSON instead of protobuf,
//!   averaged over the two transports;
//! * transport effect T_k = ((R − J) + (P − G)) / 2: HTTP/1.1 instead of gRPC,
//!   averaged over the two encodings;
//! * E_k + T_k = R_k − G_k exactly; the interaction
//!   I_k = (R − P) − (J − G) says how far the encoding's effect depends on the
//!   transport (zero when the two add up independently).
//!
//! Each is a 95% t interval of the mean over the rounds all four arms
//! completed (the same round index of every arm: counterbalanced rounds make
//! them pairs), as the comparison's paired t does for one difference.

use super::inference::{Interval, paired_t};
use super::metrics::by_key;
use crate::result::{RoundResult, RunResult};
use caller::Transport;

/// One square of the 2×2: the arm that differs from gRPC in both encoding
/// and transport (`json`), and its protobuf twin (`protobuf`); gRPC and
/// gRPC+JSON are the other two corners of every square.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Square {
    pub json: Transport,
    pub protobuf: Transport,
    /// What the transport side is, in words (`HTTP/1.1`, `the Connect protocol`).
    pub transport: &'static str,
}

/// The squares drawn where their four arms ran: REST's, then Connect's.
pub const SQUARES: [Square; 2] = [
    Square { json: Transport::Rest, protobuf: Transport::RestPb, transport: "HTTP/1.1" },
    Square { json: Transport::Connect, protobuf: Transport::ConnectPb, transport: "the Connect protocol" },
];

/// One figure split between encoding and transport (REST − gRPC, or
/// Connect − gRPC).
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    pub square: Square,
    pub label: &'static str,
    pub unit: &'static str,
    pub decimals: usize,
    /// gRPC's mean, the base of the shares.
    pub grpc_mean: f64,
    pub total: Interval,
    pub encoding: Interval,
    pub transport: Interval,
    pub interaction: Interval,
    /// Rounds used.
    pub rounds: usize,
}

impl Split {
    /// The encoding's share of the total difference, in percent (the
    /// transport's is 100 minus it); `None` unless the total difference is
    /// detectable (its interval excludes zero): a share of a difference that
    /// may be nothing means nothing.
    pub fn encoding_share(&self) -> Option<f64> {
        self.total.excludes_zero().then(|| self.encoding.estimate / self.total.estimate * 100.0)
    }
}

/// The figures split, by how they are read from a round.
type Read = fn(&RoundResult) -> Option<f64>;

fn wire_bytes(r: &RoundResult) -> Option<f64> {
    let i = &r.bytes.internal;
    Some(i.request_wire_bytes_per_request? + i.response_wire_bytes_per_request?)
}

fn metric(key: &str) -> Read {
    by_key(key).map_or(|_| None, |m| m.get)
}

/// The four arms of `square` among `runs`, each exactly once, as (G, R, P, J).
pub fn four_arms<'a>(runs: &[&'a RunResult], square: &Square) -> Option<[&'a RunResult; 4]> {
    let one = |t: Transport| {
        let mut of = runs.iter().filter(|r| r.config.transport == t);
        match (of.next(), of.next()) {
            (Some(r), None) => Some(*r),
            _ => None,
        }
    };
    Some([one(Transport::Grpc)?, one(square.json)?, one(square.protobuf)?, one(Transport::GrpcJson)?])
}

/// The split of internal-hop wire bytes per request and of the caller's and
/// the downstream's CPU µs per request, where the four arms ran; empty
/// otherwise. A figure with under two rounds of all four arms is left out.
pub fn attribute(runs: &[&RunResult]) -> Vec<Split> {
    let figures: [(&'static str, &'static str, usize, Read); 3] = [
        ("internal hop wire bytes per request (both directions)", "B", 0, wire_bytes),
        ("caller CPU per request", "µs", 1, metric("cpu_us_per_request.caller")),
        ("downstream CPU per request", "µs", 1, metric("cpu_us_per_request.downstream")),
    ];
    SQUARES
        .iter()
        .filter_map(|square| Some((square, four_arms(runs, square)?)))
        .flat_map(|(square, arms)| {
            figures.into_iter().filter_map(move |(label, unit, decimals, read)| {
                split(&arms, label, unit, decimals, read).map(|s| Split { square: *square, ..s })
            })
        })
        .collect()
}

/// Per round index: the four arms' figures, where every arm completed that
/// round and has the figure.
fn per_round(arms: &[&RunResult; 4], read: Read) -> Vec<[f64; 4]> {
    fn round(run: &RunResult, index: u32) -> Option<&RoundResult> {
        run.rounds.iter().find(|r| r.index == index && r.complete)
    }
    arms[0]
        .rounds
        .iter()
        .filter_map(|r0| {
            let mut v = [0.0; 4];
            for (slot, run) in v.iter_mut().zip(arms) {
                *slot = read(round(run, r0.index)?)?;
            }
            Some(v)
        })
        .collect()
}

fn split(
    arms: &[&RunResult; 4],
    label: &'static str,
    unit: &'static str,
    decimals: usize,
    read: Read,
) -> Option<Split> {
    let rounds = per_round(arms, read);
    let of = |f: fn(&[f64; 4]) -> f64| -> Option<Interval> {
        let v: Vec<f64> = rounds.iter().map(f).collect();
        paired_t(&vec![0.0; v.len()], &v)
    };
    Some(Split {
        square: SQUARES[0],
        label,
        unit,
        decimals,
        grpc_mean: rounds.iter().map(|v| v[0]).sum::<f64>() / rounds.len().max(1) as f64,
        total: of(|[g, r, _, _]| r - g)?,
        encoding: of(|[g, r, p, j]| ((r - p) + (j - g)) / 2.0)?,
        transport: of(|[g, r, p, j]| ((r - j) + (p - g)) / 2.0)?,
        interaction: of(|[g, r, p, j]| (r - p) - (j - g))?,
        rounds: rounds.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    /// Four arms whose rounds carry wire bytes built from a known split:
    /// gRPC `base`, plus `enc` for JSON, plus `tr` for HTTP/1.1, plus noise.
    fn arms(base: f64, enc: f64, tr: f64, noise: &[f64]) -> Vec<RunResult> {
        let cells = [
            (Transport::Grpc, 0.0, 0.0),
            (Transport::Rest, 1.0, 1.0),
            (Transport::RestPb, 0.0, 1.0),
            (Transport::GrpcJson, 1.0, 0.0),
        ];
        cells
            .iter()
            .enumerate()
            .map(|(a, &(t, json, http1))| {
                let mut run = testing::run(t, 1.0);
                let first = run.rounds[0].clone();
                run.rounds = vec![first; noise.len()];
                for (k, round) in run.rounds.iter_mut().enumerate() {
                    round.index = k as u32 + 1;
                    round.complete = true;
                    // Different noise per arm and round, shared by both directions.
                    let v = base + json * enc + http1 * tr + noise[k] * [1.0, -2.0, 0.5, 3.0][a];
                    round.bytes.internal.request_wire_bytes_per_request = Some(v / 2.0);
                    round.bytes.internal.response_wire_bytes_per_request = Some(v / 2.0);
                }
                run
            })
            .collect()
    }

    #[test]
    fn a_known_split_is_recovered_and_adds_up() {
        let runs = arms(1000.0, 600.0, 200.0, &[0.0, 0.0, 0.0]);
        let refs: Vec<&RunResult> = runs.iter().collect();
        let s = &attribute(&refs)[0];
        assert_eq!(s.rounds, 3);
        assert!((s.total.estimate - 800.0).abs() < 1e-9, "{s:?}");
        assert!((s.encoding.estimate - 600.0).abs() < 1e-9 && (s.transport.estimate - 200.0).abs() < 1e-9);
        assert!(s.interaction.estimate.abs() < 1e-9);
        assert!((s.encoding_share().unwrap() - 75.0).abs() < 1e-9);
        assert_eq!(s.grpc_mean, 1000.0);
    }

    #[test]
    fn noise_widens_the_intervals_around_the_split() {
        let runs = arms(1000.0, 600.0, 200.0, &[3.0, -2.0, 1.0, -4.0, 2.0]);
        let refs: Vec<&RunResult> = runs.iter().collect();
        let s = &attribute(&refs)[0];
        assert_eq!(s.rounds, 5);
        assert!(s.encoding_share().is_some_and(|e| (e - 75.0).abs() < 2.0), "{s:?}");
        // No share of a difference that is not detectable.
        let flat = arms(1000.0, 0.0, 0.0, &[3.0, -2.0, 1.0, -4.0, 2.0]);
        let flat = &attribute(&flat.iter().collect::<Vec<_>>())[0];
        assert!(!flat.total.excludes_zero() && flat.encoding_share().is_none(), "{flat:?}");
        // Encoding and transport always add up to the total, round by round.
        assert!((s.encoding.estimate + s.transport.estimate - s.total.estimate).abs() < 1e-9);
        for (i, truth) in [(s.encoding, 600.0), (s.transport, 200.0)] {
            assert!(i.lo < i.hi && i.lo <= truth + 5.0 && i.hi >= truth - 5.0, "{i:?}");
            assert!(i.lo > 0.0, "a split this large is detectable: {i:?}");
        }
    }

    #[test]
    fn the_connect_square_is_split_the_same_way() {
        let mut runs = arms(1000.0, 600.0, 300.0, &[0.0, 0.0, 0.0]);
        runs[1].config.transport = Transport::Connect;
        runs[2].config.transport = Transport::ConnectPb;
        let splits = attribute(&runs.iter().collect::<Vec<_>>());
        assert_eq!(splits[0].square, SQUARES[1]);
        assert!(
            (splits[0].encoding.estimate - 600.0).abs() < 1e-9 && (splits[0].transport.estimate - 300.0).abs() < 1e-9
        );
        // With REST's square too, both are drawn, REST's first.
        let mut both = arms(1000.0, 600.0, 200.0, &[0.0, 0.0, 0.0]);
        both.extend(runs.drain(1..3));
        let splits = attribute(&both.iter().collect::<Vec<_>>());
        assert_eq!(splits.iter().map(|s| s.square).collect::<Vec<_>>(), [[SQUARES[0]; 3], [SQUARES[1]; 3]].concat());
    }

    #[test]
    fn nothing_without_all_four_arms_or_two_rounds() {
        let runs = arms(1000.0, 600.0, 200.0, &[0.0, 1.0]);
        let three: Vec<&RunResult> = runs.iter().take(3).collect();
        assert!(attribute(&three).is_empty());
        let one_round = arms(1000.0, 600.0, 200.0, &[0.0]);
        assert!(attribute(&one_round.iter().collect::<Vec<_>>()).is_empty());
    }
}
