//! `_native.AppendCore`: one native call for the common `append` (issue 31, part 3).
//!
//! The common case is a body without keys or a dedup id (perhaps with an explicit
//! queue, a tag, properties) to a topic with files per queue, that fits in the active
//! segment, whose queue entry goes to the queue's last file. The call then does what
//! `Writer.write_group` does for it, in this order, holding the GIL throughout but
//! for a wait for the pen (so no other thread of this process runs meanwhile): take
//! the pen; check that no other process published since this one caught up (the
//! sequence word; else follow it, see below) and
//! that no write is left unfinished; mark the write begun with its extent; `pwrite` the
//! queue entry into the queue's file; store the record into the segment's mapping
//! (segments are reserved whole with `fallocate`, so the store cannot fault on a full
//! disk); `pwrite` its time mark when the entry is one the time index marks (every
//! 128th; part 5); publish the tail with the queue's note; let go of the pen; build the
//! `AppendResult`. A single message with keys, a str body, or to a shared topic, is
//! prepared natively as `Writer.prepare` prepares it (prepare.rs) and written as a dict
//! batch of one (`try_items`); a message `Writer.prepare` would refuse (a bad queue id,
//! a frozen queue, a bad tag...) is declined before anything is written, and the long
//! way raises its typed error. A dedup id goes the long way.
//!
//! Another process's write is not declined (part 11): a busy pen is tried again for a
//! couple of microseconds, then waited for without the GIL; appends another process
//! published are followed natively from the notes ring (append_core/follow.rs), any
//! other change by the store's `_follow`, and the write's plan (its queues' rooms;
//! after a wait, the store and topic too) is made again under the pen.
//!
//! Everything else it declines with None before it writes anything, and the caller
//! takes today's Python path: another thread writing, a dead
//! writer (its mutex is settled by the store first), a segment roll, a new queue file,
//! a topic setting of its own, a failed or closed store, and any fault plan
//! a test installed (a replaced `fileio` function or engine method on the append
//! path): those keep their kill points and fault sites in Python. The exception is a
//! plan installed with native sites (io_seam.rs): the functions it names as stood in
//! for by the core's sites (`fileio.pwrite_all`, `fileio.fdatasync`) may be replaced,
//! and the core's calls go through the plan's `Io` at `log.record`, `queue.entry`,
//! `queue.reserve`, `timeindex.mark`, `block.entry` (and the group commit's `log.sync`).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pyo3::exceptions::{PyOSError, PyRuntimeError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyList, PySet, PyString, PyTuple, PyType};

mod follow;

use follow::Followed;

use super::io_seam::{self, Site, What};
use super::log_sync::{LogSyncer, Written};
use super::pen::Pen;
use super::prepare;
use super::returning;
use super::slots::Slot;
use super::thread_lock::ThreadLock;
use super::window::{populate_write, NotStored, QueueWindow};
use super::words::{Asks, Refusals, Word};
use super::Bytes;
use super::{check_record_type, id_prefix, message_id, new_record};
use crate::appending;
use crate::consume_queue::{Entry, ENTRY_SIZE};
use crate::pen::Taken;
use crate::record::{encode_at, Fields, MARKER_SIZE, RECORD_OVERHEAD};

// A shared topic's dict batch (issue 33): its own file, beside this one's machinery.
#[path = "shared_core.rs"]
mod shared_core;

// The `state` header (sharedstate.py, FORMAT.md "Shared state"): where each word sits.
const SEQUENCE_AT: usize = 8;
const TAIL_AT: usize = 16;
const WRITING_AT: usize = 56;
const RING_SEQ_AT: usize = 64;
const EXTENT_AT: usize = 72;
const RING_AT: usize = 4096;
const RING_ENTRY: usize = 32;
const RING_ENTRIES: u64 = 8192;
/// consumequeue.TIME_INDEX_INTERVAL: an entry at a multiple of it gets a time mark.
const TIME_INDEX_INTERVAL: u64 = 128;
/// timeindex.MARK_SIZE: a mark's bytes (the queue offset plus one, the store ms; LE).
const MARK_SIZE: usize = 16;
/// The log bytes between two asks for the pretoucher (`after`), and how far past the
/// tail it populates the active segment (store.py, `_pretouch`: `PRETOUCH_BYTES`).
const PRETOUCH_ASK: u64 = 256 << 10;
/// Queue files whose descriptors are kept open here (the last file of a queue each).
const OPEN_FILES: usize = 256;
/// How long a busy pen is tried again, without sleeping and with the GIL held,
/// before the core waits for it without the GIL (`take_pen`): `PEN_SPIN` while the
/// holder's write under way (the header's `writing` word set) reaches `LONG_WRITE`
/// bytes past the tail, else `PEN_SPIN_SHORT`. A batch's pen section of 500 × 1 KiB
/// lasts 150–330 µs on session 57's machine, most of it the records' `pwrite`: of
/// two processes appending batches in turn, the next writer takes the pen as it is
/// let go instead of a futex wake-up later; a single append's is a microsecond, and
/// a wait past that is a holder off its CPU, not worth a vCPU spun for
/// (procs31-s57; until then 64 tries, 13 µs on this Xeon, whatever the write).
const PEN_SPIN: Duration = Duration::from_micros(300);
const PEN_SPIN_SHORT: Duration = Duration::from_micros(50);
const LONG_WRITE: u64 = 64 << 10;

/// A map keyed by object addresses, which no one chooses: hashed by one multiply, not
/// SipHash (which cost ~170 instructions an append for two look-ups).
type ByAddress<V> = HashMap<usize, V, BuildHasherDefault<AddressHasher>>;

#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(SPREAD);
        }
    }

    fn write_usize(&mut self, address: usize) {
        // Objects sit on 16-byte boundaries: the low 4 bits say nothing.
        self.0 = ((address as u64) >> 4).wrapping_mul(SPREAD);
    }

    fn write_i64(&mut self, queue_id: i64) {
        self.0 = (queue_id as u64).wrapping_mul(SPREAD);
    }
}

/// A map keyed by queue id (below the topic's queue count: no one chooses colliding
/// ones), hashed by one multiply, not SipHash (~190 instructions a batch item).
type ByQueue<V> = HashMap<i64, V, BuildHasherDefault<AddressHasher>>;

/// 2^64 / the golden ratio, odd: spreads consecutive addresses over the table.
const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;

/// The last file of a queue, opened for writing its entries: the file object is held,
/// so no other object takes its place in memory while the entry is kept.
struct Tail {
    file: Py<PyAny>,
    fd: OwnedFd,
    /// Its mapping and reserved window (window.rs); None when it is written with
    /// `pwrite` (it could not be mapped, or its file system has no `fallocate`).
    window: Option<QueueWindow>,
}

/// The slots the call reads and writes, of a topic's state (`Topic`), a consume queue,
/// a queue file and a segment, with those classes (an object of another type: declined).
struct Slots {
    topic_type: Py<PyType>,
    file_type: Py<PyType>,
    segment_type: Py<PyType>,
    time_index_type: Py<PyType>,
    info: Slot,
    name_bytes: Slot,
    queues: Slot,
    round_robin: Slot,
    writable: Slot,
    blocks: Slot,
    max_offset: Slot,
    loaded: Slot,
    closed: Slot,
    files: Slot,
    changes: Slot,
    dirty: Slot,
    time_index: Slot,
    first_index: Slot,
    entries: Slot,
    base: Slot,
    end: Slot,
    map: Slot,
    fd: Slot,
    handles: Slot,
    marks_dirty: Slot,
    interval: Slot,
}

impl Slots {
    fn new(queue_type: &Bound<'_, PyType>, slotted: Slotted<'_>) -> PyResult<Slots> {
        let (topic, file, segment, time_index) = slotted;
        Ok(Slots {
            info: Slot::of(&topic, "_info")?,
            name_bytes: Slot::of(&topic, "name_bytes")?,
            queues: Slot::of(&topic, "queues")?,
            round_robin: Slot::of(&topic, "round_robin")?,
            writable: Slot::of(&topic, "_writable")?,
            blocks: Slot::of(&topic, "blocks")?,
            max_offset: Slot::of(queue_type, "_max_offset")?,
            loaded: Slot::of(queue_type, "_loaded")?,
            closed: Slot::of(queue_type, "closed")?,
            files: Slot::of(queue_type, "_files")?,
            changes: Slot::of(queue_type, "changes")?,
            dirty: Slot::of(queue_type, "dirty")?,
            time_index: Slot::of(queue_type, "time_index")?,
            first_index: Slot::of(&file, "first_index")?,
            entries: Slot::of(&file, "entries")?,
            base: Slot::of(&segment, "base")?,
            end: Slot::of(&segment, "end")?,
            map: Slot::of(&segment, "map")?,
            fd: Slot::of(&segment, "fd")?,
            handles: Slot::of(&time_index, "handles")?,
            marks_dirty: Slot::of(&time_index, "dirty")?,
            interval: Slot::of(&time_index, "interval")?,
            time_index_type: time_index.unbind(),
            topic_type: topic.unbind(),
            file_type: file.unbind(),
            segment_type: segment.unbind(),
        })
    }
}

/// The slotted classes: a topic's state, a queue file, a segment, a time index.
type Slotted<'py> = (
    Bound<'py, PyType>,
    Bound<'py, PyType>,
    Bound<'py, PyType>,
    Bound<'py, PyType>,
);

/// A slot's value; declined when unset (the long way raises what it raises).
fn get<'py>(slot: Slot, object: &Bound<'py, PyAny>) -> Step<Bound<'py, PyAny>> {
    slot.get(object).ok_or(Stop::Declined)
}

#[inline(always)]
fn get_int(slot: Slot, object: &Bound<'_, PyAny>) -> Step<i64> {
    match slot.int_value(object) {
        Some(value) => Ok(value),
        None => get_int_extracted(slot, object),
    }
}

/// `get_int` of a slot whose value is not an int read at its place: extracted.
#[cold]
#[inline(never)]
fn get_int_extracted(slot: Slot, object: &Bound<'_, PyAny>) -> Step<i64> {
    Ok(get(slot, object)?.extract::<i64>()?)
}

/// The int `value` (`int_of`: laid out by hand when it can be).
#[inline]
fn new_int(py: Python<'_>, value: i64) -> PyResult<Bound<'_, PyAny>> {
    match u64::try_from(value) {
        Ok(value) => super::int_of(py, value),
        Err(_) => Ok(value.into_pyobject(py)?.into_any()),
    }
}

/// An int's value (read at its place when it can be: `int_value`), as `extract` gives it.
#[inline]
fn int_in(object: &Bound<'_, PyAny>) -> Step<i64> {
    match super::int_value(object) {
        Some(value) => Ok(value),
        None => Ok(object.extract::<i64>()?),
    }
}

#[inline(always)]
fn get_u64(slot: Slot, object: &Bound<'_, PyAny>) -> Step<u64> {
    u64::try_from(get_int(slot, object)?).map_err(|_| Stop::Declined)
}

/// A topic's writable queues: its `_writable` slot, made by its `writable` property when
/// None (topics.py: made on first use).
fn writable_of<'py>(
    py: Python<'py>,
    slots: &Slots,
    state: &Bound<'py, PyAny>,
) -> Step<Bound<'py, PyList>> {
    let mut writable = get(slots.writable, state)?;
    if writable.is_none() {
        writable = state.getattr(intern!(py, "writable"))?;
    }
    Ok(writable.cast_into::<PyList>().map_err(PyErr::from)?)
}

/// `list[at]` when `at` is below its length (else None), without `PyList_GetItem`'s call
/// and its checks again.
#[inline]
fn list_item<'py>(list: &Bound<'py, PyList>, at: usize) -> Option<Bound<'py, PyAny>> {
    // SAFETY: the GIL is held (no other thread changes the list meanwhile) and `at` is
    // below the list's length, checked just before.
    (at < list.len()).then(|| unsafe { list.get_item_unchecked(at) })
}

/// A slot's truth (`loaded`, `closed`): True and False by address, anything else asked.
#[inline]
fn truthy(object: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = object.py();
    if object.is(PyBool::new(py, true)) {
        return Ok(true);
    }
    if object.is(PyBool::new(py, false)) {
        return Ok(false);
    }
    object.is_truthy()
}

/// An attribute kept in an object's `__dict__` (the commit log, the writer, the store).
fn item<'py>(dict: &Bound<'py, PyDict>, name: &Bound<'py, PyString>) -> Step<Bound<'py, PyAny>> {
    dict.get_item(name)?.ok_or(Stop::Declined)
}

fn item_int(dict: &Bound<'_, PyDict>, name: &Bound<'_, PyString>) -> Step<i64> {
    Ok(item(dict, name)?.extract::<i64>()?)
}

/// An item of one of the core's dicts, kept by its address with the dict's version
/// (`dict_version`: PEP 509's tag, which CPython 3.11 changes at every change of any
/// item of the dict) when it was found: while the version is the same, the dict holds
/// the same object under the same key (so it is live), and it is not looked up again.
/// Each is used with one dict and one key (a str: a look-up runs no Python code; for
/// `topic_seen`, the key kept too). Touched with the GIL held only.
#[derive(Default)]
struct KeptItem {
    /// 0: nothing kept (a dict's version moves past 0 at its first change).
    version: AtomicU64,
    item: AtomicUsize,
}

impl KeptItem {
    /// The item kept, if `dict`'s version is still the one it was found at.
    fn get<'py>(&self, dict: &Bound<'py, PyDict>) -> Option<Bound<'py, PyAny>> {
        let version = super::dict_version(dict).filter(|&v| v != 0)?;
        if self.version.load(Ordering::Relaxed) != version {
            return None;
        }
        let item = self.item.load(Ordering::Relaxed) as *mut ffi::PyObject;
        // SAFETY: the GIL is held, and `dict` is unchanged since `item` was found in it
        // (its version is the same), so it still holds that object: live, and referenced
        // here anew.
        Some(unsafe { Bound::from_borrowed_ptr(dict.py(), item) })
    }

    /// Keep `item`, found in a dict at `version` (read before the look-up, or after the
    /// caller's own change of the item).
    fn keep(&self, version: Option<u64>, item: &Bound<'_, PyAny>) {
        if let Some(version) = version.filter(|&v| v != 0) {
            self.item.store(item.as_ptr() as usize, Ordering::Relaxed);
            self.version.store(version, Ordering::Relaxed);
        }
    }

    /// The dict went from version `before` to `after` by a change of another key alone
    /// (the caller's own): what was kept at `before` holds at `after`.
    fn carry(&self, before: Option<u64>, after: Option<u64>) {
        if let (Some(before), Some(after)) = (before, after) {
            if before != 0 && self.version.load(Ordering::Relaxed) == before {
                self.version.store(after, Ordering::Relaxed);
            }
        }
    }

    /// `dict[key]` (a str key): the item kept while the dict is unchanged, else looked
    /// up and kept. Declined when missing.
    fn item<'py>(
        &self,
        dict: &Bound<'py, PyDict>,
        key: &Bound<'py, PyString>,
    ) -> Step<Bound<'py, PyAny>> {
        if let Some(kept) = self.get(dict) {
            return Ok(kept);
        }
        let version = super::dict_version(dict);
        let found = item(dict, key)?;
        self.keep(version, &found);
        Ok(found)
    }
}

/// A batch's run placed at the tail: the records encoded, each queue's entries (in the
/// order of its share), and each record's queue offset and commit offset.
struct Run {
    out: Vec<u8>,
    entries: QueueEntries,
    queue_offsets: Vec<u64>,
    starts: Vec<u64>,
}

