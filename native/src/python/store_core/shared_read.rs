//! `read` of a shared topic's queue in the store core (issue 33): the queue's blocks
//! looked up in the topic's native block index, its entries copied from the block
//! files' mappings, its records checked and its messages made by the one entry walk
//! (`StoreCore::walk_queue`), in the call `MessageStore.read` makes; and the filtered
//! scan's walk of such a queue (`scan_filtered`), which reads its entries the same way.
//!
//! A shared topic (blockqueue.py) makes a queue's Python object on first use, and its
//! first use loads it: its ends found from its blocks (`BlockQueue._load`), then checked
//! against the log (`MessageStore._on_queue_load`: the trim of entries past the tail or
//! pointing at another queue's record, the move of the minimum past what retention
//! deleted). At a million queues that first use was most of a read's cost. Here a queue
//! whose object is not made yet is read without making it, when its ends are *settled*:
//! the load would find them and its checks change nothing (open_ends.rs, the same rules
//! the open after a crash goes by): its last block's last written entry is kept by the
//! trim (for a read, whether its record is its own is left to the walk, which declines
//! at that entry if not: `Settled`), and with a floor above zero (the log's start, or
//! the topic's retention), its first entry lies at or past it. Beside a writer in
//! another process the block store is marked stale at every follow (the writer may have
//! allocated blocks this process has not taken in): that does not unsettle a queue not
//! made, whose load reads the same index, and which has had nothing published since the
//! index was complete (each follow makes the queues whose records it takes in, and their
//! blocks are looked for then).
//! Any other queue is made and loaded the Python way, then read here from its ends.
//!
//! Whatever the core does not accept at once goes the long way (`_read_long_way`), as
//! for a queue with files of its own: a block this process does not know (another
//! process allocated it: the long way looks for it), a block file not open or not
//! mappable, an entry or record to be checked the long way, the seam's `pread` replaced.

use std::cell::Cell;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyType};

use super::super::block_index::{BlockIndex, HEADER_SIZE};
use super::super::mapped::{Copied, Mapping};
use super::super::open_ends::{self, LastEntry};
use super::super::slots::Slot;
use super::{exact_int, lock, StoreCore, View};
use crate::consume_queue::ENTRY_SIZE;

/// A read's blocks looked up without a vector (a read of 10 entries spans one or two).
const FEW_BLOCKS: usize = 4;
/// Block stores whose facts are kept (a store has few shared topics); past this many
/// the cache starts again.
const BLOCK_STORES: usize = 64;
/// Block files mapped at once for reads, over all block stores (a million queues are
/// ~16 files); past this many, the core declines reads of the others (the long way
/// `pread`s them).
const MAPPED_BLOCK_FILES: usize = 256;

/// The engine's classes a shared read goes through, and where their slots sit.
pub(super) struct SharedClasses {
    topic_type: Py<PyType>,
    topic_queues: Slot,
    topic_blocks: Slot,
    topic_info: Slot,
    lazy_type: Py<PyType>,
    lazy_at: Slot,
    lazy_count: Slot,
    queue_type: Py<PyType>,
    file_type: Py<PyType>,
    file_fd: Slot,
}

impl SharedClasses {
    /// The slots of `topics.Topic`, `topics.LazyQueues`, `blockqueue.BlockQueue` and
    /// `blockqueue.BlockFile`.
    pub(super) fn new(
        topic_type: &Bound<'_, PyType>,
        lazy_type: &Bound<'_, PyType>,
        queue_type: &Bound<'_, PyType>,
        file_type: &Bound<'_, PyType>,
    ) -> PyResult<SharedClasses> {
        Ok(SharedClasses {
            topic_queues: Slot::of(topic_type, "queues")?,
            topic_blocks: Slot::of(topic_type, "blocks")?,
            topic_info: Slot::of(topic_type, "_info")?,
            topic_type: topic_type.clone().unbind(),
            lazy_at: Slot::of(lazy_type, "_at")?,
            lazy_count: Slot::of(lazy_type, "_count")?,
            lazy_type: lazy_type.clone().unbind(),
            queue_type: queue_type.clone().unbind(),
            file_fd: Slot::of(file_type, "_fd")?,
            file_type: file_type.clone().unbind(),
        })
    }

    pub(super) fn traverse(&self, visit: &pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        visit.call(&self.topic_type)?;
        visit.call(&self.lazy_type)?;
        visit.call(&self.queue_type)?;
        visit.call(&self.file_type)?;
        Ok(())
    }
}

/// A block store's shape: entries a block, blocks a file, bytes a block.
#[derive(Clone, Copy)]
struct Geometry {
    per_block: u64,
    per_file: u64,
    block_bytes: u64,
}

