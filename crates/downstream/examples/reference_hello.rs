//! The reference exchange of `bench/run.sh`: the smallest axum service
//! (`GET /` answers `Hello, World!` over HTTP/1.1), driven by wrk in the same
//! run, so each tier's CPU per request can also be read in "reference
//! exchanges" of the machine it ran on. Prints its address, then serves until
//! killed.

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?);
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "Hello, World!" }));
    axum::serve(listener, app).await
}