/// Each queue's entries of a batch, one queue's after another's in the order of their
/// shares, in one buffer (not a buffer a queue: a batch meets hundreds of queues).
#[derive(Default)]
struct QueueEntries {
    bytes: Vec<u8>,
    /// Where each queue's entries end in `bytes` (they start where the one before's end).
    ends: Vec<usize>,
}

impl QueueEntries {
    /// Each queue's entries, in the order of the shares.
    fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, end)| &self.bytes[start..*end])
    }

    /// Each queue's entries, to change in place.
    fn each_mut(&mut self, mut change: impl FnMut(&mut [u8])) {
        let mut start = 0;
        for end in &self.ends {
            change(&mut self.bytes[start..*end]);
            start = *end;
        }
    }
}

/// The records in order from `tail` (to `end`), each at the next offset of its queue
/// (`_write_general`): `shares` gives each queue's first offset and count, `held` each
/// record's tag, keys, properties and body, its tag hash and its born time (None: the
/// store time), `places` its share and queue id.
#[allow(clippy::too_many_arguments)]
fn place_run<'a>(
    tail: u64,
    end: u64,
    now: i64,
    name_bytes: &[u8],
    shares: impl Iterator<Item = (u64, u64)>,
    held: impl ExactSizeIterator<Item = ([&'a [u8]; 4], u64, Option<i64>)>,
    places: &[(usize, u32)],
) -> Step<Run> {
    let (mut next, counts): (Vec<u64>, Vec<u64>) = shares.unzip();
    let mut at = tail;
    let mut records = Vec::with_capacity(held.len());
    let mut queue_offsets = Vec::with_capacity(held.len());
    let mut starts = Vec::with_capacity(held.len());
    for ((fields, hashed, born), (share, queue_id)) in held.zip(places) {
        let queue_offset = next[*share];
        next[*share] += 1;
        let record = appending::Placed {
            fields: crate::record::Fields {
                commit_offset: at,
                queue_offset,
                born_ms: born.unwrap_or(now),
                store_ms: now,
                queue_id: *queue_id,
                topic: name_bytes,
                tag: fields[0],
                keys: fields[1],
                properties: fields[2],
            },
            body: fields[3],
            tag_hash: hashed,
        };
        starts.push(at);
        queue_offsets.push(queue_offset);
        at += crate::record::record_length(&record.fields, record.body.len()) as u64;
        records.push(record);
    }
    if at != end {
        return declined(); // never: the lengths are the records'
    }
    let (out, packed) = appending::encode_placed(&records);
    // Each queue's entries at its place in one buffer: where each queue's begin (the
    // cursor, moved past each entry put), where they end.
    let mut cursor = Vec::with_capacity(counts.len());
    let mut ends = Vec::with_capacity(counts.len());
    let mut total = 0usize;
    for count in &counts {
        cursor.push(total);
        total += *count as usize * ENTRY_SIZE;
        ends.push(total);
    }
    let mut bytes = vec![0u8; total];
    for (i, (share, _)) in places.iter().enumerate() {
        let at = cursor[*share];
        bytes[at..at + ENTRY_SIZE].copy_from_slice(&packed[i * ENTRY_SIZE..(i + 1) * ENTRY_SIZE]);
        cursor[*share] = at + ENTRY_SIZE;
    }
    let entries = QueueEntries { bytes, ends };
    Ok(Run {
        out,
        entries,
        queue_offsets,
        starts,
    })
}

#[pyclass(module = "storeadapter.engine._native", frozen)]
pub struct AppendCore {
    store: Py<PyAny>,
    store_dict: Py<PyDict>,
    log_dict: Py<PyDict>,
    writer: Py<PyAny>,
    /// The store's refusals (closed, forked, failed, the disk past its reject ratio:
    /// words.rs), moved by the parts that change them; 0 while it takes writes.
    refusals: Py<Refusals>,
    /// When an append asks the flusher, the warmer, the waiting pulls (words.rs).
    asks: Py<Asks>,
    /// The sequence word this process last caught up to (the store's
    /// `_followed_sequence`, kept in this word: words.rs).
    followed_word: Py<Word>,
    /// The log's `last_store_ms` (kept in this word: `CommitLog.last_store`).
    last_store: Py<Word>,
    slots: Slots,
    topics: Py<PyDict>,
    dirty: Py<PySet>,
    pen: Py<Pen>,
    /// The store's list of dispatchers and its items when the core was made: the core
    /// does their work for a plain record, and declines once the list is not that.
    dispatchers: Py<PyList>,
    dispatcher_items: Vec<Py<PyAny>>,
    state_map: Py<PyAny>,
    /// The store's thread lock and follow lock (store.py), tried here without a call.
    write_lock: Py<ThreadLock>,
    follow_lock: Py<ThreadLock>,
    queue_type: Py<PyType>,
    result_type: Py<PyType>,
    snapshot_type: Py<PyType>,
    status: Py<PyString>,
    /// (namespace: a module's or class's `__dict__`, name, the genuine object): all
    /// must still be in place.
    genuine: Vec<(Py<PyAny>, Py<PyString>, Py<PyAny>)>,
    flusher: Py<PyAny>,
    /// Sync mode: the group commit each append waits on (log_sync.rs); None: async.
    syncer: Option<Py<LogSyncer>>,
    warm: Py<PyAny>,
    arrivals: Py<PyAny>,
    prefix: [u8; 8],
    max_body: usize,
    /// How many queue files' descriptors `tails` keeps: `OPEN_FILES`, or the store's
    /// `max_open_queue_files` when lower.
    open_files: usize,
    capacity: usize,
    /// A plain batch's records buffer, kept across batches.
    records: appending::KeptRecords,
    tails: Mutex<ByAddress<Tail>>,
    /// The facts of the topics appended to lately, by their info's address.
    topic_facts: Mutex<ByAddress<TopicFacts>>,
    /// The last facts `topic_facts` answered (`LastFacts`), without its lock and look-up.
    last_facts: LastFacts,
    appended: AtomicU64,
    batched: AtomicU64,
    marked: AtomicU64,
    /// How many windows of queue files this core reserved (`fallocate`d).
    reserved: AtomicU64,
    /// The log's end when the pretoucher was last asked for.
    touch_asked: AtomicU64,
    /// The seam generation at which `genuine` was last found all in place
    /// (`NEVER_CHECKED` until then).
    seam_checked: AtomicU64,
    /// The registry's `by_id` (topic id to its state): the topics of followed notes.
    by_id: Py<PyDict>,
    /// The `topics_version` (plus one) of `_seen` at which the registry was found to
    /// hold no shared topic (follow.rs); 0: not looked at since.
    unshared_at: AtomicU64,
    /// Follows the core made itself (follow.rs), the store's `_follow` runs it wrote on
    /// after, busy pens taken by trying again, busy pens waited for without the GIL.
    followed: AtomicU64,
    caught_up: AtomicU64,
    spun: AtomicU64,
    waited: AtomicU64,
    /// `_seen` as last read or renewed here, as words (follow.rs).
    seen_words: follow::SeenWords,
    /// The store's `_appender` and `_seen`, the log's `tail` and `segments`, kept by
    /// their dicts' versions (`KeptItem`).
    appender_seen: KeptItem,
    snapshot_seen: KeptItem,
    tail_seen: KeptItem,
    segments_seen: KeptItem,
    /// The registry's topic last appended to, with its name (an exact str, held so that
    /// no other object takes its address), kept by the registry's version.
    topic_seen: Mutex<Option<(Py<PyAny>, KeptItem)>>,
}

/// Let go of the pages of a block file's mapping before its block sync (shared_core.rs
/// `drop_pages`), `part` bytes at a time with each part's writeback begun after it (0:
/// all at once): true when the file was mapped here.
#[pyfunction]
#[pyo3(signature = (file, part = 0))]
pub fn drop_block_pages(file: &Bound<'_, PyAny>, part: usize) -> bool {
    shared_core::drop_pages(file, part)
}

/// Let go of a block file's mapping before it is closed (shared_core.rs `unmap`): true
/// when the file was mapped here.
#[pyfunction]
pub fn unmap_block_file(file: &Bound<'_, PyAny>) -> bool {
    shared_core::unmap(file)
}

/// Map writable again the pages of a block file stored into before its last block sync
/// (shared_core.rs `refault_pages`): the flush thread's, after a periodic sync. How many
/// pages.
#[pyfunction]
pub fn refault_block_pages(file: &Bound<'_, PyAny>) -> usize {
    shared_core::refault_pages(file)
}

/// The seam generation: moved by `seam_changed`, which the engine's seam (seam.py)
/// calls whenever a function or method of the long way is replaced or put back. A core
/// looks its genuine objects up again only when it moved.
static SEAM_GENERATION: AtomicU64 = AtomicU64::new(0);
const NEVER_CHECKED: u64 = u64::MAX;

/// Note that a fault plan was installed or removed (seam.py calls it on every
/// replacement of a module function or class attribute of the long way).
#[pyfunction]
pub fn seam_changed() -> u64 {
    SEAM_GENERATION.fetch_add(1, Ordering::SeqCst) + 1
}

/// The seam generation (tests see that installing a plan moved it).
#[pyfunction]
pub fn seam_generation() -> u64 {
    SEAM_GENERATION.load(Ordering::SeqCst)
}

/// A write under the pen, ready to go: the `state` header (caught up), the sequence
/// word read, the log's tail, the active segment and its bounds, the time of the write.
struct Ready<'py> {
    header: WritableView,
    sequence: u64,
    tail: u64,
    /// The log's `tail` as the int object its `__dict__` holds (the result's offset);
    /// None after a deferred follow (the log's tail is set after the pen).
    tail_object: Option<Bound<'py, PyAny>>,
    /// The log's `last_store_ms` before the write.
    last_store_ms: i64,
    base: u64,
    end_of_segment: u64,
    segment: Bound<'py, PyAny>,
    now: i64,
    /// What may have changed under the caller's plan (a follow, a wait for the pen).
    moved: Moved,
    /// A native follow's bookkeeping left to the caller (`ready_deferring`).
    unfollowed: Option<Box<follow::Unfollowed<'py>>>,
}

/// What may have changed under a write's plan (made before the pen was taken) by the
/// time the write is `ready`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Moved {
    /// Nothing: the plan holds.
    Nothing,
    /// Queue ends: the core took in another process's notes itself (follow.rs); the
    /// queues' rooms are found again.
    Ends,
    /// Anything Python could change: the GIL was let go while the pen was waited for,
    /// or the store's `_follow` ran. The store and the topic are checked again (they
    /// must be as planned), and the rooms found again.
    Anything,
}

/// What the core keeps of a topic's info (`TopicInfo`, which a change replaces whole,
/// never changes in place: topics.py, admin.py `_change_topic`), keyed by the info
/// object, which it holds so that no other object takes its address meanwhile.
struct TopicFacts {
    info: Py<PyAny>,
    name: Py<PyString>,
    topic_id: i64,
    /// Not a stream topic, no `max_message_bytes` of its own.
    plain: bool,
}

/// The facts `topic_facts` answered last: the info's address (0: none), its name's
/// (both held by their entry in `topic_facts`, which is only ever taken out when the map
/// is emptied, and this forgotten first), the topic id and whether it is plain. Touched
/// with the GIL held only.
#[derive(Default)]
struct LastFacts {
    info: AtomicUsize,
    name: AtomicUsize,
    topic_id: AtomicI64,
    plain: AtomicBool,
}

impl LastFacts {
    fn keep(&self, facts: &TopicFacts) {
        self.name
            .store(facts.name.as_ptr() as usize, Ordering::Relaxed);
        self.topic_id.store(facts.topic_id, Ordering::Relaxed);
        self.plain.store(facts.plain, Ordering::Relaxed);
        self.info
            .store(facts.info.as_ptr() as usize, Ordering::Relaxed);
    }
}

/// How many topics' facts are kept (emptied when full).
const TOPIC_FACTS: usize = 64;

/// The topic of a plain write (`plain_topic`).
#[derive(Clone)]
struct PlainTopic<'py> {
    topic_id: i64,
    name: Bound<'py, PyString>,
    name_bytes: Bound<'py, PyBytes>,
    writable: Bound<'py, PyList>,
    round_robin: i64,
}

/// A queue of a batch's turn with room in its last file for its share (`queue_room`).
struct QueueRoom<'py> {
    queue_id: i64,
    queue: Bound<'py, PyAny>,
    last: Bound<'py, PyAny>,
    base: u64,
    slot: u64,
    count: u64,
}

/// Why the call stops short: declined (the caller goes the long way), or a Python error.
enum Stop {
    Declined,
    Failed(PyErr),
}

impl From<PyErr> for Stop {
    fn from(error: PyErr) -> Stop {
        Stop::Failed(error)
    }
}

impl From<pyo3::CastError<'_, '_>> for Stop {
    fn from(error: pyo3::CastError<'_, '_>) -> Stop {
        Stop::Failed(error.into())
    }
}

impl From<std::convert::Infallible> for Stop {
    fn from(never: std::convert::Infallible) -> Stop {
        match never {}
    }
}

type Step<T> = Result<T, Stop>;

/// What `try_append` found for one append before it takes the locks: the topic's state
/// and info, its name, the queue picked and its last file, where the entry goes, and
/// the record's parts.
struct Planned<'a, 'py> {
    state: &'a Bound<'py, PyAny>,
    /// The topic as planned (checked again after a wait for the pen).
    planned_topic: &'a PlainTopic<'py>,
    topic_id: i64,
    name: Bound<'py, PyString>,
    queue: Bound<'py, PyAny>,
    queue_id: i64,
    queue_offset: u64,
    last: Bound<'py, PyAny>,
    slot: u64,
    topic: &'a [u8],
    body: &'a [u8],
    length: usize,
    round_robin: i64,
    /// Whether the queue is the round-robin's (it moves on), not an explicit one.
    turns: bool,
    extras: Extras<'a>,
}

/// A single append's tag and properties, encoded, and the tag's hash (for its entry).
#[derive(Clone, Copy)]
struct Extras<'a> {
    tag: &'a [u8],
    properties: &'a [u8],
    tag_hash: u64,
}

impl Extras<'_> {
    /// A plain body's: none.
    const NONE: Extras<'static> = Extras {
        tag: b"",
        properties: b"",
        tag_hash: 0,
    };
}

/// One `append`'s arguments but the dedup id (None for Python's None too).
struct Message<'a, 'py> {
    body: &'a Bound<'py, PyAny>,
    key: Option<&'a Bound<'py, PyAny>>,
    tag: Option<&'a Bound<'py, PyAny>>,
    queue: Option<&'a Bound<'py, PyAny>>,
    properties: Option<&'a Bound<'py, PyAny>>,
}

/// What a single append wrote: the tail it wrote at (the int object), the queue
/// offset, the store time (its `AppendResult` is made after the pen is let go).
type Single<'py> = ((Option<Bound<'py, PyAny>>, u64), u64, i64);

/// What `publish_shared` left in the `state` header: the tail, the ring sequence, the
/// sequence word (even).
struct Published {
    end: u64,
    ring_seq: u64,
    sequence: u64,
}

/// A single append's bookkeeping in this process, done after the pen is let go
/// (`settle_single`): the queue's new end in its last file, the topic's round-robin,
/// and what was published.
struct Unsettled<'py> {
    queue: Bound<'py, PyAny>,
    last: Bound<'py, PyAny>,
    queue_end: u64,
    round_robin: i64,
    published: Published,
    /// The bookkeeping of a native follow before the write (`settle_follow`).
    unfollowed: Option<Box<follow::Unfollowed<'py>>>,
}

