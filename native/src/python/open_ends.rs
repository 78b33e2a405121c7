//! A shared topic's queue ends on an open after a crash (issue 33): one pass over the
//! block index instead of a Python load, trim and first-entry look per queue.
//!
//! After a crash the store used to load every queue of every topic before recovery
//! (`BlockQueue._load`: the end from the queue's last block), trim each loaded queue's end
//! (`follow.trim_queue_end`: entries pointing past the tail or at another queue's record)
//! and move each one's minimum past what retention deleted (`QueueBase.advance_min`). For
//! most queues of a shared topic none of these changes anything, and a queue that is not
//! loaded at the open is loaded, checked and moved on first use (`MessageStore
//! ._on_queue_load`: the same trim against the tail, without the checkpoint's trust, and
//! the same move of the minimum) to the very ends the open would have given it. Such a
//! queue is *settled*: the pass below finds, from its blocks and the log, that
//!
//! - its last entry is written and either below the log's start or inside the tail and the
//!   record of that queue at that queue offset (the on-load trim keeps it, so recovery's,
//!   which keeps more, does too), or it has no entries past its first block's start;
//! - its minimum is found the same whether it is loaded at the open or on first use: its
//!   entries lie below the floor, then at or past it (so the binary search of
//!   `QueueBase._new_min` finds the same minimum from any start), and the open's drop of
//!   unused block files (`upkeep.drop_unused_blocks`) asks the same of its blocks loaded
//!   or not (`minimum_settled`). A queue of a group's position that the open loads later
//!   (its clamp of positions past the ends) has its minimum moved there.
//!
//! The others (and any queue whose blocks cannot be read as expected: a block missing from
//! the index, a file missing or cut short, a last block of zeros) are returned, for the
//! open to load and look at in Python as before. Decisions are the Python code's, so
//! tests/engine/test_native_open_ends.py holds the open with this pass equal to the open
//! that loads every queue (`recovery.NATIVE_ENDS = False`).

use std::collections::HashMap;

use super::block_index::HEADER_SIZE;
use super::scan::read_exactly;
use crate::consume_queue::ENTRY_SIZE;
use crate::record::{Header, HEADER_SIZE as RECORD_HEADER, RECORD_MAGIC};

/// Blocks read at a time when the blocks looked at lie close together.
const SPAN_BLOCKS: u64 = 256;
/// Bytes of the log read at a time when the records looked at lie close together.
const SPAN_BYTES: u64 = 256 << 10;

/// A shared topic's block store as the pass reads it.
pub struct Shape<'a> {
    pub per_block: u64,
    pub per_file: u64,
    pub block_bytes: u64,
    /// First block of each block file -> its descriptor.
    pub files: &'a HashMap<u64, i32>,
}

/// The commit log as the pass reads it: (base, descriptor, size) of each segment, by
/// base. Read with `pread`s, not through the segments' mappings: a million queues' last
/// records touch most of the log's pages, which a mapping would keep in the process's
/// resident set.
pub struct Log<'a> {
    pub segments: &'a [(u64, i32, u64)],
    pub min_offset: u64,
    pub tail: u64,
}

/// What the open must know of the queue ends of one shared topic.
pub struct Look<'a> {
    pub topic: &'a [u8],
    pub floor: u64,
    pub shape: Shape<'a>,
    pub log: Log<'a>,
}

/// One queue to look at: its id, first and last block seq, and its last block.
#[derive(Clone, Copy)]
struct Queue {
    id: u32,
    first: u64,
    last: u64,
    block: u64,
}

impl Shape<'_> {
    /// The bytes of `count` blocks from `block` (all in one file), or None.
    fn read(&self, block: u64, count: u64, out: &mut Vec<u8>) -> bool {
        let first = block - block % self.per_file;
        let Some(&fd) = self.files.get(&first) else {
            return false;
        };
        out.resize((count * self.block_bytes) as usize, 0);
        read_exactly(fd, out, (block - first) * self.block_bytes)
    }
}

impl Log<'_> {
    /// The segment holding commit-log `offset` (`CommitLog.locate`): (base, fd, size).
    fn locate(&self, offset: u64) -> Option<(u64, i32, u64)> {
        let at = self.segments.partition_point(|s| s.0 <= offset);
        let segment = *at.checked_sub(1).and_then(|i| self.segments.get(i))?;
        (offset - segment.0 < segment.2).then_some(segment)
    }
}

