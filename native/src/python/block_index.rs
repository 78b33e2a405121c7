//! A shared topic's block index (issue 33): which block holds each queue's block `seq`,
//! and each queue's first and last seq, for `BlockStore` (blockqueue.py) and the
//! shared batch (append_core/shared_core.rs), which looks blocks up and remembers the
//! blocks it allocates without a Python call. It was two Python dicts keyed by a made
//! int (`queue << 40 | seq`): a look-up cost a hash of an int object and, at a hundred
//! thousand queues, a few cache misses through the dict's entries and key objects.
//!
//! Beside the blocks, each queue's ends (issue 33): its minimum and maximum offsets,
//! its change count and whether it is loaded, kept here and nowhere else. The shared
//! batch reads and moves them without a Python object per queue; a `BlockQueue`
//! (blockqueue.py) reads and sets them through its properties when asked, so a queue's
//! object, made or not, and the core agree on one end.
//!
//! Held behind a mutex: the store's readers (`BlockStore.block_of`, `refresh`) and its
//! writer use it from several threads.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Mutex, MutexGuard, OnceLock};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyType};

use super::open_ends;
use super::slots::Slot;
use crate::consume_queue::ENTRY_SIZE;

/// blockqueue.ERASED: the owner written over a removed queue's block headers.
pub const ERASED: u32 = u32::MAX;
/// blockqueue.BLOCK_HEADER_SIZE: queue u32, seq u64, crc32c u32.
pub const HEADER_SIZE: usize = 16;

/// (queue, seq) of a valid block header (blockqueue.parse_header), or None (never
/// allocated, erased to zeros or torn).
fn parse_header(header: &[u8]) -> Option<(u32, u64)> {
    let word = |at: usize, n: usize| {
        let mut bytes = [0u8; 8];
        bytes[..n].copy_from_slice(&header[at..at + n]);
        u64::from_le_bytes(bytes)
    };
    let crc = word(12, 4) as u32;
    (crc == crate::crc::crc32c(&header[..12])).then(|| (word(0, 4) as u32, word(4, 8)))
}

/// 2^64 / the golden ratio, odd.
const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;

/// Queue ids and block seqs hashed by a rotate, xor and multiply each, not SipHash
/// (the batch looks up a block per queue: a few hundred a batch).
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29) // the product's high bits into the low ones (the bucket)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(SPREAD);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0.rotate_left(26) ^ u64::from(n)).wrapping_mul(SPREAD);
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(26) ^ n).wrapping_mul(SPREAD);
    }
}

type Keyed<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

/// A queue's ends (`QueueBase`'s `_min_offset`, `_max_offset`, `changes`, `_loaded`).
#[derive(Clone, Copy, Default)]
pub struct Ends {
    pub min: u64,
    pub max: u64,
    /// Bumped by every write, truncation and setting of the maximum (queuebase.py).
    pub changes: i64,
    /// Found and checked (`_ensure_loaded` done): the ends can be used as they are.
    pub loaded: bool,
    /// The queue's object is made (`LazyQueues`, topics.py, says so): the shared batch
    /// loads a queue without a Python call only when it is not (shared_core.rs).
    pub made: bool,
}

/// What the index keeps of one queue, by queue id: its ends, its block remembered
/// last and its blocks' seq range, in one cache line, so that a read's or a batch's
/// first look at a queue at a million queues costs one miss and one TLB walk, not one
/// for each (docs/PERFORMANCE.md, check33-s54). 64 bytes a queue.
#[derive(Clone, Copy, Default)]
#[repr(align(64))]
struct PerQueue {
    ends: Ends,
    /// The block remembered last for the queue: (its seq + 1, the block), (0, 0) for
    /// none; always also in `blocks`. A batch's plan looks up each queue's block at its
    /// end, almost always this one: one load where `blocks` costs two cache misses a
    /// look-up at a million queues (docs/PERFORMANCE.md, put33-s51).
    latest: (u64, u64),
    /// (first seq, last seq + 1) among the queue's blocks here; (0, 0) for none (a
    /// block's seq is an entry's index over the entries a block: never `u64::MAX`).
    seqs: (u64, u64),
}

impl PerQueue {
    fn seq_range(&self) -> Option<(u64, u64)> {
        (self.seqs.1 != 0).then(|| (self.seqs.0, self.seqs.1 - 1))
    }

