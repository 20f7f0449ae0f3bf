//! The HTTP/2 flow-control windows every client and server here sets
//! explicitly, so what a report prints is what runs. The values are hyper
//! 1's own defaults (`proto/h2/client.rs`, `proto/h2/server.rs`), written
//! down so a crate upgrade cannot change them unseen; over a link with a
//! round-trip time they bound what one stream (and one connection) can have
//! in flight before a WINDOW_UPDATE returns.

/// A client's initial stream window (SETTINGS_INITIAL_WINDOW_SIZE it sends).
pub const CLIENT_STREAM_WINDOW_BYTES: u32 = 2 * 1024 * 1024;
/// A client's connection window.
pub const CLIENT_CONNECTION_WINDOW_BYTES: u32 = 5 * 1024 * 1024;
/// A server's initial stream window.
pub const SERVER_STREAM_WINDOW_BYTES: u32 = 1024 * 1024;
/// A server's connection window.
pub const SERVER_CONNECTION_WINDOW_BYTES: u32 = 1024 * 1024;
/// BDP-based adaptive windows (hyper's `adaptive_window`): off on both sides.
pub const ADAPTIVE_WINDOW: bool = false;

/// The windows one side sets, as JSON for settings and reports.
pub fn windows_json(client: bool) -> serde_json::Value {
    let (stream, connection) = if client {
        (CLIENT_STREAM_WINDOW_BYTES, CLIENT_CONNECTION_WINDOW_BYTES)
    } else {
        (SERVER_STREAM_WINDOW_BYTES, SERVER_CONNECTION_WINDOW_BYTES)
    };
    serde_json::json!({
        "initial_stream_window_bytes": stream,
        "initial_connection_window_bytes": connection,
        "adaptive_window": ADAPTIVE_WINDOW,
    })
}
