//! Compiles `proto/` with protox (a pure-Rust protobuf compiler), so no `protoc`
//! is needed on any machine, and writes the encoded file descriptor set next to
//! the generated code for gRPC server reflection.

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let file = root.join("bench/v1/bench.proto");
    println!("cargo:rerun-if-changed={}", root.display());

    let fds = protox::compile([&file], [&root])?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out_dir.join("bench_descriptor.bin"), fds.encode_to_vec())?;

    tonic_prost_build::configure().build_client(true).build_server(true).compile_fds(fds)?;
    Ok(())
}
