//! CRC32C of several buffers at once, for the scans' per-record check.
//!
//! The `crc32c` crate runs the CPU's `crc32` instruction over one buffer: below 768
//! bytes it is one dependency chain, one instruction per 8 bytes at the instruction's
//! latency (3 cycles), and a record of 50 B (111 bytes under its CRC) or the last 300
//! bytes of a 1 KiB one wait on it. The instruction's throughput is one per cycle, so
//! `LANES` records' chains run side by side here, 8 bytes of each in turn, at about the
//! cost of one. Same result as `crc32c::crc32c` of each buffer (held by the tests).

/// `crc32c::crc32c` of one buffer, by carry-less multiplication where the CPU has it
/// (`fold_avx512`: AVX-512 with VPCLMULQDQ; else `fold_avx2`: AVX2 with VPCLMULQDQ, as
/// AMD's Zen 3 and 4 without AVX-512) and the buffer is `FOLD_FROM` bytes or more, else
/// by one chain of the `crc32` instruction (`short_sse42`, where the CPU has SSE 4.2),
/// else the crate's. A 1 KiB record's CRC in cache: 42 ns folded, 67 by the crate's three
/// chains of the `crc32` instruction (AVX-512; docs/PERFORMANCE.md, issue 34 step 3;
/// the 256-bit fold on a Zen 3 in the same document's step 5).
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    match fold_kind() {
        // SAFETY: the CPU has every feature `fold_avx512` is compiled for (`folds`).
        Fold::Avx512 if data.len() >= FOLD_FROM => return unsafe { fold_avx512(data) },
        // SAFETY: the CPU has every feature `fold_avx2` is compiled for (`folds_avx2`).
        Fold::Avx2 if data.len() >= FOLD_FROM => return unsafe { fold_avx2(data) },
        // SAFETY: both folds need SSE 4.2 (`folds`, `folds_avx2`), all `short_sse42` needs.
        Fold::Avx512 | Fold::Avx2 => return unsafe { short_sse42(data) },
        Fold::Crate => {
            if data.len() < FOLD_FROM && std::is_x86_feature_detected!("sse4.2") {
                // SAFETY: the CPU has SSE 4.2 (checked just above).
                return unsafe { short_sse42(data) };
            }
        }
    }
    crc32c::crc32c(data)
}

/// `crc32c::crc32c` of a buffer shorter than `FOLD_FROM`: one chain of the `crc32`
/// instruction, 8 bytes at a time, then the rest: the crate's chain too at this length,
/// without its work around it (an unaligned head, the split into three parts it looks
/// at and passes by, a tail): a check read's record of ~115 bytes under its CRC cost
/// ~178 instructions the crate's way, ~71 this way (docs/PERFORMANCE.md, check33-s55).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn short_sse42(data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};

    let mut words = data.chunks_exact(8);
    let mut crc = u64::from(u32::MAX);
    for word in &mut words {
        crc = _mm_crc32_u64(crc, u64::from_le_bytes(word.try_into().expect("8 bytes")));
    }
    let mut crc = crc as u32;
    let mut rest = words.remainder();
    if rest.len() >= 4 {
        crc = _mm_crc32_u32(
            crc,
            u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")),
        );
        rest = &rest[4..];
    }
    for &byte in rest {
        crc = _mm_crc32_u8(crc, byte);
    }
    !crc
}

/// Which way `crc32c` checks a buffer of `FOLD_FROM` bytes or more on this CPU.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fold {
    Avx512,
    Avx2,
    Crate,
}

/// This CPU's `Fold`, looked up once (one load a call after that, where the five
/// feature look-ups were five).
#[cfg(target_arch = "x86_64")]
#[inline]
fn fold_kind() -> Fold {
    use std::sync::atomic::{AtomicU8, Ordering};
    static KIND: AtomicU8 = AtomicU8::new(0);
    match KIND.load(Ordering::Relaxed) {
        1 => Fold::Avx512,
        2 => Fold::Avx2,
        3 => Fold::Crate,
        _ => {
            let (kind, code) = if folds() {
                (Fold::Avx512, 1)
            } else if folds_avx2() {
                (Fold::Avx2, 2)
            } else {
                (Fold::Crate, 3)
            };
            KIND.store(code, Ordering::Relaxed);
            kind
        }
    }
}

