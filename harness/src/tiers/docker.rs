//! The `docker` command line, as every part of the container launcher runs
//! it, and the labels that mark what the harness makes (containers,
//! networks, images), so its reaper can find them.

use tokio::process::Command;

/// The label every container, network and image the harness makes carries.
pub const LABEL: &str = "grpc-vs-rest";
/// The label naming the harness process that made a container or network.
pub const PID_LABEL: &str = "grpc-vs-rest.harness-pid";
/// The prefix of every container and network name (`.ci/run` looks for it).
pub const NAME_PREFIX: &str = "grpc-vs-rest-";

/// `--label` arguments for what this process makes.
pub fn labels() -> Vec<String> {
    vec!["--label".into(), format!("{LABEL}=1"), "--label".into(), format!("{PID_LABEL}={}", std::process::id())]
}

/// Runs `docker args`; its stdout, or its stderr as the error.
pub async fn docker(args: &[String]) -> Result<String, String> {
    let out = Command::new("docker")
        .args(args)
        .output()
        .await
        .map_err(|e| format!("running docker (is it installed?): {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "docker {}: {}",
            args.first().map_or("", String::as_str),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