/// A block file mapped for reads: the `BlockFile` (held, so its address names no other
/// while it is here), its first block, and its mapping (None: it could not be mapped, or
/// was cut short under it: not read through one again).
struct BlockFileMap {
    file: Py<PyAny>,
    first: u64,
    map: Option<Mapping>,
}

/// What never changes of a `BlockStore` (its `__dict__`, block index, table of files
/// and shape), by the object, which is held; its files mapped for reads, and how many
/// files its table held when they were last all looked at.
struct BlockFacts {
    blocks: Py<PyAny>,
    dict: Py<PyDict>,
    /// The version of `dict` (`dict_version`) when `index`, `files` and its `closed`
    /// were last found as kept here: while it is the same, they are, and a read does
    /// not look them up again (3 look-ups, ~375 instructions a read).
    version: Option<u64>,
    /// Whether `rebuilding` was exactly False at that version (`Facts::quiet`).
    quiet: bool,
    index: Py<BlockIndex>,
    files: Py<PyDict>,
    geometry: Geometry,
    maps: Vec<BlockFileMap>,
    files_seen: usize,
}

/// A mapping whose file may have been closed while still in its block store's table is
/// looked at once every this many reads (each look is a dict look-up and a slot read:
/// ~550 instructions, 1.5 % of a read of 10 messages when made at every read).
const SWEEP_EVERY: usize = 16;

/// The block stores read so far, and where the sweep of their mappings is.
#[derive(Default)]
pub(super) struct BlockStores {
    facts: Vec<BlockFacts>,
    sweep: usize,
    reads: usize,
    /// The `retained_from` a read found last (`retained_from`).
    retained: Option<Retained>,
}

/// A topic's `info.retained_from` as read, with the info (held), its `__dict__` and that
/// dict's version then.
struct Retained {
    info: Py<PyAny>,
    dict: Py<PyDict>,
    version: u64,
    value: u64,
}

impl BlockFacts {
    /// The key a block store's facts are kept under: its object's address (held).
    fn key(&self) -> usize {
        self.blocks.as_ptr() as usize
    }
}

/// The facts kept of the block store `key`, if any.
fn kept_mut(facts: &mut [BlockFacts], key: usize) -> Option<&mut BlockFacts> {
    facts.iter_mut().find(|f| f.key() == key)
}

/// A shared topic's read: the topic, its `LazyQueues`, its `BlockStore`.
pub(super) struct SharedTopic<'py> {
    state: Bound<'py, PyAny>,
    queues: Bound<'py, PyAny>,
    blocks: Bound<'py, PyAny>,
}

/// A shared topic's queue as a walk reads it: its block store's facts, its ends, and its
/// last block as the look at its ends copied it (when it looked: a queue not made).
pub(super) struct SharedQueue<'py> {
    facts: Facts<'py>,
    pub(super) low: u64,
    pub(super) high: u64,
    last_block: Option<LastBlock>,
}

thread_local! {
    /// The bytes of the last block the thread's last read looked at (`LastBlock`), kept
    /// for its next: not a block's bytes allocated for every read.
    static LAST_BLOCK: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// The largest block buffer a thread keeps (a block of 32 entries is 656 bytes).
const LAST_BLOCK_KEPT: usize = 256 << 10;

/// A queue's last block (its seq in the queue) as `settled_ends` copied it from its
/// file, the ends it gave found in these bytes. A walk's entries inside it are taken
/// from here (`block_entries`), not copied from the file again through the block index
/// and the file's mapping (a lock, the index's look-up and the mapping's, ~400
/// instructions a read of 10 messages): they are the bytes its end was found in.
/// The thread's buffer, given back when dropped.
struct LastBlock {
    seq: u64,
    bytes: Vec<u8>,
}

impl LastBlock {
    fn take(seq: u64, len: usize) -> LastBlock {
        let mut bytes = LAST_BLOCK.with(Cell::take);
        bytes.resize(len, 0);
        LastBlock { seq, bytes }
    }

    /// Entries `slot` to `slot + count - 1` of the block, packed, if it holds them.
    fn entries(&self, slot: u64, count: u64) -> Option<&[u8]> {
        let at = HEADER_SIZE + slot as usize * ENTRY_SIZE;
        self.bytes.get(at..at + count as usize * ENTRY_SIZE)
    }
}

impl Drop for LastBlock {
    fn drop(&mut self) {
        let bytes = std::mem::take(&mut self.bytes);
        if bytes.capacity() <= LAST_BLOCK_KEPT {
            let _ = LAST_BLOCK.try_with(|kept| kept.set(bytes));
        }
    }
}

/// Whether `settled_ends` looks at the record of the queue's last entry (when the trim
/// would keep that entry only if its record is its own), or leaves it to the walk.
///
/// A read (`read_shared`) leaves it to the walk: the walk checks every entry it reaches
/// against its record (`walk::read_entries`: the record's topic, queue and queue offset
/// among its checks, all of `open_ends::record_is`'s) and declines at one that is not
/// its own, so a read that reaches the last entry goes the long way, whose first use of
/// the queue loads it and trims that entry; a read that stops short of it returns the
/// same messages either way, and leaves the queue not made (whatever asks for its end
/// next loads it, as before). At a million queues that record is a random place in a
/// log of gigabytes: its look was a cache and TLB miss of its own and ~280 instructions
/// a read. A filtered scan, which may pass entries over unread (another tag), looks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Settled {
    Now,
    ByTheWalk,
}

