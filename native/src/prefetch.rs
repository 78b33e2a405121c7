//! Software prefetch of bytes a walk will read next. A queue's records lie a few KiB
//! apart in the log (its queue shares the log with the others), so each record starts
//! on a page the CPU's own prefetchers have not seen: asking for the next records'
//! lines while the current one is checked overlaps their misses with that work.

/// The size of a cache line.
const LINE: usize = 64;
/// How many records ahead of the one being checked a walk asks for: measured over
/// reads of 500 of 1 KiB records from 4 queues (docs/PERFORMANCE.md, issue 29 part 4),
/// 2 took most of the gain, 4 to 12 the same as each other.
pub const RECORDS_AHEAD: usize = 4;
/// A record of at most this many bytes, read on its own (a `get`), is not asked for:
/// its few lines come as fast when the check reads them.
pub const WORTH_ASKING: u32 = 256;
/// At most this many bytes of one record are asked for: past a page, the CPU's own
/// prefetcher follows a record being read, and a large body would only push out what
/// the walk still needs.
const MOST: usize = 4096;

/// Ask the CPU to bring `data[pos..pos + len]` (at most `MOST` bytes of it, clipped to
/// `data`) into its nearest cache: a record about to be read. A hint only: nothing is
/// read, nothing can fault.
#[inline]
pub fn bytes(data: &[u8], pos: usize, len: usize) {
    lines::<NEAREST>(data, pos, len);
}

/// Ask for `data[pos..pos + len]` as `bytes` does, into the second-level cache only
/// (PREFETCHT2): a record some records ahead of a walk. Into the first level, a walk's
/// ~18 lines a record for four records ahead keep the level's few miss buffers full, and
/// each prefetch waits for one to free: measured over a queue's 1 KiB records in a
/// 256 MiB segment (4 queues), CPU time of a check of each record's CRC32C with the
/// records 4 ahead asked for: 200 ns a record into the first level, 122-133 into the
/// second (docs/PERFORMANCE.md, issue 34).
#[inline]
pub fn ahead(data: &[u8], pos: usize, len: usize) {
    lines::<SECOND>(data, pos, len);
}

/// How far ahead of its position a sequential walk over a segment (recovery's scan)
/// asks for bytes: over 1 KiB records read from memory, 8 KiB ahead took the scan from
/// 6.6-7.0 to 7.3-7.6 GB/s of CPU, 16 KiB the same (docs/PERFORMANCE.md, issue 29 part
/// 6). The CPU's own prefetcher stops at each 4 KiB page.
pub const STREAM_AHEAD: usize = 8 << 10;
/// A walk asks ahead only over records of at least this many bytes.
pub const STREAM_FROM: u32 = 256;

/// Ask for every line of `data[from..to]` (clipped to `data`) into the second-level
/// cache: the stretch a sequential walk reaches next. A hint only, as `ahead`.
#[inline]
pub fn stretch(data: &[u8], from: usize, to: usize) {
    let end = to.min(data.len());
    let mut at = from;
    while at < end {
        line::<SECOND>(&data[at]);
        at += LINE;
    }
}

#[cfg(target_arch = "x86_64")]
const NEAREST: i32 = std::arch::x86_64::_MM_HINT_T0;
#[cfg(target_arch = "x86_64")]
const SECOND: i32 = std::arch::x86_64::_MM_HINT_T2;
#[cfg(not(target_arch = "x86_64"))]
const NEAREST: i32 = 0;
#[cfg(not(target_arch = "x86_64"))]
const SECOND: i32 = 0;

/// Ask for the line at `address` into the nearest cache: a word a call is about to
/// read (a list's item). A hint only: nothing is read, nothing can fault, whatever
/// the address.
#[inline]
pub fn object(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHh is in every x86_64 CPU (SSE); it reads nothing and never
    // faults, even at an address not mapped.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<NEAREST>(address.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

#[inline(always)]
fn lines<const HINT: i32>(data: &[u8], pos: usize, len: usize) {
    let end = pos.saturating_add(len.min(MOST)).min(data.len());
    if pos >= end {
        return;
    }
    // Every line the bytes lie on, from the one holding the first to the one holding
    // the last (stepping by a line from `pos` missed the last of a record's lines
    // whenever `pos` was not at a line's start: the third of a 123-byte record's most
    // of the time).
    let start = data.as_ptr() as usize;
    let last = start + end - 1;
    let mut at = (start + pos) & !(LINE - 1);
    while at <= last {
        line_at::<HINT>(at as *const u8);
        at += LINE;
    }
}

#[inline(always)]
fn line_at<const HINT: i32>(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHh is in every x86_64 CPU (SSE); it reads nothing and never
    // faults, even at an address not mapped (here a line of `data`'s bytes anyway).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<HINT>(address.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

#[inline(always)]
fn line<const HINT: i32>(byte: &u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHh is in every x86_64 CPU (SSE); it reads nothing and never
    // faults, and `byte` is a reference, so the address is valid anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<HINT>((byte as *const u8).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = byte;
}
