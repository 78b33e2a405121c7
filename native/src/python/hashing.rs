//! Hashes the engine stores: key-index key hashes and consume-queue tag hashes.

use pyo3::prelude::*;

/// `crc32c(topic + "\x00" + key)` over the UTF-8 bytes, 0 stored as 1.
#[pyfunction]
pub fn key_hash(topic: &str, key: &str) -> u32 {
    crate::key_index::key_hash(topic.as_bytes(), key.as_bytes())
}

/// BLAKE2b-64 of an encoded tag, little-endian, 0 stored as 1; no tag is 0.
#[pyfunction]
pub fn tag_hash(tag: &[u8]) -> u64 {
    crate::tags::tag_hash(tag)
}

/// The event index's hashes of a stream id and of a command id in it (0: no command id):
/// `eventindex.stream_hash` and `eventindex.command_hash` in one call.
#[pyfunction]
pub fn stream_hashes(stream_id: &str, command_id: Option<&str>) -> (u64, u64) {
    let stream = stream_id.as_bytes();
    (
        crate::events::stream_hash(stream),
        command_id.map_or(0, |command| {
            crate::events::command_hash(stream, command.as_bytes())
        }),
    )
}
