//! The caller's integration tests, one module per file of this folder, built as
//! one test binary (`cargo test -p caller --test integration [filter]`).

mod arms;
mod caller;
mod codecs;
mod contract;
mod garbage;
mod hop;
mod no_cert_store;
mod plain;
mod streams;
