//! The balancer in front of the downstream's replicas (`--balance l4|l7`):
//! a real nginx, started like the proxy (its own folder, loopback, no
//! system service), its configuration kept for the report.
//!
//! * `l4`: nginx's stream module, round robin over the replicas per TCP
//!   connection, as a Kubernetes Service (kube-proxy) or a network load
//!   balancer does: every call on a connection goes where the connection went;
//! * `l7`: nginx's http module, round robin per call: `grpc_pass` over
//!   HTTP/2 cleartext for gRPC, `proxy_pass` with an upstream keep-alive
//!   pool for REST.
//!
//! The upstream's round-robin state is shared by nginx's workers (`zone`), so
//! connections are spread as one balancer would, whichever worker accepts.

use std::net::SocketAddr;
use std::path::Path;

use crate::config::{Balance, ProxyHop, ProxyKind};
use crate::result::{ProxyInfo, TierName};
use crate::tiers::process::{Tier, TierError};
use crate::tiers::proxy;
use crate::tiers::proxy_config::{self, Protocol};

/// Where Debian's nginx keeps its dynamic modules when `nginx -V` names none.
const DEBIAN_MODULES: &str = "/usr/lib/nginx/modules";

/// The `load_module` line nginx needs for its stream module, `Some("")` when
/// it is built in, `None` when this nginx has none.
fn stream_module(version_text: &str) -> Option<String> {
    if version_text.contains("--with-stream ") || version_text.ends_with("--with-stream") {
        return Some(String::new());
    }
    let dir = version_text
        .split_whitespace()
        .find_map(|a| a.strip_prefix("--modules-path="))
        .unwrap_or(DEBIAN_MODULES)
        .to_owned();
    let module = Path::new(&dir).join("ngx_stream_module.so");
    module.is_file().then(|| format!("load_module {};\n", module.display()))
}

/// nginx's `-V` text (its configure arguments).
fn configure_text(bin: &Path) -> String {
    std::process::Command::new(bin)
        .arg("-V")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned() + &String::from_utf8_lossy(&o.stdout))
        .unwrap_or_default()
}

/// The balancer's configuration: listen on `listen`, spread over `replicas`.
/// `h2c`: the hop is HTTP/2 cleartext (gRPC, or REST over h2c), for `l7`.
pub fn config(
    mode: Balance,
    listen: SocketAddr,
    replicas: &[SocketAddr],
    protocol: Protocol,
    modules: &str,
    work: &Path,
) -> String {
    let servers: String = replicas.iter().map(|r| format!("        server {r};\n")).collect();
    let comment =
        format!("nginx balancing {} downstream replicas ({}), listening on {listen}.", replicas.len(), mode.as_str());
    let main = proxy_config::nginx_main(&comment, modules, work);
    // The round robin's place is shared by the workers.
    let zone = "        zone backend 64k;\n";
    if mode == Balance::L4 {
        main + &stream_block(listen, &format!("{zone}{servers}"))
    } else {
        main + &proxy_config::nginx_http(listen, zone, &servers, protocol, work)
    }
}

/// nginx's `stream` block: one TCP upstream of the replicas.
fn stream_block(listen: SocketAddr, servers: &str) -> String {
    format!(
        r#"
stream {{
    upstream backend {{
{servers}    }}

    server {{
        listen {listen};
        proxy_pass backend;
    }}
}}
"#
    )
}

/// Starts nginx balancing `replicas` as `mode` says, on `ip`.
pub async fn start(
    mode: Balance,
    ip: std::net::IpAddr,
    replicas: &[SocketAddr],
    speaks: Protocol,
) -> Result<(Tier, ProxyInfo), TierError> {
    let kind = ProxyKind::Nginx;
    let tag = replicas.first().map_or(0, SocketAddr::port);
    let prepared = proxy::prepare(kind, TierName::Balancer, ip, tag)?;
    let modules = if mode == Balance::L4 {
        stream_module(&configure_text(&prepared.bin)).ok_or_else(|| TierError::Spawn {
            tier: TierName::Balancer,
            reason: "this nginx has no stream module (--balance l4 needs it): install it with \
                     `apt-get install libnginx-mod-stream`"
                .to_owned(),
        })?
    } else {
        String::new()
    };
    let text = config(mode, prepared.listen, replicas, speaks, &modules, &prepared.work);
    let (tier, workers) = proxy::launch_configured(kind, TierName::Balancer, &prepared, &text).await?;
    let protocol = protocol(mode, speaks.h2c, replicas.len());
    Ok((tier, prepared.info(kind, ProxyHop::Internal, replicas[0], protocol, workers, text)))
}

