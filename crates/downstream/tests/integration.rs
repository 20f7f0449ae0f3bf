//! The downstream's integration tests, one module per file of this folder, built as
//! one test binary (`cargo test -p downstream --test integration [filter]`).

mod binary;
mod downstream;
mod hostile;
mod items;
mod plain;
mod protocols;