/// The `BlockStore` facts a read uses, taken out of the cache for the call.
struct Facts<'py> {
    key: usize,
    dict: Bound<'py, PyDict>,
    /// The store's `rebuilding` is exactly False (recovery is not rebuilding the topic's
    /// entries): read with its dict's other facts, and only looked up again by
    /// `settled_ends` when not.
    quiet: bool,
    index: Bound<'py, BlockIndex>,
    files: Bound<'py, PyDict>,
    geometry: Geometry,
}

/// The (min offset, max offset) the block index keeps for queue `queue_id` when it is
/// loaded (block_index.rs).
fn known_ends(facts: &Facts<'_>, queue_id: u32) -> Option<(u64, u64)> {
    let ends = facts.index.get().lock().ends(queue_id);
    ends.loaded.then_some((ends.min, ends.max))
}

/// Ask for the line holding item `index` of `list` (a hint: nothing is read), when
/// there is one: its miss then overlaps the block index's.
fn ask_for_item(list: &Bound<'_, PyList>, index: usize) {
    if index >= list.len() {
        return;
    }
    // SAFETY: `list` is a live list (bound: the GIL is held) with more than `index`
    // items (checked just above, nothing run since), so `ob_item + index` is inside its
    // item array; only its address is taken, for a prefetch, which reads nothing.
    let item = unsafe {
        (*list.as_ptr().cast::<pyo3::ffi::PyListObject>())
            .ob_item
            .add(index)
    };
    crate::prefetch::object(item.cast::<u8>());
}

/// Whether the record at commit offset `offset`, in the segment `data` whose first byte
/// is commit offset `base`, is entry `index` of queue `queue_id` of topic `name`.
fn record_in(data: &[u8], base: u64, offset: u64, name: &[u8], queue_id: u32, index: u64) -> bool {
    let Some(at) = offset.checked_sub(base).map(|at| at as usize) else {
        return false;
    };
    at < data.len() && open_ends::record_is(&data[at..], offset, name, queue_id, index)
}