/// A prepared item's born time (`Writer.prepare`'s tuple, at 6): None (the store time),
/// or a non-negative int (else declined: the long way writes what it writes).
fn born_of(tuple: &Bound<'_, PyTuple>) -> Step<Option<i64>> {
    born_ms(&tuple.get_item(6)?)
}

/// A prepared item's born time (`born_of`) from the object itself.
fn born_ms(born: &Bound<'_, PyAny>) -> Step<Option<i64>> {
    if born.is_none() {
        return Ok(None);
    }
    match born.extract::<i64>() {
        Ok(ms) if ms >= 0 => Ok(Some(ms)),
        _ => declined(),
    }
}

/// A step's outcome as Python sees it: its value, None when declined, or the error.
fn answer<T>(step: Step<T>) -> PyResult<Option<T>> {
    match step {
        Ok(value) => Ok(Some(value)),
        Err(Stop::Declined) => Ok(None),
        Err(Stop::Failed(error)) => Err(error),
    }
}

fn declined<T>() -> Step<T> {
    Err(Stop::Declined)
}

/// A writable view of a mapping (an `mmap`) for one call.
struct WritableView {
    buffer: ffi::Py_buffer,
}

impl WritableView {
    fn of(object: &Bound<'_, PyAny>) -> Option<WritableView> {
        let mut buffer = std::mem::MaybeUninit::<ffi::Py_buffer>::uninit();
        // SAFETY: `object` is live (the caller holds it and the GIL); on success
        // PyObject_GetBuffer fills `buffer` and takes an export that `Drop` releases.
        if unsafe {
            ffi::PyObject_GetBuffer(object.as_ptr(), buffer.as_mut_ptr(), ffi::PyBUF_WRITABLE)
        } != 0
        {
            // SAFETY: the GIL is held; a refused export leaves an exception to clear.
            unsafe { ffi::PyErr_Clear() };
            return None;
        }
        // SAFETY: PyObject_GetBuffer succeeded, so it initialised `buffer`.
        Some(WritableView {
            buffer: unsafe { buffer.assume_init() },
        })
    }

    fn len(&self) -> usize {
        usize::try_from(self.buffer.len).unwrap_or(0)
    }

    fn ptr(&self) -> *mut u8 {
        self.buffer.buf.cast()
    }

    /// The bytes `[at, at + len)`, which the caller alone writes (it holds the pen).
    #[allow(clippy::mut_from_ref)]
    fn slice(&self, at: usize, len: usize) -> Option<&mut [u8]> {
        if self.ptr().is_null() || at.checked_add(len)? > self.len() {
            return None;
        }
        // SAFETY: a writable PyBUF export is `len()` contiguous bytes at `buf`, kept
        // alive (an mmap refuses to close or resize while exported) until `Drop`. The
        // range is inside it; only the pen's holder writes past the published tail,
        // and readers read only below it, so no other reference aliases these bytes.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr().add(at), len) })
    }

    /// The 8-byte word at `at` (8-aligned in an mmap, whose base is page-aligned).
    fn word(&self, at: usize) -> &AtomicU64 {
        assert!(at + 8 <= self.len() && at.is_multiple_of(8) && !self.ptr().is_null());
        // SAFETY: in bounds and aligned (asserted; the mapping starts on a page); the
        // mapping outlives the view, and other processes use these words as u64s too.
        unsafe { &*self.ptr().add(at).cast::<AtomicU64>() }
    }
}

impl Drop for WritableView {
    fn drop(&mut self) {
        // SAFETY: the buffer was filled by a successful PyObject_GetBuffer; the GIL is
        // held wherever a view is dropped (it lives within one call).
        unsafe { ffi::PyBuffer_Release(&mut self.buffer) };
    }
}

/// Let go of a thread lock the core took.
fn release(lock: &ThreadLock) -> PyResult<()> {
    lock.release_lock()
        .map_err(pyo3::exceptions::PyRuntimeError::new_err)
}

fn now_ms() -> i64 {
    if let Some(pinned) = io_seam::pinned_ms() {
        return pinned;
    }
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec to fill; CLOCK_REALTIME is what SystemTime::now
    // reads (through the vDSO, no system call), without its Duration arithmetic.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) } == 0 && now.tv_sec >= 0 {
        return now.tv_sec * 1000 + now.tv_nsec / 1_000_000;
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[pymethods]
impl AppendCore {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        store: &Bound<'_, PyAny>,
        pen: Py<Pen>,
        dispatchers: &Bound<'_, PyList>,
        state_map: &Bound<'_, PyAny>,
        prefix: &str,
        result_type: &Bound<'_, PyType>,
        snapshot_type: &Bound<'_, PyType>,
        queue_type: &Bound<'_, PyType>,
        genuine: Vec<(Bound<'_, PyAny>, Bound<'_, PyString>, Bound<'_, PyAny>)>,
        max_body: usize,
        slotted: Slotted<'_>,
    ) -> PyResult<AppendCore> {
        check_record_type(result_type)?;
        check_record_type(snapshot_type)?;
        let log = store.getattr(intern!(py, "commitlog"))?;
        let registry = store.getattr(intern!(py, "_registry"))?;
        let capacity: usize = log.call_method0(intern!(py, "capacity"))?.extract()?;
        let writer = store.getattr(intern!(py, "_writer"))?;
        let open_files: usize = store
            .getattr(intern!(py, "config"))?
            .getattr(intern!(py, "max_open_queue_files"))?
            .extract()?;
        Ok(AppendCore {
            open_files: open_files.clamp(1, OPEN_FILES),
            slots: Slots::new(queue_type, slotted)?,
            log_dict: log.getattr(intern!(py, "__dict__"))?.cast_into()?.unbind(),
            writer: writer.unbind(),
            refusals: store
                .getattr(intern!(py, "_refusals"))?
                .cast_into::<Refusals>()?
                .unbind(),
            asks: store
                .getattr(intern!(py, "_asks"))?
                .cast_into::<Asks>()?
                .unbind(),
            followed_word: store
                .getattr(intern!(py, "_followed"))?
                .cast_into::<Word>()?
                .unbind(),
            last_store: log
                .getattr(intern!(py, "last_store"))?
                .cast_into::<Word>()?
                .unbind(),
            store_dict: store
                .getattr(intern!(py, "__dict__"))?
                .cast_into()?
                .unbind(),
            topics: registry
                .getattr(intern!(py, "topics"))?
                .cast_into()?
                .unbind(),
            dirty: registry
                .getattr(intern!(py, "dirty"))?
                .cast_into()?
                .unbind(),
            write_lock: store
                .getattr(intern!(py, "_write_lock"))?
                .cast_into::<ThreadLock>()?
                .unbind(),
            follow_lock: store
                .getattr(intern!(py, "_follow_lock"))?
                .cast_into::<ThreadLock>()?
                .unbind(),
            store: store.clone().unbind(),
            pen,
            dispatcher_items: dispatchers.iter().map(Bound::unbind).collect(),
            dispatchers: dispatchers.clone().unbind(),
            state_map: state_map.clone().unbind(),
            queue_type: queue_type.clone().unbind(),
            result_type: result_type.clone().unbind(),
            snapshot_type: snapshot_type.clone().unbind(),
            status: PyString::new(py, "OK").unbind(),
            genuine: genuine
                .into_iter()
                .map(|(d, n, o)| (d.unbind(), n.unbind(), o.unbind()))
                .collect(),
            flusher: store.getattr(intern!(py, "_flusher"))?.unbind(),
            syncer: store
                .getattr(intern!(py, "_log_syncer"))?
                .extract::<Option<Py<LogSyncer>>>()?,
            warm: store.getattr(intern!(py, "_warm"))?.unbind(),
            arrivals: store
                .getattr(intern!(py, "_reader"))?
                .getattr(intern!(py, "arrivals"))?
                .unbind(),
            prefix: id_prefix(prefix)?,
            max_body,
            capacity,
            records: appending::KeptRecords::default(),
            tails: Mutex::new(ByAddress::default()),
            topic_facts: Mutex::new(ByAddress::default()),
            last_facts: LastFacts::default(),
            appended: AtomicU64::new(0),
            batched: AtomicU64::new(0),
            marked: AtomicU64::new(0),
            reserved: AtomicU64::new(0),
            touch_asked: AtomicU64::new(0),
            seam_checked: AtomicU64::new(NEVER_CHECKED),
            by_id: registry
                .getattr(intern!(py, "by_id"))?
                .cast_into()?
                .unbind(),
            unshared_at: AtomicU64::new(0),
            followed: AtomicU64::new(0),
            caught_up: AtomicU64::new(0),
            spun: AtomicU64::new(0),
            waited: AtomicU64::new(0),
            seen_words: follow::SeenWords::new(),
            appender_seen: KeptItem::default(),
            snapshot_seen: KeptItem::default(),
            tail_seen: KeptItem::default(),
            segments_seen: KeptItem::default(),
            topic_seen: Mutex::new(None),
        })
    }

    /// Append `body` (bytes) to the topic named `topic` as `MessageStore.append` would
    /// with no other argument; its `AppendResult`, or None when declined (see the module
    /// docs; also when the topic is not in the registry, or the disk is past
    /// `disk_reject_ratio`: the long way loads it or raises). Raises the typed error of
    /// a failed write (the store then refuses writes, as after any failed write).
    fn append<'py>(
        &self,
        py: Python<'py>,
        topic: &Bound<'py, PyAny>,
        body: &[u8],
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        returning::make_way(py);
        let found = match self.topics.bind(py).get_item(topic) {
            Ok(Some(state)) => state,
            _ => return Ok(None),
        };
        answer(self.try_append(py, &found, body, None, Extras::NONE))
    }

    /// What `MessageStore.append` answers (same arguments, same results, same errors), in
    /// one native call: a message without a dedup id goes to `append_message`; whatever
    /// that declines, and a message with a dedup id, goes to the store's
    /// `_append_long_way` with the arguments as given. The store binds its `append` to
    /// this (no Python frame around the call).
    #[pyo3(signature = (topic, body, key = None, tag = None, queue = None, properties = None, dedup_id = None))]
    #[allow(clippy::too_many_arguments)]
    fn append_or_long_way<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
        topic: &Bound<'py, PyAny>,
        body: &Bound<'py, PyAny>,
        key: Option<&Bound<'py, PyAny>>,
        tag: Option<&Bound<'py, PyAny>>,
        queue: Option<&Bound<'py, PyAny>>,
        properties: Option<&Bound<'py, PyAny>>,
        dedup_id: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        returning::make_way(py);
        let core = slf.get();
        if dedup_id.is_none_or(|d| d.is_none()) {
            // Still the store's append core (a test switches it off with `_appender = None`).
            let current = match core
                .appender_seen
                .item(core.store_dict.bind(py), intern!(py, "_appender"))
            {
                Ok(current) => Some(current),
                Err(Stop::Declined) => None,
                Err(Stop::Failed(error)) => return Err(error),
            };
            if current.is_some_and(|c| c.is(slf)) {
                let message = Message {
                    body,
                    key: key.filter(|k| !k.is_none()),
                    tag: tag.filter(|t| !t.is_none()),
                    queue: queue.filter(|q| !q.is_none()),
                    properties: properties.filter(|p| !p.is_none()),
                };
                if let Some(result) = core.append_message(py, topic, &message)? {
                    return Ok(result);
                }
            }
        }
        core.store.bind(py).call_method1(
            intern!(py, "_append_long_way"),
            (topic, body, key, tag, queue, properties, dedup_id),
        )
    }

    /// Append `bodies` (a list of bytes) to topic `state` as `MessageStore.append_batch`
    /// would: to the writable queues in turn, in one write; their `AppendResult`s, or None
    /// when declined (as `append`, and also when the batch needs a new queue file or a
    /// segment roll). Raises the typed error of a failed write. A shared topic's: as a
    /// dict batch of plain items (`try_items`), as `Writer._write_records` writes them.
    fn append_batch<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        bodies: &Bound<'py, PyList>,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        returning::make_way(py);
        if !self.shared(py, state)? {
            return answer(self.try_batch(py, state, bodies));
        }
        // `Writer._write_records`'s tuple of a plain body.
        let none = py.None().into_bound(py);
        let empty = PyBytes::new(py, b"").into_any();
        let untagged = 0u64.into_pyobject(py)?.into_any();
        let no_keys = PyTuple::empty(py).into_any();
        let items = PyList::empty(py);
        for body in bodies.iter() {
            if !body.is_exact_instance_of::<PyBytes>() {
                return Ok(None);
            }
            items.append(PyTuple::new(
                py,
                [
                    none.clone(),
                    none.clone(),
                    empty.clone(),
                    empty.clone(),
                    empty.clone(),
                    body,
                    none.clone(),
                    untagged.clone(),
                    no_keys.clone(),
                    none.clone(),
                ],
            )?)?;
        }
        answer(self.try_items(py, state, &items, false))
    }

    /// Write `items` (a list of `Writer.prepare`'s tuples: a dict batch prepared by
    /// `prepare_items`) to topic `state` as `Writer._write_general` would, in one
    /// write: each item to its explicit queue, else to the writable queue its first
    /// key's CRC32 picks, else to the next in the round-robin; tags, keys and properties
    /// in the records, tag hashes in the entries, the keys handed to the key index's
    /// `put_many` in one call. Their `AppendResult`s, or None when declined (as
    /// `append_batch`, and also for an item with a dedup id).
    fn append_items<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        items: &Bound<'py, PyList>,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        returning::make_way(py);
        answer(self.try_items(py, state, items, false))
    }

    /// `append_batch`'s `messages` (bytes, str, dicts) to a shared topic `state` in one
    /// call: each prepared as `Writer.prepare` prepares it (prepare.rs), without its
    /// tuple, and written as `append_items` writes a prepared batch. Their
    /// `AppendResult`s, or None when declined (not a shared topic, an item
    /// `prepare_items` leaves to Python or `Writer.prepare` refuses, and whatever
    /// `append_items` declines): nothing is written then.
    fn append_messages<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        messages: &Bound<'py, PyList>,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        returning::make_way(py);
        answer(self.try_messages(py, state, messages))
    }

    /// How many batches this core wrote.
    #[getter]
    fn batched(&self) -> u64 {
        self.batched.load(Ordering::Relaxed)
    }

    /// How many time marks this core wrote itself (not through `TimeIndex.write`).
    #[getter]
    fn marked(&self) -> u64 {
        self.marked.load(Ordering::Relaxed)
    }

    /// How many windows of queue files this core reserved with `fallocate`.
    #[getter]
    fn reserved(&self) -> u64 {
        self.reserved.load(Ordering::Relaxed)
    }

    /// How many appends this core made (tests see that the native path was taken).
    #[getter]
    fn appended(&self) -> u64 {
        self.appended.load(Ordering::Relaxed)
    }

    /// How many times this core took in other processes' notes itself (follow.rs)
    /// and wrote on.
    #[getter]
    fn followed(&self) -> u64 {
        self.followed.load(Ordering::Relaxed)
    }

    /// How many times the store's `_follow` caught up (something other than appends
    /// moved, or the notes did not suffice) and this core wrote on after it.
    #[getter]
    fn caught_up(&self) -> u64 {
        self.caught_up.load(Ordering::Relaxed)
    }

    /// How many busy pens this core took by trying again, and how many it waited for
    /// without the GIL.
    #[getter]
    fn pen_waits(&self) -> (u64, u64) {
        (
            self.spun.load(Ordering::Relaxed),
            self.waited.load(Ordering::Relaxed),
        )
    }

    /// The pretoucher, on the flush thread (asked by `after` every `PRETOUCH_ASK`
    /// bytes of log): populate for writing `map[start:stop]` (the active segment's
    /// mmap past the tail; reserved whole at its creation) and the next bytes of each
    /// queue window past its last entry (window.rs), without the GIL, so that the
    /// appending thread does not take those page faults. The caller holds the log's
    /// `closing` lock, so the segment's mapping is not closed meanwhile (its export
    /// here would refuse the close); the windows' mappings are held by `Arc`s.
    fn pretouch(
        &self,
        py: Python<'_>,
        map: &Bound<'_, PyAny>,
        start: usize,
        stop: usize,
    ) -> PyResult<()> {
        let segment = Bytes::of(map)?;
        let bytes = segment.slice();
        let stop = stop.min(bytes.len());
        let range = (start < stop).then(|| (bytes.as_ptr() as usize + start, stop - start));
        let windows: Vec<_> = match self.tails.lock() {
            Ok(mut tails) => tails
                .values_mut()
                .filter_map(|tail| tail.window.as_mut().and_then(QueueWindow::ahead))
                .collect(),
            Err(_) => Vec::new(),
        };
        py.detach(move || {
            if let Some((at, length)) = range {
                // SAFETY: the range is inside the active segment's mapping, kept mapped
                // by `segment`'s export (and the caller's `closing` lock) for the call;
                // segments are reserved whole with fallocate at creation.
                unsafe { populate_write(at, length) };
            }
            for (map, from, to) in windows {
                map.populate(from, to);
            }
        });
        drop(segment);
        Ok(())
    }

    /// Close the queue files' descriptors kept here.
    /// Let go of the queue files' descriptors and windows, and of the mappings of block
    /// files closed since (the store closes its files first).
    fn close(&self, py: Python<'_>) {
        if let Ok(mut tails) = self.tails.lock() {
            tails.clear();
        }
        shared_core::release_closed_maps(py);
    }
}

