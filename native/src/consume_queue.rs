//! Consume-queue entries (docs/FORMAT.md, "Consume queues"): 20 bytes each, commit
//! offset (u64), record length (u32, 0 = not written), tag hash (u32: the low half of
//! the record's 64-bit tag hash), check (u32: CRC32C of the 16 bytes before it).
//!
//! Entries written before the check existed hold the whole 64-bit tag hash in the last
//! 8 bytes: they fail the check (but for one in 2³²), and are verified against their
//! records, as a damaged entry is.

pub const ENTRY_SIZE: usize = 20;
/// Bytes of an entry the check covers.
pub const CHECKED_BYTES: usize = 16;

/// An entry to write: its record's place and 64-bit tag hash (`tags::tag_hash`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub commit_offset: u64,
    pub size: u32,
    pub tag_hash: u64,
}

/// An entry as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stored {
    pub commit_offset: u64,
    pub size: u32,
    pub tag: u32,
    pub check: u32,
}

/// The tag hash an entry stores for a record whose 64-bit tag hash is `tag_hash`: its
/// low half, 0 only for no tag (a tag whose low half is 0 is stored as 1).
pub fn entry_tag(tag_hash: u64) -> u32 {
    let low = tag_hash as u32;
    if low == 0 && tag_hash != 0 {
        1
    } else {
        low
    }
}

/// The check of an entry's first 16 bytes.
pub fn check_of(head: &[u8]) -> u32 {
    crate::crc::crc32c_16(head[..CHECKED_BYTES].try_into().expect("16 bytes"))
}

impl Entry {
    pub fn pack_into(&self, out: &mut Vec<u8>) {
        let at = out.len();
        self.pack_unchecked_into(out);
        let check = check_of(&out[at..]);
        out[at + CHECKED_BYTES..].copy_from_slice(&check.to_le_bytes());
    }

    /// The entry's bytes, its check included (`pack_into` without a buffer: a single
    /// append's entry, on the stack).
    pub fn packed(&self) -> [u8; ENTRY_SIZE] {
        let mut entry = [0u8; ENTRY_SIZE];
        entry[0..8].copy_from_slice(&self.commit_offset.to_le_bytes());
        entry[8..12].copy_from_slice(&self.size.to_le_bytes());
        entry[12..16].copy_from_slice(&entry_tag(self.tag_hash).to_le_bytes());
        let check = check_of(&entry);
        entry[CHECKED_BYTES..].copy_from_slice(&check.to_le_bytes());
        entry
    }

    /// The entry with a zero check: many packed this way are given their checks by one
    /// `crc::seal_checks`.
    pub fn pack_unchecked_into(&self, out: &mut Vec<u8>) {
        let mut entry = [0u8; ENTRY_SIZE];
        entry[0..8].copy_from_slice(&self.commit_offset.to_le_bytes());
        entry[8..12].copy_from_slice(&self.size.to_le_bytes());
        entry[12..16].copy_from_slice(&entry_tag(self.tag_hash).to_le_bytes());
        out.extend_from_slice(&entry);
    }

    /// The entry's bytes as read: see `Stored`.
    pub fn parse(data: &[u8]) -> Stored {
        Stored {
            commit_offset: u64::from_le_bytes(data[0..8].try_into().expect("8 bytes")),
            size: u32::from_le_bytes(data[8..12].try_into().expect("4 bytes")),
            tag: u32::from_le_bytes(data[12..16].try_into().expect("4 bytes")),
            check: u32::from_le_bytes(data[16..20].try_into().expect("4 bytes")),
        }
    }
}

/// Whether the entry at the start of `data` passes its check.
pub fn checked(data: &[u8]) -> bool {
    u32::from_le_bytes(data[16..20].try_into().expect("4 bytes")) == check_of(data)
}

/// Give every written entry of `entries` that fails its check one, taking its last 8
/// bytes as a 64-bit tag hash (entries packed before the check existed, or by code that
/// packs the 64-bit hash). Entries of zeros (not written) stay zeros. Whether any changed.
pub fn seal(entries: &mut [u8]) -> bool {
    let mut changed = false;
    for entry in entries.chunks_exact_mut(ENTRY_SIZE) {
        if entry.iter().all(|&b| b == 0) || checked(entry) {
            continue;
        }
        let tag_hash = u64::from_le_bytes(entry[12..20].try_into().expect("8 bytes"));
        entry[12..16].copy_from_slice(&entry_tag(tag_hash).to_le_bytes());
        let check = check_of(entry);
        entry[16..20].copy_from_slice(&check.to_le_bytes());
        changed = true;
    }
    changed
}

/// Whether every entry of `entries` is sealed already (or not written).
pub fn all_sealed(entries: &[u8]) -> bool {
    let mut rest = &entries[..entries.len() / ENTRY_SIZE * ENTRY_SIZE];
    while let Some(found) = crate::crc::first_unchecked(rest, ENTRY_SIZE) {
        let end = (found + 1) * ENTRY_SIZE;
        if rest[found * ENTRY_SIZE..end].iter().any(|&b| b != 0) {
            return false;
        }
        rest = &rest[end..];
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worked_examples_entry_packs_and_parses() {
        let entry = Entry {
            commit_offset: 0,
            size: 69,
            tag_hash: 0x4F58_6EF9_6743_DF4A,
        };
        let mut out = Vec::new();
        entry.pack_into(&mut out);
        let check = crc32c::crc32c(&out[..16]).to_le_bytes();
        assert_eq!(
            out[..16],
            [0, 0, 0, 0, 0, 0, 0, 0, 0x45, 0, 0, 0, 0x4a, 0xdf, 0x43, 0x67]
        );
        assert_eq!(out[16..], check);
        assert_eq!(entry.packed()[..], out[..]);
        let stored = Entry::parse(&out);
        assert_eq!((stored.size, stored.tag), (69, 0x6743_DF4A));
        assert!(checked(&out));
    }

    #[test]
    fn an_old_entry_is_sealed_as_a_new_one_is_packed() {
        let entry = Entry {
            commit_offset: 1234,
            size: 99,
            tag_hash: 0x0000_0001_0000_0000,
        };
        let mut old = Vec::new();
        old.extend_from_slice(&1234u64.to_le_bytes());
        old.extend_from_slice(&99u32.to_le_bytes());
        old.extend_from_slice(&entry.tag_hash.to_le_bytes());
        old.extend_from_slice(&[0; 20]);
        assert!(!checked(&old));
        assert!(seal(&mut old));
        let mut new = Vec::new();
        entry.pack_into(&mut new);
        assert_eq!(old[..20], new[..]);
        assert_eq!(Entry::parse(&new).tag, 1);
        assert_eq!(old[20..], [0; 20]);
        assert!(all_sealed(&old));
        assert!(!seal(&mut old));
    }

    #[test]
    fn every_flipped_bit_fails_the_check() {
        let mut out = Vec::new();
        Entry {
            commit_offset: 777,
            size: 120,
            tag_hash: 42,
        }
        .pack_into(&mut out);
        for bit in 0..ENTRY_SIZE * 8 {
            let mut damaged = out.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(!checked(&damaged), "bit {bit}");
        }
    }
}