/// `follow.record_matches` for each `(offset, queue, index)` of `matches` (sorted by
/// offset): whether the record at `offset` is entry `index` of that queue of `topic`.
/// The queues whose record does not match are pushed to `unmatched`. Records close
/// together are read in one `pread` of up to `SPAN_BYTES`.
fn match_records(
    log: &Log<'_>,
    topic: &[u8],
    matches: &[(u64, u32, u64)],
    unmatched: &mut Vec<u32>,
) {
    let need = (RECORD_HEADER + topic.len()) as u64;
    let mut span: Vec<u8> = Vec::new();
    let mut span_at = 0u64; // commit offset of span[0]
    let mut i = 0;
    while i < matches.len() {
        let (offset, id, index) = matches[i];
        let Some((base, fd, size)) = log.locate(offset) else {
            unmatched.push(id);
            i += 1;
            continue;
        };
        if offset - base + need > size {
            unmatched.push(id);
            i += 1;
            continue;
        }
        if offset < span_at || offset + need > span_at + span.len() as u64 {
            // A new span: up to the last record within SPAN_BYTES in this segment.
            let limit = (offset + SPAN_BYTES).min(base + size);
            let mut end = offset + need;
            for &(next, _, _) in &matches[i + 1..] {
                if next + need > limit {
                    break;
                }
                end = next + need;
            }
            span.resize((end - offset) as usize, 0);
            if !read_exactly(fd, &mut span, offset - base) {
                span.clear();
                unmatched.push(id);
                i += 1;
                continue;
            }
            span_at = offset;
        }
        if !record_is(
            &span[(offset - span_at) as usize..],
            offset,
            topic,
            id,
            index,
        ) {
            unmatched.push(id);
        }
        i += 1;
    }
}

/// `follow.record_matches` over `record`, the bytes from commit-log `offset` on (at
/// least its header and a topic name of `topic`'s length, else it does not match):
/// whether a record starts there that is entry `index` of queue `queue_id` of `topic`.
pub(super) fn record_is(
    record: &[u8],
    offset: u64,
    topic: &[u8],
    queue_id: u32,
    index: u64,
) -> bool {
    let start = RECORD_HEADER;
    if record.len() < start + topic.len() {
        return false;
    }
    let header = Header::parse(record);
    header.magic == RECORD_MAGIC
        && header.commit_offset == offset
        && header.queue_offset == index
        && header.queue_id == queue_id
        && usize::from(header.topic_len) == topic.len()
        && &record[start..start + topic.len()] == topic
}

/// What the on-load trim (`follow.trim_queue_end`, without the checkpoint's trust) does
/// with a queue's last entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LastEntry {
    /// Kept as it is: its record lies below the log's start (retention took it).
    Kept,
    /// Kept if the record it points at is that entry's (`record_is`).
    IfRecordIs,
}

/// `last` (commit offset, size) as the queue's last entry, the log starting at `log_min`
/// with its published tail at `tail`; None when the trim may drop it (unwritten, or its
/// record not inside the tail): only Python's look says what then.
pub(super) fn last_entry_kept(last: (u64, u32), log_min: u64, tail: u64) -> Option<LastEntry> {
    let (offset, length) = last;
    if length == 0 {
        return None; // unwritten: the trim drops it
    }
    if offset < log_min {
        return Some(LastEntry::Kept);
    }
    let inside = offset
        .checked_add(u64::from(length))
        .is_some_and(|past| past <= tail);
    inside.then_some(LastEntry::IfRecordIs)
}

/// (commit offset, size) of entry `slot` of a block's bytes.
pub(super) fn entry_of(block: &[u8], slot: u64) -> (u64, u32) {
    let at = HEADER_SIZE + slot as usize * ENTRY_SIZE;
    let entry = &block[at..at + ENTRY_SIZE];
    (
        u64::from_le_bytes(entry[..8].try_into().expect("8 bytes")),
        u32::from_le_bytes(entry[8..12].try_into().expect("4 bytes")),
    )
}

/// `BlockStore.written_end` from the queue's block `seq`'s bytes: the offset after its
/// last written entry in it, or None when every entry byte is zero.
pub(super) fn written_end(block: &[u8], seq: u64, per_block: u64) -> Option<u64> {
    let entries = &block[HEADER_SIZE..];
    // From the end, whole entries first (a word at a time: most of a queue's last block
    // is unwritten), then the bytes of the last entry that is not all zeros.
    let whole = entries.len() / ENTRY_SIZE * ENTRY_SIZE;
    let zero = |entry: &[u8]| {
        let (words, rest) = entry.split_at(16);
        u128::from_ne_bytes(words.try_into().unwrap_or([1; 16])) == 0
            && rest.iter().all(|&b| b == 0)
    };
    let tail = &entries[whole..];
    let written = match tail.iter().rposition(|&b| b != 0) {
        Some(at) => whole + at + 1,
        None => {
            let last = entries[..whole]
                .chunks_exact(ENTRY_SIZE)
                .rposition(|entry| !zero(entry))?;
            last * ENTRY_SIZE + ENTRY_SIZE
        }
    };
    Some(seq * per_block + written.div_ceil(ENTRY_SIZE) as u64)
}

