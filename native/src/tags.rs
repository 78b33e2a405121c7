//! Tag hashes stored in consume-queue entries (docs/FORMAT.md, "Tag hash").

/// BLAKE2b with an 8-byte digest, read little-endian; 0 is stored as 1, and no tag is 0.
pub fn tag_hash(tag: &[u8]) -> u64 {
    if tag.is_empty() {
        return 0;
    }
    let digest = blake2b_simd::Params::new().hash_length(8).hash(tag);
    let hash = u64::from_le_bytes(digest.as_bytes().try_into().expect("8 bytes"));
    if hash == 0 {
        1
    } else {
        hash
    }
}

/// Tag hashes of the tags met in a walk, remembered (a batch's records share one tag).
#[derive(Default)]
pub struct TagHashes {
    last: Vec<u8>,
    last_hash: u64,
}

impl TagHashes {
    pub fn hash(&mut self, tag: &[u8]) -> u64 {
        if tag.is_empty() {
            return 0;
        }
        if tag != self.last.as_slice() || self.last_hash == 0 {
            self.last.clear();
            self.last.extend_from_slice(tag);
            self.last_hash = tag_hash(tag);
        }
        self.last_hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worked_examples_tag_hash() {
        assert_eq!(tag_hash(b"x"), 0x4F58_6EF9_6743_DF4A);
        assert_eq!(tag_hash(b""), 0);
        assert_eq!(TagHashes::default().hash(b"x"), 0x4F58_6EF9_6743_DF4A);
    }
}