impl AppendCore {
    /// The long way's functions are the genuine ones: looked up again only when the
    /// seam generation moved since they last were (a plan installed or removed).
    fn still_genuine(&self, py: Python<'_>) -> Step<()> {
        let generation = SEAM_GENERATION.load(Ordering::SeqCst);
        if generation == self.seam_checked.load(Ordering::Relaxed) {
            return Ok(());
        }
        for (namespace, name, genuine) in &self.genuine {
            match namespace.bind(py).get_item(name.bind(py)) {
                Ok(found) if found.is(genuine.bind(py)) => {}
                // Replaced by a fault plan whose native sites stand in for it (io_seam.rs).
                _ if io_seam::covers(namespace.bind(py), &name.bind(py).to_string_lossy()) => {}
                _ => return declined(),
            }
        }
        self.seam_checked.store(generation, Ordering::Relaxed);
        Ok(())
    }

    /// Everything checked before the pen: the store, the topic, the body. The store
    /// refuses writes (closed, forked, failed, its disk past `disk_reject_ratio`: one
    /// word, moved by the parts that change them): the long way raises the typed error.
    fn check_store(&self, py: Python<'_>) -> Step<()> {
        if self.refusals.get().refused() != 0 {
            return declined();
        }
        let dispatchers = self.dispatchers.bind(py);
        if dispatchers.len() != self.dispatcher_items.len()
            || self
                .dispatcher_items
                .iter()
                .enumerate()
                // SAFETY: the GIL is held and `dispatchers` is a live list of (just
                // checked) that many items; the item is only compared by address, so
                // no reference is taken or needed.
                .any(|(at, then)| unsafe {
                    ffi::PyList_GET_ITEM(dispatchers.as_ptr(), at as ffi::Py_ssize_t)
                        != then.as_ptr()
                })
        {
            return declined();
        }
        self.still_genuine(py)
    }

