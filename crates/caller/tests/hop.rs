//! TLS, mTLS and compression on the internal hop, over real sockets: each arm's
//! handshake and negotiated ALPN as the downstream counted it, a client
//! without a certificate refused by an mTLS downstream, a TLS client against a
//! plaintext downstream failing as a connect error, and compressed responses
//! smaller on the wire than uncompressed ones with the same records.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use caller::Transport;
use caller::clients::{ClientSettings, build};
use caller::hop::{ClientTls, HopOptions};
use caller::outbound::CallError;
use downstream::{Config as DsConfig, Handle as DsHandle};
use payload::FetchRequest;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};
use service::Compression;
use service::tls::ServerTlsFiles;
use telemetry::CountersSnapshot;
use tokio_util::sync::CancellationToken;

/// A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM
/// files in a fresh folder (removed by [`Certs`]'s drop).
struct Certs {
    dir: PathBuf,
}

impl Certs {
    fn new(name: &str) -> Certs {
        let dir = std::env::temp_dir().join(format!("gvr-wire-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        ca.distinguished_name.push(DnType::CommonName, "test CA");
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let leaf = |names: Vec<String>, file: &str| {
            let key = KeyPair::generate().unwrap();
            let cert = CertificateParams::new(names).unwrap().signed_by(&key, &ca).unwrap();
            std::fs::write(dir.join(format!("{file}.pem")), cert.pem()).unwrap();
            std::fs::write(dir.join(format!("{file}-key.pem")), key.serialize_pem()).unwrap();
        };
        leaf(vec!["127.0.0.1".into(), "localhost".into()], "server");
        leaf(vec!["caller".into()], "client");
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        Certs { dir }
    }

    fn server(&self, mutual: bool) -> ServerTlsFiles {
        ServerTlsFiles {
            cert: self.dir.join("server.pem"),
            key: self.dir.join("server-key.pem"),
            client_ca: mutual.then(|| self.dir.join("ca.pem")),
        }
    }

    fn client(&self, with_certificate: bool) -> ClientTls {
        let p = |f: &str| self.dir.join(f);
        ClientTls { ca: p("ca.pem"), identity: with_certificate.then(|| (p("client.pem"), p("client-key.pem"))) }
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn downstream(tls: Option<ServerTlsFiles>, compression: Compression) -> DsHandle {
    let config = DsConfig { delay: Duration::from_millis(1), tls, compression, ..DsConfig::default() };
    downstream::start(config, CancellationToken::new()).await.unwrap()
}

#[derive(Clone, Copy, Debug)]
struct Arm {
    transport: Transport,
    http2: bool,
    alpn: &'static str,
}

const ARMS: [Arm; 5] = [
    Arm { transport: Transport::Grpc, http2: false, alpn: "ALPN h2" },
    Arm { transport: Transport::Rest, http2: false, alpn: "ALPN http/1.1" },
    Arm { transport: Transport::Rest, http2: true, alpn: "ALPN h2" },
    Arm { transport: Transport::RestPb, http2: false, alpn: "ALPN http/1.1" },
    Arm { transport: Transport::GrpcJson, http2: false, alpn: "ALPN h2" },
];

/// One fetch of `items` records over `arm` with `hop`, verified against the request.
async fn fetch(ds: &DsHandle, arm: Arm, hop: HopOptions, items: u32) -> Result<(), CallError> {
    let scheme = if hop.tls.is_some() { "https" } else { "http" };
    let addr = if arm.transport.is_grpc() { ds.grpc_addr } else { ds.rest_addr };
    let settings = ClientSettings {
        transport: arm.transport,
        target: format!("{scheme}://{addr}"),
        grpc_connections: 1,
        rest_http2: arm.http2,
        hop,
    };
    let client = build(&settings, Arc::new(arm.transport.client_counters("test"))).unwrap();
    let req = FetchRequest { request_id: "wire-1".into(), items, body: Vec::new(), ..FetchRequest::default() };
    let resp = client.fetch(req.clone()).await?;
    payload::verify(&req, &resp).expect("the records the request asked for");
    Ok(())
}

fn listener(ds: &DsHandle, arm: Arm) -> CountersSnapshot {
    ds.registry.snapshot().listeners[arm.transport.listener()].clone()
}

fn tls_hop(certs: &Certs, with_certificate: bool) -> HopOptions {
    HopOptions { tls: Some(certs.client(with_certificate)), ..HopOptions::default() }
}

#[tokio::test]
async fn each_arm_handshakes_tls_1_3_with_its_alpn_and_mtls() {
    let certs = Certs::new("alpn");
    let ds = downstream(Some(certs.server(true)), Compression::None).await;
    for arm in ARMS {
        let before = listener(&ds, arm).tls.unwrap_or_default();
        fetch(&ds, arm, tls_hop(&certs, true), 5).await.unwrap_or_else(|e| panic!("{arm:?}: {e}"));
        let tls = listener(&ds, arm).tls.expect("a TLS listener counts its handshakes").since(&before);
        assert_eq!(tls.handshakes(), 1, "{arm:?}: {tls:?}");
        let negotiated: Vec<&String> = tls.negotiated.keys().collect();
        assert_eq!(negotiated.len(), 1, "{arm:?}: {negotiated:?}");
        assert!(negotiated[0].starts_with("TLSv1.3 TLS13_") && negotiated[0].ends_with(arm.alpn), "{negotiated:?}");
    }
    // The byte counter sits under TLS: what it saw is ciphertext, larger than
    // the messages it carried.
    let grpc = listener(&ds, ARMS[0]);
    assert!(grpc.bytes_out.unwrap() > grpc.message_bytes_out);
    ds.stop().await;
}

#[tokio::test]
async fn an_mtls_downstream_refuses_a_client_without_a_certificate() {
    let certs = Certs::new("mtls");
    let ds = downstream(Some(certs.server(true)), Compression::None).await;
    for arm in ARMS {
        let before = listener(&ds, arm);
        let err = fetch(&ds, arm, tls_hop(&certs, false), 5).await.expect_err("no client certificate");
        let after = listener(&ds, arm);
        let tls = after.tls.expect("TLS counted").since(&before.tls.unwrap_or_default());
        assert!(tls.handshakes_failed >= 1 && tls.handshakes() == 0, "{arm:?}: {tls:?} ({err})");
        assert_eq!(after.requests_started, before.requests_started, "{arm:?}: no request reached the service");
    }
    ds.stop().await;
}

#[tokio::test]
async fn a_tls_client_against_a_plaintext_downstream_is_a_connect_error() {
    let certs = Certs::new("plain");
    let ds = downstream(None, Compression::None).await;
    for arm in ARMS {
        let err = fetch(&ds, arm, tls_hop(&certs, false), 5).await.expect_err("plaintext server");
        assert!(matches!(err, CallError::Connect { .. }), "{arm:?}: {err:?}");
        assert_eq!(err.outcome(), "connect");
    }
    ds.stop().await;
}

#[tokio::test]
async fn compression_sends_fewer_wire_bytes_for_the_same_records() {
    for arm in ARMS {
        let mut wire_out = Vec::new();
        for compression in [Compression::None, Compression::Gzip, Compression::Zstd] {
            let ds = downstream(None, compression).await;
            fetch(&ds, arm, HopOptions { compression, ..HopOptions::default() }, 200)
                .await
                .unwrap_or_else(|e| panic!("{arm:?}: {e}"));
            let counted = listener(&ds, arm);
            wire_out.push((compression, counted.bytes_out.unwrap(), counted.message_bytes_out));
            ds.stop().await;
        }
        let (none, gzip, zstd) = (wire_out[0], wire_out[1], wire_out[2]);
        // Message bytes stay the logical payload; the wire shows the saving.
        assert!(none.2 == gzip.2 && none.2 == zstd.2, "{arm:?}: {wire_out:?}");
        assert!(gzip.1 * 4 < none.1 * 3 && zstd.1 * 4 < none.1 * 3, "{arm:?}: {wire_out:?}");
    }
}
