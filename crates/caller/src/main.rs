use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    telemetry::init_logging();
    telemetry::exit_code("caller", caller::cli::run(caller::cli::Args::parse()).await)
}
