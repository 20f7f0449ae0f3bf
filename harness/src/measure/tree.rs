//! A foreign tier measured from outside: its whole process tree (every
//! process whose chain of parents leads to the command's first one, from
//! /proc) read without the tier's help. CPU seconds are each member's
//! nanosecond CPU clock (its /proc ticks where that clock cannot be read)
//! plus the CPU of children it has already waited for (`cutime` + `cstime`,
//! in ticks); memory is the members' RSS summed, and their PSS from
//! `smaps_rollup` where processes share pages; connections are the TCP
//! sockets its members hold that are established.

use std::collections::BTreeSet;

use telemetry::{ProcessSnapshot, StatsSnapshot};

use super::cpu_clock::process_cpu_seconds;
use crate::tiers::foreign::tree;

/// One reading of a process tree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TreeReading {
    pub processes: u32,
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    /// `None` where a member's `smaps_rollup` could not be read.
    pub pss_bytes: Option<u64>,
    /// Established TCP connections its members hold; `None` where their
    /// descriptors could not be read.
    pub connections: Option<u64>,
}

/// Clock ticks per second of /proc's CPU figures.
fn ticks_per_second() -> f64 {
    // SAFETY: sysconf(3) reads a constant of the system; it has no
    // preconditions and touches no memory of ours.
    #[allow(unsafe_code)]
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// The fields of `/proc/<pid>/stat` after the command's closing paren
/// (field 3, the state, is the first).
fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    Some(after.split_whitespace().skip(1).map(|f| f.parse().unwrap_or(0)).collect())
}

/// One member's CPU seconds: its own clock, plus its waited-for children's.
fn member_cpu_seconds(pid: u32, tick: f64) -> Option<f64> {
    let f = stat_fields(pid)?;
    // After the state: ppid pgrp session tty tpgid flags minflt cminflt
    // majflt cmajflt utime(11) stime(12) cutime(13) cstime(14), 0-based here
    // from ppid.
    let (utime, stime, cutime, cstime) = (*f.get(10)?, *f.get(11)?, *f.get(12)?, *f.get(13)?);
    let own = process_cpu_seconds(pid).unwrap_or((utime + stime) as f64 / tick);
    Some(own + (cutime + cstime) as f64 / tick)
}

fn status_kib(pid: u32, file: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// One member's PSS in KiB: 0 for a member that holds no memory (one that
/// exited since the tree was listed, or a zombie not yet waited for, as RSS
/// counts them), `None` where a live member's `smaps_rollup` cannot be read.
fn member_pss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "smaps_rollup", "Pss:").or_else(|| status_kib(pid, "status", "VmRSS:").is_none().then_some(0))
}

/// Inodes of the established TCP sockets of this machine (IPv4 and IPv6).
fn established_inodes() -> BTreeSet<u64> {
    let mut inodes = BTreeSet::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // st 01 is ESTABLISHED; the inode is the tenth column.
            if cols.get(3) == Some(&"01")
                && let Some(inode) = cols.get(9).and_then(|i| i.parse().ok())
            {
                inodes.insert(inode);
            }
        }
    }
    inodes
}

/// The socket inodes `pid` holds open; `None` if its descriptors cannot be read.
fn socket_inodes(pid: u32) -> Option<BTreeSet<u64>> {
    let entries = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(
        entries
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .filter_map(|l| l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok())
            .collect(),
    )
}

/// The tree under `root`'s CPU seconds and RSS now, the sampler's figures:
/// its stat and status files only (PSS and connections walk every mapping
/// and descriptor, and the machine's socket table: `read` takes them, once
/// at ready). `None` once `root` is gone.
pub fn usage(root: u32) -> Option<(f64, u64)> {
    let members = tree(root);
    (!members.is_empty()).then(|| cpu_and_rss(&members))
}

fn cpu_and_rss(members: &[u32]) -> (f64, u64) {
    let tick = ticks_per_second();
    let cpu_seconds = members.iter().filter_map(|p| member_cpu_seconds(*p, tick)).sum();
    let rss_bytes = members.iter().filter_map(|p| status_kib(*p, "status", "VmRSS:")).sum::<u64>() * 1024;
    (cpu_seconds, rss_bytes)
}