/// What the report says the balancer speaks and how it spreads the calls.
fn protocol(mode: Balance, h2c: bool, replicas: usize) -> String {
    match mode {
        Balance::L4 => format!("TCP (nginx stream), round robin per connection over {replicas} replicas"),
        _ if h2c => format!("HTTP/2 cleartext on both sides, round robin per call over {replicas} replicas"),
        _ => format!("HTTP/1.1 with an upstream keep-alive pool, round robin per call over {replicas} replicas"),
    }
}

/// Rewrites the balancer's configuration for `replicas` and has nginx load
/// it (SIGHUP): new connections (l4) or calls (l7) go to the new set; with
/// l4 a connection already open stays on its replica until it closes.
pub fn reload(
    mode: Balance,
    tier: &Tier,
    info: &mut ProxyInfo,
    replicas: &[SocketAddr],
    speaks: Protocol,
) -> Result<(), TierError> {
    let fail = |reason: String| TierError::Spawn { tier: TierName::Balancer, reason };
    let modules = if mode == Balance::L4 {
        stream_module(&configure_text(&info.binary)).unwrap_or_default()
    } else {
        String::new()
    };
    let text = config(mode, info.listen, replicas, speaks, &modules, &info.work_dir);
    let conf = info.work_dir.join(&info.config_file);
    std::fs::write(&conf, &text).map_err(|e| fail(format!("writing {}: {e}", conf.display())))?;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(tier.pid() as i32), nix::sys::signal::Signal::SIGHUP)
        .map_err(|e| fail(format!("asking nginx to reload: {e}")))?;
    info.protocol = protocol(mode, speaks.h2c, replicas.len());
    info.config = text;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l4_spreads_connections_and_l7_spreads_calls_over_every_replica() {
        let listen: SocketAddr = "127.0.0.1:8000".parse().unwrap();
        let replicas: Vec<SocketAddr> =
            ["127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003"].iter().map(|a| a.parse().unwrap()).collect();
        let w = Path::new("/tmp/w");
        let h2c = Protocol { h2c: true, streams: false };
        let l4 = config(Balance::L4, listen, &replicas, h2c, "load_module /m/ngx_stream_module.so;\n", w);
        assert!(l4.contains("load_module /m/ngx_stream_module.so;") && l4.contains("stream {"), "{l4}");
        assert!(l4.contains("proxy_pass backend;") && !l4.contains("http {"), "{l4}");
        let l7 = config(Balance::L7, listen, &replicas, h2c, "", w);
        assert!(l7.contains("listen 127.0.0.1:8000 http2;") && l7.contains("grpc_pass grpc://backend;"), "{l7}");
        let rest = config(Balance::L7, listen, &replicas, Protocol::default(), "", w);
        assert!(rest.contains("proxy_pass http://backend;") && rest.contains("keepalive 1024;"), "{rest}");
        for c in [&l4, &l7, &rest] {
            assert!(replicas.iter().all(|r| c.contains(&format!("server {r};"))), "{c}");
            assert!(c.contains("zone backend 64k;"), "round robin shared by the workers: {c}");
            assert!(c.starts_with("# Written by grpc-vs-rest: nginx balancing 3 downstream replicas"), "{c}");
        }
    }

    #[test]
    fn the_stream_module_is_loaded_when_it_is_a_dynamic_one() {
        assert_eq!(stream_module("configure arguments: --with-stream --with-http_ssl_module"), Some(String::new()));
        let dir = std::env::temp_dir().join(format!("gvr-modules-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = format!("configure arguments: --modules-path={} --with-stream=dynamic", dir.display());
        assert_eq!(stream_module(&text), None, "no module file: no stream");
        std::fs::write(dir.join("ngx_stream_module.so"), b"").unwrap();
        assert_eq!(stream_module(&text), Some(format!("load_module {}/ngx_stream_module.so;\n", dir.display())));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
