/// The allocator every process of this executable uses (see the `mimalloc`
/// feature in Cargo.toml).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // First, so that the tiers it starts inherit it too: see
    // service::huge_pages (a tier's settings state what it got).
    let _ = service::huge_pages::disable();
    harness::app::main()
}