/// Whether the queue's minimum is settled: `entries` are its entries (commit offset,
/// size; size 0 unwritten) from `min` (its first block's start) to `end`, `floor` what
/// it moves up to. `QueueBase.advance_min` moves it to the offset `_new_min` finds (its
/// binary search, done here the same way), and `upkeep.drop_unused_blocks` asks of each
/// block below the last whether it is in use: for a loaded queue, whether the block ends
/// past that minimum; for one not loaded, whether its last entry is unwritten or at or
/// past the floor. Settled when the two answers agree for every block (the open's drop of
/// unused block files is the same whether the queue was loaded or not) and the entries
/// lie below the floor and then at or past it (a search from any start finds the same
/// minimum: the one the open would set is the one the first use sets).
fn minimum_settled(
    entries: &[(u64, u32)],
    min: u64,
    end: u64,
    queue: &Queue,
    per_block: u64,
    floor: u64,
) -> bool {
    if floor == 0 {
        return true; // nothing moves, every block is in use both ways
    }
    let at = |i: u64| entries[(i - min) as usize];
    let mut past = false;
    for &(offset, size) in entries {
        if size != 0 {
            if offset >= floor {
                past = true;
            } else if past {
                return false; // below the floor again: a search's answer depends on its start
            }
        }
    }
    let entry = |i: u64| (min <= i && i < end && at(i).1 != 0).then(|| at(i).0);
    let first_written = |low: u64, high: u64| (low..high).find(|&i| at(i).1 != 0).unwrap_or(high);
    let (mut low, mut high) = (min, end);
    if low < high && entry(low).is_none() {
        low = first_written(low, high);
    }
    let first = if low < high { entry(low) } else { None };
    if first.is_some_and(|offset| offset < floor) {
        while low < high {
            let middle = (low + high) / 2;
            let probe = first_written(middle, high);
            let found = if probe < high { entry(probe) } else { None };
            if found.is_some_and(|offset| offset < floor) {
                low = probe + 1;
            } else {
                high = middle;
            }
        }
    }
    let moved = low.max(min);
    (queue.first..queue.last).all(|seq| {
        let (offset, size) = at((seq + 1) * per_block - 1);
        let unloaded = size == 0 || offset >= floor;
        let loaded = (seq + 1) * per_block > moved;
        unloaded == loaded
    })
}

