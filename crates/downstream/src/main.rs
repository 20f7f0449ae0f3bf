use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    telemetry::init_logging();
    telemetry::exit_code("downstream", downstream::cli::run(downstream::cli::Args::parse()).await)
}
