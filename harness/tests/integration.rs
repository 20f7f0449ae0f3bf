//! The harness's integration tests, one module per file of this folder, built as
//! one test binary (`cargo test -p harness --test integration [filter]`);
//! `generators.rs` is a binary of its own (see Cargo.toml).

mod architecture;
mod arms;
mod both;
mod browser;
mod capacity;
mod common;
mod containers;
mod contract;
mod contract_inputs;
mod decision;
mod deploy;
mod disk;
mod docs;
mod export;
mod exposure;
mod faults;
mod fixture;
mod flags;
mod gates;
mod helpers;
mod launchers;
mod link;
mod own_cpu;
mod plan;
mod provenance;
mod proxy;
mod rebuild;
mod remote;
mod render;
mod replicas;
mod rerun;
mod run;
mod sizes;
mod streams;
mod wire;