/// Whether the CPU has what `fold_avx2` uses.
#[cfg(target_arch = "x86_64")]
#[inline]
fn folds_avx2() -> bool {
    std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("vpclmulqdq")
        && std::is_x86_feature_detected!("pclmulqdq")
        && std::is_x86_feature_detected!("sse4.2")
}

/// The shortest buffer folded: four 64-byte registers' worth, the loop's first load.
const FOLD_FROM: usize = 256;

/// Whether the CPU has what `fold_avx512` uses (looked up once; std caches the answer).
#[cfg(target_arch = "x86_64")]
#[inline]
fn folds() -> bool {
    std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512vl")
        && std::is_x86_feature_detected!("vpclmulqdq")
        && std::is_x86_feature_detected!("pclmulqdq")
        && std::is_x86_feature_detected!("sse4.2")
}

/// The polynomial of CRC32C (Castagnoli), with its x^32 term.
const POLY: u64 = 0x1_1EDC_6F41;

/// x^n mod `POLY`, in the polynomial's own bit order.
const fn x_pow_mod(n: u32) -> u32 {
    let mut r: u64 = 1;
    let mut i = 0;
    while i < n {
        r <<= 1;
        if r & (1 << 32) != 0 {
            r ^= POLY;
        }
        i += 1;
    }
    r as u32
}

/// The two multipliers that carry a 128-bit block `bits` bits further along a buffer
/// (for a reflected CRC: x^(bits+32) and x^(bits-32) mod P, bit-reversed, shifted by
/// one), for the block's low and high halves. The same rule gives the published
/// constants of CRC-32 (zlib's `0x154442bd4`, `0x1c6e41596`, ... for 512 and 128 bits).
const fn fold_by(bits: u32) -> (u64, u64) {
    (
        (x_pow_mod(bits + 32).reverse_bits() as u64) << 1,
        (x_pow_mod(bits - 32).reverse_bits() as u64) << 1,
    )
}

