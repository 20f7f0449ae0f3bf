//! The text of the configurations the harness gives nginx and caddy: the
//! proxy on one hop, and the top and `http` block every nginx of the
//! harness's shares (the balancer's too). Text only: starting them is
//! `proxy.rs`'s.

use std::net::SocketAddr;
use std::path::Path;

use crate::config::ProxyKind;

impl ProxyKind {
    pub(crate) fn config_file(self) -> &'static str {
        match self {
            ProxyKind::Nginx => "nginx.conf",
            ProxyKind::Caddy => "Caddyfile",
        }
    }
}

/// The top of every nginx configuration the harness writes: `comment`
/// first, then `modules` (its `load_module` lines), one master with its
/// workers in the foreground, every file of its own in `work`.
pub(crate) fn nginx_main(comment: &str, modules: &str, work: &Path) -> String {
    let w = work.display();
    format!(
        r#"# Written by grpc-vs-rest: {comment}
{modules}daemon off;
master_process on;
worker_processes auto;
worker_rlimit_nofile 65536;
pid {w}/nginx.pid;
error_log {w}/error.log warn;

events {{
    worker_connections 16384;
}}
"#
    )
}

/// nginx's `http` block: listen on `listen` and send every request to the
/// upstream `backend` (its `server` lines, `servers`, and `extra` lines
/// before them), over HTTP/2 cleartext on both sides when `h2c` (gRPC:
/// `grpc_pass`), else HTTP/1.1 with an upstream keep-alive pool.
pub(crate) fn nginx_http(listen: SocketAddr, extra: &str, servers: &str, protocol: Protocol, work: &Path) -> String {
    let w = work.display();
    let (listen_opts, mut location) = if protocol.h2c {
        (" http2", "grpc_pass grpc://backend;".to_owned())
    } else {
        (
            "",
            "proxy_pass http://backend;\n            proxy_http_version 1.1;\n            proxy_set_header Connection \"\";"
                .to_owned(),
        )
    };
    if protocol.streams && !protocol.h2c {
        // Each item passed on as it comes, not gathered into buffers first
        // (grpc_pass streams without this).
        location.push_str("\n            proxy_buffering off;");
    }
    format!(
        r#"
http {{
    access_log off;
    client_body_temp_path {w}/client_body;
    proxy_temp_path {w}/proxy;
    fastcgi_temp_path {w}/fastcgi;
    uwsgi_temp_path {w}/uwsgi;
    scgi_temp_path {w}/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    http2_max_concurrent_streams 16384;

    upstream backend {{
{extra}{servers}        keepalive 1024;
        keepalive_requests 1000000;
    }}

    server {{
        listen {listen}{listen_opts};
        location / {{
            {location}
        }}
    }}
}}
"#
    )
}

/// How a proxy speaks to both sides: HTTP/2 cleartext (gRPC, or REST over
/// h2c) or HTTP/1.1, and whether answers are streams to pass on item by
/// item (the streaming arms) rather than whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Protocol {
    pub h2c: bool,
    pub streams: bool,
}

/// The proxy's configuration: listen on `listen`, forward everything to
/// `upstream`, over HTTP/2 cleartext on both sides when `protocol.h2c`,
/// never buffering a streamed answer.
pub fn config(kind: ProxyKind, listen: SocketAddr, upstream: SocketAddr, protocol: Protocol, work: &Path) -> String {
    match kind {
        ProxyKind::Nginx => {
            nginx_main("nginx between two tiers, on loopback.", "", work)
                + &nginx_http(listen, "", &format!("        server {upstream};\n"), protocol, work)
        }
        ProxyKind::Caddy => {
            let scheme = if protocol.h2c { "h2c" } else { "http" };
            // Flush each write at once: a streamed answer's items as they come.
            let flush = if protocol.streams { "\n\t\tflush_interval -1" } else { "" };
            format!(
                r#"# Written by grpc-vs-rest: caddy between two tiers, on loopback.
{{
	admin off
	auto_https off
	servers {{
		protocols h1 h2c
	}}
}}

http://{listen} {{
	reverse_proxy {scheme}://{upstream} {{{flush}
		transport http {{
			keepalive 90s
			keepalive_idle_conns 1024
		}}
	}}
}}
"#
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_forward_to_the_upstream_with_the_right_protocol() {
        const H2C: Protocol = Protocol { h2c: true, streams: false };
        const H1: Protocol = Protocol { h2c: false, streams: false };
        let (l, u): (SocketAddr, SocketAddr) = ("127.0.0.1:8000".parse().unwrap(), "127.0.0.1:9000".parse().unwrap());
        let w = Path::new("/tmp/w");
        let n = config(ProxyKind::Nginx, l, u, H2C, w);
        assert!(n.contains("listen 127.0.0.1:8000 http2;") && n.contains("grpc_pass grpc://backend;"), "{n}");
        assert!(n.contains("server 127.0.0.1:9000;") && n.contains("pid /tmp/w/nginx.pid;"));
        let n = config(ProxyKind::Nginx, l, u, H1, w);
        assert!(n.contains("listen 127.0.0.1:8000;") && n.contains("proxy_pass http://backend;"));
        assert!(n.contains("keepalive 1024;") && n.contains(r#"proxy_set_header Connection "";"#));
        let c = config(ProxyKind::Caddy, l, u, H2C, w);
        assert!(c.contains("http://127.0.0.1:8000 {") && c.contains("reverse_proxy h2c://127.0.0.1:9000"), "{c}");
        assert!(config(ProxyKind::Caddy, l, u, H1, w).contains("reverse_proxy http://127.0.0.1:9000"));
        // Unary answers pass as the proxies' defaults have them; streams item by item.
        for (kind, setting) in [(ProxyKind::Nginx, "proxy_buffering off;"), (ProxyKind::Caddy, "flush_interval -1")] {
            assert!(!config(kind, l, u, H1, w).contains(setting), "{kind:?}");
            assert!(config(kind, l, u, Protocol { h2c: false, streams: true }, w).contains(setting), "{kind:?}");
        }
    }
}
