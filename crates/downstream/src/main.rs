use clap::Parser;

/// The allocator every process of this executable uses (see the `mimalloc`
/// feature in Cargo.toml).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    service::init_logging();
    // As early as main can, before any request's buffers: see
    // service::huge_pages (the tier's settings state what it got).
    if let Err(e) = service::huge_pages::disable() {
        tracing::warn!("transparent huge pages stay as the machine sets them: {e}");
    }
    service::exit_code("downstream", downstream::cli::run(downstream::cli::Args::parse()).await)
}
