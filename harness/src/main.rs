fn main() -> std::process::ExitCode {
    harness::app::main()
}
