//! The tiers' image: built from `scratch` with this very executable (the
//! tiers run in its hidden `__tier` role) and the shared libraries `ldd`
//! lists, so it builds on a machine with no registry; reused while the
//! executable is unchanged.

use std::path::{Path, PathBuf};

use tokio::process::Command;

use crate::tiers::docker::{LABEL, NAME_PREFIX, docker};

/// The repository of the harness's own image; the tag names the executable.
const IMAGE_REPO: &str = "grpc-vs-rest-tiers";
/// The build recipe, shared with `deploy/build-image.sh`.
const DOCKERFILE: &str = include_str!("../../../deploy/Dockerfile");
/// How the tiers' C library looks host names up: the hosts file first.
const NSSWITCH: &str = "hosts: files dns\n";

/// The image of this executable: reused when one with its tag exists, else
/// built from `scratch` (see `deploy/Dockerfile`).
pub async fn ensure_image() -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding the harness executable: {e}"))?;
    let tag = format!("{IMAGE_REPO}:{}", executable_id(&exe)?);
    if docker(&["image".into(), "inspect".into(), tag.clone()]).await.is_ok() {
        return Ok(tag);
    }
    let context = std::env::temp_dir().join(format!("{NAME_PREFIX}image-{}", std::process::id()));
    let built = async {
        build_context(&exe, &context).await?;
        let args = ["build", "-q", "--label", &format!("{LABEL}=1"), "-t", &tag, &context.to_string_lossy()];
        // The classic builder: it needs no BuildKit plug-in, and a scratch
        // image pulls nothing.
        let out = Command::new("docker")
            .args(args)
            .env("DOCKER_BUILDKIT", "0")
            .output()
            .await
            .map_err(|e| format!("running docker build: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("docker build failed: {}", String::from_utf8_lossy(&out.stderr).trim()))
        }
    }
    .await;
    let _ = std::fs::remove_dir_all(&context);
    built.map(|()| tag)
}

/// Names this executable's content cheaply: its size and modification time.
fn executable_id(exe: &Path) -> Result<String, String> {
    use std::hash::{Hash, Hasher};
    let meta = std::fs::metadata(exe).map_err(|e| format!("reading {}: {e}", exe.display()))?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    exe.hash(&mut h);
    meta.len().hash(&mut h);
    meta.modified().ok().hash(&mut h);
    Ok(format!("{:016x}", h.finish()))
}

/// A build context: the executable as `/harness`, every shared library `ldd`
/// lists at its own path, `/etc/nsswitch.conf`, and the Dockerfile.
pub async fn build_context(exe: &Path, context: &Path) -> Result<(), String> {
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    let _ = std::fs::remove_dir_all(context);
    std::fs::create_dir_all(context).map_err(|e| io("making the image context", e))?;
    std::fs::copy(exe, context.join("harness")).map_err(|e| io("copying the harness", e))?;
    for lib in shared_libraries(exe).await? {
        let to = context.join(lib.strip_prefix("/").unwrap_or(&lib));
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io("making a library folder", e))?;
        }
        std::fs::copy(&lib, &to).map_err(|e| io(&format!("copying {}", lib.display()), e))?;
    }
    // Host names the caller is given (`--add-host`, with `--tls`) come from
    // its hosts file, never from a DNS query leaving the machine.
    std::fs::create_dir_all(context.join("etc")).map_err(|e| io("making etc/", e))?;
    std::fs::write(context.join("etc/nsswitch.conf"), NSSWITCH).map_err(|e| io("writing etc/nsswitch.conf", e))?;
    std::fs::write(context.join("Dockerfile"), DOCKERFILE).map_err(|e| io("writing the Dockerfile", e))
}

/// The absolute paths `ldd` names (libraries and the loader); none for a
/// static executable.
async fn shared_libraries(exe: &Path) -> Result<Vec<PathBuf>, String> {
    let out = Command::new("ldd").arg(exe).output().await.map_err(|e| format!("running ldd: {e}"))?;
    Ok(parse_ldd(&String::from_utf8_lossy(&out.stdout)))
}

fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let path = l.split("=>").last()?.split_whitespace().next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_libraries_and_the_loader() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            parse_ldd(text),
            [PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"), PathBuf::from("/lib64/ld-linux-x86-64.so.2")]
        );
        assert!(parse_ldd("\tnot a dynamic executable\n").is_empty());
    }
}
