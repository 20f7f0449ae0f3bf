//! The async runtime a tier serves on, as its settings state it.
//!
//! A tier runs tokio's multi-threaded runtime with tokio's default worker
//! count: one per core, or what `TOKIO_WORKER_THREADS` says when it is set in
//! the environment the tier starts in. That variable changes how a tier's
//! threads share the machine (on two shared cores, one worker per tier instead
//! of two took the tiers' context switches per request from 1–1.9 to 0.05–0.8:
//! bench/README.md), so the count a tier runs with and where it came from are
//! part of its settings, never assumed.

use tokio::runtime::{Handle, RuntimeFlavor};

/// The environment variable tokio's builder reads for its worker count.
pub const WORKERS_ENV: &str = "TOKIO_WORKER_THREADS";

/// The current runtime's flavor and workers, and where the count came from
/// (`TOKIO_WORKER_THREADS` as read from the environment now); `null` fields
/// outside a runtime.
pub fn runtime_settings() -> serde_json::Value {
    runtime_settings_with(Handle::try_current().ok().as_ref(), std::env::var(WORKERS_ENV).ok())
}

fn runtime_settings_with(handle: Option<&Handle>, env: Option<String>) -> serde_json::Value {
    let Some(handle) = handle else {
        return serde_json::json!({ "runtime": null, "runtime_workers": null, "runtime_workers_source": null });
    };
    let (flavor, source) = match handle.runtime_flavor() {
        RuntimeFlavor::CurrentThread => ("tokio current-thread", "one thread (current-thread runtime)".to_owned()),
        RuntimeFlavor::MultiThread => (
            "tokio multi-thread",
            match env {
                Some(v) => format!("{WORKERS_ENV}={v} in the environment (tokio's default: one per core)"),
                None => "tokio's default: one per core".to_owned(),
            },
        ),
        _ => ("tokio (other flavor)", "unknown".to_owned()),
    };
    serde_json::json!({
        "runtime": flavor,
        "runtime_workers": handle.metrics().num_workers(),
        "runtime_workers_source": source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 3)]
    async fn a_multi_thread_runtime_states_its_workers_and_their_source() {
        let s = runtime_settings_with(Some(&Handle::current()), None);
        assert_eq!(s["runtime"], "tokio multi-thread");
        assert_eq!(s["runtime_workers"], 3);
        assert_eq!(s["runtime_workers_source"], "tokio's default: one per core");
        let s = runtime_settings_with(Some(&Handle::current()), Some("1".into()));
        assert!(s["runtime_workers_source"].as_str().unwrap().starts_with("TOKIO_WORKER_THREADS=1 in the environment"));
    }

    #[tokio::test]
    async fn a_current_thread_runtime_says_so() {
        let s = runtime_settings();
        assert_eq!(s["runtime"], "tokio current-thread");
        assert_eq!(s["runtime_workers"], 1);
    }

    #[test]
    fn outside_a_runtime_nothing_is_claimed() {
        let s = runtime_settings();
        assert!(s["runtime"].is_null() && s["runtime_workers"].is_null());
    }
}