    fn set_seq_range(&mut self, range: Option<(u64, u64)>) {
        self.seqs = match range {
            Some((first, last)) => (first, last.wrapping_add(1)),
            None => (0, 0),
        };
    }

    /// The seq range widened to hold `seq`.
    fn widen(&mut self, seq: u64) {
        let range = match self.seq_range() {
            Some((first, last)) => (first.min(seq), last.max(seq)),
            None => (seq, seq),
        };
        self.set_seq_range(Some(range));
    }
}

#[derive(Default)]
pub struct Index {
    /// (queue, seq) -> block.
    blocks: Keyed<(u32, u64), u64>,
    /// By queue id (queue ids of a topic are dense): a vector grown to the highest id
    /// whose ends were set or whose block was remembered. It replaced a hash map of the
    /// seq ranges beside two vectors (ends, latest block): a read's first look at a
    /// queue took three misses, now one.
    queues: Vec<PerQueue>,
}

impl Index {
    fn of(&self, queue: u32) -> Option<&PerQueue> {
        self.queues.get(queue as usize)
    }

    /// The queue's entry, made (empty) when never set.
    fn of_mut(&mut self, queue: u32) -> &mut PerQueue {
        let at = queue as usize;
        if at >= self.queues.len() {
            self.queues.resize(at + 1, PerQueue::default());
        }
        &mut self.queues[at]
    }

    /// The queue's ends (all zero, not loaded, when never set).
    pub fn ends(&self, queue: u32) -> Ends {
        self.of(queue).map(|q| q.ends).unwrap_or_default()
    }

    /// The queue's ends to change, made (zero, not loaded) when never set.
    pub fn ends_mut(&mut self, queue: u32) -> &mut Ends {
        &mut self.of_mut(queue).ends
    }

    /// Forget the queue's ends (removed, or added back as another incarnation: loaded
    /// again on its next use).
    pub fn forget_ends(&mut self, queue: u32) {
        if let Some(q) = self.queues.get_mut(queue as usize) {
            q.ends = Ends::default();
        }
    }

    pub fn get(&self, queue: u32, seq: u64) -> Option<u64> {
        self.blocks.get(&(queue, seq)).copied()
    }

    /// `get`, looking first at the queue's block remembered last (a batch's look-up).
    pub fn recent(&self, queue: u32, seq: u64) -> Option<u64> {
        match self.of(queue) {
            Some(&PerQueue {
                latest: (plus_one, block),
                ..
            }) if plus_one != 0 && plus_one == seq.wrapping_add(1) => Some(block),
            _ => self.get(queue, seq),
        }
    }

    /// Ask the processor to load what the index keeps of each of `queues` (its ends,
    /// latest block and seq range: one line) into its cache now, all at once, so that
    /// the look-ups that follow one by one do not each wait for memory (at a million
    /// queues each is a miss).
    pub fn prefetch(&self, queues: impl Iterator<Item = u32>) {
        #[cfg(target_arch = "x86_64")]
        for queue in queues {
            if let Some(q) = self.of(queue) {
                // SAFETY: a prefetch only hints the cache; the address is an element of
                // a live vector (and a prefetch never faults in any case).
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        (q as *const PerQueue).cast(),
                    )
                };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        drop(queues);
    }

    /// `pop`: forget the queue's block `seq`; its block, or None.
    fn forget(&mut self, queue: u32, seq: u64) -> Option<u64> {
        if let Some(q) = self.queues.get_mut(queue as usize) {
            if q.latest.0 == seq.wrapping_add(1) {
                q.latest = (0, 0);
            }
        }
        self.blocks.remove(&(queue, seq))
    }

    /// `BlockStore._remember`: the block of `(queue, seq)`, the queue's seq range
    /// widened; an erased block is no one's.
    pub fn remember(&mut self, queue: u32, seq: u64, block: u64) {
        if queue == ERASED {
            return;
        }
        self.blocks.insert((queue, seq), block);
        let q = self.of_mut(queue);
        q.latest = (seq.wrapping_add(1), block);
        q.widen(seq);
    }

    /// (first, last) seq of the queue's blocks here, or None.
    pub fn seq_range(&self, queue: u32) -> Option<(u64, u64)> {
        self.of(queue).and_then(PerQueue::seq_range)
    }

