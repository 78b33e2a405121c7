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
