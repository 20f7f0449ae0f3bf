//! The machine and build a run was measured on, so a result can be reproduced
//! or challenged.

use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};

use crate::config::{ConfigError, Plan};
use crate::result::Environment;

/// The optimisation level this executable was compiled at (`0`–`3`, `s`, `z`).
pub const OPT_LEVEL: &str = env!("HARNESS_BUILD_OPT_LEVEL");
/// Cargo's name for the profile it was built with (`debug` for dev, `release`).
pub const PROFILE: &str = env!("HARNESS_BUILD_PROFILE");

/// The global allocator of this executable, and so of every tier it runs
/// (the `mimalloc` feature, on by default).
pub const ALLOCATOR: &str = if cfg!(feature = "mimalloc") { "mimalloc" } else { "system" };

/// Reads the machine, raising the soft open-files limit to the hard one on
/// the way (REST keeps one connection per in-flight request).
pub fn capture() -> Environment {
    let (nofile_soft_before, nofile_soft, nofile_hard) = raise_nofile();
    let sys = System::new_with_specifics(
        RefreshKind::nothing().with_cpu(CpuRefreshKind::nothing()).with_memory(MemoryRefreshKind::nothing().with_ram()),
    )
    .ok();
    let cpu_model = sys.as_ref().and_then(|s| s.cpus().first().map(|c| c.brand().trim().to_owned()));
    let (commit, dirty) = git();
    Environment {
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        build_profile: PROFILE.to_owned(),
        opt_level: Some(OPT_LEVEL.to_owned()),
        allocator: Some(ALLOCATOR.to_owned()),
        transparent_huge_pages: service::huge_pages::machine_mode(),
        rustc: command_line("rustc", &["--version"]),
        git_commit: commit,
        git_dirty: dirty,
        os: System::long_os_version().ok(),
        kernel: System::kernel_version().ok(),
        hostname: System::host_name().ok(),
        cpu_model: cpu_model.filter(|m| !m.is_empty()),
        logical_cores: sys.as_ref().map(|s| s.cpus().len()).filter(|n| *n > 0),
        physical_cores: System::physical_core_count().ok(),
        memory_bytes: sys.as_ref().map(System::total_memory).filter(|m| *m > 0),
        nofile_soft_before,
        nofile_soft,
        nofile_hard,
        stamp_reader_priority: crate::load::reader_priority(),
    }
}

/// Raises the soft open-files limit to the hard one (children inherit it) and
/// refuses a plan whose connections cannot fit, saying how to fix it.
pub fn check_open_files(plan: &Plan) -> Result<(), ConfigError> {
    let (_, Some(soft), Some(hard)) = raise_nofile() else { return Ok(()) };
    open_files_problem(plan, soft, hard).map_or(Ok(()), Err)
}

/// Why `plan` cannot fit in `soft` open files, naming the flag that sets its
/// connections: `--connections` in closed loop, `--qps` otherwise (a sweep
/// judged at its highest step).
pub fn open_files_problem(plan: &Plan, soft: u64, hard: u64) -> Option<ConfigError> {
    let c = plan.busiest();
    let needed = c.expected_open_files();
    if needed <= soft {
        return None;
    }
    let fix = format!(
        "the caller then needs about {needed} open files, but this shell allows {soft} (hard limit {hard}). Raise the \
         limit (`ulimit -n {}` in a shell whose hard limit allows it, or LimitNOFILE= for a service)",
        (needed * 2).next_power_of_two()
    );
    let step = if plan.is_sweep() { " (the highest step of the sweep)" } else { "" };
    Some(if c.load.closed_loop {
        ConfigError {
            flag: "--connections",
            problem: format!(
                "{} connections keep up to {} requests in flight; {fix} or lower --connections.",
                c.load.connections, c.load.connections
            ),
        }
    } else {
        ConfigError {
            flag: "--qps",
            problem: format!(
                "{} req/s{step} with a {} service time keeps about {} requests in flight; {fix} or lower --qps / \
                 --max-in-flight.",
                c.load.qps,
                humantime::format_duration(c.work.delay + c.work.jitter),
                c.expected_in_flight(),
            ),
        }
    })
}

fn raise_nofile() -> (Option<u64>, Option<u64>, Option<u64>) {
    let Ok((soft, hard)) = rlimit::getrlimit(rlimit::Resource::NOFILE) else { return (None, None, None) };
    let raised = rlimit::increase_nofile_limit(hard).ok();
    (Some(soft), raised.or(Some(soft)), Some(hard))
}

fn command_line(cmd: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(cmd).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned()).filter(|s| !s.is_empty())
}

/// The commit the harness was built from and whether its checkout had
/// uncommitted changes (`build.rs`), not the current directory's repository:
/// `None` when it was not built from a git checkout.
fn git() -> (Option<String>, Option<bool>) {
    let commit = Some(env!("HARNESS_GIT_COMMIT")).filter(|c| !c.is_empty()).map(str::to_owned);
    let dirty = match env!("HARNESS_GIT_DIRTY") {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    };
    (commit, dirty)
}

#[cfg(test)]
mod tests {
    use caller::Transport;

    use super::*;
    use crate::testing;

    /// `cargo run -p harness` builds the dev profile, and tests build with
    /// the same settings: this fails if the workspace's profile settings stop
    /// optimising what people measure with.
    #[test]
    fn the_build_people_start_with_is_optimised() {
        let env = capture();
        assert!(env.is_optimised(), "built at opt-level {OPT_LEVEL} ({PROFILE}): figures would not be representative");
        assert_eq!(env.opt_level.as_deref(), Some(OPT_LEVEL));
        assert_eq!(env.allocator.as_deref(), Some(if cfg!(feature = "mimalloc") { "mimalloc" } else { "system" }));
        // The machine's mode as the kernel states it, where it states one.
        let file = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok();
        assert_eq!(env.transparent_huge_pages.is_some(), file.is_some(), "{file:?}");
        if let (Some(mode), Some(file)) = (&env.transparent_huge_pages, &file) {
            assert!(file.contains(&format!("[{mode}]")), "{mode} in {file}");
        }
    }

    fn plan(rates: &[f64], transport: Transport) -> Plan {
        let mut config = testing::config(transport);
        config.load.qps = rates[0];
        config.work.delay = std::time::Duration::from_millis(20);
        Plan { config, arms: vec![transport], rates: rates.to_vec(), payload: None, codecs: Vec::new() }
    }

    #[test]
    fn a_sweep_is_judged_at_its_highest_step() {
        let sweep = plan(&[20.0, 2000.0], Transport::Rest);
        assert!(plan(&[20.0], Transport::Rest).busiest().expected_open_files() <= 256);
        let e = open_files_problem(&sweep, 256, 256).expect("2000 req/s over REST does not fit in 256");
        assert_eq!(e.flag, "--qps");
        assert!(e.problem.contains("2000 req/s (the highest step of the sweep)"), "{e}");
        assert!(open_files_problem(&sweep, 1 << 20, 1 << 20).is_none());
    }

    #[test]
    fn closed_loop_names_connections() {
        let mut p = plan(&[100.0], Transport::Grpc);
        p.rates.clear();
        (p.config.load.closed_loop, p.config.load.qps, p.config.load.connections) = (true, 0.0, 30_000);
        let e = open_files_problem(&p, 256, 256).unwrap();
        assert_eq!(e.flag, "--connections");
        assert!(e.problem.contains("30000 connections") && !e.problem.contains("req/s"), "{e}");
    }
}
