//! Today's graphs, pinned: every combination of flags that runs, parsed as
//! the command line parses it, and the graph its arm gets. No process, no
//! container: a graph that changes fails here before anything starts.

use clap::Parser;

use super::*;
use crate::config::{Plan, RunArgs};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

/// The graph of each arm of the run `args` describe.
fn graphs(args: &str) -> Vec<String> {
    let mut full = vec!["harness", "--out", "/tmp/gvr-layout-test"];
    full.extend(args.split_whitespace());
    let cli = Cli::try_parse_from(full).unwrap_or_else(|e| panic!("{args}: {e}"));
    let plan = Plan::from_args(&cli.run).unwrap_or_else(|e| panic!("{args}: {e}"));
    plan.arms.iter().map(|&t| layout(&plan.arm(t)).to_string()).collect()
}

fn graph(args: &str) -> String {
    let all = graphs(args);
    assert_eq!(all.len(), 1, "{args}: one arm");
    all.into_iter().next().unwrap()
}

/// Every graph that runs today, and what it is.
const CASES: &[(&str, &str)] = &[
    ("--transport grpc --qps 10", "downstream\ncaller -> downstream\nload -> caller front/v1/call"),
    ("--transport rest --qps 10", "downstream\ncaller -> downstream\nload -> caller front/v1/call"),
    ("--transport grpc --qps 10 --target downstream", "downstream\nload -> downstream grpc"),
    ("--transport rest --qps 10 --target downstream", "downstream\nload -> downstream rest"),
    (
        "--transport grpc --qps 10 --proxy nginx",
        "downstream\nproxy (nginx on the internal hop) h2c -> downstream\ncaller -> proxy\nload -> caller front/v1/call",
    ),
    (
        "--transport rest --qps 10 --proxy caddy",
        "downstream\nproxy (caddy on the internal hop) -> downstream\ncaller -> proxy\nload -> caller front/v1/call",
    ),
    (
        "--transport rest --qps 10 --proxy nginx --rest-http2",
        "downstream\nproxy (nginx on the internal hop) h2c -> downstream\ncaller -> proxy\nload -> caller front/v1/call",
    ),
    (
        "--transport grpc --qps 10 --proxy nginx --proxy-hop front",
        "downstream\ncaller -> downstream\nproxy (nginx on the front hop) -> caller\nload -> proxy proxy/v1/call",
    ),
    (
        "--transport grpc --qps 10 --link rtt=5ms",
        "downstream\nlink h2c -> downstream\ncaller -> link\nload -> caller front/v1/call",
    ),
    (
        "--transport rest --qps 10 --link rtt=5ms --link-hop front",
        "downstream\ncaller -> downstream\nlink-front -> caller\nload -> link-front link/v1/call",
    ),
    (
        "--transport rest --qps 10 --link wan --link-hop both",
        "downstream\nlink -> downstream\ncaller -> link\nlink-front -> caller\nload -> link-front link/v1/call",
    ),
    (
        "--transport grpc --qps 10 --downstream-replicas 3 --balance l4",
        "downstream\ndownstream-1\ndownstream-2\nbalancer (l4) h2c -> downstream, downstream-1, downstream-2\n\
         caller -> balancer\nload -> caller front/v1/call",
    ),
    (
        "--transport rest --qps 10 --downstream-replicas 2 --balance l7",
        "downstream\ndownstream-1\nbalancer (l7) -> downstream, downstream-1\ncaller -> balancer\n\
         load -> caller front/v1/call",
    ),
    (
        "--transport grpc --qps 10 --downstream-replicas 2 --balance client",
        "downstream\ndownstream-1\ncaller -> downstream, downstream-1\nload -> caller front/v1/call",
    ),
    (
        "--transport grpc --qps 10 --balance l4",
        "downstream\nbalancer (l4) h2c -> downstream\ncaller -> balancer\nload -> caller front/v1/call",
    ),
    (
        "--transport grpc --qps 10 --downstream-replicas 2 --balance l4 --scale-at 1s:+1 --duration 3s",
        "downstream\ndownstream-1\nbalancer (l4) h2c -> downstream, downstream-1\ncaller -> balancer\n\
         load -> caller front/v1/call",
    ),
    (
        "--transport grpc-stream --qps 10 --stream-items 5",
        "downstream\ncaller -> downstream\nload -> caller front/v1/stream",
    ),
    (
        "--transport rest-ndjson --qps 10 --stream-items 5 --proxy nginx",
        "downstream\nproxy (nginx on the internal hop) -> downstream\ncaller -> proxy\nload -> caller front/v1/stream",
    ),
    (
        "--transport grpc --qps 10 --isolation containers",
        "downstream\ncaller -> downstream\nload -> caller front/v1/call",
    ),
    (
        "--transport rest --qps 10 --isolation containers --downstream-replicas 2 --balance l7",
        "downstream\ndownstream-1\nbalancer (l7) -> downstream, downstream-1\ncaller -> balancer\n\
         load -> caller front/v1/call",
    ),
    (
        "--transport grpc --qps 10 --tls --downstream-replicas 2 --balance l4",
        "downstream\ndownstream-1\nbalancer (l4) h2c -> downstream, downstream-1\ncaller -> balancer\n\
         load -> caller front/v1/call",
    ),
    // Lifted by the layout: replicas behind a proxy or a link.
    (
        "--transport grpc --qps 10 --downstream-replicas 2 --balance l7 --proxy nginx",
        "downstream\ndownstream-1\nbalancer (l7) h2c -> downstream, downstream-1\n\
         proxy (nginx on the internal hop) h2c -> balancer\ncaller -> proxy\nload -> caller front/v1/call",
    ),
    (
        "--transport rest --qps 10 --downstream-replicas 2 --balance l4 --proxy caddy --proxy-hop front",
        "downstream\ndownstream-1\nbalancer (l4) -> downstream, downstream-1\ncaller -> balancer\n\
         proxy (caddy on the front hop) -> caller\nload -> proxy proxy/v1/call",
    ),
    (
        "--transport grpc --qps 10 --downstream-replicas 2 --balance l4 --link rtt=5ms",
        "downstream\ndownstream-1\nbalancer (l4) h2c -> downstream, downstream-1\nlink h2c -> balancer\n\
         caller -> link\nload -> caller front/v1/call",
    ),
];

