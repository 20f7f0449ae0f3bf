//! The bounds on what a contract reads and holds, and the one way its files
//! are read: each must be a regular file (not a FIFO, a device or a folder)
//! no larger than its bound, checked before a byte is read, so `/dev/zero`,
//! a pipe or a 2 GiB file is refused at once with its name.

use std::io::Read;
use std::path::Path;

/// Largest `.proto` file, imports included.
pub const MAX_PROTO_FILE_BYTES: u64 = 8 << 20;
/// Largest data file (`--request-data`, `--response-data`).
pub const MAX_DATA_FILE_BYTES: u64 = 64 << 20;
/// Longest data line: one message in the proto3 JSON mapping.
pub const MAX_DATA_LINE_BYTES: usize = 16 << 20;
/// Most messages on one side of a call: data lines, or `count=` generated.
pub const MAX_MESSAGES: usize = 10_000;
/// Most field values one side's messages hold together (every element of a
/// repeated field, every map entry and every message counts one): what
/// bounds their memory on every tier, whatever the bytes that spelled them.
pub const MAX_VALUES: u64 = 2_000_000;
/// Most protobuf bytes one side's messages encode to together.
pub const MAX_PROTOBUF_BYTES: u64 = 64 << 20;

/// The bytes of the regular file at `path`, refused with the reason if it
/// is not one or holds more than `limit` bytes (`what` names the bound).
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, String> {
    // `metadata` follows symbolic links: a link to a regular file is one.
    // Checked before opening, because opening a FIFO waits for a writer.
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    check(&meta, limit, what)?;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    // Again on the handle, in case the path changed in between; and read
    // at most one byte past the bound, whatever the file says of itself.
    check(&file.metadata().map_err(|e| e.to_string())?, limit, what)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64, limit, what));
    }
    Ok(bytes)
}

/// Whether `path` is a regular file of at most `limit` bytes, without
/// opening it; the reason it is not (`what` names the bound).
pub fn check_bounded(path: &Path, limit: u64, what: &str) -> Result<(), String> {
    check(&std::fs::metadata(path).map_err(|e| e.to_string())?, limit, what)
}

fn check(meta: &std::fs::Metadata, limit: u64, what: &str) -> Result<(), String> {
    if !meta.is_file() {
        let kind = if meta.is_dir() { "a folder" } else { "not a regular file (a pipe, a socket or a device)" };
        return Err(format!("{kind}; {what} must be a regular file"));
    }
    if meta.len() > limit {
        return Err(too_large(meta.len(), limit, what));
    }
    Ok(())
}

fn too_large(size: u64, limit: u64, what: &str) -> String {
    format!("{} bytes; {what} may hold at most {} ({limit} bytes)", size, mib(limit))
}

/// `limit` in MiB or KiB, as the README's bounds table writes it.
pub fn mib(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_within_its_bound_is_read() {
        let dir = crate::testing::folder();
        let file = dir.join("ok.txt");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(read_bounded(&file, 5, "a test file").unwrap(), b"12345");
        let e = read_bounded(&file, 4, "a test file").unwrap_err();
        assert!(e.contains("5 bytes") && e.contains("at most 4 bytes"), "{e}");
        let e = read_bounded(&dir, 4, "a test file").unwrap_err();
        assert!(e.contains("a folder"), "{e}");
        // A character device that never ends, refused before a byte is read.
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20, "a test file").unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        assert!(read_bounded(&dir.join("absent"), 4, "a test file").is_err());
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = crate::testing::folder();
        let fifo = dir.join("pipe.jsonl");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        // Opening it for reading would block until a writer came: the
        // refusal returning at all is the test.
        let e = read_bounded(&fifo, 1 << 20, "a data file").unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
    }
}