    /// Set the queue's seq range (None: it has no blocks).
    fn set_seq_range(&mut self, queue: u32, range: Option<(u64, u64)>) {
        match range {
            Some(_) => self.of_mut(queue).set_seq_range(range),
            None => {
                if let Some(q) = self.queues.get_mut(queue as usize) {
                    q.set_seq_range(None);
                }
            }
        }
    }

    /// (queue, first seq, last seq) of each queue with blocks here, by queue id.
    fn ranges(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        self.queues
            .iter()
            .enumerate()
            .filter_map(|(id, q)| q.seq_range().map(|(first, last)| (id as u32, first, last)))
    }

    fn recount(&mut self) {
        for q in self.queues.iter_mut() {
            q.set_seq_range(None);
        }
        let keys: Vec<(u32, u64)> = self.blocks.keys().copied().collect();
        for (queue, seq) in keys {
            self.of_mut(queue).widen(seq);
        }
    }
}

/// The index, one per `BlockStore`.
#[pyclass(module = "storeadapter.engine._native", frozen)]
pub struct BlockIndex {
    inner: Mutex<Index>,
}

impl BlockIndex {
    /// The index, locked (a poisoned lock: a panic mid-change cannot happen in these
    /// few map operations, so its contents are taken as they are).
    pub fn lock(&self) -> MutexGuard<'_, Index> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[pymethods]
impl BlockIndex {
    #[new]
    fn new() -> BlockIndex {
        BlockIndex {
            inner: Mutex::new(Index::default()),
        }
    }

    fn __len__(&self) -> usize {
        self.lock().blocks.len()
    }

    /// The block of the queue's block `seq`, or None.
    fn get(&self, queue: u32, seq: u64) -> Option<u64> {
        self.lock().get(queue, seq)
    }

    /// Remember `block` as the queue's block `seq` (nothing for an erased owner).
    fn remember(&self, queue: u32, seq: u64, block: u64) {
        self.lock().remember(queue, seq, block);
    }

    /// Forget the queue's block `seq`; its block, or None. The queue's seq range is
    /// left as it was (`set_range` sets it).
    fn pop(&self, queue: u32, seq: u64) -> Option<u64> {
        self.lock().forget(queue, seq)
    }

    /// (first, last) seq of the queue's blocks, or None.
    fn seq_range(&self, queue: u32) -> Option<(u64, u64)> {
        self.lock().seq_range(queue)
    }

    /// Set the queue's seq range (None: it has no blocks).
    #[pyo3(signature = (queue, seqs))]
    fn set_range(&self, queue: u32, seqs: Option<(u64, u64)>) {
        self.lock().set_seq_range(queue, seqs);
    }

    /// The ids of the queues with blocks, ascending.
    fn queues(&self) -> Vec<u32> {
        self.lock().ranges().map(|(queue, _, _)| queue).collect()
    }

    /// Every (queue, seq, block), in no order.
    fn items(&self) -> Vec<(u32, u64, u64)> {
        self.lock()
            .blocks
            .iter()
            .map(|(&(queue, seq), &block)| (queue, seq, block))
            .collect()
    }

    /// The first blocks of the files (`per_file` blocks each) that hold some queue's
    /// last block, ascending (`BlockStore.drop_files`: such a file is in use).
    fn files_with_last_blocks(&self, per_file: u64) -> Vec<u64> {
        let index = self.lock();
        if per_file == 0 {
            return Vec::new();
        }
        let mut firsts: Vec<u64> = index
            .ranges()
            .filter_map(|(queue, _, last)| index.get(queue, last))
            .map(|block| block - block % per_file)
            .collect();
        firsts.sort_unstable();
        firsts.dedup();
        firsts
    }

    /// Every (queue, seq, block) whose block is in a file starting at one of `firsts`
    /// (`per_file` blocks each), in no order.
    fn items_in_files(&self, firsts: Vec<u64>, per_file: u64) -> Vec<(u32, u64, u64)> {
        if per_file == 0 {
            return Vec::new();
        }
        let firsts: std::collections::HashSet<u64> = firsts.into_iter().collect();
        self.lock()
            .blocks
            .iter()
            .filter(|(_, &block)| firsts.contains(&(block - block % per_file)))
            .map(|(&(queue, seq), &block)| (queue, seq, block))
            .collect()
    }