/// Reads the tree under `root` now, PSS and connections too; `None` once
/// `root` is gone.
pub fn read(root: u32) -> Option<TreeReading> {
    let members = tree(root);
    if members.is_empty() {
        return None;
    }
    let (cpu_seconds, rss_bytes) = cpu_and_rss(&members);
    let pss_bytes = members.iter().map(|p| member_pss_kib(*p)).sum::<Option<u64>>().map(|k| k * 1024);
    let held: Option<BTreeSet<u64>> = members
        .iter()
        .map(|p| socket_inodes(*p))
        .collect::<Option<Vec<_>>>()
        .map(|sets| sets.into_iter().flatten().collect());
    let connections = held.map(|h| established_inodes().intersection(&h).count() as u64);
    Some(TreeReading { processes: members.len() as u32, cpu_seconds, rss_bytes, pss_bytes, connections })
}

/// A foreign tier's `/stats` as the harness makes it from outside: its
/// process tree's CPU seconds and RSS, no listener of its own (the hops'
/// bytes come from our side of them). `None` once it is gone.
pub fn outside_stats(service: &str, root: u32) -> Option<StatsSnapshot> {
    let (cpu_seconds, rss_bytes) = usage(root)?;
    Some(StatsSnapshot {
        service: service.to_owned(),
        hostname: None,
        uptime_seconds: 0.0,
        process: ProcessSnapshot { pid: root, cpu_seconds: Some(cpu_seconds), rss_bytes: Some(rss_bytes) },
        listeners: Default::default(),
        clients: Default::default(),
        admin: None,
        settings: serde_json::Value::Null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_counts_its_children_and_the_ones_that_exited() {
        // A shell that burns CPU in a child it waits for, then sleeps with a
        // second child alive: both children's CPU is the tree's.
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; (sh -c 'i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done'); sleep 5 & wait"])
            .spawn()
            .unwrap();
        let root = sh.id();
        let mut last = None;
        for _ in 0..100 {
            std::thread::sleep(std::time::Duration::from_millis(50));
            last = read(root);
            if last.is_some_and(|r| r.processes >= 2) {
                break;
            }
        }
        let r = last.unwrap();
        let _ = sh.kill();
        let _ = sh.wait();
        assert!(r.processes >= 2, "{r:?}");
        assert!(r.cpu_seconds > 0.0 && r.rss_bytes > 0, "{r:?}");
        assert!(r.pss_bytes.is_some_and(|p| p <= r.rss_bytes), "{r:?}");
        assert!(r.connections.is_some(), "{r:?}");
        assert!(read(u32::MAX - 9).is_none());
    }

    #[test]
    fn a_zombie_member_holds_no_memory_and_leaves_pss_measured() {
        // The subshell exits and `sleep`, exec'd in its parent's place, never
        // waits for it: a zombie in the tree, with no memory to read.
        let mut sh = std::process::Command::new("sh").args(["-c", "(exit 0) & exec sleep 5"]).spawn().unwrap();
        let root = sh.id();
        let zombie = |p: &u32| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .is_ok_and(|s| s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
        };
        let mut seen = None;
        for _ in 0..100 {
            std::thread::sleep(std::time::Duration::from_millis(20));
            let members = tree(root);
            if members.len() >= 2 && members.iter().any(zombie) {
                seen = read(root);
                break;
            }
        }
        let _ = sh.kill();
        let _ = sh.wait();
        let r = seen.expect("a tree holding a zombie within 2 s");
        assert!(r.processes >= 2, "{r:?}");
        assert!(r.pss_bytes.is_some_and(|p| p > 0 && p <= r.rss_bytes), "{r:?}");
    }

    #[test]
    fn a_trees_cpu_agrees_with_proc_read_independently() {
        // Two busy processes, one of them a child the shell has not waited for.
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "(while :; do :; done) & i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; wait"])
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(700));
        let root = sh.id();
        let ours = read(root).unwrap();
        // /proc's own figures for the same processes, in clock ticks.
        let members = tree(root);
        let tick = ticks_per_second();
        let independent: f64 = members
            .iter()
            .map(|p| {
                let text = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                let fields: Vec<u64> =
                    text.rsplit(')').next().unwrap_or("").split_whitespace().map(|f| f.parse().unwrap_or(0)).collect();
                // After the paren: state(0) … utime(11) stime(12) cutime(13) cstime(14).
                (fields[11] + fields[12] + fields[13] + fields[14]) as f64 / tick
            })
            .sum();
        for p in &members {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*p as i32), nix::sys::signal::Signal::SIGKILL);
        }
        let _ = sh.wait();
        assert!(ours.processes >= 2 && ours.cpu_seconds > 0.1, "{ours:?}");
        // Within a tick per process, and 1% (the CPU the second read saw more).
        let slack = members.len() as f64 / tick + 0.01 * independent;
        assert!((ours.cpu_seconds - independent).abs() <= slack, "{ours:?} vs /proc {independent:.3} s");
    }
}