    /// The topic of a plain write: `state` still the registry's (`from_registry`: the
    /// caller just found it there), files per queue, no `max_message_bytes` of its own,
    /// not a stream topic. Its name, id, name's bytes, writable queues and round-robin.
    fn plain_topic<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        from_registry: bool,
    ) -> Step<PlainTopic<'py>> {
        let slots = &self.slots;
        if !state.get_type().is(slots.topic_type.bind(py)) {
            return declined();
        }
        let info = get(slots.info, state)?;
        let (name, topic_id, plain) = self.topic_facts(py, &info)?;
        if !from_registry {
            match self.topics.bind(py).get_item(&name)? {
                Some(current) if current.is(state) => {}
                _ => return declined(), // deleted meanwhile: the long way says so
            }
        }
        if !plain || !get(slots.blocks, state)?.is_none() {
            return declined();
        }
        let writable = writable_of(py, slots, state)?;
        if writable.is_empty() {
            return declined();
        }
        Ok(PlainTopic {
            topic_id,
            name,
            name_bytes: get(slots.name_bytes, state)?
                .cast_into::<PyBytes>()
                .map_err(PyErr::from)?,
            writable,
            round_robin: get_int(slots.round_robin, state)?,
        })
    }

    /// A topic info's name, id and whether a plain write may go to it (not a stream
    /// topic, no `max_message_bytes` of its own): read once per info object (a topic
    /// change replaces the info, so a new object is read again).
    fn topic_facts<'py>(
        &self,
        py: Python<'py>,
        info: &Bound<'py, PyAny>,
    ) -> Step<(Bound<'py, PyString>, i64, bool)> {
        let key = info.as_ptr() as usize;
        let last = &self.last_facts;
        if last.info.load(Ordering::Relaxed) == key {
            let name = last.name.load(Ordering::Relaxed) as *mut ffi::PyObject;
            // SAFETY: the GIL is held; the facts last answered are still in `topic_facts`
            // (`last` is forgotten before the map is emptied), whose entry holds the info
            // (so `info`, at its address, is that object) and the name: live, a str,
            // referenced here anew.
            let name = unsafe { Bound::from_borrowed_ptr(py, name).cast_into_unchecked() };
            return Ok((
                name,
                last.topic_id.load(Ordering::Relaxed),
                last.plain.load(Ordering::Relaxed),
            ));
        }
        {
            let facts = self.topic_facts.lock().map_err(|_| Stop::Declined)?;
            if let Some(known) = facts.get(&key) {
                if known.info.bind(py).is(info) {
                    last.keep(known);
                    return Ok((known.name.bind(py).clone(), known.topic_id, known.plain));
                }
            }
        }
        let name = info
            .getattr(intern!(py, "name"))?
            .cast_into::<PyString>()
            .map_err(PyErr::from)?;
        let plain = !info.getattr(intern!(py, "streams"))?.is_truthy()?
            && !info
                .getattr(intern!(py, "settings"))?
                .contains(intern!(py, "max_message_bytes"))?;
        let topic_id = info.getattr(intern!(py, "id"))?.extract::<i64>()?;
        let old = {
            let mut facts = self.topic_facts.lock().map_err(|_| Stop::Declined)?;
            let old = if facts.len() >= TOPIC_FACTS {
                last.info.store(0, Ordering::Relaxed);
                std::mem::take(&mut *facts)
            } else {
                ByAddress::default()
            };
            let known = TopicFacts {
                info: info.clone().unbind(),
                name: name.clone().unbind(),
                topic_id,
                plain,
            };
            last.keep(&known);
            facts.insert(key, known);
            old
        };
        drop(old); // after the lock is let go: dropping may run Python code
        Ok((name, topic_id, plain))
    }

    /// Queue `queue_id` of `state` when `count` entries from its end fit in its last
    /// file (else the long way makes a new one): the queue, that file, its end, and the
    /// slot of the first entry in the file.
    fn queue_room<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        queue_id: i64,
        count: u64,
    ) -> Step<QueueRoom<'py>> {
        let slots = &self.slots;
        let queues = get(slots.queues, state)?;
        let queue = match queues.cast::<PyList>() {
            Ok(list) => match usize::try_from(queue_id).map(|at| list_item(list, at)) {
                Ok(Some(queue)) => queue,
                _ => return declined(), // no such queue: the long way says so
            },
            Err(_) => queues.get_item(queue_id)?,
        };
        if !queue.get_type().is(self.queue_type.bind(py))
            || !truthy(&get(slots.loaded, &queue)?)?
            || truthy(&get(slots.closed, &queue)?)?
        {
            return declined();
        }
        let base = get_u64(slots.max_offset, &queue)?;
        let files = get(slots.files, &queue)?
            .cast_into::<PyList>()
            .map_err(PyErr::from)?;
        let Some(last) = files
            .len()
            .checked_sub(1)
            .and_then(|i| list_item(&files, i))
        else {
            return declined();
        };
        if !last.get_type().is(slots.file_type.bind(py)) {
            return declined();
        }
        let first_index = get_u64(slots.first_index, &last)?;
        let entries = get_u64(slots.entries, &last)?;
        let Some(slot) = base
            .checked_sub(first_index)
            .filter(|s| s + count <= entries)
        else {
            return declined(); // a new queue file: the long way creates it
        };
        Ok(QueueRoom {
            queue_id,
            queue,
            last,
            base,
            slot,
            count,
        })
    }

    /// Whether `state` is a shared topic's (a `Topic` with a block store).
    fn shared(&self, py: Python<'_>, state: &Bound<'_, PyAny>) -> PyResult<bool> {
        let slots = &self.slots;
        Ok(state.get_type().is(slots.topic_type.bind(py))
            && answer(get(slots.blocks, state))?.is_some_and(|blocks| !blocks.is_none()))
    }

    /// Whether queue `id` is among `writable` (a topic's writable queues, ascending:
    /// its queues but the frozen ones), as `Writer.prepare` checks an explicit queue.
    fn writable_queue(writable: &Bound<'_, PyList>, id: i64) -> PyResult<bool> {
        let Ok(at) = usize::try_from(id) else {
            return Ok(false);
        };
        // No queue below it frozen: it is at its own place.
        if at < writable.len() && writable.get_item(at)?.extract::<i64>()? == id {
            return Ok(true);
        }
        let ids: Vec<i64> = writable.extract()?;
        Ok(ids.binary_search(&id).is_ok())
    }

    fn try_batch<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        bodies: &Bound<'py, PyList>,
    ) -> Step<Bound<'py, PyList>> {
        self.check_store(py)?;
        let topic = self.plain_topic(py, state, false)?;
        let count = bodies.len();
        if count == 0 || topic.name_bytes.as_bytes().len() > 255 {
            return declined();
        }
        let held: Vec<Bound<'py, PyBytes>> = bodies
            .iter()
            .map(|item| item.cast_into::<PyBytes>().map_err(|_| Stop::Declined))
            .collect::<Step<_>>()?;
        let slices: Vec<&[u8]> = held.iter().map(|b| b.as_bytes()).collect();
        if slices.iter().any(|b| b.len() > self.max_body) {
            return declined();
        }
        let name_bytes = topic.name_bytes.as_bytes();
        let length = appending::plain_length(name_bytes, &slices);
        if length > self.capacity {
            return declined();
        }
        // The turn: the writable queues from the round-robin on, as `_write_plain`.
        let writable = &topic.writable;
        let width = count.min(writable.len());
        let mut rooms = Vec::with_capacity(width);
        for j in 0..width {
            let queue_id: i64 = writable
                .get_item(
                    (topic.round_robin + j as i64).rem_euclid(writable.len() as i64) as usize,
                )?
                .extract()?;
            let share = (count / width + usize::from(j < count % width)) as u64;
            rooms.push(self.queue_room(py, state, queue_id, share)?);
        }
        // The records' buffer, taken before the pen (the one kept from the last batch:
        // procs31-s53); the records copied into it and their CRCs taken, with their
        // places zero (set under the pen, `place_plain`: procs31-s51).
        let mut room = self.records.take(length);
        let out = room.bytes();
        let unplaced = appending::encode_plain_unplaced(topic.name_bytes.as_bytes(), &slices, out);
        let write_lock = self.write_lock.get();
        if !write_lock.try_acquire() {
            return declined(); // another thread is in a write session
        }
        let outcome = self.under_thread_lock(py, |waited| {
            self.batch_under_pen(py, state, &topic, &rooms, &unplaced, out, waited)
        });
        release(write_lock)?;
        drop(room);
        let (places, now, end) = outcome?;
        let results = self.batch_results(py, &topic.name, &places, &unplaced.lengths, now)?;
        self.settle_batch(py, results, end)
    }

    /// `append_items`, and an `append` of one prepared message (`single`: counted in
    /// `appended`, not `batched`): written, then what `Writer.append_prepared` does
    /// after a write (`after`; in sync mode, the wait for the fsync that covers it).
    fn try_items<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        items: &Bound<'py, PyList>,
        single: bool,
    ) -> Step<Bound<'py, PyList>> {
        self.check_store(py)?;
        let (results, end) = if self.shared(py, state)? {
            let prepared = items
                .iter()
                .map(shared_core::prepared_of)
                .collect::<Step<Vec<_>>>()?;
            self.try_shared_items(py, state, prepared)? // shared_core.rs
        } else {
            self.try_file_items(py, state, items)?
        };
        let counter = if single {
            &self.appended
        } else {
            &self.batched
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.settle_batch(py, results, end)
    }

    /// `append_messages`: prepared natively, then written as `try_items` writes them.
    fn try_messages<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        messages: &Bound<'py, PyList>,
    ) -> Step<Bound<'py, PyList>> {
        self.check_store(py)?;
        if !self.shared(py, state)? {
            return declined();
        }
        let Some(limits) = self.topic_limits(py, state)? else {
            return declined();
        };
        let Some(prepared) = prepare::prepare_all(py, messages, limits, None) else {
            return declined(); // the long way prepares them, and raises its typed error
        };
        let (results, end) = self.try_shared_items(py, state, prepared)?;
        self.batched.fetch_add(1, Ordering::Relaxed);
        self.settle_batch(py, results, end)
    }

    /// `try_items` to a topic with files per queue: the results and the new tail.
    fn try_file_items<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        items: &Bound<'py, PyList>,
    ) -> Step<(Bound<'py, PyList>, i64)> {
        let topic = self.plain_topic(py, state, false)?;
        let count = items.len();
        let name_len = topic.name_bytes.as_bytes().len();
        if count == 0 || name_len > 255 {
            return declined();
        }
        let writable: Vec<i64> = topic.writable.extract()?;
        let mut round_robin = topic.round_robin;
        let mut held = Vec::with_capacity(count);
        // Per item: its queue and its slot among `shares` (the queues in first-use order).
        let mut places: Vec<(usize, u32)> = Vec::with_capacity(count);
        let mut shares: Vec<(i64, u64)> = Vec::new();
        let mut length = 0usize;
        for item in items.iter() {
            let tuple = item.cast_into::<PyTuple>().map_err(|_| Stop::Declined)?;
            if tuple.len() != 10 || !tuple.get_item(9)?.is_none() {
                return declined(); // a dedup id: the long way
            }
            let born = born_of(&tuple)?;
            let fields: [Bound<'py, PyBytes>; 4] = [
                tuple.get_item(2)?.cast_into().map_err(PyErr::from)?,
                tuple.get_item(3)?.cast_into().map_err(PyErr::from)?,
                tuple.get_item(4)?.cast_into().map_err(PyErr::from)?,
                tuple.get_item(5)?.cast_into().map_err(PyErr::from)?,
            ];
            if fields[3].as_bytes().len() > self.max_body || fields[0].as_bytes().len() > 255 {
                return declined();
            }
            let explicit = tuple.get_item(0)?;
            let route_key = tuple.get_item(1)?;
            let queue_id = if !explicit.is_none() {
                explicit.extract::<i64>()?
            } else if !route_key.is_none() {
                let key = route_key.cast_into::<PyBytes>().map_err(PyErr::from)?;
                writable[crate::events::crc32_ieee(key.as_bytes()) as usize % writable.len()]
            } else {
                let id = writable[round_robin.rem_euclid(writable.len() as i64) as usize];
                round_robin += 1;
                id
            };
            let share = match shares.iter().position(|(id, _)| *id == queue_id) {
                Some(at) => at,
                None => {
                    shares.push((queue_id, 0));
                    shares.len() - 1
                }
            };
            shares[share].1 += 1;
            places.push((share, u32::try_from(queue_id).map_err(|_| Stop::Declined)?));
            length += crate::record::RECORD_OVERHEAD
                + name_len
                + fields.iter().map(|f| f.as_bytes().len()).sum::<usize>();
            let hashed: u64 = tuple.get_item(7)?.extract()?;
            let keys = tuple
                .get_item(8)?
                .cast_into::<PyTuple>()
                .map_err(PyErr::from)?;
            held.push((fields, hashed, born, keys));
        }
        if length > self.capacity {
            return declined();
        }
        let mut rooms = Vec::with_capacity(shares.len());
        for (queue_id, share) in &shares {
            rooms.push(self.queue_room(py, state, *queue_id, *share)?);
        }
        let write_lock = self.write_lock.get();
        if !write_lock.try_acquire() {
            return declined(); // another thread is in a write session
        }
        let outcome = self.under_thread_lock(py, |waited| {
            self.items_under_pen(
                py,
                state,
                &topic,
                &rooms,
                &held,
                &places,
                round_robin,
                length,
                waited,
            )
        });
        release(write_lock)?;
        outcome
    }

    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn items_under_pen<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        topic: &PlainTopic<'py>,
        rooms: &[QueueRoom<'py>],
        held: &[(
            [Bound<'py, PyBytes>; 4],
            u64,
            Option<i64>,
            Bound<'py, PyTuple>,
        )],
        places: &[(usize, u32)],
        round_robin: i64,
        length: usize,
        waited: bool,
    ) -> Step<(Bound<'py, PyList>, i64)> {
        let ready = self.ready(py, waited)?;
        let again = self.rooms_again(py, state, topic, rooms, ready.moved)?;
        let rooms = again.as_deref().unwrap_or(rooms);
        let tail = ready.tail;
        let end = tail + length as u64;
        let map = self.room(&ready, end)?;
        self.room_for_fds(rooms.len())?;
        let fds = rooms
            .iter()
            .map(|room| self.queue_file_fd(py, &room.queue, &room.last))
            .collect::<Step<Vec<i32>>>()?;
        drop(map);
        let now = ready.now;
        let segment_fd =
            i32::try_from(get_int(self.slots.fd, &ready.segment)?).map_err(|_| Stop::Declined)?;
        let name_bytes = topic.name_bytes.as_bytes();
        let Run {
            out,
            entries,
            queue_offsets,
            starts,
        } = place_run(
            tail,
            end,
            now,
            name_bytes,
            rooms.iter().map(|room| (room.base, room.count)),
            held.iter().map(|(fields, hashed, born, _)| {
                (fields.each_ref().map(|f| f.as_bytes()), *hashed, *born)
            }),
            places,
        )?;
        Self::begin(&ready, end);
        // The records with one pwrite, each queue's entries with one, the time marks,
        // then the key index's items in one `put_many`; a failure clears all of it.
        self.write_run(
            py,
            segment_fd,
            &out,
            tail - ready.base,
            rooms,
            &fds,
            entries.iter(),
            now,
            tail,
        )?;
        let stored = now.into_pyobject(py)?.into_any();
        let keyed = held.iter().map(|(_, _, _, keys)| keys).zip(&starts);
        if let Err(error) = self.put_keys(py, &topic.name, keyed, &stored) {
            return Err(self.write_failed(py, error, tail));
        }
        self.slots
            .round_robin
            .set(state, round_robin.into_pyobject(py)?.into_any());
        let mut notes = Vec::with_capacity(rooms.len());
        for room in rooms {
            self.moved_queue(py, &room.queue, &room.last, room.base + room.count)?;
            notes.push((room.queue_id, room.base + room.count));
        }
        self.publish(py, &ready, end, topic.topic_id, &notes)?;
        let results = PyList::empty(py);
        let status = self.status.bind(py);
        let result_type = self.result_type.bind(py);
        for i in 0..starts.len() {
            results.append(new_record(
                py,
                result_type,
                [
                    message_id(py, &self.prefix, starts[i]).into_any(),
                    topic.name.clone().into_any(),
                    places[i].1.into_pyobject(py)?.into_any(),
                    queue_offsets[i].into_pyobject(py)?.into_any(),
                    starts[i].into_pyobject(py)?.into_any(),
                    stored.clone(),
                    status.clone().into_any(),
                ],
            )?)?;
        }
        Ok((results, end as i64))
    }

    /// The key index's items of records written (each record's keys, at its commit
    /// offset `start`, stored at `stored`) handed to its `put_many` in one call, as
    /// `KeyIndexDispatch` hands them (none: no call).
    fn put_keys<'a, 'py: 'a>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyString>,
        keyed: impl Iterator<Item = (&'a Bound<'py, PyTuple>, &'a u64)>,
        stored: &Bound<'py, PyAny>,
    ) -> PyResult<()> {
        let index_items = PyList::empty(py);
        for (keys, start) in keyed {
            for key in keys.iter() {
                index_items.append((
                    name.clone(),
                    key,
                    start.into_pyobject(py)?,
                    stored.clone(),
                ))?;
            }
        }
        if index_items.is_empty() {
            return Ok(());
        }
        let key_index = self
            .dispatcher_items
            .get(KEY_INDEX_DISPATCHER)
            .ok_or_else(|| PyRuntimeError::new_err("the store has no key index dispatcher"))?
            .bind(py)
            .getattr(intern!(py, "index"))?;
        key_index.call_method1(intern!(py, "put_many"), (index_items,))?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn batch_under_pen<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        topic: &PlainTopic<'py>,
        rooms: &[QueueRoom<'py>],
        unplaced: &appending::Unplaced,
        out: &mut [u8],
        waited: bool,
    ) -> Step<(appending::PlainPlaces, i64, i64)> {
        let length = out.len();
        let ready = self.ready(py, waited)?;
        let again = self.rooms_again(py, state, topic, rooms, ready.moved)?;
        let rooms = again.as_deref().unwrap_or(rooms);
        let tail = ready.tail;
        let end = tail + length as u64;
        let map = self.room(&ready, end)?;
        self.room_for_fds(rooms.len())?;
        let fds = rooms
            .iter()
            .map(|room| self.queue_file_fd(py, &room.queue, &room.last))
            .collect::<Step<Vec<i32>>>()?;
        let now = ready.now;
        let turn: Vec<u32> = rooms.iter().map(|room| room.queue_id as u32).collect();
        let bases: Vec<u64> = rooms.iter().map(|room| room.base).collect();
        let batch = appending::PlainBatch {
            topic: topic.name_bytes.as_bytes(),
            tail,
            now,
            turn: &turn,
            bases: &bases,
        };
        drop(map);
        let segment_fd =
            i32::try_from(get_int(self.slots.fd, &ready.segment)?).map_err(|_| Stop::Declined)?;
        let entries = appending::place_plain(&batch, unplaced, out);
        Self::begin(&ready, end);
        // 4. The records with one pwrite (as the long way: no page faults on the
        //    mapping's first touches), then each queue's entries (one pwrite a queue),
        //    then the time marks (`write_marks`: one pwrite a queue); a failure clears
        //    all of it past the tail.
        self.write_run(
            py,
            segment_fd,
            out,
            tail - ready.base,
            rooms,
            &fds,
            entries.iter().map(Vec::as_slice),
            now,
            tail,
        )?;
        // 5. This process's state, as the long way leaves it; 6, 7: publish, seen.
        self.slots.round_robin.set(
            state,
            (topic.round_robin + unplaced.lengths.len() as i64)
                .into_pyobject(py)?
                .into_any(),
        );
        let mut notes = Vec::with_capacity(rooms.len());
        for room in rooms {
            self.moved_queue(py, &room.queue, &room.last, room.base + room.count)?;
            notes.push((room.queue_id, room.base + room.count));
        }
        self.publish(py, &ready, end, topic.topic_id, &notes)?;
        self.batched.fetch_add(1, Ordering::Relaxed);
        let places = appending::PlainPlaces { tail, turn, bases };
        Ok((places, now, end as i64))
    }

    /// The `AppendResult`s of a plain batch of records `lengths` long written at `now`
    /// where `places` says, made after the pen is let go (the other processes need not
    /// wait for them).
    fn batch_results<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyString>,
        places: &appending::PlainPlaces,
        lengths: &[u32],
        now: i64,
    ) -> PyResult<Bound<'py, PyList>> {
        let results = PyList::empty(py);
        let status = self.status.bind(py);
        let result_type = self.result_type.bind(py);
        let stored = now.into_pyobject(py)?.into_any();
        for (start, queue_id, queue_offset) in places.each(lengths) {
            results.append(new_record(
                py,
                result_type,
                [
                    message_id(py, &self.prefix, start).into_any(),
                    name.clone().into_any(),
                    queue_id.into_pyobject(py)?.into_any(),
                    queue_offset.into_pyobject(py)?.into_any(),
                    start.into_pyobject(py)?.into_any(),
                    stored.clone(),
                    status.clone().into_any(),
                ],
            )?)?;
        }
        Ok(results)
    }

    /// `append` of one message without a dedup id, to the topic named `topic`: its
    /// `AppendResult`, or None when declined (the caller goes the long way, which also
    /// raises the typed error of a message `Writer.prepare` refuses: nothing is written
    /// here then). A body (bytes) without keys, perhaps with a queue, a tag and
    /// properties (checked and encoded as `Writer.prepare` does: prepare.rs), to a topic
    /// with files per queue: `try_append`; anything else (keys, a str body, a shared
    /// topic): prepared as `Writer.prepare` prepares it (prepare.rs), then written as a
    /// dict batch of one (`try_items`).
    fn append_message<'py>(
        &self,
        py: Python<'py>,
        topic: &Bound<'py, PyAny>,
        message: &Message<'_, 'py>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(state) = self.registry_topic(py, topic) else {
            return Ok(None);
        };
        if message.key.is_none() && !self.shared(py, &state)? {
            if let Ok(bytes) = message.body.cast_exact::<PyBytes>() {
                let explicit = match message.queue {
                    None => None,
                    Some(q) if q.is_exact_instance_of::<PyInt>() => match q.extract::<i64>() {
                        Ok(id) => Some(id),
                        Err(_) => return Ok(None), // past i64: the long way says so
                    },
                    Some(_) => return Ok(None), // not an int: the long way says so
                };
                if message.tag.is_none() && message.properties.is_none() {
                    let extras = Extras::NONE; // what tag_and_properties makes of none
                    return answer(self.try_append(py, &state, bytes.as_bytes(), explicit, extras));
                }
                let Some((tag, properties, tag_hash)) =
                    prepare::tag_and_properties(message.tag, message.properties)
                else {
                    return Ok(None); // refused: the long way raises its typed error
                };
                let extras = Extras {
                    tag,
                    properties: &properties,
                    tag_hash,
                };
                return answer(self.try_append(py, &state, bytes.as_bytes(), explicit, extras));
            }
        }
        let Some(prepared) = self.prepare_message(py, &state, message)? else {
            return Ok(None);
        };
        let items = PyList::new(py, [prepared])?;
        answer(self.try_items(py, &state, &items, true))?
            .map(|results| results.get_item(0))
            .transpose()
    }

    /// The registry's topic `topic` (None: not there, or its look-up failed: the long
    /// way says so). An exact str's is kept with the registry's version (`topic_seen`).
    fn registry_topic<'py>(
        &self,
        py: Python<'py>,
        topic: &Bound<'py, PyAny>,
    ) -> Option<Bound<'py, PyAny>> {
        let topics = self.topics.bind(py);
        if !topic.is_exact_instance_of::<PyString>() {
            return topics.get_item(topic).ok().flatten();
        }
        if let Ok(seen) = self.topic_seen.lock() {
            if let Some((name, kept)) = seen.as_ref() {
                if name.bind(py).is(topic) {
                    if let Some(state) = kept.get(topics) {
                        return Some(state);
                    }
                }
            }
        }
        // A str key: the look-up runs no Python code.
        let version = super::dict_version(topics);
        let state = topics.get_item(topic).ok().flatten()?;
        let kept = KeptItem::default();
        kept.keep(version, &state);
        let old = self
            .topic_seen
            .lock()
            .ok()
            .and_then(|mut seen| seen.replace((topic.clone().unbind(), kept)));
        drop(old); // after the lock is let go: dropping may run Python code
        Some(state)
    }

    /// `message` prepared for topic `state` (`prepare::prepare_message`), or None when
    /// the long way prepares it (and raises what it raises).
    fn prepare_message<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        message: &Message<'_, 'py>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let Some(limits) = self.topic_limits(py, state)? else {
            return Ok(None);
        };
        Ok(prepare::prepare_message(
            py,
            message.body,
            message.queue,
            message.key,
            message.tag,
            message.properties,
            limits,
        ))
    }

    /// What `Writer.prepare` checks a message to topic `state` against
    /// (`prepare::TopicLimits`), or None when the long way prepares its messages (a
    /// stream topic, a body limit of its own).
    fn topic_limits<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
    ) -> PyResult<Option<prepare::TopicLimits<'py>>> {
        let slots = &self.slots;
        if !state.get_type().is(slots.topic_type.bind(py)) {
            return Ok(None);
        }
        let Some(info) = answer(get(slots.info, state))? else {
            return Ok(None);
        };
        let Some((_, _, plain)) = answer(self.topic_facts(py, &info))? else {
            return Ok(None);
        };
        let Some(queues) = answer(get(slots.queues, state))? else {
            return Ok(None);
        };
        let Some(name_bytes) = answer(get(slots.name_bytes, state))? else {
            return Ok(None);
        };
        if !plain {
            return Ok(None); // a stream topic, a body limit of its own: the long way
        }
        Ok(Some((
            i64::try_from(queues.len()?).unwrap_or(i64::MAX),
            info.getattr(intern!(py, "frozen"))?,
            self.max_body,
            RECORD_OVERHEAD + name_bytes.len()?,
            self.capacity,
        )))
    }

    /// `append` of `body` (with `extras`: its tag and properties, checked and encoded)
    /// to topic `state` (just found in the registry): to queue `explicit` when given (a
    /// queue `Writer.prepare` would refuse, or one not writable: declined, for the long
    /// way's typed error), else to the next writable queue of the round-robin.
    fn try_append<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        body: &[u8],
        explicit: Option<i64>,
        extras: Extras<'_>,
    ) -> Step<Bound<'py, PyAny>> {
        self.check_store(py)?;
        let planned_topic = self.plain_topic(py, state, true)?;
        let PlainTopic {
            topic_id,
            name,
            name_bytes,
            writable,
            round_robin,
        } = &planned_topic;
        let (topic_id, round_robin) = (*topic_id, *round_robin);
        let topic = name_bytes.as_bytes();
        let length =
            RECORD_OVERHEAD + topic.len() + extras.tag.len() + extras.properties.len() + body.len();
        if body.len() > self.max_body || length > self.capacity || topic.len() > 255 {
            return declined();
        }
        let queue_id: i64 = match explicit {
            None => {
                let turn = round_robin.rem_euclid(writable.len() as i64) as usize;
                int_in(&list_item(writable, turn).ok_or(Stop::Declined)?)?
            }
            Some(id) if Self::writable_queue(writable, id)? => id,
            Some(_) => return declined(),
        };
        let QueueRoom {
            queue,
            last,
            base: queue_offset,
            slot,
            ..
        } = self.queue_room(py, state, queue_id, 1)?;
        let write_lock = self.write_lock.get();
        if !write_lock.try_acquire() {
            return declined(); // another thread is in a write session
        }
        let plan = Planned {
            state,
            planned_topic: &planned_topic,
            topic_id,
            name: name.clone(),
            queue,
            queue_id,
            queue_offset,
            last,
            slot,
            topic,
            body,
            length,
            round_robin,
            turns: explicit.is_none(),
            extras,
        };
        let outcome = self.under_thread_lock_then(
            py,
            |waited| self.under_pen(py, &plan, waited),
            |(single, end, unsettled)| match self.settle_single(py, state, unsettled) {
                Ok(old_end) => Ok((single, end, old_end)),
                // Published: never declined to the long way, which would write it again.
                Err(Stop::Declined) => Err(Stop::Failed(PyRuntimeError::new_err(
                    "the store's state changed under a published append",
                ))),
                Err(stop) => Err(stop),
            },
        );
        release(write_lock)?;
        let (((tail, tail_at), queue_offset, now), end, old_end) = outcome?;
        let tail = match tail {
            Some(tail) => tail,
            None => super::int_of(py, tail_at)?,
        };
        let queue_offset = match old_end {
            Some(old_end) => old_end,
            None => super::int_of(py, queue_offset)?,
        };
        // The result made after the pen is let go (the other processes need not wait).
        let result = new_record(
            py,
            self.result_type.bind(py),
            [
                message_id(py, &self.prefix, tail_at).into_any(),
                plan.name.clone().into_any(),
                new_int(py, queue_id)?,
                queue_offset,
                tail,
                new_int(py, now)?,
                self.status.bind(py).clone().into_any(),
            ],
        )?;
        self.after(py, end, true)?;
        if self.waited_out(py, end)? {
            let writer = self.writer.bind(py);
            let timed_out = writer.call_method1(
                intern!(py, "flush_timed_out"),
                (PyList::new(py, [result])?,),
            )?;
            return Ok(timed_out.get_item(0)?);
        }
        Ok(result)
    }

    /// What `Writer.append_prepared` does after a batch's write (`after`), and in sync
    /// mode the wait for the fdatasync that covers `end`: the results, or, when that
    /// wait timed out, the writer's `flush_timed_out` of them.
    fn settle_batch<'py>(
        &self,
        py: Python<'py>,
        results: Bound<'py, PyList>,
        end: i64,
    ) -> Step<Bound<'py, PyList>> {
        self.after(py, end, false)?;
        if self.waited_out(py, end)? {
            let writer = self.writer.bind(py);
            return Ok(writer
                .call_method1(intern!(py, "flush_timed_out"), (results,))?
                .cast_into()
                .map_err(PyErr::from)?);
        }
        Ok(results)
    }

    /// Sync mode (issue 31, part 9): wait, without the GIL, until an fdatasync covers
    /// the write that ended at `end` (log_sync.rs); whether it timed out instead
    /// (FLUSH_TIMEOUT). Async mode: false at once. Raises the typed error of a failed
    /// fdatasync.
    fn waited_out(&self, py: Python<'_>, end: i64) -> PyResult<bool> {
        let Some(syncer) = &self.syncer else {
            return Ok(false);
        };
        let written = syncer
            .get()
            .wait_written(py, self.store.bind(py), end as u64)?;
        Ok(matches!(written, Written::TimedOut))
    }

    /// What `Writer.append_prepared` does after an async write: ask for a flush past
    /// `flush_dirty_bytes`, for warming past `WARM_ASK_BYTES`, and wake waiting pulls
    /// (sync mode: no flush is asked for; the append waits for its own, `waited_out`).
    /// The flusher, the warmer and the pulls keep the ends past which each is asked in
    /// `asks` (words.rs): below the lowest, one load and nothing else.
    /// `touch`: a single append asks for the pretoucher (a batch writes its records
    /// with `pwrite`, so the segment's pages need no faulting in for it).
    fn after(&self, py: Python<'_>, end: i64, touch: bool) -> PyResult<()> {
        let touched = self.touch_asked.load(Ordering::Relaxed);
        if touch && end.abs_diff(touched as i64) > PRETOUCH_ASK {
            self.touch_asked.store(end as u64, Ordering::Relaxed);
            self.flusher.bind(py).call_method0(intern!(py, "touch"))?;
        }
        let asks = self.asks.get();
        if !asks.due(end) {
            return Ok(());
        }
        if self.syncer.is_none() && asks.flush_due(end) {
            self.flusher.bind(py).call_method0(intern!(py, "kick"))?;
        }
        if asks.warm_due(end) {
            self.warm
                .bind(py)
                .call_method1(intern!(py, "soon"), (end,))?;
        }
        if asks.wake_due() {
            self.arrivals.bind(py).call_method0(intern!(py, "wake"))?;
        }
        Ok(())
    }

    /// Take the pen, waiting for it when another process holds it (`take_pen`), then
    /// the follow lock without waiting (the caller holds the thread lock); run `write`
    /// under them (told whether the GIL was let go meanwhile), let go.
    fn under_thread_lock<R>(&self, py: Python<'_>, write: impl FnOnce(bool) -> Step<R>) -> Step<R> {
        self.under_thread_lock_then(py, write, Ok)
    }

    /// `under_thread_lock`, then `settle` with what `write` returned after the pen is
    /// let go, still under the follow lock (with the GIL held throughout, no other
    /// thread of this process sees the state between).
    fn under_thread_lock_then<R, S>(
        &self,
        py: Python<'_>,
        write: impl FnOnce(bool) -> Step<R>,
        settle: impl FnOnce(R) -> Step<S>,
    ) -> Step<S> {
        let pen = self.pen.get();
        let (taken, waited) = self.take_pen(py, pen)?;
        if taken == Taken::OwnerDied {
            // Its last owner died holding it: the store settles it (clears what that
            // writer left, marks it consistent; under its follow lock), then the long
            // way writes.
            let settled = self
                .store
                .bind(py)
                .getattr(intern!(py, "_session"))
                .and_then(|s| s.call_method0(intern!(py, "settle_dead_owner")));
            let _ = pen.mutex().unlock();
            settled?;
            return declined();
        }
        if waited {
            // The GIL was let go: another thread may have closed or failed the store.
            if let Err(stop) = self.check_store(py) {
                let _ = pen.mutex().unlock();
                return Err(stop);
            }
        }
        let follow_lock = self.follow_lock.get();
        if !follow_lock.try_acquire() {
            let _ = pen.mutex().unlock();
            return declined(); // another thread follows: the long way waits for it
        }
        let outcome = write(waited);
        let unlocked = pen.mutex().unlock();
        // What was written is settled even when letting go failed (it was published).
        let settled = match (outcome.and_then(settle), unlocked) {
            (Ok(result), Ok(())) => Ok(result),
            (Err(stop), _) => Err(stop),
            (Ok(_), Err(error)) => Err(Stop::Failed(PyOSError::new_err(error.to_string()))),
        };
        release(follow_lock)?;
        settled
    }

    /// Take the pen: at once when free; while another process holds it (for the
    /// length of one write: a microsecond for a single append, a few hundred for a
    /// batch of 500 × 1 KiB), by trying again for up to `PEN_SPIN_SHORT`, or
    /// `PEN_SPIN` while the holder's write is a long one; then by waiting for it
    /// without the GIL (a futex sleep). The second item
    /// says whether the GIL was let go (then anything may have moved). Declined when
    /// the mutex reports an error (the long way raises it).
    fn take_pen(&self, py: Python<'_>, pen: &Pen) -> Step<(Taken, bool)> {
        match pen.mutex().try_lock() {
            Ok(Some(taken)) => return Ok((taken, false)),
            Ok(None) => {}
            Err(_) => return declined(),
        }
        let header = WritableView::of(self.state_map.bind(py));
        let long_write = || {
            header.as_ref().is_some_and(|header| {
                header.word(WRITING_AT).load(Ordering::Acquire) != 0
                    && header.word(EXTENT_AT).load(Ordering::Relaxed)
                        >= header.word(TAIL_AT).load(Ordering::Relaxed) + LONG_WRITE
            })
        };
        let go_on = |spun| spun < PEN_SPIN_SHORT || (spun < PEN_SPIN && long_write());
        match pen.mutex().try_spinning(go_on) {
            Ok(Some(taken)) => {
                self.spun.fetch_add(1, Ordering::Relaxed);
                return Ok((taken, false));
            }
            Ok(None) => {}
            Err(_) => return declined(),
        }
        let mutex = pen.mutex();
        let taken = py.detach(|| mutex.lock());
        self.waited.fetch_add(1, Ordering::Relaxed);
        match taken {
            Ok(taken) => Ok((taken, true)),
            Err(_) => declined(),
        }
    }

    /// The rooms of a write's plan found again after `ready` when `moved` says they may
    /// have changed (None: they hold); after a wait or the store's `_follow`, the store
    /// and the topic are first checked to be as planned (`still_planned`).
    fn rooms_again<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        topic: &PlainTopic<'py>,
        rooms: &[QueueRoom<'py>],
        moved: Moved,
    ) -> Step<Option<Vec<QueueRoom<'py>>>> {
        if moved == Moved::Nothing {
            return Ok(None);
        }
        self.still_planned(py, state, topic, moved)?;
        let again = rooms
            .iter()
            .map(|room| self.queue_room(py, state, room.queue_id, room.count))
            .collect::<Step<Vec<_>>>()?;
        Ok(Some(again))
    }

    /// After `Moved::Anything`: the store still takes a native write (`check_store`),
    /// `state` is still the registry's topic, with the writable queues, round-robin,
    /// id and name the plan was made with; else declined (the long way plans again).
    fn still_planned<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        planned: &PlainTopic<'py>,
        moved: Moved,
    ) -> Step<()> {
        if moved != Moved::Anything {
            return Ok(());
        }
        self.check_store(py)?;
        let now = self.plain_topic(py, state, false)?;
        if now.topic_id != planned.topic_id
            || now.round_robin != planned.round_robin
            || !now.name_bytes.is(&planned.name_bytes)
            || !(now.writable.is(&planned.writable) || now.writable.eq(&planned.writable)?)
        {
            return declined();
        }
        Ok(())
    }

    /// Steps 1 and 2 of a write under the pen: caught up (no other process published
    /// since this one last followed; nothing left unfinished), the tail and the active
    /// segment, the time of the write.
    fn ready<'py>(&self, py: Python<'py>, waited: bool) -> Step<Ready<'py>> {
        self.ready_deferring(py, waited, false)
    }

    /// `ready`; with `defer`, the bookkeeping of a native follow is left in the
    /// `Ready` (`unfollowed`) for the caller to settle after the pen is let go (issue
    /// 31, part 12); settled here when the write is declined or fails before that.
    fn ready_deferring<'py>(&self, py: Python<'py>, waited: bool, defer: bool) -> Step<Ready<'py>> {
        let store = self.store.bind(py);
        let log = self.log_dict.bind(py);
        let slots = &self.slots;
        let Some(header) = WritableView::of(self.state_map.bind(py)) else {
            return declined();
        };
        if header.len() < RING_AT + RING_ENTRIES as usize * RING_ENTRY {
            return declined();
        }
        // 1. Caught up: no other process published since this one last followed.
        let mut moved = if waited {
            Moved::Anything
        } else {
            Moved::Nothing
        };
        let sequence = header.word(SEQUENCE_AT).load(Ordering::Acquire);
        if sequence & 1 == 1 {
            return declined();
        }
        let followed = self.followed_word.get();
        let mut unfollowed = None;
        if i64::try_from(sequence).ok() != Some(followed.load()) {
            // Moved since this process last looked (by its own long way, or by another
            // process). Another process's appends alone: the core takes in their notes
            // itself (follow.rs). Anything else: the store's `_follow` decides, and
            // nothing to follow leaves `_seen` as it was. Either way the caller finds
            // its rooms again (`moved`) and writes on.
            match self.follow_notes(py, &header, sequence, defer)? {
                (Followed::Nothing, _) => {}
                (Followed::Ends, work) => {
                    moved = moved.max(Moved::Ends);
                    unfollowed = work.map(Box::new);
                }
                (Followed::NotHere, _) => {
                    let seen = store.getattr(intern!(py, "_seen"))?;
                    store.call_method0(intern!(py, "_follow"))?;
                    if i64::try_from(sequence).ok() != Some(followed.load()) {
                        return declined();
                    }
                    if !store.getattr(intern!(py, "_seen"))?.is(&seen) {
                        self.caught_up.fetch_add(1, Ordering::Relaxed);
                        moved = Moved::Anything;
                    }
                }
            }
        }
        // After a deferred follow the tail and the active segment are the follow's
        // (the log's tail in this process is set after the pen: `settle_follow`).
        let followed_to = unfollowed
            .as_deref()
            .map(|u: &follow::Unfollowed<'py>| (u.tail, u.base, u.end, u.active.clone()));
        let finish = move || -> Step<Ready<'py>> {
            if header.word(WRITING_AT).load(Ordering::Acquire) != 0 {
                return declined(); // a write left unfinished: the long way clears it
            }
            if let Some((tail, base, end_of_segment, segment)) = followed_to {
                let last_store_ms = self.last_store.get().load();
                return Ok(Ready {
                    header,
                    sequence,
                    tail,
                    tail_object: None,
                    last_store_ms,
                    base,
                    end_of_segment,
                    segment,
                    now: now_ms().max(last_store_ms),
                    moved,
                    unfollowed: None,
                });
            }
            // 2. The tail and the active segment (`CommitLog.active`, read without its
            //    property's frame); the caller checks its room (else the long way rolls).
            let tail_object = self.tail_seen.item(log, intern!(py, "tail"))?;
            let tail = match super::int_value(&tail_object) {
                Some(tail) => u64::try_from(tail).map_err(|_| Stop::Declined)?,
                None => tail_object.extract::<u64>().map_err(|_| Stop::Declined)?,
            };
            if header.word(TAIL_AT).load(Ordering::Acquire) != tail {
                return declined();
            }
            let segments = self
                .segments_seen
                .item(log, intern!(py, "segments"))?
                .cast_into::<PyList>()
                .map_err(PyErr::from)?;
            let Some(segment) = segments
                .len()
                .checked_sub(1)
                .and_then(|i| list_item(&segments, i))
            else {
                return declined();
            };
            if !segment.get_type().is(slots.segment_type.bind(py)) {
                return declined();
            }
            let base = get_u64(slots.base, &segment)?;
            let end_of_segment = get_u64(slots.end, &segment)?;
            if tail < base {
                return declined();
            }
            let last_store_ms = self.last_store.get().load();
            Ok(Ready {
                header,
                sequence,
                tail,
                tail_object: Some(tail_object),
                last_store_ms,
                base,
                end_of_segment,
                segment,
                now: now_ms().max(last_store_ms),
                moved,
                unfollowed: None,
            })
        };
        match finish() {
            Ok(mut ready) => {
                ready.unfollowed = unfollowed;
                Ok(ready)
            }
            Err(stop) => {
                if let Some(work) = unfollowed {
                    self.settle_follow(py, *work, true)?;
                }
                Err(stop)
            }
        }
    }

    /// The mapping of the active segment, when `[tail, end)` and a marker after it fit.
    fn room(&self, ready: &Ready<'_>, end: u64) -> Step<WritableView> {
        if end + MARKER_SIZE as u64 > ready.end_of_segment {
            return declined();
        }
        WritableView::of(&get(self.slots.map, &ready.segment)?).ok_or(Stop::Declined)
    }

    /// Step 3: the write begins: its extent marked, so that a death from here on is
    /// cleared by the next writer (sharedstate.begin_write + raise_extent).
    fn begin(ready: &Ready<'_>, end: u64) {
        ready.header.word(EXTENT_AT).store(end, Ordering::Relaxed);
        ready.header.word(WRITING_AT).store(1, Ordering::Release);
    }

    /// A batch's run written past `tail`: its records with one pwrite at `position` of the
    /// segment (as the long way: no page faults on the mapping's first touches), each
    /// queue's entries with one pwrite at its room's slot, then the time marks; a failure
    /// clears all of it past `tail` (`write_failed`).
    #[allow(clippy::too_many_arguments)]
    fn write_run<'py, 'e>(
        &self,
        py: Python<'py>,
        segment_fd: i32,
        records: &[u8],
        position: u64,
        rooms: &[QueueRoom<'py>],
        fds: &[i32],
        entries: impl Iterator<Item = &'e [u8]>,
        now: i64,
        tail: u64,
    ) -> Step<()> {
        if let Err(error) = Self::write_at_site(py, Site::LogRecord, segment_fd, records, position)
        {
            return Err(self.write_failed(py, error, tail));
        }
        for ((room, fd), entries) in rooms.iter().zip(fds).zip(entries) {
            if let Err(error) = self.store_entries(&room.queue, *fd, entries, room.slot) {
                return Err(self.write_failed(py, error, tail));
            }
        }
        for room in rooms {
            self.write_marks(
                py,
                &room.queue,
                room.base..room.base + room.count,
                now,
                tail,
            )?;
        }
        Ok(())
    }

    /// A failed write of an entry or a time mark: the store fails with the typed error
    /// (`Writer.native_write_failed` clears what was written past `tail`, publishes).
    fn write_failed(&self, py: Python<'_>, error: PyErr, tail: u64) -> Stop {
        match self
            .writer
            .bind(py)
            .call_method1(intern!(py, "native_write_failed"), (error, tail))
        {
            Ok(failure) => Stop::Failed(PyErr::from_value(failure)),
            Err(error) => Stop::Failed(error),
        }
    }

    /// Entries `data` into the last file of `queue` (descriptor `fd`, kept in `tails`)
    /// at entry `slot`: stored into its mapped window, reserved first when the entries
    /// are past it (window.rs), or written with `pwrite` where the file is not mapped;
    /// an OSError when it fails (ENOSPC at a window's reservation: DiskFullError).
    fn store_entries(
        &self,
        queue: &Bound<'_, PyAny>,
        fd: i32,
        data: &[u8],
        slot: u64,
    ) -> PyResult<()> {
        let py = queue.py();
        let at = slot * ENTRY_SIZE as u64;
        if io_seam::planned() {
            // Under a fault plan the window is reserved apart, at its own site; without
            // one the store reserves it itself (window.rs), the same `fallocate`.
            self.reserve_window(queue, fd, data.len(), at)?;
        }
        io_seam::with_io(py, |io| {
            io.write(py, Site::QueueEntry, fd, at, data, &mut || {
                self.store_entries_direct(queue, fd, data, at)
            })
        })
    }

    /// The window a store of `len` bytes at byte `at` of the last file of `queue` needs,
    /// reserved through the `Io` in force at `queue.reserve` (none needed: nothing).
    /// The `tails` lock is not held while the plan's hook runs (it may let the GIL go).
    fn reserve_window(
        &self,
        queue: &Bound<'_, PyAny>,
        fd: i32,
        len: usize,
        at: u64,
    ) -> PyResult<()> {
        let py = queue.py();
        let key = queue.as_ptr() as usize;
        let Ok(at) = usize::try_from(at) else {
            return Ok(());
        };
        let needed = match self.tails.lock() {
            Ok(tails) => tails
                .get(&key)
                .filter(|tail| tail.fd.as_raw_fd() == fd)
                .and_then(|tail| tail.window.as_ref())
                .and_then(|window| window.to_reserve(at, len)),
            Err(_) => None,
        };
        let Some((from, to)) = needed else {
            return Ok(());
        };
        io_seam::with_io(py, |io| {
            io.call(
                py,
                Site::QueueReserve,
                fd,
                from as u64,
                What::Reserve((to - from) as u64),
                &mut || {
                    let Ok(mut tails) = self.tails.lock() else {
                        return Ok(());
                    };
                    let Some(tail) = tails.get_mut(&key).filter(|t| t.fd.as_raw_fd() == fd) else {
                        return Ok(());
                    };
                    let Some(window) = tail.window.as_mut() else {
                        return Ok(());
                    };
                    match window.reserve_range(fd, from, to) {
                        Ok(()) => {
                            self.reserved.fetch_add(1, Ordering::Relaxed);
                            Ok(())
                        }
                        Err(NotStored::Failed(error)) => Err(PyOSError::new_err((
                            error.raw_os_error().unwrap_or(libc::EIO),
                            error.to_string(),
                        ))),
                        Err(NotStored::Unmapped) => {
                            tail.window = None;
                            Ok(())
                        }
                    }
                },
            )
        })
    }

    /// `store_entries`'s write itself (the `Io`'s `direct`).
    fn store_entries_direct(
        &self,
        queue: &Bound<'_, PyAny>,
        fd: i32,
        data: &[u8],
        at: u64,
    ) -> PyResult<()> {
        let os_error = |error: std::io::Error| {
            PyOSError::new_err((error.raw_os_error().unwrap_or(libc::EIO), error.to_string()))
        };
        if let (Ok(mut tails), Ok(at)) = (self.tails.lock(), usize::try_from(at)) {
            if let Some(tail) = tails.get_mut(&(queue.as_ptr() as usize)) {
                if tail.fd.as_raw_fd() == fd {
                    if let Some(window) = tail.window.as_mut() {
                        match window.store(fd, data, at) {
                            Ok(reserved) => {
                                if reserved {
                                    self.reserved.fetch_add(1, Ordering::Relaxed);
                                }
                                return Ok(());
                            }
                            Err(NotStored::Failed(error)) => return Err(os_error(error)),
                            Err(NotStored::Unmapped) => tail.window = None,
                        }
                    }
                }
            }
        }
        Self::write_at(fd, data, at)
    }

    /// `store` (a write of `data` at `at` of the file `fd`) through the `Io` in force.
    fn write_site(
        py: Python<'_>,
        site: Site,
        fd: i32,
        at: u64,
        data: &[u8],
        mut store: impl FnMut() -> PyResult<()>,
    ) -> PyResult<()> {
        io_seam::with_io(py, |io| io.write(py, site, fd, at, data, &mut store))
    }

    /// `write_at` through the `Io` in force, as site `site`.
    fn write_at_site(
        py: Python<'_>,
        site: Site,
        fd: i32,
        data: &[u8],
        position: u64,
    ) -> PyResult<()> {
        Self::write_site(py, site, fd, position, data, || {
            Self::write_at(fd, data, position)
        })
    }

    /// `data` into the file `fd` at `position`; an OSError when it fails.
    fn write_at(fd: i32, data: &[u8], position: u64) -> PyResult<()> {
        let file = std::mem::ManuallyDrop::new(
            // SAFETY: `fd` is a queue file's descriptor this core owns (in `tails`, open
            // until the core closes it), the active segment's, whose `Segment` the
            // caller holds for the call, or a time index's, which its HandleCache keeps
            // open while the GIL is held (`time_index_fd`); the File is never dropped (ManuallyDrop), so
            // the descriptor is not closed here.
            unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) },
        );
        file.write_all_at(data, position).map_err(|error| {
            PyOSError::new_err((error.raw_os_error().unwrap_or(libc::EIO), error.to_string()))
        })
    }

    /// What a write leaves of a queue in this process, as the long way leaves it: its
    /// end, its change count, its last file dirty, the queue dirty in the registry.
    /// The queue's old end (the int object its slot held) is handed back: a single
    /// append's result gives it as its queue offset (`settle_single`).
    fn moved_queue<'py>(
        &self,
        py: Python<'py>,
        queue: &Bound<'py, PyAny>,
        last: &Bound<'py, PyAny>,
        end_offset: u64,
    ) -> Step<Option<Bound<'py, PyAny>>> {
        let slots = &self.slots;
        let old_end = slots
            .max_offset
            .replace(queue, super::int_of(py, end_offset)?);
        let changes = get_int(slots.changes, queue)?;
        if !u64::try_from(changes + 1).is_ok_and(|next| slots.changes.renew_int(queue, next)) {
            slots.changes.set(queue, new_int(py, changes + 1)?);
        }
        let queue_dirty = get(slots.dirty, queue)?
            .cast_into::<PySet>()
            .map_err(PyErr::from)?;
        super::set_add(&queue_dirty, last)?;
        super::set_add(self.dirty.bind(py), queue)?;
        Ok(old_end)
    }

    /// Steps 5 to 7: the log's tail and store time in this process; publish
    /// (sharedstate.publish_tail: the notes `(queue id, new queue end)` of topic
    /// `topic_id`, then the tail, the write finished, the ring sequence, each under an
    /// odd sequence word); seen (what `_published_tail` notes, the sequence written).
    fn publish(
        &self,
        py: Python<'_>,
        ready: &Ready<'_>,
        end: u64,
        topic_id: i64,
        notes: &[(i64, u64)],
    ) -> Step<()> {
        let published = self.publish_shared(ready, end, topic_id, notes)?;
        self.published_here(py, &published)
    }

    /// The shared half of `publish`: the notes, the tail and the words in the `state`
    /// header, under the pen. What this process notes of it (`published_here`) needs
    /// no pen: a single append does it after letting go (issue 31, part 12).
    fn publish_shared(
        &self,
        ready: &Ready<'_>,
        end: u64,
        topic_id: i64,
        notes: &[(i64, u64)],
    ) -> Step<Published> {
        let header = &ready.header;
        let now = ready.now;
        if now != ready.last_store_ms {
            self.last_store.get().store(now);
        }
        let mut ring_seq = header.word(RING_SEQ_AT).load(Ordering::Acquire);
        for &(queue_id, end_offset) in notes {
            ring_seq += 1;
            let at = RING_AT + (ring_seq % RING_ENTRIES) as usize * RING_ENTRY;
            let Some(note) = header.slice(at + 8, RING_ENTRY - 8) else {
                return declined();
            };
            // The slot's `seq` before its other fields (a release fence between): a
            // process reading notes without the pen may be reading this slot for the
            // note it held, 8192 back; it reads the slot, then `seq` again, and must
            // find it moved if any new field reached it (sharedstate.py, `notes`).
            header.word(at).store(ring_seq, Ordering::Relaxed);
            fence(Ordering::Release);
            note[0..4].copy_from_slice(&(topic_id as u32).to_le_bytes());
            note[4..8].copy_from_slice(&(queue_id as u32).to_le_bytes());
            note[8..16].copy_from_slice(&end_offset.to_le_bytes());
            note[16..24].copy_from_slice(&now.to_le_bytes());
        }
        let odd = ready.sequence | 1;
        header.word(SEQUENCE_AT).store(odd, Ordering::Release);
        fence(Ordering::SeqCst);
        header.word(TAIL_AT).store(end, Ordering::Relaxed);
        header.word(WRITING_AT).store(0, Ordering::Relaxed);
        header.word(EXTENT_AT).store(0, Ordering::Relaxed);
        header.word(RING_SEQ_AT).store(ring_seq, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        header.word(SEQUENCE_AT).store(odd + 1, Ordering::Release);
        Ok(Published {
            end,
            ring_seq,
            sequence: odd + 1,
        })
    }

    /// This process's half of `publish`: the log's tail, `_seen` (tail and ring
    /// sequence) and the sequence followed, as `publish_shared` left the header. No
    /// other process reads them, and no other thread of this one runs meanwhile (the
    /// GIL is held from the publish on; the thread and follow locks too).
    fn published_here(&self, py: Python<'_>, published: &Published) -> Step<()> {
        let log = self.log_dict.bind(py);
        let end_object = super::int_of(py, published.end)?;
        // The old tail held across the set, so that letting it go (which, for an object
        // not an int, could run code) is not part of the change: the set alone moves the
        // log's version, and what was kept of it but the tail holds after it.
        let old_tail = match self.tail_seen.get(log) {
            Some(kept) => Some(kept),
            None => log.get_item(intern!(py, "tail"))?,
        };
        let before = super::dict_version(log);
        log.set_item(intern!(py, "tail"), &end_object)?;
        let after = super::dict_version(log);
        self.segments_seen.carry(before, after);
        self.tail_seen.keep(after, &end_object);
        drop(old_tail);
        let store_dict = self.store_dict.bind(py);
        let seen = self
            .snapshot_seen
            .item(store_dict, intern!(py, "_seen"))?
            .cast_into::<PyTuple>()
            .map_err(PyErr::from)?;
        if !self.renew_snapshot(
            py,
            &seen,
            (&end_object, published.end),
            (None, published.ring_seq),
        ) {
            let ring_object = super::int_of(py, published.ring_seq)?;
            let snapshot = new_record(
                py,
                self.snapshot_type.bind(py),
                [
                    end_object,
                    seen.get_item(1)?,
                    seen.get_item(2)?,
                    seen.get_item(3)?,
                    seen.get_item(4)?,
                    ring_object,
                ],
            )?;
            store_dict.set_item(intern!(py, "_seen"), snapshot)?;
        }
        self.followed_word.get().store(published.sequence as i64);
        Ok(())
    }

    /// The store's `_seen` (a `SharedSnapshot`: tail, then three versions, then the
    /// ring sequence) given the new `tail` and `ring_seq` in place, when no one but the
    /// store's `__dict__` (and `seen`, the caller's reference) holds it: no one can then
    /// see it change, and the old one is not freed and a new one made per append. False
    /// when it is held elsewhere (the caller makes a new one).
    fn renew_snapshot(
        &self,
        py: Python<'_>,
        seen: &Bound<'_, PyTuple>,
        (tail, tail_value): (&Bound<'_, PyAny>, u64),
        (ring_seq, ring_value): (Option<&Bound<'_, PyAny>>, u64),
    ) -> bool {
        if !seen.get_type().is(self.snapshot_type.bind(py)) || seen.len() != 6 {
            return false;
        }
        let object = seen.as_ptr();
        // The core's own reference when it knows this snapshot's words (follow.rs).
        let known = self.seen_words.holds(seen.as_any());
        let owners = 2 + isize::from(known);
        // SAFETY: the GIL is held and `seen` is a live tuple of the snapshot type (a
        // tuple subclass with the tuple's layout, `check_record_type`) with 6 items. Its
        // count is 2 (the store's `__dict__` and `seen`; 3 with the core's own in
        // `seen_words`, which is moved with it below), so no other reference can see
        // the items change, as CPython itself refills a tuple no one else holds.
        // Each new item is a reference we own (SET_ITEM steals it); the old one is let
        // go after it is replaced, so the tuple is whole if that runs any code. The ring
        // sequence's int, when the tuple is its one holder, is given the new value in
        // place (`renew_int_at`; None given: else made here), before anything changes.
        unsafe {
            if ffi::Py_REFCNT(object) != owners {
                return false;
            }
            let old_ring = ffi::PyTuple_GET_ITEM(object, 5);
            if !super::renew_int_at(py, old_ring, ring_value) {
                let new = match ring_seq {
                    Some(ring_seq) => ring_seq.clone(),
                    None => match super::int_of(py, ring_value) {
                        Ok(made) => made,
                        Err(_) => return false, // the caller makes it, or says why not
                    },
                };
                ffi::PyTuple_SET_ITEM(object, 5, new.into_ptr());
                ffi::Py_DECREF(old_ring);
            }
            let old = ffi::PyTuple_GET_ITEM(object, 0);
            ffi::PyTuple_SET_ITEM(object, 0, tail.clone().into_ptr());
            ffi::Py_DECREF(old);
        }
        if known {
            self.seen_words.renewed(tail_value, ring_value);
        }
        true
    }

    #[inline(never)] // named in profiles: the pen section (PERFORMANCE.md)
    fn under_pen<'py>(
        &self,
        py: Python<'py>,
        plan: &Planned<'_, 'py>,
        waited: bool,
    ) -> Step<(Single<'py>, i64, Unsettled<'py>)> {
        let mut ready = self.ready_deferring(py, waited, true)?;
        let unfollowed = ready.unfollowed.take();
        match self.write_single(py, plan, &ready, unfollowed.as_deref()) {
            Ok((single, end, written)) => Ok((
                single,
                end,
                Unsettled {
                    unfollowed,
                    ..written
                },
            )),
            Err(stop) => {
                if let Some(work) = unfollowed {
                    self.settle_follow(py, *work, true)?;
                }
                Err(stop)
            }
        }
    }

    /// `under_pen`'s write once `ready`.
    fn write_single<'py>(
        &self,
        py: Python<'py>,
        plan: &Planned<'_, 'py>,
        ready: &Ready<'py>,
        unfollowed: Option<&follow::Unfollowed<'py>>,
    ) -> Step<(Single<'py>, i64, Unsettled<'py>)> {
        let Planned {
            state, topic, body, ..
        } = plan;
        let (length, round_robin, queue_id) = (plan.length, plan.round_robin, plan.queue_id);
        // The queue's room again when a follow (or a wait) may have moved its end: a
        // deferred follow's raised queue from the follow (its end in this process is
        // set after the pen), else the plan's (only queue ends moved) or found again.
        let (queue, last, queue_offset, slot) = match ready.moved {
            Moved::Nothing => (
                plan.queue.clone(),
                plan.last.clone(),
                plan.queue_offset,
                plan.slot,
            ),
            moved => {
                let planned = if moved == Moved::Ends {
                    (
                        plan.queue.clone(),
                        plan.last.clone(),
                        plan.queue_offset,
                        plan.slot,
                    )
                } else {
                    self.still_planned(py, state, plan.planned_topic, moved)?;
                    let room = self.queue_room(py, state, queue_id, 1)?;
                    (room.queue, room.last, room.base, room.slot)
                };
                match unfollowed.and_then(|u| u.room(&planned.0)) {
                    Some((queue, last, end, first, entries)) => {
                        let Some(slot) = end.checked_sub(first).filter(|s| *s < entries) else {
                            return declined(); // a new queue file: the long way makes it
                        };
                        (queue.clone(), last.clone(), end, slot)
                    }
                    None => planned,
                }
            }
        };
        let (queue_held, last_held) = (queue, last);
        let (queue, last) = (&queue_held, &last_held);
        let tail = ready.tail;
        let end = tail + length as u64;
        let map = self.room(ready, end)?;
        let now = ready.now;
        // 4. The entry first (a failed pwrite leaves nothing in the segment), then the
        //    record into the mapping; the write begun (3) once the queue's file is open.
        let entry = Entry {
            commit_offset: tail,
            size: length as u32,
            tag_hash: plan.extras.tag_hash,
        }
        .packed();
        let stored = if io_seam::planned() {
            let fd = self.queue_file_fd(py, queue, last)?;
            Self::begin(ready, end);
            self.store_entries(queue, fd, &entry, slot)
        } else {
            self.store_entry_direct(py, (queue, last), &entry, slot, || Self::begin(ready, end))?
        };
        if let Err(error) = stored {
            return Err(self.write_failed(py, error, tail));
        }
        let Some(out) = map.slice((tail - ready.base) as usize, length) else {
            return declined();
        };
        let fields = Fields {
            commit_offset: tail,
            queue_offset,
            born_ms: now,
            store_ms: now,
            queue_id: queue_id as u32,
            topic,
            tag: plan.extras.tag,
            keys: b"",
            properties: plan.extras.properties,
        };
        if io_seam::planned() {
            // Under a fault plan: the record shown to it at its site (io_seam.rs), then
            // stored; a failure fails the write as a failed entry does.
            let mut record = vec![0u8; length];
            encode_at(&mut record, &fields, body);
            let segment_fd = i32::try_from(get_int(self.slots.fd, &ready.segment)?)
                .map_err(|_| Stop::Declined)?;
            let at = tail - ready.base;
            let stored = Self::write_site(py, Site::LogRecord, segment_fd, at, &record, || {
                out.copy_from_slice(&record);
                Ok(())
            });
            if let Err(error) = stored {
                drop(map);
                return Err(self.write_failed(py, error, tail));
            }
        } else {
            encode_at(out, &fields, body);
        }
        drop(map);
        self.write_marks(py, queue, queue_offset..queue_offset + 1, now, tail)?;
        // 6: publish. 5 and 7, this process's state as the long way leaves it and
        //    seen, after the pen is let go (`settle_single`).
        let published =
            self.publish_shared(ready, end, plan.topic_id, &[(queue_id, queue_offset + 1)])?;
        self.appended.fetch_add(1, Ordering::Relaxed);
        let unsettled = Unsettled {
            queue: queue_held,
            last: last_held,
            queue_end: queue_offset + 1,
            round_robin: round_robin + i64::from(plan.turns),
            published,
            unfollowed: None,
        };
        Ok((
            ((ready.tail_object.clone(), tail), queue_offset, now),
            end as i64,
            unsettled,
        ))
    }

    /// A single append's steps 5 and 7 (`under_pen`), after the pen is let go: the
    /// topic's round-robin, the queue's end, change count and dirty file, the log's
    /// tail, `_seen`, the sequence followed.
    #[inline(never)] // named in profiles: the pen section (PERFORMANCE.md)
    /// The queue's old end is handed back when it is the int of the append's queue
    /// offset (the result gives that object, not a new one of the same value).
    fn settle_single<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        unsettled: Unsettled<'py>,
    ) -> Step<Option<Bound<'py, PyAny>>> {
        if let Some(work) = unsettled.unfollowed {
            self.settle_follow(py, *work, false)?;
        }
        let round_robin = &self.slots.round_robin;
        if !u64::try_from(unsettled.round_robin)
            .is_ok_and(|turn| round_robin.renew_int(state, turn))
        {
            round_robin.set(state, new_int(py, unsettled.round_robin)?);
        }
        let old_end =
            self.moved_queue(py, &unsettled.queue, &unsettled.last, unsettled.queue_end)?;
        self.published_here(py, &unsettled.published)?;
        let queue_offset = unsettled.queue_end as i64 - 1;
        Ok(old_end.filter(|old| super::int_value(old) == Some(queue_offset)))
    }

    /// The time marks of the queue offsets in `offsets` that the index marks (every
    /// `TIME_INDEX_INTERVAL`-th), stored at `now`: the bytes `TimeIndex.write` writes
    /// (`MARK`: the offset plus one, the store ms), with one `pwrite` into the
    /// descriptor the time index's `HandleCache` holds open, and the index left dirty
    /// (the next sync fsyncs it), as `TimeIndex.write` leaves it. When the cache holds
    /// no descriptor for it (its first mark since open, or evicted) the core calls
    /// `TimeIndex.write` itself, which opens (or creates) the file and caches it. A
    /// failed write fails the store (`write_failed`: all of it past `tail` cleared).
    fn write_marks(
        &self,
        py: Python<'_>,
        queue: &Bound<'_, PyAny>,
        offsets: std::ops::Range<u64>,
        now: i64,
        tail: u64,
    ) -> Step<()> {
        let first = offsets.start.div_ceil(TIME_INDEX_INTERVAL) * TIME_INDEX_INTERVAL;
        if first >= offsets.end {
            return Ok(());
        }
        let marks: Vec<u64> = (first..offsets.end)
            .step_by(TIME_INDEX_INTERVAL as usize)
            .collect();
        let time_index = get(self.slots.time_index, queue)?;
        let written = match self.time_index_fd(py, &time_index)? {
            Some(fd) => {
                let mut packed = Vec::with_capacity(marks.len() * MARK_SIZE);
                for &mark in &marks {
                    packed.extend_from_slice(&(mark + 1).to_le_bytes());
                    packed.extend_from_slice(&now.to_le_bytes());
                }
                // Consecutive marks of one queue sit in consecutive slots.
                let position = first / TIME_INDEX_INTERVAL * MARK_SIZE as u64;
                let written = Self::write_at_site(py, Site::TimeIndexMark, fd, &packed, position);
                if written.is_ok() {
                    self.slots
                        .marks_dirty
                        .set(&time_index, PyBool::new(py, true).to_owned().into_any());
                    self.marked.fetch_add(marks.len() as u64, Ordering::Relaxed);
                }
                written
            }
            None => {
                let marks: Vec<(u64, i64)> = marks.iter().map(|&mark| (mark, now)).collect();
                time_index
                    .call_method1(intern!(py, "write"), (marks,))
                    .map(drop)
            }
        };
        match written {
            Ok(()) => Ok(()),
            Err(error) if error.is_instance_of::<PyOSError>(py) => {
                Err(self.write_failed(py, error, tail))
            }
            Err(error) => Err(Stop::Failed(error)),
        }
    }

    /// The descriptor `time_index`'s `HandleCache` holds open for it, or None (not
    /// open now; or not a plain `TimeIndex` of the core's interval: the caller calls
    /// its `write`). The GIL is held from here to the caller's `pwrite`, and the cache
    /// closes a descriptor only after taking it out of `_open` (under the GIL), so one
    /// found there stays open for the write.
    fn time_index_fd(&self, py: Python<'_>, time_index: &Bound<'_, PyAny>) -> Step<Option<i32>> {
        // Called after the write began: nothing here declines (an unset or odd slot
        // leaves the mark to `TimeIndex.write`).
        let slots = &self.slots;
        if !time_index.get_type().is(slots.time_index_type.bind(py)) {
            return Ok(None);
        }
        let interval = slots.interval.get(time_index).map(|i| i.extract::<u64>());
        if !matches!(interval, Some(Ok(TIME_INDEX_INTERVAL))) {
            return Ok(None);
        }
        let Some(handles) = slots.handles.get(time_index) else {
            return Ok(None);
        };
        let Ok(open) = handles.getattr(intern!(py, "_open"))?.cast_into::<PyDict>() else {
            return Ok(None);
        };
        match open.get_item(time_index)? {
            Some(fd) => Ok(i32::try_from(fd.extract::<i64>()?).ok()),
            None => Ok(None),
        }
    }

    /// The descriptor of `last`, the last file of `queue`, opened here for writing its
    /// entries (kept while it stays the queue's last file; at most `OPEN_FILES`).
    /// Make room in `tails` for a batch's `count` queue files before their descriptors
    /// are taken, so that taking one never closes another of the same batch; declined
    /// when they are more than it keeps.
    fn room_for_fds(&self, count: usize) -> Step<()> {
        if count > self.open_files {
            return declined();
        }
        let mut tails = self.tails.lock().map_err(|_| Stop::Declined)?;
        if tails.len() + count > self.open_files {
            tails.clear();
        }
        Ok(())
    }

    fn queue_file_fd(
        &self,
        py: Python<'_>,
        queue: &Bound<'_, PyAny>,
        last: &Bound<'_, PyAny>,
    ) -> Step<i32> {
        let mut tails = self.tails.lock().map_err(|_| Stop::Declined)?;
        Ok(self.tail_of(py, &mut tails, queue, last)?.fd.as_raw_fd())
    }

    /// A single append's entry (`data`, at `slot` of the last file `last` of `queue`)
    /// stored as `store_entries` stores it with no fault plan installed
    /// (`store_entries_direct`), with the file found (or opened) under the same hold of
    /// `tails` (`queue_file_fd`'s): `begin` runs between, once the file is there.
    /// Declined (before `begin`) as `queue_file_fd`; the store's own failure inside.
    fn store_entry_direct(
        &self,
        py: Python<'_>,
        (queue, last): (&Bound<'_, PyAny>, &Bound<'_, PyAny>),
        data: &[u8],
        slot: u64,
        begin: impl FnOnce(),
    ) -> Step<PyResult<()>> {
        let at = slot * ENTRY_SIZE as u64;
        let mut tails = self.tails.lock().map_err(|_| Stop::Declined)?;
        let tail = self.tail_of(py, &mut tails, queue, last)?;
        let fd = tail.fd.as_raw_fd();
        begin();
        if let (Some(window), Ok(at)) = (tail.window.as_mut(), usize::try_from(at)) {
            match window.store(fd, data, at) {
                Ok(reserved) => {
                    if reserved {
                        self.reserved.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(Ok(()));
                }
                Err(NotStored::Failed(error)) => {
                    return Ok(Err(PyOSError::new_err((
                        error.raw_os_error().unwrap_or(libc::EIO),
                        error.to_string(),
                    ))));
                }
                Err(NotStored::Unmapped) => tail.window = None,
            }
        }
        Ok(Self::write_at(fd, data, at))
    }

    /// The kept last file of `queue` when it is `last`, else `last` opened and kept in
    /// its place (`tails` emptied first when full).
    fn tail_of<'t>(
        &self,
        py: Python<'_>,
        tails: &'t mut ByAddress<Tail>,
        queue: &Bound<'_, PyAny>,
        last: &Bound<'_, PyAny>,
    ) -> Step<&'t mut Tail> {
        let key = queue.as_ptr() as usize;
        if tails
            .get(&key)
            .is_some_and(|kept| kept.file.bind(py).is(last))
        {
            return tails.get_mut(&key).ok_or(Stop::Declined);
        }
        let path: String = last.getattr(intern!(py, "_path"))?.extract()?;
        let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
        else {
            return declined(); // gone or refused: the long way reports it
        };
        if tails.len() >= self.open_files {
            tails.clear();
        }
        let fd = OwnedFd::from(file);
        let raw = fd.as_raw_fd();
        let entries = get_u64(self.slots.entries, last)?;
        let window = usize::try_from(entries * ENTRY_SIZE as u64)
            .ok()
            .and_then(|len| QueueWindow::open(raw, len));
        tails.insert(
            key,
            Tail {
                file: last.clone().unbind(),
                fd,
                window,
            },
        );
        debug_assert_eq!(tails.get(&key).map(|t| t.fd.as_raw_fd()), Some(raw));
        tails.get_mut(&key).ok_or(Stop::Declined)
    }
}

/// Where `KeyIndexDispatch` stands in the store's dispatchers (nativeappend.py's
/// `_KNOWN_DISPATCHERS`, which the core is only made for).
const KEY_INDEX_DISPATCHER: usize = 1;
