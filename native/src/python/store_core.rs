//! The store core: the hot read state of one open store in one process (its segment
//! table and the shared state's sequence word), so that a `get`, and a `read` or a
//! filtered scan's step of a queue with files of its own or of a shared topic's
//! (shared_read.rs), is one native call.
//!
//! The core never decides what damage is: whatever it does not accept at once (an id
//! not written as this store writes them, an offset outside the log, a record that fails
//! a check, a closed or forked store) it declines with None, and the engine's Python
//! path (the long way) says what is wrong, as it always has.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PyString, PyType};
use pyo3::{PyTraverseError, PyVisit};

use super::filter::Filter;
use super::mapped::{Copied, Mapping};
use super::reader::{checked_message, stored_message, Extras, Shared};
use super::words::{Refusals, REFUSED_CLOSED, REFUSED_FORKED};
use super::{check_record_type, id_prefix};
use crate::consume_queue::ENTRY_SIZE;
use crate::prefetch;
use crate::reader::{self as walk, Found, Stop, Wanted};
use crate::record::{self, Header, Parts};

mod shared_read;

/// Where the shared state keeps its sequence word (sharedstate.py `_SEQUENCE_AT`): a
/// little-endian u64 that changes with every write another process publishes.
const SEQUENCE_AT: usize = 8;
/// The followed sequence before the first follow: no sequence word has this value.
const NEVER_FOLLOWED: u64 = u64::MAX;
/// Topic names kept as strings; past this many the cache starts again.
const TOPIC_NAMES: usize = 4096;
/// `reading.MAX_READ_MESSAGES`: a read asks for 1 to this many messages.
const MAX_READ_MESSAGES: i64 = 10_000;
/// `read`'s default `max_messages`.
const DEFAULT_READ_MESSAGES: usize = 32;
/// Entries a filtered scan reads at a time (its clock is looked at between them).
const FILTER_STEP: usize = 4096;
/// How many records an entry walk checks before it hands them over (`walk_queue`): a
/// few, so each is evaluated or copied while the check has left its lines in the CPU's
/// nearest caches, not after a whole chunk of entries has pushed them out. Measured on
/// the property filter over 1,000,000 records of 1 KiB (ns a record): 4: 187-201, 8:
/// 193-207, 16: 205-222, 48: 208-226. (Each call asks again for the records ahead of
/// its first entry, already asked for by the call before: leaving that out measured
/// worse, 220-236 against 191-200. Session 49 measured one walk a chunk handing each
/// record over as it is checked, each record asked for once: 1,448-1,557 instructions a
/// record of the property filter against 1,619 here, but 146-196 ns against 121-147;
/// asking again every 4 records in that walk brought the time back, and the
/// instructions too; here, a prefetch loop without a bounds check a line took 139-154 ns
/// against 116-130: see docs/PERFORMANCE.md, "filter34-s49".)
const HAND_OVER: usize = 4;
/// How many of a chunk's first records an entry walk asks for together before it
/// checks the first (`ask_for_records`), how many bytes of each, and in at most how
/// many segments.
const ASK_FIRST: usize = 16;
const ASK_BYTES: usize = 256;
/// How many segments (their exports) an entry walk holds at once.
const HELD_SEGMENTS: usize = 4;
/// How many records ahead of the one it makes `get_many` asks for (their first lines),
/// and how many bytes of each.
const MANY_AHEAD: usize = 4;
const MANY_AHEAD_BYTES: usize = 128;

/// Topic names by their bytes, hashed by FNV-1a (a few bytes each): SipHash cost ~190
/// instructions a `get` for the one look-up.
type ByName<V> = HashMap<Vec<u8>, V, BuildHasherDefault<NameHasher>>;

struct NameHasher(u64);