    /// Forget every block of the files starting at `firsts` (`per_file` blocks each),
    /// and count the queues' seq ranges again.
    fn drop_files(&self, firsts: Vec<u64>, per_file: u64) {
        let mut index = self.lock();
        if per_file == 0 {
            return;
        }
        index
            .blocks
            .retain(|_, block| !firsts.contains(&(*block - *block % per_file)));
        for q in index.queues.iter_mut() {
            if q.latest.0 != 0 && firsts.contains(&(q.latest.1 - q.latest.1 % per_file)) {
                q.latest = (0, 0);
            }
        }
        index.recount();
    }

    /// `BlockStore._load`'s scan of `count` blocks read from block `first` (`data`, each
    /// `block_bytes` long; shorter when the file is cut short), the allocation end at
    /// `end` when it starts: each valid header's block remembered, an invalid one below
    /// `allocated` (the published allocation end) counted as damaged, and the scan
    /// stopped at the first invalid one past it, or at `limit`. Returns the allocation
    /// end reached, the damaged blocks, and whether the scan stopped (else it goes on
    /// with the next blocks).
    #[pyo3(signature = (data, block_bytes, first, count, end, allocated, limit))]
    #[allow(clippy::too_many_arguments)]
    fn take_headers(
        &self,
        data: &[u8],
        block_bytes: usize,
        first: u64,
        count: usize,
        mut end: u64,
        allocated: u64,
        limit: Option<u64>,
    ) -> (u64, Vec<u64>, bool) {
        let mut index = self.lock();
        let mut damaged = Vec::new();
        for slot in 0..count {
            let at = slot * block_bytes;
            let owner = data.get(at..at + HEADER_SIZE).and_then(parse_header);
            if limit.is_some_and(|limit| end >= limit) {
                return (end, damaged, true);
            }
            match owner {
                Some((queue, seq)) => index.remember(queue, seq, first + slot as u64),
                None if end < allocated => damaged.push(end),
                None => return (end, damaged, true),
            }
            end += 1;
        }
        (end, damaged, false)
    }

    /// The open after a crash (open_ends.rs): of the queues with blocks here whose ids
    /// are below `queues` and not in `skip` (queues the open loaded already), those whose
    /// ends the open must load and look at in Python (ascending), and how many it need
    /// not (settled: a load on first use finds the ends the open would). `topic`'s block
    /// files are `files` ((first block, descriptor)), `per_block` entries a block,
    /// `per_file` blocks a file, `block_bytes` a block; the log's segments `segments`
    /// ((base, descriptor, size), by base), its first offset `log_min` and its tail `tail`;
    /// `floor` the offset the queues' minimums are moved up to (`queue_floor`).
    #[pyo3(signature = (queues, skip, topic, files, per_block, per_file, block_bytes, segments, log_min, tail, floor))]
    #[allow(clippy::too_many_arguments)]
    fn unsettled_queues(
        &self,
        queues: u32,
        skip: Vec<u32>,
        topic: &[u8],
        files: Vec<(u64, i32)>,
        per_block: u64,
        per_file: u64,
        block_bytes: u64,
        segments: Vec<(u64, i32, u64)>,
        log_min: u64,
        tail: u64,
        floor: u64,
    ) -> PyResult<(Vec<u32>, usize)> {
        if per_block == 0
            || per_file == 0
            || block_bytes != HEADER_SIZE as u64 + per_block * ENTRY_SIZE as u64
        {
            return Err(PyValueError::new_err("a block store's shape"));
        }
        if segments.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(PyValueError::new_err("segments not by base"));
        }
        let files: HashMap<u64, i32> = files.into_iter().collect();
        let skip: std::collections::HashSet<u32> = skip.into_iter().collect();
        let index = self.lock();
        let ranges: Vec<(u32, u64, u64, Option<u64>)> = index
            .ranges()
            .filter(|(id, _, _)| *id < queues && !skip.contains(id))
            .map(|(id, first, last)| (id, first, last, index.get(id, last)))
            .collect();
        let look = open_ends::Look {
            topic,
            floor,
            shape: open_ends::Shape {
                per_block,
                per_file,
                block_bytes,
                files: &files,
            },
            log: open_ends::Log {
                segments: &segments,
                min_offset: log_min,
                tail,
            },
        };
        Ok(open_ends::unsettled(&look, ranges, &|id, seq| {
            index.get(id, seq)
        }))
    }

