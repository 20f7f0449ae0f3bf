//! A `scratch` container has no certificate store. A plaintext REST caller
//! must start there all the same (reqwest's default rustls set-up looks for
//! the system's roots and fails to build without them): run the binary with
//! the store pointed at nothing and expect its ready line.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn a_plaintext_rest_caller_starts_without_a_certificate_store() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_caller"))
        .args(["--transport", "rest", "--downstream-rest", "http://127.0.0.1:9"])
        .env("SSL_CERT_FILE", "/nonexistent/cert.pem")
        .env("SSL_CERT_DIR", "/nonexistent")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line)
        .unwrap_or_else(|_| panic!("no ready line: {line:?}; stderr: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(ready["service"], "caller");
}