impl Default for NameHasher {
    fn default() -> NameHasher {
        NameHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for NameHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The topic names made as strings: the last one found (a store's gets and reads mostly
/// come from one topic: its bytes compared, nothing hashed), then all by their bytes.
#[derive(Default)]
struct TopicNames {
    last: Option<(Vec<u8>, Py<PyString>)>,
    by_name: ByName<Py<PyString>>,
}

/// One mapped segment: its first commit offset, the offset past its end, its mapping.
struct Mapped {
    base: u64,
    end: u64,
    map: Py<PyAny>,
}

/// The segment table as read from the commit log's list of segments, with what tells
/// it is still that list's: its length and its first and last segment (held, so no
/// other segment can take their place in memory). The list only ever gains segments at
/// its end and loses them at either end, so an unchanged length and ends mean unchanged.
#[derive(Default)]
struct Table {
    len: usize,
    first: Option<Py<PyAny>>,
    last: Option<Py<PyAny>>,
    segments: Vec<Mapped>,
}

impl Table {
    fn read(list: &Bound<'_, PyList>) -> PyResult<Table> {
        let py = list.py();
        let mut segments = Vec::with_capacity(list.len());
        for segment in list.iter() {
            segments.push(Mapped {
                base: segment.getattr(intern!(py, "base"))?.extract()?,
                end: segment.getattr(intern!(py, "end"))?.extract()?,
                map: segment.getattr(intern!(py, "map"))?.unbind(),
            });
        }
        Ok(Table {
            len: list.len(),
            first: list.iter().next().map(Bound::unbind),
            last: list.iter().last().map(Bound::unbind),
            segments,
        })
    }

    fn is_of(
        &self,
        len: usize,
        first: *mut pyo3::ffi::PyObject,
        last: *mut pyo3::ffi::PyObject,
    ) -> bool {
        self.len == len
            && self.first.as_ref().is_some_and(|s| s.as_ptr() == first)
            && self.last.as_ref().is_some_and(|s| s.as_ptr() == last)
    }

    /// The segment holding `offset`: its base, its end and its mapping.
    fn find(&self, py: Python<'_>, offset: u64) -> Option<(u64, u64, Py<PyAny>)> {
        let index = self
            .segments
            .partition_point(|s| s.base <= offset)
            .checked_sub(1)?;
        let segment = &self.segments[index];
        (offset < segment.end).then(|| (segment.base, segment.end, segment.map.clone_ref(py)))
    }
}

/// A read-only view of a mapping's bytes for one call, exported as `Bytes` exports it
/// but without its heap allocation and format check (a get makes two of these).
struct View {
    buffer: ffi::Py_buffer,
}

impl View {
    fn of(object: &Bound<'_, PyAny>) -> Option<View> {
        let mut buffer = std::mem::MaybeUninit::<ffi::Py_buffer>::uninit();
        // SAFETY: `object` is a live object (the caller holds it and the GIL); on success
        // PyObject_GetBuffer fills `buffer` and takes an export that `Drop` releases.
        if unsafe {
            ffi::PyObject_GetBuffer(object.as_ptr(), buffer.as_mut_ptr(), ffi::PyBUF_SIMPLE)
        } != 0
        {
            // SAFETY: the GIL is held; a refused export leaves an exception to clear.
            unsafe { ffi::PyErr_Clear() };
            return None;
        }
        // SAFETY: PyObject_GetBuffer succeeded, so it initialised `buffer`.
        Some(View {
            buffer: unsafe { buffer.assume_init() },
        })
    }

    /// The length of `slice()`, as a commit offset's distance is compared with it.
    #[inline]
    fn len(&self) -> u64 {
        if self.buffer.buf.is_null() {
            return 0;
        }
        u64::try_from(self.buffer.len).unwrap_or(0)
    }

    fn slice(&self) -> &[u8] {
        let len = usize::try_from(self.buffer.len).unwrap_or(0);
        if len == 0 || self.buffer.buf.is_null() {
            return &[];
        }
        // SAFETY: a PyBUF_SIMPLE export is `len` contiguous bytes at `buf`, kept alive
        // (an mmap refuses to close or resize while exported) until `Drop` releases it,
        // which bounds the slice's lifetime. Only bytes below the published tail are
        // read, which no writer changes.
        unsafe { std::slice::from_raw_parts(self.buffer.buf as *const u8, len) }
    }
}

impl Drop for View {
    fn drop(&mut self) {
        // SAFETY: `buffer` holds an export taken in `of` and not yet released; every
        // View lives inside a call that holds the GIL (it is not Send).
        unsafe { ffi::PyBuffer_Release(&mut self.buffer) };
    }
}

/// What `read` needs of a `QueueFile`, all set when it is made: read once per object.
struct FileFacts {
    /// The object, held so that its address names no other while it is cached (and the
    /// key its handle cache's table knows it by).
    file: Py<PyAny>,
    first_index: u64,
    entries: u64,
    /// `file.handles._open`: owner → open descriptor.
    open: Py<PyDict>,
    /// The file mapped, once it has been read through an open descriptor; and whether
    /// it may not be (it could not be, or was cut short under its mapping).
    map: Option<Mapping>,
    unmappable: bool,
}

/// Where a read's entries are: the queue file (its key in `StoreCore::queue_files` and
/// its descriptor when the handle cache holds it open), the first entry's slot in it,
/// and how many of the entries wanted it holds from there.
struct FileAt {
    key: usize,
    fd: Option<i32>,
    slot: u64,
    count: u64,
}

/// Queue files' facts kept; past this many the cache starts again.
const QUEUE_FILES: usize = 4096;
/// Queue files mapped at once; past this many, the others are read with `pread` until
/// the facts' cache starts again (a read of a file newly mapped pays an `fstat`, an
/// `mmap` and a page fault: reads over more files than this, in turn, would pay them
/// again and again).
const MAPPED_FILES: usize = 1024;

/// The queue files' facts (by the `QueueFile` object's address), and which of them are
/// mapped, with where the sweep of those is (`StoreCore::sweep_one`).
#[derive(Default)]
struct QueueFiles {
    facts: HashMap<usize, FileFacts>,
    mapped: Vec<usize>,
    sweep: usize,
}

impl QueueFiles {
    /// Let go of the mapping of the file `key`, if it has one.
    fn unmap(&mut self, key: usize) {
        if let Some(facts) = self.facts.get_mut(&key) {
            if facts.map.take().is_some() {
                if let Some(at) = self.mapped.iter().position(|&k| k == key) {
                    self.mapped.swap_remove(at);
                }
            }
        }
    }
}

/// How many bodies `get` keeps to fill again, and the lengths it keeps: bodies above
/// 512 bytes are `malloc`'d (CPython's small-object allocator serves the rest), and a
/// 1 KiB body's bytes object (1,057 bytes) is past glibc's per-thread cache (up to
/// 1,032): `malloc` and `free` cost ~565 instructions a `get`, a third more than its
/// copy (docs/PERFORMANCE.md, "get29-s45"). Two, so that a caller holding the last
/// message while it asks for the next (`m = store.get(i)` in a loop) finds the one
/// before free. At most 64 KiB each: what a closed-over core holds is bounded.
const KEPT_BODIES: usize = 2;
const KEPT_BODY_FROM: usize = 513;
const KEPT_BODY_TO: usize = 64 << 10;

/// The bodies of the last `get`s (`StoreCore::body`), and which slot the next new one
/// takes.
#[derive(Default)]
struct KeptBodies {
    slots: [Option<Py<PyBytes>>; KEPT_BODIES],
    next: usize,
}

/// A lock that a panic elsewhere does not make unusable (what it guards is a cache).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A number read from a dict, kept with the dict's version (`dict_version`, PEP 509's
/// tag, which CPython 3.11 changes at every change of any item) when it was read: while
/// the version is the same, so is the number, and it is not looked up again. Touched
/// with the GIL held only.
#[derive(Default)]
struct KeptByVersion {
    /// 0: nothing kept (a dict holding anything has had a version past 0).
    version: AtomicU64,
    value: AtomicU64,
}

impl KeptByVersion {
    /// The number kept, if the dict's version is still `version`.
    fn get(&self, version: Option<u64>) -> Option<u64> {
        let version = version.filter(|&v| v != 0)?;
        (self.version.load(Ordering::Relaxed) == version)
            .then(|| self.value.load(Ordering::Relaxed))
    }

    /// Keep `value`, read from the dict at `version` (read before the look-up).
    fn keep(&self, version: Option<u64>, value: u64) {
        if let Some(version) = version {
            self.value.store(value, Ordering::Relaxed);
            self.version.store(version, Ordering::Relaxed);
        }
    }
}

/// The characters of `text` when it is a compact ASCII string (one byte each, stored
/// in the object: every id the store writes, and any a caller builds from its parts);
/// None for any other string, which can be no id the core reads (the long way judges it).
/// Read in place: `to_str` asks CPython for its UTF-8 form, a call of its own.
fn ascii<'a>(text: &'a Bound<'_, PyString>) -> Option<&'a [u8]> {
    let object = text.as_ptr();
    // SAFETY: `object` is a live str (the caller holds it and the GIL). The flags read
    // are its header's; a compact ASCII string holds its `length` one-byte characters
    // right after that header, and they never change while it lives, which the borrow
    // of `text` outlives.
    unsafe {
        if ffi::PyUnicode_IS_COMPACT_ASCII(object) == 0 {
            return None;
        }
        let length = usize::try_from(ffi::PyUnicode_GET_LENGTH(object)).ok()?;
        Some(std::slice::from_raw_parts(
            ffi::PyUnicode_1BYTE_DATA(object),
            length,
        ))
    }
}

/// The shared state's sequence word's page, mapped from the store's `_shared.fd` (see
/// `StoreCore::state`); None for a store without one, or when it cannot be mapped.
fn state_mapping(store: &Bound<'_, PyAny>) -> Option<Mapping> {
    let py = store.py();
    let fd: i32 = store
        .getattr(intern!(py, "_shared"))
        .and_then(|shared| shared.getattr(intern!(py, "fd")))
        .and_then(|fd| fd.extract())
        .ok()?;
    Mapping::of(fd, SEQUENCE_AT + 8)
}

/// The cycle collector paused while a `get_many` makes a message (and started again as
/// it was when dropped). A message is three containers (its tuple, its keys list, its
/// properties dict), none of them tracked, which CPython counts as allocations all the
/// same: the messages of one call, all alive until it returns, would set off a
/// collection every ~230 of them (each walking the young objects, every tenth the older
/// ones), ~430 instructions a message at 1,000 a call (docs/PERFORMANCE.md,
/// "get29-s45"). Paused, the count goes on rising and the collection runs once, at the
/// first allocation after. No Python code runs while paused: only the message's making.
struct CollectorPaused {
    was_on: bool,
}

impl CollectorPaused {
    fn now() -> CollectorPaused {
        // SAFETY: the GIL is held (the caller holds a `Python` token for the call).
        CollectorPaused {
            was_on: unsafe { ffi::PyGC_Disable() } == 1,
        }
    }
}

impl Drop for CollectorPaused {
    fn drop(&mut self) {
        if self.was_on {
            // SAFETY: as in `now`: the same call, the GIL still held.
            unsafe { ffi::PyGC_Enable() };
        }
    }
}

/// The hot read state of one open store in this process (see the module docs). Made by
/// the store's open with the store (whose `_follow` catches up with other processes and
/// whose `_refusals` say it may no longer be used), its commit log (`tail`, `segments`),
/// the shared state's mapping, the store's id prefix and the result type.
#[pyclass(frozen, module = "storeadapter.engine._native")]
pub struct StoreCore {
    prefix: [u8; 8],
    store: Py<PyAny>,
    segments: Py<PyList>,
    shared: Py<PyAny>,
    /// The shared state's first page mapped by the core itself (from the store's
    /// `_shared.fd`), so that the sequence word is one load: an export of `shared`'s
    /// buffer and its release cost ~90 instructions a `get`. None when it could not be
    /// mapped: then `shared` is read as before.
    state: Option<Mapping>,
    message_type: Py<PyType>,
    /// The registry's topics (name → Topic), and the one queue type read here.
    topics_by_name: Py<PyDict>,
    queue_type: Py<PyType>,
    /// The namespace of the engine's file seam (`fileio.__dict__`) and the seam's own
    /// `pread`: entries are read here only while `fileio.pread` is that one (a fault
    /// test that replaced it sees every read). A dict, read without an attribute look-up.
    fileio: Py<PyDict>,
    genuine_pread: Py<PyAny>,
    /// `fileio`'s version (`dict_version`) when its `pread` was last found to be the
    /// seam's own, 0 for none: while it is the same, it still is (not looked up again).
    pread_seen: AtomicU64,
    /// The store's refusals (words.rs): closed or forked, the core declines (a failed
    /// writer or a full disk refuses writes only). One load, no look-up.
    refusals: Py<Refusals>,
    /// The commit log's `__dict__`, where its `tail` lives (read without a look-up
    /// through the log's classes, as the append core reads and moves it).
    log_dict: Py<PyDict>,
    /// The log's tail as last read, with `log_dict`'s version then: a reader's process
    /// changes that dict only when it follows, a writer's at every append.
    tail_seen: KeptByVersion,
    /// The topic a read last found by its name: the name (a str, held), the topic's
    /// address (not held: the registry's dict holds it while its version is the same;
    /// a topic holds the store, and the core must not) and `topics_by_name`'s version.
    topic_seen: Mutex<Option<(Py<PyAny>, usize, u64)>>,
    followed: AtomicU64,
    closed: AtomicBool,
    table: Mutex<Table>,
    topics: Mutex<TopicNames>,
    /// What never changes of a queue file (`QueueFile`: its first index, its entries and
    /// its handle cache's table of open descriptors), by the object, which is held.
    /// A file is mapped only while the handle cache holds its descriptor open (it
    /// closes those of files it deletes): a mapping of a deleted file would keep its
    /// space in use.
    queue_files: Mutex<QueueFiles>,
    /// The bodies of the last `get`s, to fill again once no one else holds them.
    bodies: Mutex<KeptBodies>,
    /// A shared topic's read (shared_read.rs): the classes it goes through, and the
    /// block stores read (their facts and their files' mappings).
    shared_classes: shared_read::SharedClasses,
    block_stores: Mutex<shared_read::BlockStores>,
}

#[pymethods]
impl StoreCore {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        store: &Bound<'_, PyAny>,
        log: &Bound<'_, PyAny>,
        shared: &Bound<'_, PyAny>,
        prefix: &str,
        message_type: &Bound<'_, PyType>,
        topics: &Bound<'_, PyDict>,
        queue_type: &Bound<'_, PyType>,
        fileio: &Bound<'_, PyAny>,
        genuine_pread: &Bound<'_, PyAny>,
        shared_types: (
            Bound<'_, PyType>,
            Bound<'_, PyType>,
            Bound<'_, PyType>,
            Bound<'_, PyType>,
        ),
    ) -> PyResult<StoreCore> {
        check_record_type(message_type)?;
        let (topic_type, lazy_type, block_queue_type, block_file_type) = shared_types;
        let segments = log
            .getattr(intern!(store.py(), "segments"))?
            .cast_into::<PyList>()?;
        Ok(StoreCore {
            prefix: id_prefix(prefix)?,
            store: store.clone().unbind(),
            segments: segments.unbind(),
            shared: shared.clone().unbind(),
            state: state_mapping(store),
            message_type: message_type.clone().unbind(),
            topics_by_name: topics.clone().unbind(),
            queue_type: queue_type.clone().unbind(),
            fileio: fileio
                .getattr(intern!(store.py(), "__dict__"))?
                .cast_into::<PyDict>()?
                .unbind(),
            genuine_pread: genuine_pread.clone().unbind(),
            pread_seen: AtomicU64::new(0),
            refusals: store
                .getattr(intern!(store.py(), "_refusals"))?
                .cast_into::<Refusals>()?
                .unbind(),
            log_dict: log
                .getattr(intern!(store.py(), "__dict__"))?
                .cast_into::<PyDict>()?
                .unbind(),
            tail_seen: KeptByVersion::default(),
            topic_seen: Mutex::new(None),
            followed: AtomicU64::new(NEVER_FOLLOWED),
            closed: AtomicBool::new(false),
            table: Mutex::new(Table::default()),
            topics: Mutex::new(TopicNames::default()),
            queue_files: Mutex::new(QueueFiles::default()),
            bodies: Mutex::new(KeptBodies::default()),
            shared_classes: shared_read::SharedClasses::new(
                &topic_type,
                &lazy_type,
                &block_queue_type,
                &block_file_type,
            )?,
            block_stores: Mutex::new(shared_read::BlockStores::default()),
        })
    }

    /// The message with id `message_id` (a str), checked as `MessageStore.get` checks
    /// it; None when the core declines it (see the module docs): the long way answers.
    fn get<'py>(
        &self,
        py: Python<'py>,
        message_id: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.closed.load(Ordering::Acquire) {
            return Ok(None);
        }
        let Some(commit_offset) = self.canonical_offset(message_id) else {
            return Ok(None);
        };
        if self.refused() {
            return Ok(None);
        }
        self.follow(py)?;
        let Some(tail) = self.tail(py)? else {
            return Ok(None);
        };
        if commit_offset >= tail {
            return Ok(None);
        }
        let Some((base, map)) = self.locate(py, commit_offset)? else {
            return Ok(None);
        };
        let Some(data) = View::of(map.bind(py)) else {
            return Ok(None); // a mapping closed under us: the long way says so
        };
        self.message_at(py, data.slice(), base, commit_offset, message_id)
    }

    /// `get` of each id of `message_ids` (a list), the records read in commit-offset
    /// order (each segment's mapping exported once, its records in the order they lie,
    /// the next ones asked for while one is made), the answers in the list's order.
    /// Returns that list, with None for each id the core declines, and the indexes of
    /// those in increasing order: the store's `get_many` takes them the long way.
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        message_ids: &Bound<'py, PyList>,
    ) -> PyResult<(Bound<'py, PyList>, Vec<usize>)> {
        let count = message_ids.len();
        let mut declined = Vec::new();
        let tail = if self.closed.load(Ordering::Acquire) || self.refused() {
            None
        } else {
            self.follow(py)?;
            self.tail(py)?
        };
        let mut wanted = Vec::with_capacity(count);
        for (index, message_id) in message_ids.iter().enumerate() {
            match (tail, self.canonical_offset(&message_id)) {
                (Some(tail), Some(offset)) if offset < tail => wanted.push((offset, index)),
                _ => declined.push(index),
            }
        }
        wanted.sort_unstable();
        let mut found: Vec<Option<Bound<'py, PyAny>>> = (0..count).map(|_| None).collect();
        let mut segment: Option<(u64, u64, View)> = None;
        for (at, &(offset, index)) in wanted.iter().enumerate() {
            if !segment
                .as_ref()
                .is_some_and(|(base, end, _)| *base <= offset && offset < *end)
            {
                segment = None;
                if let Some((base, end, map)) = self.locate_span(py, offset)? {
                    segment = View::of(map.bind(py)).map(|view| (base, end, view));
                }
            }
            let Some((base, end, view)) = &segment else {
                declined.push(index);
                continue;
            };
            let data = view.slice();
            // The record a few ahead asked for now (its first lines: its length is not
            // known before they come), so that its miss overlaps this one's work.
            if let Some(&(ahead, _)) = wanted.get(at + MANY_AHEAD) {
                if ahead < *end {
                    prefetch::bytes(data, (ahead - base) as usize, MANY_AHEAD_BYTES);
                }
            }
            let message_id = message_ids.get_item(index)?;
            let paused = CollectorPaused::now();
            let made = self.message_at(py, data, *base, offset, &message_id)?;
            drop(paused);
            match made {
                Some(message) => found[index] = Some(message),
                None => declined.push(index),
            }
        }
        drop(segment);
        declined.sort_unstable();
        let answers = PyList::new(
            py,
            found
                .into_iter()
                .map(|message| message.unwrap_or_else(|| py.None().into_bound(py))),
        )?;
        Ok((answers, declined))
    }

