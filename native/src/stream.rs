//! Copies written past the CPU's caches. A filtered scan holds up to 10,000 messages
//! when it answers (`filters.MAX_MATCHES`): ~18 MB for 1 KiB bodies, past the caches,
//! so each body it copies lands on lines last used a whole answer ago, which an
//! ordinary store first reads from memory (read for ownership) before it writes them.
//! A non-temporal store writes a whole line without reading it, and does not push out
//! of the caches the records the scan reads next.

/// The size of a cache line.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const LINE: usize = 64;

/// Copy `src` into `dst` (of the same length): the whole 64-byte lines of `dst` with
/// non-temporal stores, its partial first and last lines as `copy_from_slice` does.
/// Other threads may see the streamed bytes only after a `fence`: call it before the
/// copies are handed to anyone else. Elsewhere than on x86_64, `copy_from_slice`.
pub fn copy_past_cache(dst: &mut [u8], src: &[u8]) {
    assert_eq!(
        dst.len(),
        src.len(),
        "a copy is between slices of one length"
    );
    #[cfg(target_arch = "x86_64")]
    {
        let head = dst.as_ptr().align_offset(LINE).min(dst.len());
        let lines = (dst.len() - head) / LINE;
        let tail = head + lines * LINE;
        dst[..head].copy_from_slice(&src[..head]);
        for n in 0..lines {
            let at = head + n * LINE;
            let to = dst[at..at + LINE]
                .as_mut_ptr()
                .cast::<std::arch::x86_64::__m128i>();
            let from = src[at..at + LINE]
                .as_ptr()
                .cast::<std::arch::x86_64::__m128i>();
            // SAFETY: SSE2 is part of x86_64. `from` points at 64 readable bytes of
            // `src` (read unaligned); `to` at 64 writable bytes of `dst` aligned to 64
            // (`head` made it so), so each of the four 16-byte stores is aligned to 16
            // as `_mm_stream_si128` requires.
            unsafe {
                use std::arch::x86_64::{_mm_loadu_si128, _mm_stream_si128};
                for i in 0..4 {
                    _mm_stream_si128(to.add(i), _mm_loadu_si128(from.add(i)));
                }
            }
        }
        dst[tail..].copy_from_slice(&src[tail..]);
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

/// Order the non-temporal stores made so far before any later store: after it, any
/// thread that sees a later store (a lock released, a pointer published) sees them.
pub fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86_64; SFENCE has no operands and no other effect.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_past_the_cache_is_the_same_bytes_at_every_length_and_alignment() {
        let src: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut room = vec![0u8; 1200];
        for offset in 0..LINE + 3 {
            for len in (0..300).chain([511, 512, 513, 1000 - LINE - 3]) {
                room.fill(0xAA);
                let from = (offset * 5) % 7;
                copy_past_cache(&mut room[offset..offset + len], &src[from..from + len]);
                fence();
                assert_eq!(&room[offset..offset + len], &src[from..from + len]);
                assert!(room[..offset].iter().all(|&b| b == 0xAA));
                assert!(room[offset + len..].iter().all(|&b| b == 0xAA));
            }
        }
    }
}