    /// The clamp of group positions after a crash (open_ends.rs, `maybe_past_ends`): of
    /// `positions` ((queue id, committed position) of queues the open left unloaded),
    /// the indexes (ascending) of those whose position may be past the queue's end, for
    /// the open to load and decide in Python; the others are at or below it. The block
    /// files are `files` ((first block, descriptor)), `per_block` entries a block,
    /// `per_file` blocks a file, `block_bytes` a block.
    #[pyo3(signature = (queues, positions, files, per_block, per_file, block_bytes))]
    fn maybe_past_ends(
        &self,
        queues: Vec<u32>,
        positions: Vec<u64>,
        files: Vec<(u64, i32)>,
        per_block: u64,
        per_file: u64,
        block_bytes: u64,
    ) -> PyResult<Vec<usize>> {
        if per_block == 0
            || per_file == 0
            || block_bytes != HEADER_SIZE as u64 + per_block * ENTRY_SIZE as u64
        {
            return Err(PyValueError::new_err("a block store's shape"));
        }
        if queues.len() != positions.len() {
            return Err(PyValueError::new_err("a position for each queue"));
        }
        let files: HashMap<u64, i32> = files.into_iter().collect();
        let looked: Vec<(u32, u64, u64, Option<u64>, u64)> = {
            let index = self.lock();
            queues
                .iter()
                .zip(&positions)
                .map(|(&id, &position)| match index.seq_range(id) {
                    Some((first, last)) => (id, first, last, index.get(id, last), position),
                    None => (id, 0, 0, None, position),
                })
                .collect()
        };
        let shape = open_ends::Shape {
            per_block,
            per_file,
            block_bytes,
            files: &files,
        };
        Ok(open_ends::maybe_past_ends(&shape, &looked))
    }

    /// Forget every block (the queues' ends are kept: `BlockStore._load` reads the
    /// headers again, the queues stay loaded).
    fn clear(&self) {
        let mut index = self.lock();
        index.blocks.clear();
        for q in index.queues.iter_mut() {
            q.latest = (0, 0);
            q.set_seq_range(None);
        }
    }

    /// The queue's minimum offset (0 when never set).
    fn min_of(&self, queue: u32) -> u64 {
        self.lock().ends(queue).min
    }

    /// The queue's maximum offset (0 when never set).
    fn max_of(&self, queue: u32) -> u64 {
        self.lock().ends(queue).max
    }

    /// The queue's change count (0 when never set).
    fn changes_of(&self, queue: u32) -> i64 {
        self.lock().ends(queue).changes
    }

    /// Whether the queue is loaded (its ends found and checked).
    fn loaded(&self, queue: u32) -> bool {
        self.lock().ends(queue).loaded
    }

    fn set_min(&self, queue: u32, value: u64) {
        self.lock().ends_mut(queue).min = value;
    }

    fn set_max(&self, queue: u32, value: u64) {
        self.lock().ends_mut(queue).max = value;
    }

    fn set_changes(&self, queue: u32, value: i64) {
        self.lock().ends_mut(queue).changes = value;
    }

    fn set_loaded(&self, queue: u32, value: bool) {
        self.lock().ends_mut(queue).loaded = value;
    }

    /// Note whether the queue's object is made (`LazyQueues` makes it, or lets it go).
    fn set_made(&self, queue: u32, value: bool) {
        self.lock().ends_mut(queue).made = value;
    }

    /// Forget the queue's ends (it was removed, or is another incarnation now).
    fn forget_ends(&self, queue: u32) {
        self.lock().forget_ends(queue);
    }

    /// The ids of the loaded queues, ascending.
    fn loaded_queues(&self) -> Vec<u32> {
        let index = self.lock();
        (0..index.queues.len() as u32)
            .filter(|&queue| index.queues[queue as usize].ends.loaded)
            .collect()
    }
}

/// Which of a queue's ends a `QueueEnd` reads and sets.
#[derive(Clone, Copy)]
enum Field {
    Min,
    Max,
    Changes,
    Loaded,
}

