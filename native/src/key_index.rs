//! Key-index hashing (docs/FORMAT.md, "Key hash").

/// `crc32c(topic + "\x00" + key)` over the UTF-8 bytes, 0 stored as 1.
pub fn key_hash(topic: &[u8], key: &[u8]) -> u32 {
    let hash = crc32c::crc32c_append(crc32c::crc32c_append(crc32c::crc32c(topic), b"\0"), key);
    if hash == 0 {
        1
    } else {
        hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worked_examples_key_hashes() {
        assert_eq!(key_hash(b"t", b"k"), 0x5076_397E);
        assert_eq!(key_hash(b"t", b"\x01dedup\x01d1"), 0x5F4F_A4C0);
    }
}