impl StoreCore {
    /// The shared topic `state` (a registry `Topic`) is, if it is one: exactly a
    /// `Topic` with a block store and its queues a `LazyQueues`.
    pub(super) fn shared_topic<'py>(&self, state: &Bound<'py, PyAny>) -> Option<SharedTopic<'py>> {
        let py = state.py();
        let classes = &self.shared_classes;
        if !state.get_type().is(classes.topic_type.bind(py)) {
            return None;
        }
        let blocks = classes.topic_blocks.get(state)?;
        let queues = classes.topic_queues.get(state)?;
        if blocks.is_none() || !queues.get_type().is(classes.lazy_type.bind(py)) {
            return None;
        }
        Some(SharedTopic {
            state: state.clone(),
            queues,
            blocks,
        })
    }

    /// `read`'s messages for queue `queue_id` of the shared topic `shared` (named `name`
    /// in its records), from queue offset `offset` on, at most `max_messages`; None when
    /// the core declines (see the module docs).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn read_shared<'py>(
        &self,
        py: Python<'py>,
        shared: &SharedTopic<'py>,
        topic: &Bound<'py, PyAny>,
        name: &[u8],
        queue: &Bound<'py, PyAny>,
        queue_id: u32,
        offset: u64,
        max_messages: usize,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        let Some(walked) = self.queue_of(py, shared, name, queue_id, Settled::ByTheWalk)? else {
            return Ok(None);
        };
        self.read_messages(
            py,
            (topic, queue),
            (name, queue_id),
            (offset.max(walked.low), walked.high),
            max_messages,
            |position, count, buffer| {
                self.shared_entries(py, &walked, queue_id, position, count, buffer)
            },
        )
    }

    /// Queue `queue_id` of the shared topic `shared` (named `name` in its records) as a
    /// read or a filtered scan walks it: its block store's facts and its ends; None when
    /// the core declines (see the module docs).
    pub(super) fn shared_queue<'py>(
        &self,
        py: Python<'py>,
        shared: &SharedTopic<'py>,
        name: &[u8],
        queue_id: u32,
    ) -> PyResult<Option<SharedQueue<'py>>> {
        self.queue_of(py, shared, name, queue_id, Settled::Now)
    }

    /// `shared_queue`, the look at its last entry's record made as `settled` says.
    fn queue_of<'py>(
        &self,
        py: Python<'py>,
        shared: &SharedTopic<'py>,
        name: &[u8],
        queue_id: u32,
        settled: Settled,
    ) -> PyResult<Option<SharedQueue<'py>>> {
        if !self.genuine_pread(py)? {
            return Ok(None); // a fault test's pread sees every read: the long way
        }
        let classes = &self.shared_classes;
        let Some(count) = classes
            .lazy_count
            .get(&shared.queues)
            .and_then(|count| exact_int(&count))
        else {
            return Ok(None);
        };
        if i64::from(queue_id) >= count {
            return Ok(None); // no such queue: the long way says so
        }
        let Some(facts) = self.block_facts(py, &shared.blocks)? else {
            return Ok(None);
        };
        let Some(((low, high), last_block)) =
            self.shared_ends(py, shared, &facts, name, queue_id, settled)?
        else {
            return Ok(None);
        };
        Ok(Some(SharedQueue {
            facts,
            low,
            high,
            last_block,
        }))
    }

    /// Fill `buffer` with `count` packed entries of `queue`'s queue `queue_id` from
    /// `position`: from its last block's bytes as its ends were found in them, when they
    /// lie there (`LastBlock`), else from its blocks' files (`block_entries`).
    pub(super) fn shared_entries(
        &self,
        py: Python<'_>,
        queue: &SharedQueue<'_>,
        queue_id: u32,
        position: u64,
        count: u64,
        buffer: &mut Vec<u8>,
    ) -> PyResult<bool> {
        let per = queue.facts.geometry.per_block;
        if let Some(last) = &queue.last_block {
            if position / per == last.seq && (position + count - 1) / per == last.seq {
                if let Some(entries) = last.entries(position % per, count) {
                    buffer.clear();
                    buffer.extend_from_slice(entries);
                    return Ok(true);
                }
            }
        }
        self.block_entries(py, &queue.facts, queue_id, position, count, buffer)
    }

    /// The queue's (min offset, max offset): those the topic's block index keeps for it
    /// when it is loaded (block_index.rs: made or not, its object reads them there);
    /// the settled ends its blocks give when its object is not made (`settled_ends`);
    /// else those its object finds when made and loaded the Python way (as the long way
    /// would); with the settled ones, the last block they were found in. None when the
    /// core declines.
    #[allow(clippy::type_complexity)]
    fn shared_ends<'py>(
        &self,
        py: Python<'py>,
        shared: &SharedTopic<'py>,
        facts: &Facts<'py>,
        name: &[u8],
        queue_id: u32,
        settled: Settled,
    ) -> PyResult<Option<((u64, u64), Option<LastBlock>)>> {
        let classes = &self.shared_classes;
        let at = classes
            .lazy_at
            .get(&shared.queues)
            .and_then(|at| at.cast_into::<PyList>().ok());
        if let Some(at) = &at {
            ask_for_item(at, queue_id as usize); // its miss overlaps the index's
        }
        // The queue's ends and latest block asked for with it: three misses together.
        facts.index.get().lock().prefetch(std::iter::once(queue_id));
        if let Some(ends) = known_ends(facts, queue_id) {
            return Ok(Some((ends, None)));
        }
        let Some(at) = at else {
            return Ok(None);
        };
        let Ok(made) = at.get_item(queue_id as usize) else {
            return Ok(None);
        };
        let queue = if made.is_none() {
            if let Some(found) = self.settled_ends(py, shared, facts, name, queue_id, settled)? {
                return Ok(Some(found));
            }
            // Made and loaded as the long way's first use makes and loads it.
            shared.queues.get_item(queue_id)?
        } else {
            made
        };
        Ok(self
            .load(py, facts, queue_id, &queue)?
            .map(|ends| (ends, None)))
    }

    /// `queue` (the object of queue `queue_id`) loaded, and the ends the index then keeps
    /// for it; None when it is not a `BlockQueue`.
    fn load<'py>(
        &self,
        py: Python<'py>,
        facts: &Facts<'py>,
        queue_id: u32,
        queue: &Bound<'py, PyAny>,
    ) -> PyResult<Option<(u64, u64)>> {
        if !queue.get_type().is(self.shared_classes.queue_type.bind(py)) {
            return Ok(None);
        }
        queue.call_method0(pyo3::intern!(py, "_ensure_loaded"))?;
        Ok(known_ends(facts, queue_id))
    }

    /// The ends a queue whose object is not made would be loaded with, when they are
    /// settled (see the module docs); None when only its load can say (recovery is
    /// rebuilding the topic's entries, its last block is of zeros or unknown, its last
    /// entry may be trimmed, its minimum may move). With `Settled::ByTheWalk` the look at
    /// the record of the last entry (`record_is`) is left to the walk. With the ends, the
    /// last block's bytes they were found in (`LastBlock`).
    #[allow(clippy::type_complexity)]
    fn settled_ends<'py>(
        &self,
        py: Python<'py>,
        shared: &SharedTopic<'py>,
        facts: &Facts<'py>,
        name: &[u8],
        queue_id: u32,
        settled: Settled,
    ) -> PyResult<Option<((u64, u64), Option<LastBlock>)>> {
        // Not `stale`: beside a writer in another process the block store is marked
        // stale at every follow, yet what the index lacks is the same for the queue's load
        // (`BlockQueue._load` reads this index too), and a queue whose records others
        // published since the index was complete was made by the follow that took them in.
        if !facts.quiet {
            match facts.dict.get_item(pyo3::intern!(py, "rebuilding"))? {
                Some(value) if !value.is_truthy()? => {}
                _ => return Ok(None),
            }
        }
        let Geometry {
            per_block,
            block_bytes,
            ..
        } = facts.geometry;
        let blocks = {
            let index = facts.index.get().lock();
            match index.seq_range(queue_id) {
                None => return Ok(Some(((0, 0), None))), // no blocks: an empty queue, as loaded
                Some((first, last)) => {
                    // The last block is mostly the one the index remembered last for
                    // the queue (`recent`: one load where the block map costs two
                    // misses at a million queues), and mostly the first too.
                    let last_block = index.recent(queue_id, last);
                    let first_block = if first == last {
                        last_block
                    } else {
                        index.get(queue_id, first)
                    };
                    (first, last, first_block, last_block)
                }
            }
        };
        let (first, last, Some(first_block), Some(last_block)) = blocks else {
            return Ok(None);
        };
        // The thread's block buffer: copied over whatever it holds, not a block's bytes
        // made and zeroed for every read.
        let mut kept = LastBlock::take(last, block_bytes as usize);
        if !self.copy_block(py, facts, last_block, 0, &mut kept.bytes)? {
            return Ok(None);
        }
        let block = &kept.bytes[..];
        let Some(end) = open_ends::written_end(block, last, per_block) else {
            return Ok(None);
        };
        let min = first * per_block;
        let Some(tail) = self.tail(py)? else {
            return Ok(None);
        };
        let log_min = self.log_min(py, tail)?;
        let entry = open_ends::entry_of(block, end - 1 - last * per_block);
        match open_ends::last_entry_kept(entry, log_min, tail) {
            Some(LastEntry::Kept) => {}
            Some(LastEntry::IfRecordIs) if settled == Settled::ByTheWalk => {}
            Some(LastEntry::IfRecordIs) => {
                if !self.record_is(py, entry.0, name, queue_id, end - 1)? {
                    return Ok(None);
                }
            }
            None => return Ok(None),
        }
        let floor = log_min.max(self.retained_from(py, &shared.state)?);
        if floor > 0 && end > min {
            // `QueueBase.advance_min` leaves the minimum where it is only when its entry
            // is written and at or past the floor.
            let first_entry = if first == last {
                open_ends::entry_of(block, 0)
            } else {
                let mut head = vec![0u8; HEADER_SIZE + ENTRY_SIZE];
                if !self.copy_block(py, facts, first_block, 0, &mut head)? {
                    return Ok(None);
                }
                open_ends::entry_of(&head, 0)
            };
            if first_entry.1 == 0 || first_entry.0 < floor {
                return Ok(None);
            }
        }
        Ok(Some(((min, end.max(min)), Some(kept))))
    }

    /// Whether the record at commit offset `offset` is entry `index` of queue `queue_id`
    /// of topic `name` (`follow.record_matches`).
    fn record_is(
        &self,
        py: Python<'_>,
        offset: u64,
        name: &[u8],
        queue_id: u32,
        index: u64,
    ) -> PyResult<bool> {
        let Some((base, map)) = self.locate(py, offset)? else {
            return Ok(false);
        };
        let Some(view) = View::of(map.bind(py)) else {
            return Ok(false);
        };
        Ok(record_in(view.slice(), base, offset, name, queue_id, index))
    }

    /// The log's first offset (`CommitLog.min_offset`: its first segment's base, or the
    /// tail when it has none).
    fn log_min(&self, py: Python<'_>, tail: u64) -> PyResult<u64> {
        if let Some(base) = self.first_base(py) {
            return Ok(base); // the segment table's, without the attribute look-up
        }
        let segments = self.segments.bind(py);
        match segments.iter().next() {
            Some(first) => first.getattr(pyo3::intern!(py, "base"))?.extract(),
            None => Ok(tail),
        }
    }

    /// The topic's `info.retained_from`: the one read last while `info` is the same
    /// object and its `__dict__` unchanged (`dict_version`), else read and kept when it
    /// is that dict's own item (a `TopicInfo` is a dataclass: it is).
    fn retained_from(&self, py: Python<'_>, state: &Bound<'_, PyAny>) -> PyResult<u64> {
        let Some(info) = self.shared_classes.topic_info.get(state) else {
            return Ok(u64::MAX); // no floor known: nothing is settled below it
        };
        {
            let stores = lock(&self.block_stores);
            if let Some(kept) = &stores.retained {
                if kept.info.is(&info)
                    && super::super::dict_version(kept.dict.bind(py)) == Some(kept.version)
                {
                    return Ok(kept.value);
                }
            }
        }
        let name = pyo3::intern!(py, "retained_from");
        let dict = info
            .getattr(pyo3::intern!(py, "__dict__"))
            .ok()
            .and_then(|dict| dict.cast_into::<PyDict>().ok());
        // Read before the look-ups: were the dict changed by code they run, the version
        // kept would not be its new one, and the next read would look again.
        let version = dict.as_ref().and_then(super::super::dict_version);
        let found = info.getattr(name)?;
        let value: u64 = found.extract()?;
        if let (Some(dict), Some(version)) = (dict, version) {
            if dict.get_item(name)?.is_some_and(|own| own.is(&found)) {
                let old = lock(&self.block_stores).retained.replace(Retained {
                    info: info.unbind(),
                    dict: dict.unbind(),
                    version,
                    value,
                });
                drop(old); // after the lock is let go: dropping may run Python code
            }
        }
        Ok(value)
    }

    /// Fill `buffer` with `count` packed entries of queue `queue_id` from `position`,
    /// copied from its blocks' files' mappings; false when they cannot all be (a block
    /// not in the index, a file not open or not mappable, a file cut short): the long
    /// way reads them.
    fn block_entries(
        &self,
        py: Python<'_>,
        facts: &Facts<'_>,
        queue_id: u32,
        position: u64,
        count: u64,
        buffer: &mut Vec<u8>,
    ) -> PyResult<bool> {
        let per = facts.geometry.per_block;
        let (first_seq, last_seq) = (position / per, (position + count - 1) / per);
        // Mostly one or two blocks: looked up into an array, not a new vector.
        let mut few = [0u64; FEW_BLOCKS];
        let many: Vec<u64>;
        let blocks: &[u64] = {
            let index = facts.index.get().lock();
            let seqs = first_seq..=last_seq;
            if last_seq - first_seq < FEW_BLOCKS as u64 {
                for (slot, seq) in few.iter_mut().zip(seqs) {
                    let Some(block) = index.recent(queue_id, seq) else {
                        return Ok(false);
                    };
                    *slot = block;
                }
                &few[..=(last_seq - first_seq) as usize]
            } else {
                let Some(found) = seqs.map(|seq| index.recent(queue_id, seq)).collect() else {
                    return Ok(false);
                };
                many = found;
                &many
            }
        };
        buffer.clear();
        buffer.resize(count as usize * ENTRY_SIZE, 0);
        let mut index = position;
        let mut filled = 0;
        for &block in blocks {
            let slot = index % per;
            let n = (per - slot).min(position + count - index) as usize;
            let at = HEADER_SIZE + slot as usize * ENTRY_SIZE;
            let out = &mut buffer[filled..filled + n * ENTRY_SIZE];
            if !self.copy_block(py, facts, block, at, out)? {
                return Ok(false);
            }
            filled += n * ENTRY_SIZE;
            index += n as u64;
        }
        Ok(true)
    }

    /// Copy `out`'s length of bytes from `at` of block `block` out of its file's
    /// mapping (made the first time from the `BlockFile`'s open descriptor); false when
    /// they are not copied (the file not in the block store's table or not open, not
    /// mappable, cut short).
    fn copy_block(
        &self,
        py: Python<'_>,
        facts: &Facts<'_>,
        block: u64,
        at: usize,
        out: &mut [u8],
    ) -> PyResult<bool> {
        let geometry = facts.geometry;
        let first = block - block % geometry.per_file;
        let from = ((block - first) * geometry.block_bytes) as usize + at;
        if let Some(copied) = self.copy_kept(py, facts, first, from, out) {
            return Ok(copied);
        }
        let Some(file) = facts.files.get_item(first)? else {
            return Ok(false);
        };
        let classes = &self.shared_classes;
        if !file.get_type().is(classes.file_type.bind(py)) {
            return Ok(false);
        }
        let Some(fd) = classes
            .file_fd
            .get(&file)
            .and_then(|fd| exact_int(&fd))
            .and_then(|fd| i32::try_from(fd).ok())
            .filter(|&fd| fd >= 0)
        else {
            return Ok(false); // not open here: the long way opens it
        };
        let file_len = (geometry.per_file * geometry.block_bytes) as usize;
        let mut stores = lock(&self.block_stores);
        let stores = &mut *stores;
        let mapped: usize = stores.facts.iter().map(|f| f.maps.len()).sum();
        let Some(kept) = kept_mut(&mut stores.facts, facts.key) else {
            return Ok(false);
        };
        let known = kept.maps.iter().position(|m| m.file.is(&file));
        let place = match known {
            Some(place) => place,
            None => {
                if mapped >= MAPPED_BLOCK_FILES {
                    return Ok(false);
                }
                kept.maps.push(BlockFileMap {
                    file: file.clone().unbind(),
                    first,
                    map: Mapping::of(fd, file_len),
                });
                kept.maps.len() - 1
            }
        };
        let Some(map) = &kept.maps[place].map else {
            return Ok(false);
        };
        match map.copy(from, out) {
            Copied::Done => Ok(true),
            Copied::Outside => Ok(false),
            Copied::Cut => {
                kept.maps[place].map = None; // never read through it again
                Ok(false)
            }
        }
    }

    /// `copy_block` through a file this process mapped already, without looking it up
    /// in the block store's table: a `BlockFile` still open is still the table's file
    /// for its first block (blockqueue.py sets a table entry only where none is, and
    /// closes a file when it takes it out; a file let go of is never opened again, and
    /// the core holds it). None when no open file is mapped for `first` (the caller
    /// looks it up), else whether the bytes were copied (as `copy_block`).
    fn copy_kept(
        &self,
        py: Python<'_>,
        facts: &Facts<'_>,
        first: u64,
        from: usize,
        out: &mut [u8],
    ) -> Option<bool> {
        let file_fd = self.shared_classes.file_fd;
        let mut stores = lock(&self.block_stores);
        let kept = kept_mut(&mut stores.facts, facts.key)?;
        let place = kept.maps.iter().position(|m| {
            m.first == first
                && file_fd
                    .get(m.file.bind(py))
                    .and_then(|fd| exact_int(&fd))
                    .is_some_and(|fd| fd >= 0)
        })?;
        let map = kept.maps[place].map.as_ref()?;
        Some(match map.copy(from, out) {
            Copied::Done => true,
            Copied::Outside => false,
            Copied::Cut => {
                kept.maps[place].map = None; // never read through it again
                false
            }
        })
    }

    /// The facts of the block store `blocks`, read the first time (and again when its
    /// index or table of files is not the one kept); one of its mappings looked at (in
    /// turn) and let go if its file left the table or was closed. None when it is not a
    /// block store as the core reads them.
    fn block_facts<'py>(
        &self,
        py: Python<'py>,
        blocks: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Facts<'py>>> {
        let key = blocks.as_ptr() as usize;
        let found = {
            let stores = lock(&self.block_stores);
            stores.facts.iter().find(|f| f.key() == key).map(|f| {
                (
                    f.dict.clone_ref(py),
                    f.index.clone_ref(py),
                    f.files.clone_ref(py),
                    f.geometry,
                    f.version,
                    f.quiet,
                )
            })
        };
        let dict = match &found {
            Some((dict, ..)) => dict.bind(py).clone(),
            None => match blocks
                .getattr(pyo3::intern!(py, "__dict__"))?
                .cast_into::<PyDict>()
            {
                Ok(dict) => dict,
                Err(_) => return Ok(None),
            },
        };
        // Read before the look-ups: were the dict changed by code they run, the version
        // noted would not be its new one, and the next read would look again.
        let version = super::super::dict_version(&dict);
        if let Some((_, kept_index, kept_files, geometry, seen, quiet)) = &found {
            if version.is_some() && version == *seen {
                self.sweep_block_maps(py, key);
                return Ok(Some(Facts {
                    key,
                    dict,
                    quiet: *quiet,
                    index: kept_index.clone_ref(py).into_bound(py),
                    files: kept_files.clone_ref(py).into_bound(py),
                    geometry: *geometry,
                }));
            }
        }
        let item = |name: &Bound<'py, PyString>| dict.get_item(name);
        let (Some(index), Some(files), Some(closed)) = (
            item(pyo3::intern!(py, "index"))?,
            item(pyo3::intern!(py, "files"))?,
            item(pyo3::intern!(py, "closed"))?,
        ) else {
            return Ok(None);
        };
        if closed.is_truthy()? {
            return Ok(None);
        }
        let quiet = item(pyo3::intern!(py, "rebuilding"))?
            .is_some_and(|rebuilding| rebuilding.is(PyBool::new(py, false)));
        if let Some((_, kept_index, kept_files, geometry, _, _)) = found {
            if kept_index.bind(py).is(&index) && kept_files.bind(py).is(&files) {
                if let Some(kept) = kept_mut(&mut lock(&self.block_stores).facts, key) {
                    kept.version = version;
                    kept.quiet = quiet;
                }
                self.sweep_block_maps(py, key);
                return Ok(Some(Facts {
                    key,
                    dict,
                    quiet,
                    index: kept_index.into_bound(py),
                    files: kept_files.into_bound(py),
                    geometry,
                }));
            }
        }
        let (Ok(index), Ok(files)) = (index.cast_into::<BlockIndex>(), files.cast_into::<PyDict>())
        else {
            return Ok(None);
        };
        let number = |name: &Bound<'py, PyString>| -> PyResult<Option<u64>> {
            Ok(match dict.get_item(name)? {
                Some(value) if value.is_exact_instance_of::<PyInt>() => value.extract().ok(),
                _ => None,
            })
        };
        let (Some(per_block), Some(per_file), Some(block_bytes)) = (
            number(pyo3::intern!(py, "entries_per_block"))?,
            number(pyo3::intern!(py, "blocks_per_file"))?,
            number(pyo3::intern!(py, "block_bytes"))?,
        ) else {
            return Ok(None);
        };
        if per_block == 0
            || per_file == 0
            || block_bytes != HEADER_SIZE as u64 + per_block * ENTRY_SIZE as u64
        {
            return Ok(None);
        }
        let geometry = Geometry {
            per_block,
            per_file,
            block_bytes,
        };
        let fresh = BlockFacts {
            blocks: blocks.clone().unbind(),
            dict: dict.clone().unbind(),
            version,
            quiet,
            index: index.clone().unbind(),
            files: files.clone().unbind(),
            geometry,
            maps: Vec::new(),
            files_seen: 0,
        };
        let old = {
            let mut stores = lock(&self.block_stores);
            let old: Vec<BlockFacts> = if stores.facts.len() >= BLOCK_STORES {
                std::mem::take(&mut stores.facts)
            } else {
                let mut old = Vec::new();
                if let Some(at) = stores.facts.iter().position(|f| f.key() == key) {
                    old.push(stores.facts.swap_remove(at));
                }
                old
            };
            stores.facts.push(fresh);
            old
        };
        drop(old); // after the lock is let go: dropping may run Python code
        Ok(Some(Facts {
            key,
            dict,
            quiet,
            index,
            files,
            geometry,
        }))
    }

    /// Let go of the mappings of the block store `key` whose files are no longer in its
    /// table or were closed (retention deletes block files whose blocks are all unused:
    /// a mapping would keep their space): all of them when the table's size changed
    /// since they were last looked at, else one (in turn) every `SWEEP_EVERY` reads.
    fn sweep_block_maps(&self, py: Python<'_>, key: usize) {
        let released: Vec<BlockFileMap> = {
            let mut stores = lock(&self.block_stores);
            let stores = &mut *stores;
            let Some(kept) = kept_mut(&mut stores.facts, key) else {
                return;
            };
            if kept.maps.is_empty() {
                return;
            }
            let files = kept.files.bind(py);
            let file_fd = self.shared_classes.file_fd;
            let gone = |entry: &BlockFileMap| {
                let file = entry.file.bind(py);
                let in_table = matches!(
                    files.get_item(entry.first),
                    Ok(Some(current)) if current.is(file)
                );
                let open = file_fd
                    .get(file)
                    .and_then(|fd| exact_int(&fd))
                    .is_some_and(|fd| fd >= 0);
                !(in_table && open)
            };
            if files.len() != kept.files_seen {
                kept.files_seen = files.len();
                let (gone, kept_maps): (Vec<_>, Vec<_>) = std::mem::take(&mut kept.maps)
                    .into_iter()
                    .partition(|m| gone(m));
                kept.maps = kept_maps;
                gone
            } else {
                stores.reads = stores.reads.wrapping_add(1);
                if !stores.reads.is_multiple_of(SWEEP_EVERY) {
                    return;
                }
                let at = stores.sweep % kept.maps.len();
                stores.sweep = at + 1;
                if gone(&kept.maps[at]) {
                    vec![kept.maps.swap_remove(at)]
                } else {
                    Vec::new()
                }
            }
        };
        drop(released); // after the lock is let go: dropping may run Python code
    }
}