/// A `BlockQueue`'s `_min_offset`, `_max_offset`, `changes` or `_loaded` (blockqueue.py):
/// a data descriptor that reads and sets the field in the queue's block index
/// (`obj._ends`, at `obj.queue_id`), where the queue's ends are kept. Native, so that the
/// Python paths that read a queue's ends often (its load and its checks: ~35 reads) pay no
/// Python property's frame and method call; still ~400 instructions a read against a
/// slot's ~30 (the descriptor protocol, pyo3's trampoline, the lock): PERFORMANCE.md,
/// put33-s49.
#[pyclass(module = "storeadapter.engine._native", frozen)]
pub struct QueueEnd {
    field: Field,
    /// The class it was first read through, with where that class keeps `_ends` and
    /// `queue_id` (read at their place in the object, as a slot is; another class's
    /// objects are read by name).
    known: OnceLock<(Py<PyType>, Slot, Slot)>,
}

impl QueueEnd {
    fn place<'py>(&self, object: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, BlockIndex>, u32)> {
        let py = object.py();
        let class = object.get_type();
        if self.known.get().is_none() {
            if let (Ok(ends), Ok(queue)) = (Slot::of(&class, "_ends"), Slot::of(&class, "queue_id"))
            {
                let _ = self.known.set((class.clone().unbind(), ends, queue));
            }
        }
        let (ends, queue) = match self.known.get() {
            // A `Slot` is read only on an object whose type is exactly the class it was
            // taken from (checked here), as `Slot` requires.
            Some((known, ends, queue)) if class.is(known.bind(py)) => (
                ends.get(object)
                    .ok_or_else(|| PyTypeError::new_err("a queue without its block index"))?,
                queue
                    .get(object)
                    .ok_or_else(|| PyTypeError::new_err("a queue without its id"))?,
            ),
            _ => (
                object.getattr(intern!(py, "_ends"))?,
                object.getattr(intern!(py, "queue_id"))?,
            ),
        };
        let ends = ends.cast_into::<BlockIndex>().map_err(PyErr::from)?;
        Ok((ends, queue.extract()?))
    }
}

#[pymethods]
impl QueueEnd {
    /// `field`: "min", "max", "changes" or "loaded".
    #[new]
    fn new(field: &str) -> PyResult<QueueEnd> {
        let field = match field {
            "min" => Field::Min,
            "max" => Field::Max,
            "changes" => Field::Changes,
            "loaded" => Field::Loaded,
            _ => return Err(PyValueError::new_err(format!("no queue end {field:?}"))),
        };
        Ok(QueueEnd {
            field,
            known: OnceLock::new(),
        })
    }

    fn __get__<'py>(
        slf: &Bound<'py, Self>,
        object: Option<&Bound<'py, PyAny>>,
        owner: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = owner;
        let Some(object) = object.filter(|o| !o.is_none()) else {
            return Ok(slf.clone().into_any()); // read on the class
        };
        let py = object.py();
        let (index, queue) = slf.get().place(object)?;
        let ends = index.get().lock().ends(queue);
        Ok(match slf.get().field {
            Field::Min => ends.min.into_pyobject(py)?.into_any(),
            Field::Max => ends.max.into_pyobject(py)?.into_any(),
            Field::Changes => ends.changes.into_pyobject(py)?.into_any(),
            Field::Loaded => PyBool::new(py, ends.loaded).to_owned().into_any(),
        })
    }

    fn __set__(&self, object: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (index, queue) = self.place(object)?;
        // Converted before the lock is taken (a conversion may run Python code).
        match self.field {
            Field::Min => {
                let value: u64 = value.extract()?;
                index.get().lock().ends_mut(queue).min = value;
            }
            Field::Max => {
                let value: u64 = value.extract()?;
                index.get().lock().ends_mut(queue).max = value;
            }
            Field::Changes => {
                let value: i64 = value.extract()?;
                index.get().lock().ends_mut(queue).changes = value;
            }
            Field::Loaded => {
                let value = value.is_truthy()?;
                index.get().lock().ends_mut(queue).loaded = value;
            }
        }
        Ok(())
    }

    fn __delete__(&self, _object: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(PyTypeError::new_err("a queue's end cannot be deleted"))
    }
}
