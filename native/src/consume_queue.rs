//! Consume-queue entries (docs/FORMAT.md, "Consume queues"): 20 bytes each,
//! commit offset (u64), record length (u32, 0 = not written), tag hash (u64).

pub const ENTRY_SIZE: usize = 20;

/// One entry's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub commit_offset: u64,
    pub size: u32,
    pub tag_hash: u64,
}

impl Entry {
    pub fn parse(data: &[u8]) -> Entry {
        Entry {
            commit_offset: u64::from_le_bytes(data[0..8].try_into().expect("8 bytes")),
            size: u32::from_le_bytes(data[8..12].try_into().expect("4 bytes")),
            tag_hash: u64::from_le_bytes(data[12..20].try_into().expect("8 bytes")),
        }
    }

    pub fn pack_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.commit_offset.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.tag_hash.to_le_bytes());
    }
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
        assert_eq!(
            out,
            [
                0, 0, 0, 0, 0, 0, 0, 0, 0x45, 0, 0, 0, 0x4a, 0xdf, 0x43, 0x67, 0xf9, 0x6e, 0x58,
                0x4f
            ]
        );
        assert_eq!(Entry::parse(&out), entry);
    }
}