#[test]
fn every_graph_that_runs_today_is_pinned() {
    let mut wrong = Vec::new();
    for (args, want) in CASES {
        let got = graph(args);
        if got != *want {
            wrong.push(format!("{args}:\n--- want\n{want}\n--- got\n{got}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn both_arms_get_the_same_graph_but_for_the_transport() {
    let both = graphs("--transport both --qps 10 --proxy nginx");
    assert_eq!(both.len(), 2);
    assert!(both[0].contains("h2c") && !both[1].contains("h2c"), "{both:?}");
    assert_eq!(both[0].replace(" h2c", ""), both[1]);
}

#[test]
fn every_node_comes_after_its_upstreams() {
    for (args, _) in CASES {
        let plan_layouts = graphs(args);
        assert!(!plan_layouts.is_empty());
    }
    let mut full = vec!["harness", "--out", "/tmp/gvr-layout-test"];
    full.extend("--transport grpc --qps 10 --downstream-replicas 3 --balance l7 --link lan --link-hop both".split(' '));
    let plan = Plan::from_args(&Cli::try_parse_from(full).unwrap().run).unwrap();
    let l = layout(&plan.config);
    for (i, n) in l.nodes.iter().enumerate() {
        assert!(n.upstreams.iter().all(|&u| u < i), "{l}");
    }
    assert_eq!(l.replicas().count(), 3);
    assert!(matches!(l.nodes[3].kind, Kind::Balancer(Balance::L7)), "{l}");
    assert_eq!(reached_listener(&plan.config, &l.nodes[0]), "grpc");
}

#[test]
fn the_certificate_names_cover_every_replica_a_round_may_add() {
    let mut full = vec!["harness", "--out", "/tmp/gvr-layout-test"];
    full.extend("--qps 10 --downstream-replicas 2 --balance l4 --scale-at 1s:+2,2s:-1,3s:+1 --duration 4s".split(' '));
    let plan = Plan::from_args(&Cli::try_parse_from(full).unwrap().run).unwrap();
    let names = layout(&plan.config).host_names(&plan.config);
    assert_eq!(
        names,
        ["balancer", "caller", "downstream", "downstream-1", "downstream-2", "downstream-3", "downstream-4"]
    );
}
