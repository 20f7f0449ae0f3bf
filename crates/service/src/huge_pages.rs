//! Transparent huge pages: off in every process of this tool unless a tier
//! is told otherwise (`--huge-pages machine`), and said so.
//!
//! mimalloc 3 (the binaries' default allocator) asks the kernel for huge pages
//! on its arena (`MADV_HUGEPAGE`), which a machine whose mode is `madvise`
//! (Debian's and Ubuntu's default) then grants 2 MiB at a time. A tier's
//! resident set is then counted in whole huge pages, however little of each
//! it uses: at 5,000 req/s through three tiers the caller held 328 MiB on
//! REST and 142 MiB on gRPC with them, 171 and 101 MiB without
//! (bench/README.md). The memory a report states is meant to be what the
//! transport holds, not the rounding of an allocator's arena, so each
//! process turns huge pages off for itself as it starts
//! (`prctl(PR_SET_THP_DISABLE)`, which also covers the system allocator on a
//! machine whose mode is `always`, and is inherited by the processes it
//! starts). That has a price in CPU: on 4 KiB pages the same memory takes
//! more TLB refills, and at 1,000 req/s a plain caller spent 13–14% more
//! CPU a request with huge pages off on one VM, 1–3% on another
//! (bench/README.md, "Issue 56, eleventh pass" and "thirteenth pass"). A
//! team whose services run with the machine's huge pages measures them so
//! with `--huge-pages machine`, which the harness also applies to a foreign
//! tier it starts. Every tier states the result in its settings, read back
//! from the kernel, and the run records the machine's mode.

/// What a tier does with transparent huge pages (`--huge-pages`): `off`
/// (the default, for memory figures free of the allocator's 2 MiB rounding)
/// or `machine` (as a plain service on this machine runs: the machine's
/// mode, which mimalloc's arena asks for; its CPU without the extra TLB
/// refills of 4 KiB pages, its resident set in whole huge pages).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HugePages {
    #[default]
    Off,
    Machine,
}

impl HugePages {
    pub fn as_str(self) -> &'static str {
        match self {
            HugePages::Off => "off",
            HugePages::Machine => "machine",
        }
    }
}

/// Sets this process's huge pages as `mode` asks, whatever it inherited (the
/// harness turns them off for itself before it starts a tier). Call it
/// first thing in a tier's run; a failure leaves the process as it was, and
/// [`settings`] says what the kernel then reports.
pub fn set(mode: HugePages) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    return nix::sys::prctl::set_thp_disable(mode == HugePages::Off).map_err(std::io::Error::from);
    #[cfg(not(target_os = "linux"))]
    return match mode {
        HugePages::Off => Err(std::io::ErrorKind::Unsupported.into()),
        HugePages::Machine => Ok(()),
    };
}

/// Where the kernel states the machine's transparent-huge-page mode.
const MODE_FILE: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// Turns transparent huge pages off for this process and the processes it
/// starts from now on. Call it first thing in `main`, before the allocator
/// has mapped much. Fails where the kernel has no such switch (not Linux, or
/// older than 3.15); the process then runs as the machine is set, and
/// [`settings`] says so.
pub fn disable() -> std::io::Result<()> {
    set(HugePages::Off)
}

/// Whether huge pages are off for this process, as the kernel says now
/// (`None` where it cannot be asked).
pub fn disabled() -> Option<bool> {
    #[cfg(target_os = "linux")]
    return nix::sys::prctl::get_thp_disable().ok();
    #[cfg(not(target_os = "linux"))]
    return None;
}

/// Whether huge pages are off for process `pid`, read from outside it (its
/// `/proc/<pid>/status` line `THP_enabled`, Linux 5.0 and later; `None`
/// without one): how a foreign tier started by the harness is checked.
pub fn disabled_for(pid: u32) -> Option<bool> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("THP_enabled:"))?;
    line.split_whitespace().nth(1).map(|v| v == "0")
}

/// [`settings`] of process `pid`, read from outside it.
pub fn settings_of(pid: u32) -> serde_json::Value {
    settings_with(disabled_for(pid), machine_mode())
}

/// The machine's mode (`always`, `madvise` or `never`: the bracketed word of
/// the kernel's file), `None` where there is no such file.
pub fn machine_mode() -> Option<String> {
    std::fs::read_to_string(MODE_FILE).ok().as_deref().and_then(selected)
}

/// The bracketed choice of a sysfs list such as `always [madvise] never`.
fn selected(list: &str) -> Option<String> {
    let (_, rest) = list.split_once('[')?;
    let (word, _) = rest.split_once(']')?;
    Some(word.to_owned())
}

/// This process's huge-page setting for a tier's settings:
/// `transparent_huge_pages` (`off (PR_SET_THP_DISABLE)`, `the machine's
/// mode`, or `null` where the kernel cannot be asked) and
/// `transparent_huge_pages_machine` (the machine's mode, or `null`).
pub fn settings() -> serde_json::Value {
    settings_with(disabled(), machine_mode())
}

fn settings_with(disabled: Option<bool>, machine: Option<String>) -> serde_json::Value {
    let this = disabled.map(|off| if off { "off (PR_SET_THP_DISABLE)" } else { "the machine's mode" });
    serde_json::json!({ "transparent_huge_pages": this, "transparent_huge_pages_machine": machine })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selected_mode_is_the_bracketed_word() {
        assert_eq!(selected("always [madvise] never\n").as_deref(), Some("madvise"));
        assert_eq!(selected("[always] madvise never").as_deref(), Some("always"));
        assert_eq!(selected("always madvise never"), None);
    }

    #[test]
    fn settings_say_what_the_kernel_said_and_nothing_it_did_not() {
        let s = settings_with(Some(true), Some("madvise".into()));
        assert_eq!(s["transparent_huge_pages"], "off (PR_SET_THP_DISABLE)");
        assert_eq!(s["transparent_huge_pages_machine"], "madvise");
        assert_eq!(settings_with(Some(false), None)["transparent_huge_pages"], "the machine's mode");
        let unknown = settings_with(None, None);
        assert!(unknown["transparent_huge_pages"].is_null() && unknown["transparent_huge_pages_machine"].is_null());
    }

    /// The switch is the kernel's, read back from the kernel: after it, the
    /// prctl and this process's status both say huge pages are not allowed;
    /// `machine` then undoes it (as a tier the harness started with huge
    /// pages off does). One test: the switch is the whole process's.
    #[cfg(target_os = "linux")]
    #[test]
    fn disabling_is_what_the_kernel_then_reports() {
        disable().expect("prctl(PR_SET_THP_DISABLE)");
        assert_eq!(disabled(), Some(true));
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        // Kernels since 5.0 print the flag; older ones have no such line.
        if let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) {
            assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
        }
        assert_eq!(settings()["transparent_huge_pages"], "off (PR_SET_THP_DISABLE)");
        set(HugePages::Machine).expect("prctl(PR_SET_THP_DISABLE, 0)");
        assert_eq!(disabled(), Some(false));
        assert_eq!(settings()["transparent_huge_pages"], "the machine's mode");
        // From outside, as a foreign tier is read: the same answer.
        if status.contains("THP_enabled:") {
            assert_eq!(disabled_for(std::process::id()), Some(false));
        }
        disable().unwrap();
    }
}
