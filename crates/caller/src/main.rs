use clap::Parser;

/// The allocator every process of this executable uses (see the `mimalloc`
/// feature in Cargo.toml).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    service::init_logging();
    // Huge pages are set as `--huge-pages` says first thing in `cli::run`.
    service::exit_code("caller", caller::cli::run(caller::cli::Args::parse()).await)
}