/// Of the queues `ranges` (id, first seq, last seq, last seq's block), those that are not
/// settled, ascending, and how many were; `first_block(queue, seq)` is the index's
/// look-up.
pub fn unsettled(
    look: &Look<'_>,
    ranges: Vec<(u32, u64, u64, Option<u64>)>,
    first_block: &dyn Fn(u32, u64) -> Option<u64>,
) -> (Vec<u32>, usize) {
    let shape = &look.shape;
    let total = ranges.len();
    let mut unsettled = Vec::new();
    let mut queues = Vec::with_capacity(ranges.len());
    for (id, first, last, block) in ranges {
        match block {
            Some(block) => queues.push(Queue {
                id,
                first,
                last,
                block,
            }),
            None => unsettled.push(id),
        }
    }
    queues.sort_unstable_by_key(|q| q.block);
    // (queue, its end) of the queues of more than one block whose minimum may move.
    let mut moving: Vec<(Queue, u64)> = Vec::new();
    // (commit offset, queue, queue offset) of the last entries to match with the log.
    let mut matches: Vec<(u64, u32, u64)> = Vec::new();
    let size = shape.block_bytes as usize;
    let mut span = Vec::new();
    let mut one = Vec::new();
    let mut i = 0;
    while i < queues.len() {
        // The queues whose last blocks lie within SPAN_BLOCKS of this one, in its file:
        // their blocks read in one go (a store of one or two blocks a queue is read
        // front to back), each alone when the span cannot be read whole.
        let start = queues[i].block;
        let file_end = start - start % shape.per_file + shape.per_file;
        let mut j = i + 1;
        while j < queues.len() && queues[j].block < (start + SPAN_BLOCKS).min(file_end) {
            j += 1;
        }
        let count = queues[j - 1].block - start + 1;
        let whole = shape.read(start, count, &mut span);
        for queue in &queues[i..j] {
            let block: &[u8] = if whole {
                let at = ((queue.block - start) as usize) * size;
                &span[at..at + size]
            } else if shape.read(queue.block, 1, &mut one) {
                &one
            } else {
                unsettled.push(queue.id);
                continue;
            };
            let Some(end) = written_end(block, queue.last, shape.per_block) else {
                unsettled.push(queue.id); // a last block of zeros: the look goes back
                continue;
            };
            let min = queue.first * shape.per_block;
            let last = entry_of(block, end - 1 - queue.last * shape.per_block);
            match last_entry_kept(last, look.log.min_offset, look.log.tail) {
                Some(LastEntry::Kept) => {}
                Some(LastEntry::IfRecordIs) => matches.push((last.0, queue.id, end - 1)),
                None => {
                    unsettled.push(queue.id);
                    continue;
                }
            }
            if look.floor == 0 || end <= min {
                continue;
            }
            if queue.first == queue.last {
                let entries: Vec<(u64, u32)> =
                    (0..end - min).map(|slot| entry_of(block, slot)).collect();
                if !minimum_settled(&entries, min, end, queue, shape.per_block, look.floor) {
                    unsettled.push(queue.id);
                }
                continue;
            }
            moving.push((*queue, end));
        }
        i = j;
    }
    // The entries of queues of more than one block (with a floor only), block by block.
    moving.sort_unstable_by_key(|m| m.0.block);
    'moving: for &(queue, end) in &moving {
        let min = queue.first * shape.per_block;
        let mut entries: Vec<(u64, u32)> = Vec::with_capacity((end - min) as usize);
        for seq in queue.first..=queue.last {
            let Some(block) = first_block(queue.id, seq) else {
                unsettled.push(queue.id); // a block missing from the run: Python's look
                continue 'moving;
            };
            if !shape.read(block, 1, &mut one) {
                unsettled.push(queue.id);
                continue 'moving;
            }
            let slots = shape.per_block.min(end - seq * shape.per_block);
            entries.extend((0..slots).map(|slot| entry_of(&one, slot)));
        }
        if !minimum_settled(&entries, min, end, &queue, shape.per_block, look.floor) {
            unsettled.push(queue.id);
        }
    }
    // The log's records of the last entries, in log order.
    matches.sort_unstable();
    match_records(&look.log, look.topic, &matches, &mut unsettled);
    unsettled.sort_unstable();
    unsettled.dedup();
    let settled = total - unsettled.len();
    (unsettled, settled)
}

/// The clamp of group positions after a crash (`MessageStore._clamp_offsets_past_ends`)
/// without a load per queue: of `positions` ((queue id, first block seq, last block seq,
/// its last block, committed position), each a queue the open left unloaded), the
/// indexes of those whose position may be past the queue's end, for Python to load and
/// decide as before. A queue's end when loaded is at least its first block's start and
/// at least `BlockStore.written_end`; a position at or below either is not past it. The
/// others are returned: a position past the written end of the last block, a last block
/// of zeros (`written_end` then looks further back), one missing or unreadable. Last
/// blocks close together are read in one `pread` of up to `SPAN_BLOCKS`.
pub fn maybe_past_ends(
    shape: &Shape<'_>,
    positions: &[(u32, u64, u64, Option<u64>, u64)],
) -> Vec<usize> {
    let mut past = Vec::new();
    // (last block, index into positions) of the positions a block read must decide.
    let mut reads: Vec<(u64, usize)> = Vec::new();
    for (at, &(_id, first, _last, block, position)) in positions.iter().enumerate() {
        if position <= first * shape.per_block {
            continue;
        }
        match block {
            Some(block) => reads.push((block, at)),
            None => past.push(at),
        }
    }
    reads.sort_unstable();
    let size = shape.block_bytes as usize;
    let mut span = Vec::new();
    let mut one = Vec::new();
    let mut i = 0;
    while i < reads.len() {
        let start = reads[i].0;
        let file_end = start - start % shape.per_file + shape.per_file;
        let mut j = i + 1;
        while j < reads.len() && reads[j].0 < (start + SPAN_BLOCKS).min(file_end) {
            j += 1;
        }
        let count = reads[j - 1].0 - start + 1;
        let whole = shape.read(start, count, &mut span);
        for &(block_at, at) in &reads[i..j] {
            let block: &[u8] = if whole {
                let from = ((block_at - start) as usize) * size;
                &span[from..from + size]
            } else if shape.read(block_at, 1, &mut one) {
                &one
            } else {
                past.push(at);
                continue;
            };
            let (_, _, last, _, position) = positions[at];
            match written_end(block, last, shape.per_block) {
                Some(end) if position <= end => {}
                _ => past.push(at),
            }
        }
        i = j;
    }
    past.sort_unstable();
    past
}
