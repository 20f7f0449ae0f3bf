//! The machine and build a run was measured on, so a result can be reproduced
//! or challenged.

use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};

use crate::result::Environment;

/// The optimisation level this executable was compiled at (`0`–`3`, `s`, `z`).
pub const OPT_LEVEL: &str = env!("HARNESS_BUILD_OPT_LEVEL");
/// Cargo's name for the profile it was built with (`debug` for dev, `release`).
pub const PROFILE: &str = env!("HARNESS_BUILD_PROFILE");

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
    }
}

/// Raises the soft open-files limit to the hard one (children inherit it) and
/// refuses a plan whose connections cannot fit, saying how to fix it.
pub fn check_open_files(plan: &crate::config::Plan) -> Result<(), crate::config::ConfigError> {
    let (_, Some(soft), Some(hard)) = raise_nofile() else { return Ok(()) };
    let needed = plan.arms.iter().map(|t| plan.arm(*t).expected_open_files()).max().unwrap_or(0);
    if needed <= soft {
        return Ok(());
    }
    let c = &plan.config;
    Err(crate::config::ConfigError {
        flag: "--qps",
        problem: format!(
            "{} req/s with a {} service time keeps about {} requests in flight; the caller then needs about {needed} \
             open files, but this shell allows {soft} (hard limit {hard}). Raise the limit (`ulimit -n {}` in a shell \
             whose hard limit allows it, or LimitNOFILE= for a service) or lower --qps / --max-in-flight.",
            c.qps,
            humantime::format_duration(c.delay + c.jitter),
            c.expected_in_flight(),
            (needed * 2).next_power_of_two()
        ),
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

fn git() -> (Option<String>, Option<bool>) {
    let commit = command_line("git", &["rev-parse", "HEAD"]);
    let dirty = commit.as_ref().and_then(|_| {
        let out =
            std::process::Command::new("git").args(["status", "--porcelain", "--untracked-files=no"]).output().ok()?;
        out.status.success().then_some(!out.stdout.is_empty())
    });
    (commit, dirty)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cargo run -p harness` builds the dev profile, and tests build with
    /// the same settings: this fails if the workspace's profile settings stop
    /// optimising what people measure with.
    #[test]
    fn the_build_people_start_with_is_optimised() {
        let env = capture();
        assert!(env.is_optimised(), "built at opt-level {OPT_LEVEL} ({PROFILE}): figures would not be representative");
        assert_eq!(env.opt_level.as_deref(), Some(OPT_LEVEL));
    }
}
