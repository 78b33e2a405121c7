//! CRC32C of several buffers at once, for the scans' per-record check.
//!
//! The `crc32c` crate runs the CPU's `crc32` instruction over one buffer: below 768
//! bytes it is one dependency chain, one instruction per 8 bytes at the instruction's
//! latency (3 cycles), and a record of 50 B (111 bytes under its CRC) or the last 300
//! bytes of a 1 KiB one wait on it. The instruction's throughput is one per cycle, so
//! `LANES` records' chains run side by side here, 8 bytes of each in turn, at about the
//! cost of one. Same result as `crc32c::crc32c` of each buffer (held by the tests).

/// How many buffers `crc32c_lanes` checks together.
pub const LANES: usize = 4;

/// `crc32c::crc32c` of each buffer.
pub fn crc32c_lanes(buffers: [&[u8]; LANES]) -> [u32; LANES] {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU has SSE 4.2 (checked just above), all `lanes_sse42` needs.
        return unsafe { lanes_sse42(buffers) };
    }
    buffers.map(crc32c::crc32c)
}

/// `crc32c::crc32c` of 16 bytes (a consume-queue entry's checked part): two instructions,
/// where the crate's general path splits the buffer first.
pub fn crc32c_16(data: &[u8; 16]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU has SSE 4.2 (checked just above), all `sixteen_sse42` needs.
        return unsafe { sixteen_sse42(data) };
    }
    crc32c::crc32c(data)
}

/// Set the check of every `stride`-byte entry of `entries`: its 4 bytes at 16, the
/// CRC32C of its first 16 (consume-queue entries, `stride` 20). One call for a whole
/// queue's entries, whose CRCs are independent chains the CPU overlaps.
pub fn seal_checks(entries: &mut [u8], stride: usize) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU has SSE 4.2 (checked just above), all `seal_sse42` needs.
        unsafe { seal_sse42(entries, stride) };
        return;
    }
    for entry in entries.chunks_exact_mut(stride) {
        let check = crc32c::crc32c(&entry[..16]);
        entry[16..20].copy_from_slice(&check.to_le_bytes());
    }
}

/// The first `stride`-byte entry of `entries` whose 4 bytes at 16 are not the CRC32C of
/// its first 16, if any.
pub fn first_unchecked(entries: &[u8], stride: usize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU has SSE 4.2 (checked just above), all `unchecked_sse42` needs.
        return unsafe { unchecked_sse42(entries, stride) };
    }
    entries
        .chunks_exact(stride)
        .position(|entry| crc32c::crc32c(&entry[..16]).to_le_bytes() != entry[16..20])
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn seal_sse42(entries: &mut [u8], stride: usize) {
    for entry in entries.chunks_exact_mut(stride) {
        let check = sixteen_sse42(entry[..16].try_into().expect("16 bytes"));
        entry[16..20].copy_from_slice(&check.to_le_bytes());
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn unchecked_sse42(entries: &[u8], stride: usize) -> Option<usize> {
    entries.chunks_exact(stride).position(|entry| {
        sixteen_sse42(entry[..16].try_into().expect("16 bytes")).to_le_bytes() != entry[16..20]
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn sixteen_sse42(data: &[u8; 16]) -> u32 {
    use std::arch::x86_64::_mm_crc32_u64;

    let low = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
    let high = u64::from_le_bytes(data[8..].try_into().expect("8 bytes"));
    !(_mm_crc32_u64(_mm_crc32_u64(u64::from(u32::MAX), low), high) as u32)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn lanes_sse42(buffers: [&[u8]; LANES]) -> [u32; LANES] {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};

    let word = |buffer: &[u8], at: usize| {
        u64::from_le_bytes(buffer[at..at + 8].try_into().expect("8 bytes"))
    };
    let shortest = buffers.iter().map(|b| b.len()).min().unwrap_or(0);
    let common = shortest / 8 * 8;
    let mut crcs = [u64::from(u32::MAX); LANES];
    let mut at = 0;
    // The lanes' words in turn: LANES independent chains in flight.
    while at < common {
        for (crc, buffer) in crcs.iter_mut().zip(buffers) {
            *crc = _mm_crc32_u64(*crc, word(buffer, at));
        }
        at += 8;
    }
    // Each lane's rest alone (the same length in a batch's records: nothing but bytes).
    for (crc, buffer) in crcs.iter_mut().zip(buffers) {
        let mut pos = at;
        while pos + 8 <= buffer.len() {
            *crc = _mm_crc32_u64(*crc, word(buffer, pos));
            pos += 8;
        }
        let mut small = *crc as u32;
        for &byte in &buffer[pos..] {
            small = _mm_crc32_u8(small, byte);
        }
        *crc = u64::from(small);
    }
    crcs.map(|crc| !(crc as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_worked_example_in_every_lane() {
        let check = b"123456789".as_slice();
        assert_eq!(crc32c_lanes([check; LANES]), [0xE306_9283; LANES]);
    }

    proptest! {
        #[test]
        fn sealed_entries_carry_the_crates_crc_and_a_changed_one_is_found(
            mut entries in prop::collection::vec(any::<u8>(), 0..400),
            flip in any::<prop::sample::Index>(),
        ) {
            let whole = entries.len() / 20 * 20;
            seal_checks(&mut entries, 20);
            for entry in entries[..whole].chunks_exact(20) {
                prop_assert_eq!(&entry[16..], &crc32c::crc32c(&entry[..16]).to_le_bytes()[..]);
            }
            prop_assert_eq!(first_unchecked(&entries, 20), None);
            if whole > 0 {
                let at = flip.index(whole);
                entries[at] ^= 0x40;
                prop_assert_eq!(first_unchecked(&entries, 20), Some(at / 20));
            }
        }

        #[test]
        fn sixteen_bytes_are_the_crates_crc(data in any::<[u8; 16]>()) {
            prop_assert_eq!(crc32c_16(&data), crc32c::crc32c(&data));
        }

        #[test]
        fn each_lane_is_the_crates_crc(
            a in prop::collection::vec(any::<u8>(), 0..1200),
            b in prop::collection::vec(any::<u8>(), 0..1200),
            c in prop::collection::vec(any::<u8>(), 0..40),
            d in prop::collection::vec(any::<u8>(), 0..1200),
        ) {
            let buffers = [a.as_slice(), b.as_slice(), c.as_slice(), d.as_slice()];
            prop_assert_eq!(crc32c_lanes(buffers), buffers.map(crc32c::crc32c));
        }
    }
}