    /// What `MessageStore.get` answers: `get`'s message, or when the core declines, the
    /// store's `_get_long_way` (which raises what is wrong). One native call either way,
    /// so the store binds its `get` to this.
    fn get_or_long_way<'py>(
        &self,
        py: Python<'py>,
        message_id: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.get(py, message_id)? {
            Some(message) => Ok(message),
            None => self
                .store
                .bind(py)
                .call_method1(intern!(py, "_get_long_way"), (message_id,)),
        }
    }

    /// What `MessageStore.read` answers (same arguments), in one native call: the
    /// messages of a queue (with files of its own, or of a shared topic: shared_read.rs)
    /// from `offset` on, every record checked as `Reader.read_queue` checks it. Whatever
    /// the core does not accept at once (a tag, arguments the long way refuses, a topic
    /// or queue not known yet, a queue with files not loaded, a block not known here, an
    /// entry or record to be checked the long way, a closed or forked store) goes to the
    /// store's `_read_long_way` with the arguments as given, which answers, raises and
    /// reports damage as before. A fixed signature (`read`'s own): the interpreter calls
    /// it with its arguments as they lie, no tuple or dict made for them (~1,000
    /// instructions a call with `max_messages=` by name, 3 % of a check read of 10).
    #[pyo3(signature = (topic, queue, offset, max_messages = Given::Absent, tag = None))]
    fn read_or_long_way<'py>(
        &self,
        py: Python<'py>,
        topic: &Bound<'py, PyAny>,
        queue: &Bound<'py, PyAny>,
        offset: &Bound<'py, PyAny>,
        max_messages: Given<'py>,
        tag: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if tag.is_none() {
            if let Some(max_messages) = read_count(&max_messages) {
                if let Some(messages) = self.read(py, topic, queue, offset, max_messages)? {
                    return Ok(messages.into_any());
                }
            }
        }
        let long_way = self.store.bind(py).getattr(intern!(py, "_read_long_way"))?;
        let options = PyDict::new(py);
        if let Given::Value(max_messages) = max_messages {
            options.set_item(intern!(py, "max_messages"), max_messages)?;
        }
        if let Some(tag) = tag {
            options.set_item(intern!(py, "tag"), tag)?;
        }
        long_way.call((topic, queue, offset), Some(&options))
    }

    /// The messages of `queue` of `topic` from queue offset `offset` up to `end` that
    /// `filter` (a Filter) matches, evaluated here record by record: at most
    /// `max_matches` of them, looking at at most `max_records` records and for about
    /// `max_seconds`. Returns (messages, the offset to go on from, records looked at,
    /// records whose evaluation failed, the first such failure's sentence), or None when
    /// the core declines the queue (see `read_or_long_way`): the caller then reads it
    /// the long way and evaluates each message with `Filter.matches`.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn scan_filtered<'py>(
        &self,
        py: Python<'py>,
        filter: &Bound<'py, Filter>,
        topic: &Bound<'py, PyAny>,
        queue: &Bound<'py, PyAny>,
        offset: u64,
        end: u64,
        max_records: u64,
        max_matches: usize,
        max_seconds: f64,
    ) -> PyResult<Option<(Bound<'py, PyList>, u64, u64, u64, Option<String>)>> {
        let started = Instant::now();
        let budget = Duration::from_secs_f64(max_seconds.clamp(0.0, 3600.0));
        if self.closed.load(Ordering::Acquire) || !topic.is_exact_instance_of::<PyString>() {
            return Ok(None);
        }
        let Some(queue_id) = exact_int(queue).and_then(|q| u32::try_from(q).ok()) else {
            return Ok(None);
        };
        if self.refused() {
            return Ok(None);
        }
        self.follow(py)?;
        let Some(state) = self.topics_by_name.bind(py).get_item(topic)? else {
            return Ok(None);
        };
        let Ok(name) = topic.cast::<PyString>()?.to_str() else {
            return Ok(None);
        };
        let name = name.as_bytes();
        let scan = FilteredScan {
            filter: filter.get(),
            topic,
            queue,
            owner: (name, queue_id),
            offset,
            end,
            max_records,
            max_matches,
            started,
            budget,
        };
        if let Some(shared) = self.shared_topic(&state) {
            // A shared topic's queue: its entries from its blocks (shared_read.rs).
            let Some(walked) = self.shared_queue(py, &shared, name, queue_id)? else {
                return Ok(None);
            };
            let (low, high) = (walked.low, walked.high);
            return self.scan_walk(py, scan, (low, high), |position, count, buffer| {
                self.shared_entries(py, &walked, queue_id, position, count, buffer)
            });
        }
        let Some(consume_queue) = self.loaded_queue_of(py, &state, queue_id)? else {
            return Ok(None);
        };
        let low: u64 = consume_queue
            .getattr(intern!(py, "_min_offset"))?
            .extract()?;
        let high: u64 = consume_queue
            .getattr(intern!(py, "_max_offset"))?
            .extract()?;
        self.scan_walk(py, scan, (low, high), |position, count, buffer| {
            self.read_entries(py, &consume_queue, position, count, buffer)
        })
    }
    /// The store closed: every later call declines, and the mappings are let go.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let old = std::mem::take(&mut *lock(&self.table));
        drop(old);
        let files = std::mem::take(&mut *lock(&self.queue_files));
        drop(files);
        let bodies = std::mem::take(&mut *lock(&self.bodies));
        drop(bodies);
        let block_stores = std::mem::take(&mut *lock(&self.block_stores));
        drop(block_stores);
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.store)?;
        visit.call(&self.segments)?;
        visit.call(&self.shared)?;
        visit.call(&self.message_type)?;
        visit.call(&self.topics_by_name)?;
        visit.call(&self.queue_type)?;
        visit.call(&self.fileio)?;
        visit.call(&self.genuine_pread)?;
        visit.call(&self.refusals)?;
        visit.call(&self.log_dict)?;
        self.shared_classes.traverse(&visit)?;
        Ok(())
    }
}