/// CRC32C of `data` (at least `FOLD_FROM` bytes) by folding: four 512-bit accumulators
/// carried 256 bytes at a time by carry-less multiplication, folded into one, then
/// 64 and 16 bytes at a time, and the last 128 bits and the bytes after them finished
/// by the `crc32` instruction (a block folded onto the last one leaves the CRC of the
/// buffer unchanged, so the instruction on the remainder gives the buffer's CRC).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq,pclmulqdq,sse4.2")]
fn fold_avx512(data: &[u8]) -> u32 {
    use std::arch::x86_64::*;

    #[inline(always)]
    fn load(data: &[u8], at: usize) -> __m512i {
        let bytes: &[u8; 64] = data[at..at + 64].try_into().expect("64 bytes");
        // SAFETY: `bytes` is 64 readable bytes; the load is unaligned.
        unsafe { _mm512_loadu_si512(bytes.as_ptr().cast()) }
    }
    #[inline(always)]
    fn load16(data: &[u8], at: usize) -> __m128i {
        let bytes: &[u8; 16] = data[at..at + 16].try_into().expect("16 bytes");
        // SAFETY: `bytes` is 16 readable bytes; the load is unaligned.
        unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn wide(k: (u64, u64)) -> __m512i {
        let (low, high) = (k.0 as i64, k.1 as i64);
        _mm512_set_epi64(high, low, high, low, high, low, high, low)
    }
    /// Each 128-bit lane of `x` carried forward by `k`'s distance, onto `next`.
    #[inline]
    #[target_feature(enable = "avx512f,vpclmulqdq")]
    fn fold(x: __m512i, k: __m512i, next: __m512i) -> __m512i {
        let low = _mm512_clmulepi64_epi128::<0x00>(x, k);
        let high = _mm512_clmulepi64_epi128::<0x11>(x, k);
        _mm512_ternarylogic_epi64::<0x96>(low, high, next)
    }

    const BY_256_BYTES: (u64, u64) = fold_by(2048);
    const BY_64_BYTES: (u64, u64) = fold_by(512);
    const BY_48_BYTES: (u64, u64) = fold_by(384);
    const BY_32_BYTES: (u64, u64) = fold_by(256);
    const BY_16_BYTES: (u64, u64) = fold_by(128);

    let len = data.len();
    // The CRC's initial value (all ones) is the first 32 bits of the buffer inverted.
    let ones = _mm512_castsi128_si512(_mm_cvtsi32_si128(-1));
    let mut x0 = _mm512_xor_si512(load(data, 0), ones);
    let mut x1 = load(data, 64);
    let mut x2 = load(data, 128);
    let mut x3 = load(data, 192);
    let mut at = 256;
    let k = wide(BY_256_BYTES);
    while len - at >= 256 {
        x0 = fold(x0, k, load(data, at));
        x1 = fold(x1, k, load(data, at + 64));
        x2 = fold(x2, k, load(data, at + 128));
        x3 = fold(x3, k, load(data, at + 192));
        at += 256;
    }
    let k = wide(BY_64_BYTES);
    let mut x = fold(fold(fold(x0, k, x1), k, x2), k, x3);
    while len - at >= 64 {
        x = fold(x, k, load(data, at));
        at += 64;
    }
    // The register's four 128-bit lanes onto its last: 48, 32 and 16 bytes further.
    let k = _mm512_set_epi64(
        0,
        0,
        BY_16_BYTES.1 as i64,
        BY_16_BYTES.0 as i64,
        BY_32_BYTES.1 as i64,
        BY_32_BYTES.0 as i64,
        BY_48_BYTES.1 as i64,
        BY_48_BYTES.0 as i64,
    );
    let carried = _mm512_xor_si512(
        _mm512_clmulepi64_epi128::<0x00>(x, k),
        _mm512_clmulepi64_epi128::<0x11>(x, k),
    );
    let mut v = _mm_ternarylogic_epi64::<0x96>(
        _mm512_extracti32x4_epi32::<0>(carried),
        _mm512_extracti32x4_epi32::<1>(carried),
        _mm512_extracti32x4_epi32::<2>(carried),
    );
    v = _mm_xor_si128(v, _mm512_extracti32x4_epi32::<3>(x));
    let k = _mm_set_epi64x(BY_16_BYTES.1 as i64, BY_16_BYTES.0 as i64);
    while len - at >= 16 {
        let low = _mm_clmulepi64_si128::<0x00>(v, k);
        let high = _mm_clmulepi64_si128::<0x11>(v, k);
        v = _mm_ternarylogic_epi64::<0x96>(low, high, load16(data, at));
        at += 16;
    }
    finish(v, &data[at..])
}

/// The end of a fold: `v`, the last 128 bits folded so far, and `rest`, the 0-15 bytes
/// after them, by the `crc32` instruction.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "sse4.2")]
fn finish(v: std::arch::x86_64::__m128i, rest: &[u8]) -> u32 {
    use std::arch::x86_64::*;

    let mut crc = _mm_crc32_u64(0, _mm_cvtsi128_si64(v) as u64);
    crc = _mm_crc32_u64(crc, _mm_extract_epi64::<1>(v) as u64);
    // The last 0-15 bytes: a word, a half, a quarter and a byte at most (one
    // instruction a byte was up to 15 in a row at 3 cycles each).
    let (word, rest) = rest.split_at(rest.len() & 8);
    if let Ok(word) = <[u8; 8]>::try_from(word) {
        crc = _mm_crc32_u64(crc, u64::from_le_bytes(word));
    }
    let mut crc = crc as u32;
    let (half, rest) = rest.split_at(rest.len() & 4);
    if let Ok(half) = <[u8; 4]>::try_from(half) {
        crc = _mm_crc32_u32(crc, u32::from_le_bytes(half));
    }
    let (quarter, rest) = rest.split_at(rest.len() & 2);
    if let Ok(quarter) = <[u8; 2]>::try_from(quarter) {
        crc = _mm_crc32_u16(crc, u16::from_le_bytes(quarter));
    }
    if let Some(&byte) = rest.first() {
        crc = _mm_crc32_u8(crc, byte);
    }
    !crc
}

/// CRC32C of `data` (at least `FOLD_FROM` bytes) by folding as `fold_avx512` does, with
/// 256-bit registers: four accumulators carried 128 bytes at a time, folded into one,
/// then 32 and 16 bytes at a time, and the rest by the `crc32` instruction (`finish`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
fn fold_avx2(data: &[u8]) -> u32 {
    use std::arch::x86_64::*;

    #[inline(always)]
    fn load(data: &[u8], at: usize) -> __m256i {
        let bytes: &[u8; 32] = data[at..at + 32].try_into().expect("32 bytes");
        // SAFETY: `bytes` is 32 readable bytes; the load is unaligned.
        unsafe { _mm256_loadu_si256(bytes.as_ptr().cast()) }
    }
    #[inline(always)]
    fn load16(data: &[u8], at: usize) -> __m128i {
        let bytes: &[u8; 16] = data[at..at + 16].try_into().expect("16 bytes");
        // SAFETY: `bytes` is 16 readable bytes; the load is unaligned.
        unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn wide(k: (u64, u64)) -> __m256i {
        let (low, high) = (k.0 as i64, k.1 as i64);
        _mm256_set_epi64x(high, low, high, low)
    }
    /// Each 128-bit lane of `x` carried forward by `k`'s distance, onto `next`.
    #[inline]
    #[target_feature(enable = "avx2,vpclmulqdq")]
    fn fold(x: __m256i, k: __m256i, next: __m256i) -> __m256i {
        let low = _mm256_clmulepi64_epi128::<0x00>(x, k);
        let high = _mm256_clmulepi64_epi128::<0x11>(x, k);
        _mm256_xor_si256(_mm256_xor_si256(low, high), next)
    }

    const BY_128_BYTES: (u64, u64) = fold_by(1024);
    const BY_32_BYTES: (u64, u64) = fold_by(256);
    const BY_16_BYTES: (u64, u64) = fold_by(128);

    let len = data.len();
    // The CRC's initial value (all ones) is the first 32 bits of the buffer inverted.
    let ones = _mm256_set_epi64x(0, 0, 0, 0xFFFF_FFFF);
    let mut x0 = _mm256_xor_si256(load(data, 0), ones);
    let mut x1 = load(data, 32);
    let mut x2 = load(data, 64);
    let mut x3 = load(data, 96);
    let mut at = 128;
    let k = wide(BY_128_BYTES);
    while len - at >= 128 {
        x0 = fold(x0, k, load(data, at));
        x1 = fold(x1, k, load(data, at + 32));
        x2 = fold(x2, k, load(data, at + 64));
        x3 = fold(x3, k, load(data, at + 96));
        at += 128;
    }
    let k = wide(BY_32_BYTES);
    let mut x = fold(fold(fold(x0, k, x1), k, x2), k, x3);
    while len - at >= 32 {
        x = fold(x, k, load(data, at));
        at += 32;
    }
    // The register's low 128-bit lane onto its high one, 16 bytes further.
    let k = _mm_set_epi64x(BY_16_BYTES.1 as i64, BY_16_BYTES.0 as i64);
    let low = _mm256_castsi256_si128(x);
    let mut v = _mm_xor_si128(
        _mm_xor_si128(
            _mm_clmulepi64_si128::<0x00>(low, k),
            _mm_clmulepi64_si128::<0x11>(low, k),
        ),
        _mm256_extracti128_si256::<1>(x),
    );
    while len - at >= 16 {
        let carried = _mm_xor_si128(
            _mm_clmulepi64_si128::<0x00>(v, k),
            _mm_clmulepi64_si128::<0x11>(v, k),
        );
        v = _mm_xor_si128(carried, load16(data, at));
        at += 16;
    }
    finish(v, &data[at..])
}

/// How many buffers `crc32c_lanes` checks together.
pub const LANES: usize = 4;

/// `crc32c::crc32c` of each buffer: each folded on its own (`crc32c`) where the CPU
/// folds and every buffer is `FOLD_FROM` bytes or more, else the lanes side by side.
/// Folded, a 1 KiB record's CRC costs 26-29 ns in cache against 39 for its share of
/// the lanes, and over a segment read from memory the scan went from 4.3 to 6.6-7.0
/// GB/s of CPU: one record's 64-byte loads in a row are what the CPU's prefetcher
/// follows, four records' 8-byte words in turn are not (docs/PERFORMANCE.md, issue 29
/// part 6).
pub fn crc32c_lanes(buffers: [&[u8]; LANES]) -> [u32; LANES] {
    #[cfg(target_arch = "x86_64")]
    if buffers.iter().all(|b| b.len() >= FOLD_FROM) && folds() {
        // SAFETY: the CPU has every feature `fold_avx512` is compiled for (`folds`).
        return buffers.map(|buffer| unsafe { fold_avx512(buffer) });
    }
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

/// The CRC32C polynomial, reflected (bit 31 is x^0): the register's bit order.
const POLY_REFLECTED: u32 = 0x82F6_3B78;

/// a(x) * b(x) mod P in the reflected bit order (zlib's `multmodp`).
const fn multiply(a: u32, mut b: u32) -> u32 {
    if a == 0 {
        return 0;
    }
    let mut m: u32 = 1 << 31;
    let mut p = 0;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                return p;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 {
            (b >> 1) ^ POLY_REFLECTED
        } else {
            b >> 1
        };
    }
}

/// x^(2^k) mod P, reflected, for k below 64.
const X_TO_2_TO_K: [u32; 64] = {
    let mut table = [0u32; 64];
    table[0] = 1 << 30; // x^1
    let mut k = 1;
    while k < 64 {
        table[k] = multiply(table[k - 1], table[k - 1]);
        k += 1;
    }
    table
};

/// x^e mod P, reflected.
fn x_to(e: u64) -> u32 {
    let mut p: u32 = 1 << 31; // x^0
    let mut e = e;
    let mut k = 0;
    while e != 0 {
        if e & 1 != 0 {
            p = multiply(X_TO_2_TO_K[k], p);
        }
        e >>= 1;
        k += 1;
    }
    p
}

/// What carries a CRC register over `n` zero bytes (`zero_shift`): x^(8n) mod P, or
/// with the carry-less multiply x^(8n-32) mod P (the `crc32` instruction that reduces
/// the product adds the other x^32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZeroShift {
    constant: u32,
    clmul: bool,
}

/// The shift over `n` zero bytes (about a microsecond: made once per record length).
pub fn zero_shift(n: usize) -> ZeroShift {
    let bits = 8 * n as u64;
    #[cfg(target_arch = "x86_64")]
    if bits >= 32 && shifts_by_clmul() {
        return ZeroShift {
            constant: x_to(bits - 32),
            clmul: true,
        };
    }
    ZeroShift {
        constant: x_to(bits),
        clmul: false,
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn shifts_by_clmul() -> bool {
    std::is_x86_feature_detected!("pclmulqdq") && std::is_x86_feature_detected!("sse4.2")
}

/// The change to a record's CRC32C when the bytes `changed` (zero before) are set and
/// `by` carries it to the end of the checked bytes: the raw CRC of `changed` (no
/// inversion: a change from zeros is linear) times x^(8n). With it a record is
/// encoded and checked with its place zero before the pen, and the place set under it
/// in a few nanoseconds (appending.rs `place_plain`): crc(a ^ d) = crc(a) ^ raw(d).
#[inline]
pub fn change_of(changed: &[u8; 36], by: ZeroShift) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if by.clmul {
        // SAFETY: a `ZeroShift` is made with `clmul` only where the CPU has PCLMULQDQ
        // and SSE 4.2 (`zero_shift`), all `change_clmul` is compiled for.
        return unsafe { change_clmul(changed, by.constant) };
    }
    let raw = !crc32c::crc32c_append(u32::MAX, changed);
    multiply(by.constant, raw)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "pclmulqdq,sse4.2")]
fn change_clmul(changed: &[u8; 36], constant: u32) -> u32 {
    use std::arch::x86_64::{
        _mm_clmulepi64_si128, _mm_crc32_u32, _mm_crc32_u64, _mm_cvtsi128_si64, _mm_cvtsi32_si128,
    };

    let word = |at: usize| u64::from_le_bytes(changed[at..at + 8].try_into().expect("8 bytes"));
    let mut raw = 0u64;
    for at in [0, 8, 16, 24] {
        raw = _mm_crc32_u64(raw, word(at));
    }
    let last = u32::from_le_bytes(changed[32..36].try_into().expect("4 bytes"));
    let raw = _mm_crc32_u32(raw as u32, last);
    // The product of two reflected 32-bit polynomials, as the integers' carry-less
    // product shifted up one (bit 63 is x^0), reduced with the x^32 the instruction adds.
    let product = _mm_clmulepi64_si128(
        _mm_cvtsi32_si128(raw as i32),
        _mm_cvtsi32_si128(constant as i32),
        0x00,
    );
    _mm_crc32_u64(0, (_mm_cvtsi128_si64(product) as u64) << 1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `change_of` is the CRC change of setting 36 zero bytes followed by `n` more, by
    /// the carry-less multiply and by software alike, over record-like lengths.
    #[test]
    fn a_change_from_zeros_is_its_raw_crc_carried() {
        let mut seed = 0x1234_5678_u32;
        for n in [
            0usize, 1, 3, 4, 7, 12, 13, 63, 64, 65, 200, 1035, 4096, 70_000,
        ] {
            let mut data = vec![0u8; 8 + 36 + n];
            for byte in data.iter_mut() {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                *byte = (seed >> 16) as u8;
            }
            let mut zeroed = data.clone();
            zeroed[8..44].fill(0);
            let changed: [u8; 36] = data[8..44].try_into().unwrap();
            let by = zero_shift(n);
            let want = crc32c::crc32c(&data);
            assert_eq!(
                crc32c::crc32c(&zeroed) ^ change_of(&changed, by),
                want,
                "n {n}"
            );
            let soft = ZeroShift {
                constant: x_to(8 * n as u64),
                clmul: false,
            };
            assert_eq!(
                crc32c::crc32c(&zeroed) ^ change_of(&changed, soft),
                want,
                "soft {n}"
            );
        }
    }
    use proptest::prelude::*;

    /// `crc32c` is the crate's at every length the short path takes and across the fold's
    /// threshold, whatever the buffer's alignment.
    #[test]
    fn one_buffers_crc_is_the_crates_at_every_short_length() {
        let mut seed = 0x9E37_79B9_u32;
        let mut data = vec![0u8; FOLD_FROM + 72];
        for byte in data.iter_mut() {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            *byte = (seed >> 16) as u8;
        }
        for start in 0..8 {
            for len in 0..=FOLD_FROM + 64 {
                let buffer = &data[start..start + len];
                assert_eq!(
                    crc32c(buffer),
                    crc32c::crc32c(buffer),
                    "start {start} len {len}"
                );
            }
        }
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn the_worked_example_in_every_lane() {
        let check = b"123456789".as_slice();
        assert_eq!(crc32c_lanes([check; LANES]), [0xE306_9283; LANES]);
    }

    #[test]
    fn the_fold_constants_rule_gives_crc32s_published_ones() {
        // The same rule over CRC-32's polynomial (zlib's folding constants).
        const IEEE: u64 = 0x1_04C1_1DB7;
        let k = |n: u32| {
            let mut r: u64 = 1;
            for _ in 0..n {
                r <<= 1;
                if r & (1 << 32) != 0 {
                    r ^= IEEE;
                }
            }
            u64::from((r as u32).reverse_bits()) << 1
        };
        assert_eq!((k(544), k(480)), (0x1_5444_2bd4, 0x1_c6e4_1596));
        assert_eq!((k(160), k(96)), (0x1_7519_97d0, 0x0_ccaa_009e));
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn this_machine_folds_when_it_has_avx512_and_vpclmulqdq() {
        // Says which path the other tests held to the crate on this machine.
        eprintln!("folds: {}", folds());
    }

    #[test]
    fn the_fold_at_every_length_and_alignment_around_its_steps() {
        let data: Vec<u8> = (0..3000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for start in 0..8 {
            for len in (0..700).chain([1023, 1024, 1025, 1106, 2047, 2048, 2049]) {
                let buffer = &data[start..start + len];
                assert_eq!(crc32c(buffer), crc32c::crc32c(buffer), "{start} {len}");
                #[cfg(target_arch = "x86_64")]
                if len >= FOLD_FROM && folds() {
                    // SAFETY: the CPU has every feature it is compiled for (`folds`).
                    let folded = unsafe { fold_avx512(buffer) };
                    assert_eq!(folded, crc32c::crc32c(buffer), "{start} {len}");
                }
            }
        }
        assert_eq!(crc32c(&[0u8; 300]), crc32c::crc32c(&[0u8; 300]));
        assert_eq!(crc32c(&[0xffu8; 300]), crc32c::crc32c(&[0xffu8; 300]));
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_cpu_with_avx2_and_vpclmulqdq_folds() {
        // AVX-512's fold where the CPU has it, else the 256-bit one (AMD Zen 3, Intel
        // Ice Lake and later without AVX-512 enabled): either is what `crc32c` takes.
        let has = |f: &str| match f {
            "avx2" => std::is_x86_feature_detected!("avx2"),
            "vpclmulqdq" => std::is_x86_feature_detected!("vpclmulqdq"),
            _ => unreachable!(),
        };
        let expected = if folds() {
            Fold::Avx512
        } else if has("avx2") && has("vpclmulqdq") && std::is_x86_feature_detected!("sse4.2") {
            Fold::Avx2
        } else {
            Fold::Crate
        };
        assert_eq!(fold_kind(), expected);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_256_bit_fold_at_every_length_and_alignment_around_its_steps() {
        if !folds_avx2() {
            eprintln!("no AVX2 and VPCLMULQDQ here: the 256-bit fold not run");
            return;
        }
        let data: Vec<u8> = (0..3000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for start in 0..8 {
            for len in (FOLD_FROM..800).chain([1023, 1024, 1025, 1106, 2047, 2048, 2049]) {
                let buffer = &data[start..start + len];
                // SAFETY: the CPU has every feature it is compiled for (`folds_avx2`).
                let folded = unsafe { fold_avx2(buffer) };
                assert_eq!(folded, crc32c::crc32c(buffer), "{start} {len}");
            }
        }
        for byte in [0u8, 0xff] {
            // SAFETY: as above.
            assert_eq!(
                unsafe { fold_avx2(&[byte; 300]) },
                crc32c::crc32c(&[byte; 300])
            );
        }
    }

    proptest! {
        #[test]
        #[cfg(target_arch = "x86_64")]
        fn the_256_bit_fold_is_the_crates_crc(
            data in prop::collection::vec(any::<u8>(), FOLD_FROM..5000),
        ) {
            if folds_avx2() {
                // SAFETY: the CPU has every feature it is compiled for (`folds_avx2`).
                prop_assert_eq!(unsafe { fold_avx2(&data) }, crc32c::crc32c(&data));
            }
        }

        #[test]
        fn each_folded_lane_is_the_crates_crc(
            a in prop::collection::vec(any::<u8>(), FOLD_FROM..2000),
            b in prop::collection::vec(any::<u8>(), FOLD_FROM..2000),
            c in prop::collection::vec(any::<u8>(), FOLD_FROM..300),
            d in prop::collection::vec(any::<u8>(), FOLD_FROM..2000),
        ) {
            // Every buffer long enough to fold: the path the scan takes for large records.
            let buffers = [a.as_slice(), b.as_slice(), c.as_slice(), d.as_slice()];
            prop_assert_eq!(crc32c_lanes(buffers), buffers.map(crc32c::crc32c));
        }

        #[test]
        fn one_buffer_is_the_crates_crc(data in prop::collection::vec(any::<u8>(), 0..5000)) {
            prop_assert_eq!(crc32c(&data), crc32c::crc32c(&data));
        }

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