/// An argument with a default that an explicit None must not stand for: `read`'s
/// `max_messages` (32 when not given; None given is refused by the long way).
pub(super) enum Given<'py> {
    Absent,
    Value(Bound<'py, PyAny>),
}

impl<'a, 'py> FromPyObject<'a, 'py> for Given<'py> {
    type Error = PyErr;

    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Given::Value(obj.to_owned()))
    }
}

/// The count a read with these arguments asks for, when the core reads it (an int of
/// 1 to `MAX_READ_MESSAGES`, or none given); None: the long way answers or refuses.
fn read_count(max_messages: &Given<'_>) -> Option<usize> {
    match max_messages {
        Given::Absent => Some(DEFAULT_READ_MESSAGES),
        Given::Value(value) => {
            let count: i64 = exact_int(value)?;
            (1..=MAX_READ_MESSAGES)
                .contains(&count)
                .then_some(count as usize)
        }
    }
}

thread_local! {
    /// The entry buffer of the thread's last entry walk (`walk_queue`), kept for its
    /// next: a chunk's entries are copied over the bytes it holds, not into a buffer
    /// made and zeroed again for every call (~30 instructions a record of a filtered
    /// scan, the `memset` of 4,096 entries a chunk).
    static ENTRY_BUFFER: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// A buffer of more than this many bytes is let go, not kept (a read of
/// `MAX_READ_MESSAGES` makes one of 200,000; a scan's chunks are `FILTER_STEP` entries).
const ENTRY_BUFFER_KEPT: usize = 256 << 10;

/// The thread's entry buffer for one walk, given back when the walk ends, however it
/// ends (a walk started inside another, from Python code its callback ran, takes an
/// empty one).
struct EntryBuffer(Vec<u8>);

impl EntryBuffer {
    fn take() -> EntryBuffer {
        EntryBuffer(ENTRY_BUFFER.with(Cell::take))
    }
}

impl Drop for EntryBuffer {
    fn drop(&mut self) {
        let buffer = std::mem::take(&mut self.0);
        if buffer.capacity() <= ENTRY_BUFFER_KEPT {
            let _ = ENTRY_BUFFER.try_with(|kept| kept.set(buffer));
        }
    }
}

thread_local! {
    /// The vectors of the thread's last entry walk (`walk_queue`), empty, kept for its
    /// next: a read of 10 messages made and freed both (two allocations a read).
    static WALK_VECTORS: Cell<(Vec<Found>, HeldSegments)> =
        const { Cell::new((Vec::new(), Vec::new())) };
}

/// The segments a walk holds: base and export.
type HeldSegments = Vec<(u64, View)>;

/// The thread's walk vectors for one walk, emptied (the segments' exports let go) and
/// given back when the walk ends (a walk started inside another takes new ones).
struct WalkVectors {
    found: Vec<Found>,
    segments: HeldSegments,
}

impl WalkVectors {
    fn take() -> WalkVectors {
        let (found, mut segments) = WALK_VECTORS.with(Cell::take);
        if segments.capacity() < HELD_SEGMENTS {
            segments.reserve_exact(HELD_SEGMENTS);
        }
        WalkVectors { found, segments }
    }
}

impl Drop for WalkVectors {
    fn drop(&mut self) {
        let mut found = std::mem::take(&mut self.found);
        let mut segments = std::mem::take(&mut self.segments);
        found.clear();
        segments.clear(); // the exports let go here, as the walk's own vector let them go
        if found.capacity() <= HAND_OVER * 4 && segments.capacity() <= HELD_SEGMENTS * 2 {
            let _ = WALK_VECTORS.try_with(|kept| kept.set((found, segments)));
        }
    }
}

/// What `scan_filtered` was asked: the filter, the queue (as given, and as its records
/// name it), the stretch, the limits and the time allowed.
struct FilteredScan<'a, 'py> {
    filter: &'a Filter,
    topic: &'a Bound<'py, PyAny>,
    queue: &'a Bound<'py, PyAny>,
    owner: (&'a [u8], u32),
    offset: u64,
    end: u64,
    max_records: u64,
    max_matches: usize,
    started: Instant,
    budget: Duration,
}

/// How an entry walk goes on after handing over a record.
enum Flow {
    /// On to the next record.
    Go,
    /// Stop after this record.
    Done,
    /// The core declines: the caller goes the long way.
    Decline,
}

/// How many of `entries`' entries from index `from` up to `to` are written (not zero).
/// Inline for the walk's common case, no entry between two handed over (`to == from`).
#[inline]
fn written(entries: &[u8], from: usize, to: usize) -> u64 {
    if to <= from {
        return 0;
    }
    written_in(entries, from, to)
}

fn written_in(entries: &[u8], from: usize, to: usize) -> u64 {
    entries[from * ENTRY_SIZE..to * ENTRY_SIZE]
        .chunks_exact(ENTRY_SIZE)
        .filter(|entry| {
            let (head, tail) = entry.split_at(8);
            u64::from_ne_bytes(head.try_into().unwrap_or_default()) != 0
                || tail.iter().any(|&b| b != 0)
        })
        .count() as u64
}

/// The value of an `int` (not a bool, nor another subclass) that fits in an i64.
fn exact_int(value: &Bound<'_, PyAny>) -> Option<i64> {
    if !value.is_exact_instance_of::<PyInt>() {
        return None;
    }
    value.extract().ok()
}

impl StoreCore {
    /// `scan_filtered`'s walk of a queue whose ends are `low` and `high`, its entries
    /// read by `entries_of` (a queue file's or a shared topic's blocks).
    #[allow(clippy::type_complexity)]
    fn scan_walk<'py>(
        &self,
        py: Python<'py>,
        scan: FilteredScan<'_, 'py>,
        (low, high): (u64, u64),
        entries_of: impl FnMut(u64, u64, &mut Vec<u8>) -> PyResult<bool>,
    ) -> PyResult<Option<(Bound<'py, PyList>, u64, u64, u64, Option<String>)>> {
        let FilteredScan {
            filter,
            topic,
            queue,
            owner,
            offset,
            end,
            max_records,
            max_matches,
            started,
            budget,
        } = scan;
        let filter = &filter.inner;
        let root = filter.context();
        let end = end.min(high);
        let messages = PyList::empty(py);
        let mut shared = Shared::new(topic.clone(), queue.clone(), max_matches);
        let (mut errors, mut first_error) = (0u64, None);
        let first = offset.max(low);
        // The time is looked at only after a chunk: a call whose budget is over before
        // it starts (its process descheduled for longer, under load) still walks one,
        // so an answer that made no progress always means there is nothing to read.
        let chunk = |position: u64, records: u64| {
            if position >= end
                || records >= max_records
                || messages.len() >= max_matches
                || (position > first && started.elapsed() >= budget)
            {
                return 0;
            }
            (end - position)
                .min(max_records - records)
                .min(FILTER_STEP as u64)
        };
        let walked = self.walk_queue(
            py,
            entries_of,
            owner,
            first,
            filter.tag(),
            chunk,
            |record, header| {
                let parts = Parts::of(record, header);
                match filter.matches(&root, header, &parts) {
                    Ok(true) => {
                        if !self.append_message(py, &messages, &mut shared, record, header)? {
                            return Ok(Flow::Decline);
                        }
                        if messages.len() >= max_matches {
                            return Ok(Flow::Done);
                        }
                    }
                    Ok(false) => {}
                    Err(error) => {
                        errors += 1;
                        first_error.get_or_insert(error);
                    }
                }
                Ok(Flow::Go)
            },
        )?;
        let Some((position, scanned)) = walked else {
            return Ok(None);
        };
        Ok(Some((messages, position, scanned, errors, first_error)))
    }

    /// The loaded ConsumeQueue of queue `queue_id` of the topic `state` (a registry
    /// `Topic`) with files of its own, or None (a queue not known, a shared topic's, not
    /// loaded).
    fn loaded_queue_of<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        queue_id: u32,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Ok(queues) = state.getattr(intern!(py, "queues"))?.cast_into::<PyList>() else {
            return Ok(None);
        };
        let Ok(consume_queue) = queues.get_item(queue_id as usize) else {
            return Ok(None);
        };
        if !consume_queue.get_type().is(self.queue_type.bind(py))
            || !consume_queue.getattr(intern!(py, "_loaded"))?.is_truthy()?
        {
            return Ok(None);
        }
        Ok(Some(consume_queue))
    }

    /// `read_or_long_way`'s messages, or None when the core declines.
    fn read<'py>(
        &self,
        py: Python<'py>,
        topic: &Bound<'py, PyAny>,
        queue: &Bound<'py, PyAny>,
        offset: &Bound<'py, PyAny>,
        max_messages: usize,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        if self.closed.load(Ordering::Acquire) || !topic.is_exact_instance_of::<PyString>() {
            return Ok(None);
        }
        let (Some(queue_id), Some(offset)) = (exact_int(queue), exact_int(offset)) else {
            return Ok(None);
        };
        let (Ok(queue_id), Ok(offset)) = (u32::try_from(queue_id), u64::try_from(offset)) else {
            return Ok(None);
        };
        if self.refused() {
            return Ok(None);
        }
        self.follow(py)?;
        let Some(state) = self.topic_by_name(py, topic)? else {
            return Ok(None); // not known (yet)
        };
        // The topic's name as its records hold it (`Topic.name_bytes`: the name encoded).
        let Ok(name) = topic.cast::<PyString>()?.to_str() else {
            return Ok(None);
        };
        if let Some(shared) = self.shared_topic(&state) {
            let name = name.as_bytes();
            return self.read_shared(
                py,
                &shared,
                topic,
                name,
                queue,
                queue_id,
                offset,
                max_messages,
            );
        }
        let Some(consume_queue) = self.loaded_queue_of(py, &state, queue_id)? else {
            return Ok(None); // not known, not loaded
        };
        let low: u64 = consume_queue
            .getattr(intern!(py, "_min_offset"))?
            .extract()?;
        let high: u64 = consume_queue
            .getattr(intern!(py, "_max_offset"))?
            .extract()?;
        self.read_messages(
            py,
            (topic, queue),
            (name.as_bytes(), queue_id),
            (offset.max(low), high),
            max_messages,
            |position, count, buffer| {
                self.read_entries(py, &consume_queue, position, count, buffer)
            },
        )
    }

    /// `read`'s messages: from queue offset `from` up to `high` of queue `queue_id` of
    /// topic `name` (as its records hold it; `topic` and `queue` as the caller gave
    /// them), at most `max_messages`, the entries read by `entries_of` (a queue file's or
    /// a shared topic's blocks); None when the core declines.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn read_messages<'py>(
        &self,
        py: Python<'py>,
        (topic, queue): (&Bound<'py, PyAny>, &Bound<'py, PyAny>),
        owner: (&[u8], u32),
        (from, high): (u64, u64),
        max_messages: usize,
        entries_of: impl FnMut(u64, u64, &mut Vec<u8>) -> PyResult<bool>,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        // Tracked, uncounted, with room for the messages the range can hold.
        let room = high.saturating_sub(from).min(max_messages as u64) as usize;
        let messages = super::new_list_with_room(py, room);
        let mut shared = Shared::new(topic.clone(), queue.clone(), max_messages);
        let chunk = |position: u64, _records: u64| {
            if messages.len() >= max_messages || position >= high {
                return 0;
            }
            ((max_messages - messages.len()) as u64).min(high - position)
        };
        let walked = self.walk_queue(
            py,
            entries_of,
            owner,
            from,
            None,
            chunk,
            |record, header| {
                if !self.append_message(py, &messages, &mut shared, record, header)? {
                    return Ok(Flow::Decline);
                }
                Ok(Flow::Go)
            },
        )?;
        Ok(walked.map(|_| messages))
    }

    /// A walk's record made a message (`stored_message`) and appended to `messages`;
    /// false when the record is one the core declines to build (the long way reads it).
    #[inline]
    fn append_message<'py>(
        &self,
        py: Python<'py>,
        messages: &Bound<'py, PyList>,
        shared: &mut Shared<'py>,
        record: &[u8],
        header: &Header,
    ) -> PyResult<bool> {
        let built = stored_message(
            py,
            self.message_type.bind(py),
            &self.prefix,
            shared,
            record,
            header,
        );
        match built {
            Some(message) => super::append_in_room(messages, message?).map(|()| true),
            None => Ok(false),
        }
    }

    /// The one walk over a queue's entries (`read`, `scan_filtered`, a shared topic's
    /// `read`): from queue offset `position` of queue `queue_id` of topic `topic` (its
    /// name as records hold it) on, a chunk of entries at a time (`chunk(position,
    /// records so far)`: how many the next may be, 0 to stop; `entries(position, count,
    /// buffer)` fills the buffer with them, at least one, or says they are not all there
    /// to read), each entry checked against its record (`walk::read_entries`),
    /// each record accepted handed to `each` with its header. With `tag` (a tag hash and
    /// the tag), only records of that tag are handed over: entries of another tag hash
    /// are passed over unread. Returns the queue offset to go on from and the records
    /// looked at (written entries passed, handed over or not), or None when the core
    /// declines (a file gone meanwhile, an entry or record to be checked the long way,
    /// `each` declining): the caller then goes the long way.
    #[allow(clippy::too_many_arguments)]
    fn walk_queue<'py>(
        &self,
        py: Python<'py>,
        mut entries_of: impl FnMut(u64, u64, &mut Vec<u8>) -> PyResult<bool>,
        (topic, queue_id): (&[u8], u32),
        mut position: u64,
        tag: Option<(u64, &[u8])>,
        chunk: impl Fn(u64, u64) -> u64,
        mut each: impl FnMut(&[u8], &Header) -> PyResult<Flow>,
    ) -> PyResult<Option<(u64, u64)>> {
        let mut buffer = EntryBuffer::take();
        let buffer = &mut buffer.0;
        let mut records = 0u64;
        // The records found, and the segments the entries pointed into, kept for the
        // walk's next entries (located and exported once, not once for every
        // `HAND_OVER` records): the thread's vectors, not new ones every walk.
        let mut kept = WalkVectors::take();
        let WalkVectors { found, segments } = &mut kept;
        loop {
            let count = chunk(position, records);
            if count == 0 {
                return Ok(Some((position, records)));
            }
            if !entries_of(position, count, buffer)? {
                return Ok(None); // a file deleted meanwhile: the long way reads what is left
            }
            let entries = &buffer[..];
            let total = entries.len() / ENTRY_SIZE;
            // The records the walk's `read_entries` need not ask for again.
            let asked = total.min(ASK_FIRST);
            self.ask_for_records(py, segments, &entries[..total.min(ASK_FIRST) * ENTRY_SIZE])?;
            let mut index = 0;
            while index < total {
                let at = index * ENTRY_SIZE;
                if entries[at..at + ENTRY_SIZE].iter().all(|&b| b == 0) {
                    index += 1; // not written: passed over, as the walk passes over it
                    continue;
                }
                let pointed =
                    u64::from_le_bytes(entries[at..at + 8].try_into().unwrap_or_default());
                let Some(held) = self.segment_of(py, segments, pointed)? else {
                    return Ok(None);
                };
                let (base, view) = &segments[held];
                let (base, data) = (*base, view.slice());
                let wanted = Wanted {
                    topic,
                    queue_id,
                    first_queue_offset: position,
                    tag,
                    max_messages: HAND_OVER,
                    asked,
                };
                found.clear();
                let (next, stop) = walk::read_entries(data, base, entries, index, &wanted, found);
                let mut passed = index;
                for item in found.iter() {
                    // The entry found is written (`read_entries` passes over unwritten
                    // ones): only those before it are looked at.
                    records += 1 + written(entries, passed, item.entry);
                    passed = item.entry + 1;
                    let record = &data[item.pos..item.pos + item.header.length as usize];
                    match each(record, &item.header)? {
                        Flow::Go => {}
                        Flow::Done => {
                            return Ok(Some((item.header.queue_offset + 1, records)));
                        }
                        Flow::Decline => return Ok(None),
                    }
                }
                records += written(entries, passed, next.max(passed));
                match stop {
                    // `HAND_OVER` found: the walk goes on from the next entry.
                    Stop::End | Stop::Full => index = next,
                    Stop::Slow => return Ok(None),
                    Stop::Outside if next == index && found.is_empty() => {
                        return Ok(None); // located, yet outside its segment: the long way
                    }
                    Stop::Outside => index = next,
                }
                if stop == Stop::End {
                    break;
                }
            }
            if index == 0 {
                return Ok(None);
            }
            position += index as u64;
        }
    }

    /// Ask for the first lines of the records `entries` point at, all of them before
    /// the walk checks the first: at a million queues each is a random place in
    /// gigabytes of log (a cache and a TLB miss), and asked for together their misses
    /// overlap each other instead of following one another. Their segments are located
    /// into `segments` (`segment_of`), which the walk then reads through.
    fn ask_for_records(
        &self,
        py: Python<'_>,
        segments: &mut Vec<(u64, View)>,
        entries: &[u8],
    ) -> PyResult<()> {
        for entry in entries.chunks_exact(ENTRY_SIZE) {
            let pointed = u64::from_le_bytes(entry[..8].try_into().unwrap_or_default());
            let size = u32::from_le_bytes(entry[8..12].try_into().unwrap_or_default());
            if size == 0 {
                continue; // not written (or damaged: the walk looks at it)
            }
            let Some(held) = self.segment_of(py, segments, pointed)? else {
                continue;
            };
            let (base, view) = &segments[held];
            prefetch::ahead(
                view.slice(),
                (pointed - base) as usize,
                (size as usize).min(ASK_BYTES),
            );
        }
        Ok(())
    }

    /// The place in `segments` (segments a walk holds: base and export) of the segment
    /// holding commit offset `offset`, located and exported when not held yet (the
    /// ones held let go first when `HELD_SEGMENTS` are); None when no mapped segment
    /// holds it.
    #[inline]
    fn segment_of(
        &self,
        py: Python<'_>,
        segments: &mut Vec<(u64, View)>,
        offset: u64,
    ) -> PyResult<Option<usize>> {
        // Held mostly: one compare a segment (an offset below a base wraps past every
        // length), the rest out of line.
        let inside = |(base, view): &(u64, View)| offset.wrapping_sub(*base) < view.len();
        match segments.iter().position(inside) {
            Some(held) => Ok(Some(held)),
            None => self.segment_taken(py, segments, offset),
        }
    }

    /// `segment_of` for a segment not held yet.
    #[inline(never)]
    fn segment_taken(
        &self,
        py: Python<'_>,
        segments: &mut Vec<(u64, View)>,
        offset: u64,
    ) -> PyResult<Option<usize>> {
        if segments.len() >= HELD_SEGMENTS {
            segments.clear(); // their exports let go before another is taken
        }
        let Some((base, map)) = self.locate(py, offset)? else {
            return Ok(None);
        };
        let Some(view) = View::of(map.bind(py)) else {
            return Ok(None);
        };
        segments.push((base, view));
        Ok(Some(segments.len() - 1))
    }

    /// Fill `buffer` with the packed entries of `queue` (a ConsumeQueue) from index
    /// `position`, `count` of them or those up to the end of the file holding the first
    /// (at least one). Copied here from the file's mapping (made the first time through
    /// the descriptor the queue's handle cache holds open), or read with one `pread` of
    /// that descriptor, else by the queue's `read` (which opens it, and which a fault
    /// test sees). False when the entries are not all there to read (a file deleted or
    /// cut short meanwhile).
    fn read_entries(
        &self,
        py: Python<'_>,
        queue: &Bound<'_, PyAny>,
        position: u64,
        count: u64,
        buffer: &mut Vec<u8>,
    ) -> PyResult<bool> {
        if let Some(FileAt {
            key,
            fd,
            slot,
            count: n,
        }) = self.file_of(py, queue, position, count)?
        {
            // Copied over what the buffer holds (zeros only where it grows): each way
            // that answers true below writes all of it.
            buffer.resize((n * ENTRY_SIZE as u64) as usize, 0);
            if self.copy_mapped(py, key, fd, slot, buffer) {
                return Ok(true);
            }
            if let Some(fd) = fd {
                // SAFETY: `fd` is a descriptor the store's handle cache holds open: the
                // cache closes one only after taking it out of its table, from Python
                // code, which cannot run while this call holds the GIL without calling
                // back (nothing since the look-up); and the store closes the cache only
                // after this core (checked in `file_of`). ManuallyDrop keeps the File
                // from closing it.
                let file = std::mem::ManuallyDrop::new(unsafe {
                    <std::fs::File as std::os::unix::io::FromRawFd>::from_raw_fd(fd)
                });
                let at = slot * ENTRY_SIZE as u64;
                if std::os::unix::fs::FileExt::read_exact_at(&*file, buffer, at).is_ok() {
                    return Ok(true);
                }
            }
        }
        let data = queue.call_method1(intern!(py, "read"), (position, count))?;
        let Ok(data) = data.cast_into::<PyBytes>() else {
            return Ok(false);
        };
        buffer.clear();
        buffer.extend_from_slice(data.as_bytes());
        Ok(buffer.len() as u64 == count * ENTRY_SIZE as u64)
    }

    /// Copy `buffer`'s length of entries from `slot` of the queue file `key` (a key of
    /// `queue_files`) out of its mapping, mapping it through `fd` the first time; false
    /// when they are not copied (the file not open in the handle cache, no mapping,
    /// entries outside it, the file cut short).
    fn copy_mapped(
        &self,
        py: Python<'_>,
        key: usize,
        fd: Option<i32>,
        slot: u64,
        buffer: &mut [u8],
    ) -> bool {
        let mut files = lock(&self.queue_files);
        self.sweep_one(py, &mut files);
        let Some(fd) = fd else {
            files.unmap(key); // closed by the handle cache: let go of its mapping too
            return false;
        };
        let mapped = files.mapped.len();
        let Some(facts) = files.facts.get_mut(&key) else {
            return false;
        };
        if facts.map.is_none() && !facts.unmappable {
            if mapped >= MAPPED_FILES {
                return false;
            }
            facts.map = Mapping::of(fd, (facts.entries * ENTRY_SIZE as u64) as usize);
            facts.unmappable = facts.map.is_none();
            if facts.map.is_some() {
                files.mapped.push(key);
            }
        }
        let Some(facts) = files.facts.get(&key) else {
            return false;
        };
        let Some(map) = &facts.map else {
            return false;
        };
        match map.copy((slot * ENTRY_SIZE as u64) as usize, buffer) {
            Copied::Done => true,
            Copied::Outside => false,
            Copied::Cut => {
                // Cut short under the mapping: never read through it again.
                files.unmap(key);
                if let Some(facts) = files.facts.get_mut(&key) {
                    facts.unmappable = true;
                }
                false
            }
        }
    }

    /// Look at one mapped file (in turn, one a read) and let go of its mapping if the
    /// handle cache no longer holds it open: files deleted by retention, or closed to
    /// make room, are let go of within as many reads as there are mappings.
    fn sweep_one(&self, py: Python<'_>, files: &mut QueueFiles) {
        if files.mapped.is_empty() {
            return;
        }
        let at = files.sweep % files.mapped.len();
        files.sweep = at + 1;
        let key = files.mapped[at];
        let open = files.facts.get(&key).is_some_and(|facts| {
            matches!(facts.open.bind(py).contains(facts.file.bind(py)), Ok(true))
        });
        if !open {
            files.unmap(key);
        }
    }

    /// The file of `queue` holding entry `position` (its key in `queue_files` and its
    /// descriptor if the queue's handle cache holds it open), with the entry's slot in
    /// it and how many of `count` entries from there it holds; None when the file is
    /// not the one `ConsumeQueue._file_for` finds at once, the seam's `pread` was
    /// replaced, or the store closed.
    fn file_of(
        &self,
        py: Python<'_>,
        queue: &Bound<'_, PyAny>,
        position: u64,
        count: u64,
    ) -> PyResult<Option<FileAt>> {
        if !self.genuine_pread(py)? {
            return Ok(None);
        }
        let Ok(files) = queue.getattr(intern!(py, "_files"))?.cast_into::<PyList>() else {
            return Ok(None);
        };
        let Ok(first) = files.get_item(0) else {
            return Ok(None);
        };
        let Some((first, _, _)) = self.file_facts(&first)? else {
            return Ok(None);
        };
        let per_file: u64 = queue.getattr(intern!(py, "entries_per_file"))?.extract()?;
        if position < first || per_file == 0 {
            return Ok(None);
        }
        let Ok(file) = files.get_item(((position - first) / per_file) as usize) else {
            return Ok(None);
        };
        let Some((file_first, entries, open)) = self.file_facts(&file)? else {
            return Ok(None);
        };
        let Some(slot) = position
            .checked_sub(file_first)
            .filter(|&slot| slot < entries)
        else {
            return Ok(None);
        };
        let fd = match open.bind(py).get_item(&file)? {
            Some(fd) => Some(fd.extract()?),
            None => None,
        };
        if self.closed.load(Ordering::Acquire) {
            return Ok(None);
        }
        let key = file.as_ptr() as usize;
        Ok(Some(FileAt {
            key,
            fd,
            slot,
            count: count.min(entries - slot),
        }))
    }

    /// Whether the seam's `pread` is its own (no fault test replaced it): the core reads
    /// entries itself only then.
    fn genuine_pread(&self, py: Python<'_>) -> PyResult<bool> {
        let fileio = self.fileio.bind(py);
        // Read before the look-up (which runs no Python code: a str key).
        let version = super::dict_version(fileio).filter(|&v| v != 0);
        if version.is_some_and(|v| v == self.pread_seen.load(Ordering::Relaxed)) {
            return Ok(true);
        }
        let pread = fileio.get_item(intern!(py, "pread"))?;
        let genuine = pread.is_some_and(|pread| pread.is(self.genuine_pread.bind(py)));
        if let (true, Some(version)) = (genuine, version) {
            self.pread_seen.store(version, Ordering::Relaxed);
        }
        Ok(genuine)
    }

    /// (first index, entries, table of open descriptors) of a queue file, read from the
    /// object the first time; None when it is not what a `QueueFile` holds.
    fn file_facts(&self, file: &Bound<'_, PyAny>) -> PyResult<Option<(u64, u64, Py<PyDict>)>> {
        let py = file.py();
        let key = file.as_ptr() as usize;
        if let Some(facts) = lock(&self.queue_files).facts.get(&key) {
            return Ok(Some((
                facts.first_index,
                facts.entries,
                facts.open.clone_ref(py),
            )));
        }
        let first_index: u64 = file.getattr(intern!(py, "first_index"))?.extract()?;
        let entries: u64 = file.getattr(intern!(py, "entries"))?.extract()?;
        let open = file
            .getattr(intern!(py, "handles"))?
            .getattr(intern!(py, "_open"))?;
        let Ok(open) = open.cast_into::<PyDict>() else {
            return Ok(None);
        };
        let facts = FileFacts {
            file: file.clone().unbind(),
            first_index,
            entries,
            open: open.clone().unbind(),
            map: None,
            unmappable: false,
        };
        let old = {
            let mut files = lock(&self.queue_files);
            let old = if files.facts.len() >= QUEUE_FILES {
                std::mem::take(&mut *files)
            } else {
                QueueFiles::default()
            };
            files.facts.insert(key, facts);
            old
        };
        drop(old); // after the lock is let go: dropping may run Python code
        Ok(Some((first_index, entries, open.unbind())))
    }

    /// The commit offset of `message_id` when it is this store's id as the store writes
    /// them (the prefix, then 16 upper-case hex digits).
    fn canonical_offset(&self, message_id: &Bound<'_, PyAny>) -> Option<u64> {
        let text = ascii(message_id.cast::<PyString>().ok()?)?;
        let digits = text.strip_prefix(&self.prefix[..])?;
        crate::message_id::offset_digits(digits.try_into().ok()?)
    }

    /// Whether the store is closed or was opened before this process forked (its
    /// refusals word, moved by `close` and `_mark_forked` where they set `_closed` and
    /// `_forked`): then the long way says so.
    fn refused(&self) -> bool {
        self.refusals.get().refused() & (REFUSED_CLOSED | REFUSED_FORKED) != 0
    }

    /// The registry's topic named `topic` (an exact str), if any: the one found last
    /// while the registry's dict is unchanged (`dict_version`) and `topic` is the same
    /// object, else looked up (a str key: no Python code runs) and kept.
    fn topic_by_name<'py>(
        &self,
        py: Python<'py>,
        topic: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let topics = self.topics_by_name.bind(py);
        let version = super::dict_version(topics);
        {
            let seen = lock(&self.topic_seen);
            if let Some((name, state, at)) = seen.as_ref() {
                if Some(*at) == version && name.is(topic) {
                    // SAFETY: the GIL is held, and the registry's dict is unchanged since
                    // `state` was found in it under `name` (its version is the same), so
                    // it still holds that topic: a live object, referenced here anew.
                    let state =
                        unsafe { Bound::from_borrowed_ptr(py, *state as *mut ffi::PyObject) };
                    return Ok(Some(state));
                }
            }
        }
        let state = topics.get_item(topic)?;
        if let (Some(state), Some(version)) = (&state, version) {
            let old = lock(&self.topic_seen).replace((
                topic.clone().unbind(),
                state.as_ptr() as usize,
                version,
            ));
            drop(old); // after the lock is let go: dropping may run Python code
        }
        Ok(state)
    }

    /// The log's published tail (`CommitLog.tail`, an int in its `__dict__`); None when
    /// it is not there as one (the long way reads it).
    fn tail(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        // Read before the look-up, which runs no Python code (a str key).
        let version = super::dict_version(self.log_dict.bind(py));
        if let Some(tail) = self.tail_seen.get(version) {
            return Ok(Some(tail));
        }
        let key = intern!(py, "tail");
        // SAFETY: the GIL is held; `log_dict` is a live dict (held by the core) and `key`
        // a live str. The item comes back borrowed and is read before anything else
        // runs (no Python code between the look-up and the read can drop it).
        unsafe {
            let tail = ffi::PyDict_GetItemWithError(self.log_dict.as_ptr(), key.as_ptr());
            if tail.is_null() {
                return match PyErr::take(py) {
                    Some(error) => Err(error),
                    None => Ok(None),
                };
            }
            if ffi::PyLong_CheckExact(tail) == 0 {
                return Ok(None);
            }
            let value = ffi::PyLong_AsUnsignedLongLong(tail);
            if value == u64::MAX && !ffi::PyErr_Occurred().is_null() {
                ffi::PyErr_Clear(); // a negative int, or one past 64 bits: not a tail
                return Ok(None);
            }
            self.tail_seen.keep(version, value);
            Ok(Some(value))
        }
    }

    /// Catch up with other processes (the store's `_follow`) when the shared sequence
    /// word moved since this core last saw the store caught up.
    fn follow(&self, py: Python<'_>) -> PyResult<()> {
        let sequence = match &self.state {
            Some(state) => state.word(SEQUENCE_AT),
            None => self.sequence_exported(py),
        };
        if sequence.is_some_and(|s| s == self.followed.load(Ordering::Acquire)) {
            return Ok(());
        }
        let store = self.store.bind(py);
        store.call_method0(intern!(py, "_follow"))?;
        let followed: i64 = store
            .getattr(intern!(py, "_followed_sequence"))?
            .extract()?;
        if let Ok(followed) = u64::try_from(followed) {
            self.followed.store(followed, Ordering::Release);
        }
        Ok(())
    }

    /// The shared sequence word read through an export of the shared state's buffer.
    fn sequence_exported(&self, py: Python<'_>) -> Option<u64> {
        let shared = View::of(self.shared.bind(py))?;
        let word = shared.slice().get(SEQUENCE_AT..SEQUENCE_AT + 8)?;
        word.try_into().ok().map(u64::from_le_bytes)
    }

    /// The message of the record at commit offset `commit_offset` of the segment whose
    /// bytes are `data` (its first at commit offset `base`), with id `message_id`; None
    /// when the record there is not one the core accepts (the long way says why).
    fn message_at<'py>(
        &self,
        py: Python<'py>,
        data: &[u8],
        base: u64,
        commit_offset: u64,
        message_id: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let pos = (commit_offset - base) as usize;
        if let Some(length) = data.get(pos..pos + 4) {
            // The record's lines asked for together (its length is its first 4 bytes),
            // rather than one after another as its check reads them; a record of a few
            // lines is left to the CPU (the asking would cost more than it saves).
            let length = u32::from_le_bytes(length.try_into().unwrap_or_default());
            if length > prefetch::WORTH_ASKING {
                prefetch::bytes(data, pos, length as usize);
            }
        }
        let Ok(header) = record::check(data, pos, commit_offset) else {
            return Ok(None);
        };
        let parts = Parts::of(&data[pos..pos + header.length as usize], &header);
        let Some(extras) = Extras::of(py, &parts) else {
            return Ok(None);
        };
        let Some(topic) = self.topic(py, parts.topic) else {
            return Ok(None);
        };
        let body = self.body(py, parts.body);
        checked_message(
            py,
            self.message_type.bind(py),
            message_id.clone(),
            topic.into_bound(py).into_any(),
            &header,
            extras,
            body,
        )
        .map(Some)
    }

    /// The bytes object of a message's `body`: one of the last bodies made, written
    /// over, when no one else holds it any more and it is as long (see `KeptBodies`);
    /// else a new one, kept in place of the older one kept.
    fn body<'py>(&self, py: Python<'py>, body: &[u8]) -> Bound<'py, PyAny> {
        if !(KEPT_BODY_FROM..=KEPT_BODY_TO).contains(&body.len()) {
            return PyBytes::new(py, body).into_any();
        }
        let mut kept = lock(&self.bodies);
        for object in kept.slots.iter().flatten() {
            let object = object.bind(py);
            // SAFETY: reading the count of a live object (held here) with the GIL held.
            let alone = unsafe { ffi::Py_REFCNT(object.as_ptr()) } == 1;
            if alone && object.as_bytes().len() == body.len() {
                // SAFETY: the GIL is held and the core's reference is the only one to
                // this bytes object (its count is 1), so no one can see it change: as
                // CPython's own `_PyBytes_Resize` does, it is written in place. Its
                // `len` bytes start at `ob_sval`; its hash, cached for the old bytes, is
                // set back to "not computed" (-1).
                unsafe {
                    let bytes = object.as_ptr().cast::<ffi::PyBytesObject>();
                    std::ptr::copy_nonoverlapping(
                        body.as_ptr(),
                        (*bytes).ob_sval.as_mut_ptr().cast::<u8>(),
                        body.len(),
                    );
                    #[allow(deprecated)] // CPython 3.11 still caches the hash there
                    {
                        (*bytes).ob_shash = -1;
                    }
                }
                return object.clone().into_any();
            }
        }
        let made = PyBytes::new(py, body);
        let next = kept.next;
        let old = kept.slots[next].replace(made.clone().unbind());
        kept.next = (next + 1) % KEPT_BODIES;
        drop(kept);
        drop(old); // after the lock is let go (a bytes object's release runs no Python)
        made.into_any()
    }

    /// The segment holding `offset` (its base and mapping), reading the table again
    /// when the commit log's list of segments changed.
    fn locate(&self, py: Python<'_>, offset: u64) -> PyResult<Option<(u64, Py<PyAny>)>> {
        Ok(self
            .locate_span(py, offset)?
            .map(|(base, _, map)| (base, map)))
    }

    /// The first segment's base as the segment table holds it, when the table is still
    /// the log's list's (`Table::is_of`; a segment's base never changes); None when there
    /// is no segment or the table is to be read again.
    pub(super) fn first_base(&self, py: Python<'_>) -> Option<u64> {
        let list = self.segments.bind(py);
        let len = list.len();
        if len == 0 {
            return None;
        }
        // SAFETY: as in `locate_span`: indexes 0 and len - 1 of a live list, read just
        // after its length with nothing run since; only the addresses are compared.
        let (first, last) = unsafe {
            (
                ffi::PyList_GET_ITEM(list.as_ptr(), 0),
                ffi::PyList_GET_ITEM(list.as_ptr(), len as ffi::Py_ssize_t - 1),
            )
        };
        let table = lock(&self.table);
        if !table.is_of(len, first, last) {
            return None;
        }
        table.segments.first().map(|segment| segment.base)
    }

    /// The segment holding `offset`: its base, its end and its mapping.
    fn locate_span(&self, py: Python<'_>, offset: u64) -> PyResult<Option<(u64, u64, Py<PyAny>)>> {
        let list = self.segments.bind(py);
        let len = list.len();
        if len == 0 {
            return Ok(None);
        }
        // SAFETY: `list` is a live list (held by the core) and the GIL is held; indexes 0
        // and len - 1 are below its length, read just above with nothing run since. The
        // items are borrowed: only their addresses are compared, before anything runs.
        let (first, last) = unsafe {
            (
                ffi::PyList_GET_ITEM(list.as_ptr(), 0),
                ffi::PyList_GET_ITEM(list.as_ptr(), len as ffi::Py_ssize_t - 1),
            )
        };
        {
            let table = lock(&self.table);
            if table.is_of(len, first, last) {
                return Ok(table.find(py, offset));
            }
        }
        let fresh = Table::read(list)?;
        let found = fresh.find(py, offset);
        let old = std::mem::replace(&mut *lock(&self.table), fresh);
        drop(old); // after the lock is let go: dropping may run Python code
        Ok(found)
    }

    /// The topic name of a record as a str, made once per name; None if not UTF-8.
    fn topic(&self, py: Python<'_>, name: &[u8]) -> Option<Py<PyString>> {
        {
            let mut topics = lock(&self.topics);
            if let Some((bytes, text)) = &topics.last {
                if bytes.as_slice() == name {
                    return Some(text.clone_ref(py));
                }
            }
            if let Some(text) = topics.by_name.get(name) {
                let text = text.clone_ref(py);
                topics.last = Some((name.to_vec(), text.clone_ref(py)));
                return Some(text);
            }
        }
        let text = PyString::new(py, std::str::from_utf8(name).ok()?).unbind();
        let mut topics = lock(&self.topics);
        if topics.by_name.len() >= TOPIC_NAMES {
            topics.by_name.clear();
        }
        topics.by_name.insert(name.to_vec(), text.clone_ref(py));
        topics.last = Some((name.to_vec(), text.clone_ref(py)));
        Some(text)
    }
}
