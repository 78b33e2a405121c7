//! A shared topic's batch of dict items in one native call (issue 33, part 1).
//!
//! A shared topic (blockqueue.py, docs/FORMAT.md "Shared topics") keeps its queues'
//! entries in blocks of a few preallocated block files. `AppendCore.append_items`
//! hands a prepared batch to a shared topic here: the records as the dict batch writes
//! them (`items_under_pen`), and the entries as `BlockStore.write_many` lays them out,
//! byte for byte: each queue's entries (in the batch's first-use order of its queues)
//! into the block the topic's index names for `(queue, seq)`, or, for a block not
//! allocated yet, into the next block of the allocated run (`BlockStore.end`), written
//! whole (its header, zeros, its entries); the pieces sorted by place and adjacent ones
//! joined into one write. The block index is the `BlockStore`'s native `BlockIndex`
//! (block_index.rs), read and added to here without a Python call; the allocation end
//! is published by `BlockStore.publish_end` before the tail, as `QueueDispatch` does.
//!
//! The batch's work (records encoded, entries packed, the records' pwrite, the blocks
//! remembered, the entries stored) runs without the GIL, under the thread lock and the
//! pen: the Python objects are read before it (the queues, the blocks' plan, the block
//! files' mappings) and moved after it (the queues' ends, the results).
//!
//! Its writes go through the fault seam (io_seam.rs): the records at `log.record`, each
//! piece of entries at `block.entry`.
//!
//! An item's keys go to the key index in one `put_many` after the entries are stored
//! (as `items_under_pen` does). It declines (the long way writes the batch) for an item
//! with a dedup id, a block of a file not created yet (Python creates it),
//! a queue not a `BlockQueue` or closed, and for everything `append_items` declines.

use std::borrow::Cow;
use std::sync::RwLock;

use super::super::block_index::{BlockIndex, Ends, ERASED};
use super::super::prepare::Prepared;
use super::*;

/// blockqueue.BLOCK_HEADER_SIZE: queue u32, seq u64, crc32c u32.
const BLOCK_HEADER_SIZE: usize = 16;
/// A batch whose work finds its rooms and plan (`known_rooms`, `plan_known`) has every
/// block file of its topic made ready for it first (their descriptors, their mappings):
/// done for a topic of at most this many (a million queues of 20 messages fill 16 files
/// of the default 65,536 blocks); a topic of more plans the Python way.
const RESOLVED_FILES: usize = 32;
/// A batch of at least this many items lets the GIL go for its work (handing it over
/// and back costs a few microseconds; a batch of 500 spends milliseconds).
const DETACH_ITEMS: usize = 32;

/// An item of a shared topic's batch: its tag, keys, properties and body, its tag hash,
/// its born time (None: the store time).
type Held<'py> = ([Bound<'py, PyBytes>; 4], u64, Option<i64>);

/// A queue of a shared topic's batch: its id, its end (the first entry's queue offset)
/// and how many of the batch's entries are its.
struct SharedRoom {
    queue_id: i64,
    base: u64,
    count: u64,
}

/// A batch's queues as `shared_under_pen` is given them: their rooms (None: its work
/// finds them), the items grouped by queue that they are found from (None: its work
/// groups them), and how many queues the topic has.
type Asked<'a> = (Option<&'a [SharedRoom]>, Option<&'a Grouped>, usize);

/// A batch's items grouped by queue (`group`).
struct Grouped {
    /// Per item: its share (among `shares`) and its queue id.
    places: Vec<(usize, u32)>,
    /// The queues in first-use order: (queue id, how many of the items are its).
    shares: Vec<(i64, u64)>,
}

/// The items' queues (`ids`, an item's each) grouped: with the GIL for a batch whose
/// rooms are found the Python way, else by its work, without the GIL (a hash map's
/// entry an item: docs/PERFORMANCE.md, put33-s54).
fn group(ids: &[u32]) -> Grouped {
    let mut places: Vec<(usize, u32)> = Vec::with_capacity(ids.len());
    let mut shares: Vec<(i64, u64)> = Vec::new();
    let mut share_of: ByQueue<usize> =
        ByQueue::with_capacity_and_hasher(ids.len(), Default::default());
    for &queue_id in ids {
        let share = *share_of.entry(i64::from(queue_id)).or_insert_with(|| {
            shares.push((i64::from(queue_id), 0));
            shares.len() - 1
        });
        shares[share].1 += 1;
        places.push((share, queue_id));
    }
    Grouped { places, shares }
}

/// Where a batch's entries go, decided before anything is written.
struct BlockPlan {
    /// Per queue of the batch (in its rooms' order), per block seq its entries reach
    /// (ascending): the block, and whether it is allocated by this batch.
    targets: Vec<(u64, bool)>,
    /// (queue, seq, block) of each block allocated, in allocation order.
    allocated: Vec<(u32, u64, u64)>,
    /// The allocation end after the batch.
    end: u64,
}

/// A block store's shape.
#[derive(Clone, Copy)]
struct Geometry {
    per_block: u64,
    per_file: u64,
    block_bytes: u64,
}

/// The facts of a block store the batch needs (read once per batch).
struct Blocks<'py> {
    store: Bound<'py, PyAny>,
    index: Bound<'py, BlockIndex>,
    files: Bound<'py, PyDict>,
    geometry: Geometry,
    end: u64,
}

/// A block file the batch writes: its first block, descriptor, mapping (None: written
/// with pwrites) and its `BlockFile`'s address (to find its mapping still in `MAPS`).
#[derive(Clone, Copy)]
struct FileTarget {
    first: u64,
    fd: i32,
    map: Option<usize>,
    file: usize,
}

/// Why the batch's work stopped: declined before anything was written, or a write of
/// the records or of the entries failed (the write begun: cleared by `write_failed`).
enum Unwritten {
    Declined(Stop),
    /// A queue only Python can load (nothing written): `shared_rooms` finds the rooms.
    Unloaded,
    Records(PyErr),
    Entries(PyErr, Box<Worked>),
}

/// What the batch's work did: the run, the rooms and the plan it found (the rooms None:
/// found the Python way before it) and, per block file (in the batch's list), whether
/// it was written.
struct Worked {
    run: Run,
    rooms: Option<Vec<SharedRoom>>,
    plan: BlockPlan,
    used: Vec<bool>,
}

impl Worked {
    /// The block files (`files`, the batch's list) the batch wrote.
    fn written<'a, T>(&'a self, files: &'a [T]) -> impl Iterator<Item = &'a T> {
        files
            .iter()
            .zip(&self.used)
            .filter(|(_, used)| **used)
            .map(|(file, _)| file)
    }
}

/// A batch's items as its write reads them (`parse_items`).
struct Parsed<'py> {
    held: Vec<Held<'py>>,
    keyed: Vec<Bound<'py, PyTuple>>,
    /// Per item: its queue id (`group` groups them).
    ids: Vec<u32>,
    /// Each item's queue (the int it gave, or the writable list's): its result's.
    queues: Vec<Bound<'py, PyAny>>,
    /// The records' length.
    length: usize,
    /// The round-robin moved on (None: read before the lock, not moved).
    round_robin: Option<i64>,
}

/// Where a written batch's messages landed, for their results (made after the thread
/// lock and the pen are let go: another thread's batch need not wait for them).
struct Landed<'py> {
    topic: Bound<'py, PyString>,
    /// Each message's queue: the int its item gave, or the writable list's.
    queues: Vec<Bound<'py, PyAny>>,
    queue_offsets: Vec<u64>,
    starts: Vec<u64>,
    stored: Bound<'py, PyAny>,
}

impl<'py> Landed<'py> {
    /// An `AppendResult` (`result_type`) a message, status `status`, in a list made at
    /// its length.
    fn results(
        self,
        py: Python<'py>,
        prefix: &[u8; 8],
        result_type: &Bound<'py, PyType>,
        status: &Bound<'py, PyString>,
    ) -> PyResult<Bound<'py, PyList>> {
        let count = self.starts.len();
        // SAFETY: the GIL is held; PyList_New makes a list of `count` empty slots (or NULL
        // with an exception set, which PyErr::fetch takes), each filled exactly once
        // below with a reference we own (PyList_SET_ITEM steals it) before the list is
        // shared or any Python code runs; a failure part way leaves the rest NULL, which
        // the list's dealloc skips.
        let list = unsafe {
            let list = ffi::PyList_New(count as ffi::Py_ssize_t);
            if list.is_null() {
                return Err(PyErr::fetch(py));
            }
            Bound::from_owned_ptr(py, list).cast_into_unchecked::<PyList>()
        };
        let parts = self
            .queues
            .into_iter()
            .zip(&self.queue_offsets)
            .zip(&self.starts);
        for (i, ((queue, queue_offset), start)) in parts.enumerate() {
            let result = new_record(
                py,
                result_type,
                [
                    message_id(py, prefix, *start).into_any(),
                    self.topic.clone().into_any(),
                    queue,
                    crate::python::int_of(py, *queue_offset)?,
                    crate::python::int_of(py, *start)?,
                    self.stored.clone(),
                    status.clone().into_any(),
                ],
            )?;
            // SAFETY: `i` < `count`, the list's length; its slot is empty (see above).
            unsafe { ffi::PyList_SET_ITEM(list.as_ptr(), i as ffi::Py_ssize_t, result.into_ptr()) };
        }
        Ok(list)
    }
}

/// A block file mapped for the entries' stores: the `BlockFile` object (held, so no
/// other object takes its address), its mapping and length; the pages stored into
/// since its pages were last let go (a bit a page), and those stored into before that,
/// to be mapped again after the sync (`refault_pages`).
struct BlockMap {
    file: Py<PyAny>,
    at: usize,
    len: usize,
    stored: Vec<AtomicU64>,
    /// Pages to map again after the next sync (set and cleared by the flush thread's
    /// `drop_pages` and `refault_pages`; atomic: `MAPS` is only read-locked there).
    pending: Vec<AtomicU64>,
}

/// Bytes a page, as the marks count them (a smaller real page only marks more coarsely;
/// `madvise` works on whole pages of the mapping either way).
const MARK_PAGE: usize = 4096;
/// Pages mapped again in one `madvise` (under `MAPS` held to read: no mapping is let go).
const REFAULT_RUN: usize = 16;
/// `MADV_POPULATE_WRITE` (Linux 5.14): fault the pages in writable, as stores would.
const MADV_POPULATE_WRITE: libc::c_int = 23;

impl BlockMap {
    fn new(file: Py<PyAny>, at: usize, len: usize) -> BlockMap {
        let words = len.div_ceil(MARK_PAGE).div_ceil(64);
        BlockMap {
            file,
            at,
            len,
            stored: (0..words).map(|_| AtomicU64::new(0)).collect(),
            pending: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Mark the pages of [position, position + len) stored into.
    fn mark(&self, position: usize, len: usize) {
        if len == 0 {
            return;
        }
        for page in position / MARK_PAGE..=(position + len - 1) / MARK_PAGE {
            if let Some(word) = self.stored.get(page / 64) {
                word.fetch_or(1 << (page % 64), Ordering::Relaxed);
            }
        }
    }
}

/// The block files mapped in this process (a shared topic has a few; the files of
/// every open store). A batch stores into a mapping only while holding this lock (to
/// read) and after finding the mapping still here for the same file (`store_piece`), so
/// none is let go meanwhile: a mapping is added and let go only under the lock held to
/// write (`mapped`, `unmap`, a store's close). The flush thread's `drop_pages` and
/// `refault_pages` hold it to read too: their `madvise`s run beside the batches' stores
/// (a store into a page being let go either lands before, and the page is left dirty in
/// the page cache, or faults it in again after), so neither waits for the other — a
/// batch that waited slept, holding the thread lock and the pen, and was woken by the
/// flush thread's let-go, on the other vCPU (docs/PERFORMANCE.md, put33-s58).
static MAPS: RwLock<Vec<BlockMap>> = RwLock::new(Vec::new());
/// Batches waiting for `MAPS` to store their pieces (`Self::maps_to_store`): since it is
/// held to write only to add or let go of a mapping, rarely.
static STORES_WAITING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// The longest the flush thread waits, between two of its holds of `MAPS`, for a waiting
/// batch to take it.
const LET_STORES_IN_FOR: std::time::Duration = std::time::Duration::from_millis(2);

/// Called by the flush thread (`drop_pages`, `refault_pages`) between two of its holds
/// of `MAPS`, without it: while a batch waits for it, let that batch take it first. The
/// mutex is not fair: the flush thread, running, took it back before the batch's thread
/// was woken, run after run (16 pages a run), and the batch — holding the thread lock
/// and the pen — waited 0.9–2.6 ms each time, 42–47 ns a put at 20M
/// (docs/PERFORMANCE.md, put33-s56). The flush thread now holds it to read, beside the
/// batches (put33-s58): a batch waits only behind a mapping being added or let go.
fn let_stores_in() {
    if STORES_WAITING.load(Ordering::SeqCst) == 0 {
        return;
    }
    let until = std::time::Instant::now() + LET_STORES_IN_FOR;
    while STORES_WAITING.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < until {
        std::thread::yield_now();
    }
}
/// How long a batch waits for another thread's write before it goes the long way
/// (which waits as long as it takes), in seconds.
const LOCK_WAIT_S: f64 = 1.0;
/// Open block files mapped at most (past it, a file is written with `pwrite`s).
const MAPS_KEPT: usize = 64;

/// Let go of the mappings of closed files (their `BlockFile._fd` is -1: closed with
/// their store, or deleted by retention, whose space a mapping would keep).
fn release_closed(py: Python<'_>, maps: &mut Vec<BlockMap>) {
    maps.retain(|m| {
        let open = m
            .file
            .bind(py)
            .getattr(intern!(py, "_fd"))
            .and_then(|fd| fd.extract::<i64>())
            .map(|fd| fd >= 0)
            .unwrap_or(false);
        if !open {
            // SAFETY: `at` and `len` are a mapping made by `mapped` and not unmapped
            // since; the GIL is held, so no store into it is under way.
            unsafe { libc::munmap(m.at as *mut libc::c_void, m.len) };
        }
        open
    });
}

/// Let go of the mappings of block files closed since (a store's close: its files'
/// space and pages are not kept until another batch maps a file).
pub(super) fn release_closed_maps(py: Python<'_>) {
    if let Ok(mut maps) = MAPS.write() {
        release_closed(py, &mut maps);
    }
}

/// Let go of `file`'s mapping, before the file is closed (retention deletes it: a
/// mapping left until the next file is mapped kept its space in use). False when the
/// file is not mapped here. With the GIL, as `mapped`: no store into it is under way
/// while `MAPS`' lock is held.
pub(super) fn unmap(file: &Bound<'_, PyAny>) -> bool {
    let Ok(mut maps) = MAPS.write() else {
        return false;
    };
    let Some(at) = maps.iter().position(|m| m.file.bind(file.py()).is(file)) else {
        return false;
    };
    let map = maps.swap_remove(at);
    // SAFETY: `at` and `len` are a mapping made by `mapped` and not unmapped since (it
    // was still in `MAPS`, held to write: no batch stores into it meanwhile).
    unsafe { libc::munmap(map.at as *mut libc::c_void, map.len) };
    true
}

/// Let go of the pages of `file`'s mapping (kept mapped: the next store maps its page
/// again), before its block sync: the sync writes back each page stored into since the
/// last one and write-protects each page still mapped, a TLB shootdown each (an IPI to
/// every other core this process runs on); pages unmapped in one go cost a shootdown
/// per page table at most. Their stores are not lost: a page's dirty bit goes to the
/// page cache as it is unmapped, and the sync that follows writes it back. False when
/// the file is not mapped here. Without the GIL: a batch may hold `MAPS` meanwhile.
///
/// `part` > 0: the pages let go a part of `part` bytes at a time (a multiple of
/// `FOLD_BYTES`), each part's writeback begun (`sync_file_range`) right after, so that
/// a page stored into between its let-go and its writeback (mapped again, then
/// write-protected by the writeback: a shootdown, and the store after it a fault under
/// the thread lock) is one stored into in that part's moment, not in the whole file's
/// writeback (docs/PERFORMANCE.md, put33-s55). The sync that follows waits for them.
pub(super) fn drop_pages(file: &Bound<'_, PyAny>, part: usize) -> bool {
    // The object's address: `file` is held, so no other object takes it meanwhile.
    let object = file.as_ptr() as usize;
    let fd = match part {
        0 => -1,
        _ => file
            .getattr(intern!(file.py(), "_fd"))
            .and_then(|fd| fd.extract::<i32>())
            .unwrap_or(-1),
    };
    let part = match fd {
        -1 => 0,
        _ => part.next_multiple_of(FOLD_BYTES),
    };
    file.py().detach(|| {
        let mut start = 0usize;
        loop {
            let end = {
                let Ok(maps) = MAPS.read() else {
                    return false;
                };
                let Some(map) = maps.iter().find(|m| m.file.as_ptr() as usize == object) else {
                    return start > 0;
                };
                if start >= map.len {
                    return true;
                }
                let end = match part {
                    0 => map.len,
                    _ => (start + part).min(map.len),
                };
                let words = start / FOLD_BYTES..end.div_ceil(FOLD_BYTES);
                for (pending, stored) in map.pending[words.clone()].iter().zip(&map.stored[words]) {
                    pending.fetch_or(stored.swap(0, Ordering::Relaxed), Ordering::Relaxed);
                }
                // SAFETY: [start, end) lies inside `at` and `len`, a live shared mapping of
                // the block file (in `MAPS`, held to read, so it is not unmapped
                // meanwhile). MADV_DONTNEED on a shared file mapping only drops its page
                // table entries: the pages stay in the page cache (dirty ones marked dirty
                // there), and a store into one, during the call or after, faults it in
                // again.
                let dropped = unsafe {
                    libc::madvise(
                        (map.at + start) as *mut libc::c_void,
                        end - start,
                        libc::MADV_DONTNEED,
                    )
                };
                if dropped != 0 {
                    return false;
                }
                end
            };
            let_stores_in();
            if part == 0 {
                return true;
            }
            // SAFETY: sync_file_range on the file's descriptor only begins the writeback
            // of the range's dirty pages (no byte changes, nothing waited for; one closed
            // and reused meanwhile by another file only has that file's written back);
            // an error is left: the fdatasync after writes them all.
            unsafe {
                libc::sync_file_range(
                    fd,
                    start as libc::off64_t,
                    (end - start) as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WRITE,
                )
            };
            if end - start < part {
                return true;
            }
            start = end;
        }
    })
}

/// Bytes of a mapping one word of `BlockMap`'s marks covers.
const FOLD_BYTES: usize = 64 * MARK_PAGE;

/// Map writable again, after a block sync, the pages of `file` stored into before it
/// (marked since the `drop_pages` before the one before the sync), so that the
/// batches' next stores into them take no fault: a fault is taken under the store's
/// thread lock, by which every producer thread waits; here it is taken on the flush
/// thread. Each page is dirty again once mapped writable, so the next block sync writes
/// it back even when no store came since: at most once for each page stored into. Runs
/// of `REFAULT_RUN` pages, each under `MAPS`' lock (a file closed meanwhile has its
/// mapping let go: the rest is left). Without the GIL. How many pages were mapped.
pub(super) fn refault_pages(file: &Bound<'_, PyAny>) -> usize {
    let object = file.as_ptr() as usize;
    file.py().detach(|| {
        let mut done = 0;
        let mut word = 0;
        loop {
            let Ok(maps) = MAPS.read() else {
                return done;
            };
            let Some(map) = maps.iter().find(|m| m.file.as_ptr() as usize == object) else {
                return done;
            };
            let marked = |page: usize| map.pending[page / 64].load(Ordering::Relaxed);
            while word < map.pending.len() && marked(word * 64) == 0 {
                word += 1;
            }
            if word >= map.pending.len() {
                return done;
            }
            // The lowest marked page and the marked pages right after it (a run).
            let first = word * 64 + marked(word * 64).trailing_zeros() as usize;
            let mut page = first;
            while page < first + REFAULT_RUN && marked(page) & (1 << (page % 64)) != 0 {
                map.pending[page / 64].fetch_and(!(1 << (page % 64)), Ordering::Relaxed);
                page += 1;
                if page / 64 >= map.pending.len() {
                    break;
                }
            }
            let start = first * MARK_PAGE;
            let end = (page * MARK_PAGE).min(map.len);
            if start < end {
                // SAFETY: [start, end) lies inside the live shared mapping `map` (in
                // `MAPS`, held to read, so it is not unmapped meanwhile), whose
                // space is reserved; MADV_POPULATE_WRITE faults its pages in writable, as
                // a store would, and changes no byte. An error (an older kernel) is
                // left: the stores fault as before.
                let populated = unsafe {
                    libc::madvise(
                        (map.at + start) as *mut libc::c_void,
                        end - start,
                        MADV_POPULATE_WRITE,
                    )
                };
                if populated != 0 {
                    map.pending
                        .iter()
                        .for_each(|w| w.store(0, Ordering::Relaxed));
                    return done;
                }
                done += page - first;
            }
            drop(maps);
            let_stores_in();
        }
    })
}

/// The address of `file`'s mapping (`len` bytes, the whole file as `BlockFile.create`
/// reserves it), mapped on first use after reserving its space with `fallocate` again
/// (a file made by an older engine, or on a file system that could not preallocate,
/// may be sparse: a store into a hole on a full disk would be a SIGBUS). None when the
/// file is shorter than its blocks (cut short) or its space cannot be reserved: the
/// caller `pwrite`s, which answers a full disk with ENOSPC.
fn mapped(file: &Bound<'_, PyAny>, fd: i32, len: usize) -> Option<usize> {
    // Found to read (every batch, for each of its files), made to write (once a file).
    if let Some(known) = MAPS
        .read()
        .ok()?
        .iter()
        .find(|m| m.file.bind(file.py()).is(file))
    {
        return (known.len == len).then_some(known.at);
    }
    let mut maps = MAPS.write().ok()?;
    if let Some(known) = maps.iter().find(|m| m.file.bind(file.py()).is(file)) {
        return (known.len == len).then_some(known.at);
    }
    release_closed(file.py(), &mut maps);
    if maps.len() >= MAPS_KEPT {
        return None;
    }
    // SAFETY: fstat fills the zeroed struct it is given; `fd` is the BlockFile's open
    // descriptor (the caller holds the object and the GIL).
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut stat) } != 0 || (stat.st_size as u64) < len as u64 {
        return None;
    }
    // SAFETY: fallocate with mode 0 over the file's length reserves its blocks (it
    // changes no byte and, the file being this long already, not its size).
    if unsafe { libc::fallocate(fd, 0, 0, len as libc::off_t) } != 0 {
        return None;
    }
    // SAFETY: a shared, writable mapping of the whole file, whose space is reserved
    // (above); it is unmapped only when its file is closed (`retain` above).
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if at == libc::MAP_FAILED {
        return None;
    }
    maps.push(BlockMap::new(file.clone().unbind(), at as usize, len));
    Some(at as usize)
}

/// A piece of a batch's entries: its block, its place in the block and its bytes (a
/// queue's entries as packed, or a new block whole).
type Piece<'a> = (u64, usize, Cow<'a, [u8]>);

/// A block's header (blockqueue.header_bytes): owner `queue`, `seq`, their CRC32C.
fn header_bytes(queue: u32, seq: u64) -> [u8; BLOCK_HEADER_SIZE] {
    let mut header = [0u8; BLOCK_HEADER_SIZE];
    header[0..4].copy_from_slice(&queue.to_le_bytes());
    header[4..12].copy_from_slice(&seq.to_le_bytes());
    let crc = crate::crc::crc32c(&header[0..12]);
    header[12..16].copy_from_slice(&crc.to_le_bytes());
    header
}

/// A prepared tuple (`Writer.prepare`'s, or `prepare_items`') as the batch reads it;
/// declined for one with a dedup id (the long way).
pub(super) fn prepared_of<'py>(item: Bound<'py, PyAny>) -> Step<Prepared<'py>> {
    let tuple = item.cast_into::<PyTuple>().map_err(|_| Stop::Declined)?;
    if tuple.len() != 10 || !tuple.get_item(9)?.is_none() {
        return declined(); // a dedup id: the long way
    }
    let explicit = tuple.get_item(0)?;
    let route = tuple.get_item(1)?;
    let born = tuple.get_item(6)?;
    let queue_id = match explicit.is_none() {
        true => 0,
        false => explicit.extract()?,
    };
    Ok(Prepared {
        queue: (!explicit.is_none()).then_some(explicit),
        queue_id,
        route: match route.is_none() {
            true => None,
            false => Some(route.cast_into().map_err(PyErr::from)?),
        },
        fields: [
            tuple.get_item(2)?.cast_into().map_err(PyErr::from)?,
            tuple.get_item(3)?.cast_into().map_err(PyErr::from)?,
            tuple.get_item(4)?.cast_into().map_err(PyErr::from)?,
            tuple.get_item(5)?.cast_into().map_err(PyErr::from)?,
        ],
        born: (!born.is_none()).then_some(born),
        tag_hash: tuple.get_item(7)?.extract()?,
        index_keys: tuple.get_item(8)?.cast_into().map_err(PyErr::from)?,
    })
}

/// The topic's queue objects by id (`LazyQueues._at`: None where not made).
fn made_list<'py>(
    py: Python<'py>,
    slots: &Slots,
    state: &Bound<'py, PyAny>,
) -> Step<Bound<'py, PyList>> {
    get(slots.queues, state)?
        .getattr(intern!(py, "_at"))
        .ok()
        .and_then(|made| made.cast_into::<PyList>().ok())
        .ok_or(Stop::Declined)
}

/// `shared_rooms` without the GIL, for a batch whose queues need no Python to load:
/// `shares` ((queue id, entries) in first-use order) with their ends, read under one
/// lock of the topic's block index after asking for their cache lines all at once (each
/// a miss at a million queues; their latest blocks too, for `plan_known`). A queue not
/// loaded whose object was never made (`Ends::made`) and that has no blocks is empty:
/// it is marked loaded here, as `shared_rooms` does. None for any other queue not
/// loaded, and for a queue erased or not among the topic's `queues` (`shared_rooms`
/// loads it, or declines).
fn known_rooms(
    index: &BlockIndex,
    shares: &[(i64, u64)],
    queues: usize,
) -> Option<Vec<SharedRoom>> {
    let mut known = index.lock();
    known.prefetch(shares.iter().filter_map(|&(q, _)| u32::try_from(q).ok()));
    let mut rooms = Vec::with_capacity(shares.len());
    for &(queue_id, count) in shares {
        let id = u32::try_from(queue_id)
            .ok()
            .filter(|&id| id != ERASED && (id as usize) < queues)?;
        let mut ends = known.ends(id);
        if !ends.loaded {
            if ends.made || known.seq_range(id).is_some() {
                return None;
            }
            known.ends_mut(id).loaded = true;
            ends = known.ends(id);
        }
        rooms.push(SharedRoom {
            queue_id,
            base: ends.max,
            count,
        });
    }
    Some(rooms)
}

impl AppendCore {
    /// `try_items` for a topic with blocks (the caller checked the store). The thread
    /// lock is taken first, waiting for it (without the GIL) when another thread of
    /// this process writes: that thread's long way lets the GIL go in its system
    /// calls, and declining then would send every producer thread the long way too.
    /// Everything the batch reads of the store is read after it is taken. The batch's
    /// results and the new tail (`try_items` does what follows a write).
    pub(super) fn try_shared_items<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        items: Vec<Prepared<'py>>,
    ) -> Step<(Bound<'py, PyList>, i64)> {
        // A batch whose items all name their queue is read before the thread lock is
        // taken (nothing of it needs the lock: the lock's holder does not wait for it).
        let items = match items.iter().all(|item| item.queue.is_some()) {
            true => {
                let name = get(self.slots.name_bytes, state)?
                    .cast_into::<PyBytes>()
                    .map_err(PyErr::from)?;
                let name_len = name.as_bytes().len();
                Ok(self.parse_items(py, state, items, name_len, None)?)
            }
            false => Err(items),
        };
        let write_lock = self.write_lock.get();
        if !write_lock.try_acquire() {
            let taken = self
                .write_lock
                .bind(py)
                .call_method1(intern!(py, "acquire"), (true, LOCK_WAIT_S))?
                .is_truthy()?;
            if !taken {
                return declined();
            }
        }
        let outcome = self
            .check_store(py)
            .and_then(|()| self.shared_locked(py, state, items));
        release(write_lock)?;
        // A thread woken with the thread lock (its wait is a `blocking` call) needs the
        // GIL for its batch's first part: it gets it now, not after this thread's
        // results, their frees and its next batch's items, while the lock stood idle
        // (docs/PERFORMANCE.md, put33-s52).
        returning::make_way(py);
        let (landed, end) = outcome?;
        Ok((
            landed.results(
                py,
                &self.prefix,
                self.result_type.bind(py),
                self.status.bind(py),
            )?,
            end,
        ))
    }

    /// `try_shared_items` under the thread lock: the batch parsed and placed, then
    /// written under the follow lock and the pen; its results and the new tail.
    fn shared_locked<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        items: Result<Parsed<'py>, Vec<Prepared<'py>>>,
    ) -> Step<(Landed<'py>, i64)> {
        let topic = self.shared_topic(py, state)?;
        let blocks_object = get(self.slots.blocks, state)?;
        let block_queue = py
            .import(intern!(py, "storeadapter.engine.blockqueue"))?
            .getattr(intern!(py, "BlockQueue"))?;
        let parsed = match items {
            Ok(parsed) => parsed,
            Err(items) => {
                let name_len = topic.name_bytes.as_bytes().len();
                self.parse_items(py, state, items, name_len, Some(topic.round_robin))?
            }
        };
        let Parsed {
            held,
            keyed,
            ids,
            queues,
            length,
            round_robin,
        } = parsed;
        let mut queues = queues;
        // The queues' rooms and the blocks' plan are found by the batch's work, under
        // the pen and without the GIL (each queue's end and latest block a cache miss at
        // a million queues: docs/PERFORMANCE.md, put33-s53), for a batch whose work lets
        // the GIL go, of a topic of a few block files (all of them are made ready for
        // the work: `RESOLVED_FILES`), unless the index may miss blocks another process
        // allocated (`stale`: `plan_blocks` refreshes it). Otherwise, and when the work
        // meets a queue only Python can load, `shared_rooms` finds them first.
        let queue_count = made_list(py, &self.slots, state)?.len();
        let file_count = blocks_object.getattr(intern!(py, "files"))?.len()?;
        let mut rooms = None;
        let mut grouped = None;
        // The rooms found the Python way, from the items grouped here (with the GIL).
        let python_way = || -> Step<(Vec<SharedRoom>, Grouped)> {
            let found = group(&ids);
            let rooms =
                self.shared_rooms(py, state, &blocks_object, &block_queue, &found.shares)?;
            Ok((rooms, found))
        };
        if held.len() < DETACH_ITEMS
            || io_seam::planned()
            || file_count > RESOLVED_FILES
            || blocks_object.getattr(intern!(py, "stale"))?.is_truthy()?
        {
            let (found, by_queue) = python_way()?;
            (rooms, grouped) = (Some(found), Some(by_queue));
        }
        loop {
            let written = self.under_thread_lock(py, |waited| {
                self.shared_under_pen(
                    py,
                    state,
                    &topic,
                    &blocks_object,
                    (rooms.as_deref(), grouped.as_ref(), queue_count),
                    (&held, &keyed),
                    (&ids, &mut queues),
                    round_robin.unwrap_or(topic.round_robin),
                    length,
                    waited,
                )
            })?;
            match written {
                Some(landed) => return Ok(landed),
                None if rooms.is_none() => {
                    let (found, by_queue) = python_way()?;
                    (rooms, grouped) = (Some(found), Some(by_queue));
                }
                None => return declined(), // never: rooms given are not looked for again
            }
        }
    }

    /// The batch's items read for its write: each item's fields, tag hash and born time,
    /// its keys, its queue and its share (the queues in first-use order), the records'
    /// length. An item without a queue takes the topic's next writable queue (by its
    /// key, or the round-robin from `round_robin`, then moved), which only the thread
    /// lock's holder may do: a caller without it gives None (and items with queues).
    fn parse_items<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        items: Vec<Prepared<'py>>,
        name_len: usize,
        mut round_robin: Option<i64>,
    ) -> Step<Parsed<'py>> {
        let count = items.len();
        if count == 0 || name_len > 255 {
            return declined();
        }
        // The writable queues are read only for an item without a queue (a topic may
        // have a million of them: not copied per batch, not made until needed).
        let mut writable: Option<Bound<'py, PyList>> = None;
        let mut held = Vec::with_capacity(count);
        // Each item's keys, once one has keys (else empty: no key index items).
        let mut keyed: Vec<Bound<'py, PyTuple>> = Vec::new();
        let mut ids: Vec<u32> = Vec::with_capacity(count);
        let mut length = 0usize;
        // Each item's queue (the int it gave, or the writable list's): its result's.
        let mut queues: Vec<Bound<'py, PyAny>> = Vec::with_capacity(count);
        for item in items {
            let born = match &item.born {
                Some(born) => born_ms(born)?,
                None => None,
            };
            let keys = item.index_keys;
            let fields = item.fields;
            if fields[3].as_bytes().len() > self.max_body || fields[0].as_bytes().len() > 255 {
                return declined();
            }
            let queue_id = if let Some(queue) = item.queue {
                queues.push(queue);
                item.queue_id
            } else {
                let Some(next) = round_robin.as_mut() else {
                    return declined(); // never: the caller without the lock gave queues
                };
                if writable.is_none() {
                    let list = writable_of(py, &self.slots, state)?;
                    if list.is_empty() {
                        return declined();
                    }
                    writable = Some(list);
                }
                let Some(writable) = &writable else {
                    return declined();
                };
                let writable_len = writable.len();
                let at = if let Some(key) = &item.route {
                    crate::events::crc32_ieee(key.as_bytes()) as usize % writable_len
                } else {
                    *next += 1;
                    (*next - 1).rem_euclid(writable_len as i64) as usize
                };
                let queue = writable.get_item(at)?;
                let id = queue.extract::<i64>()?;
                queues.push(queue);
                id
            };
            ids.push(u32::try_from(queue_id).map_err(|_| Stop::Declined)?);
            length += crate::record::RECORD_OVERHEAD
                + name_len
                + fields.iter().map(|f| f.as_bytes().len()).sum::<usize>();
            held.push((fields, item.tag_hash, born));
            if !keys.is_empty() || !keyed.is_empty() {
                keyed.resize(held.len() - 1, PyTuple::empty(py));
                keyed.push(keys);
            }
        }
        if length > self.capacity {
            return declined();
        }
        Ok(Parsed {
            held,
            keyed,
            ids,
            queues,
            length,
            round_robin,
        })
    }

    /// The batch's queues (`shares`: (queue id, entries) in first-use order) with their
    /// ends, read from the topic's block index, which keeps them (block_index.rs). A
    /// queue not loaded yet is loaded as every user loads it: one whose object was never
    /// made and that has no blocks is empty, and its load would find (0, 0) and check
    /// nothing (`MessageStore._on_queue_load`), so it is marked loaded here without an
    /// object; any other is made and loaded the Python way (`_ensure_loaded`, under the
    /// loading lock), which sets its ends in the index.
    fn shared_rooms<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        blocks_object: &Bound<'py, PyAny>,
        block_queue: &Bound<'py, PyAny>,
        shares: &[(i64, u64)],
    ) -> Step<Vec<SharedRoom>> {
        let queues = get(self.slots.queues, state)?;
        let made = made_list(py, &self.slots, state)?;
        let index = blocks_object
            .getattr(intern!(py, "index"))?
            .cast_into::<BlockIndex>()
            .map_err(|_| Stop::Declined)?;
        let index = index.get();
        // The batch's queues' ends read under one lock, their cache lines asked for
        // all at once first (each a miss at a million queues), with their latest
        // blocks for `plan_blocks`.
        let looked: Vec<Ends> = {
            let known = index.lock();
            let ids = || shares.iter().filter_map(|&(q, _)| u32::try_from(q).ok());
            known.prefetch(ids());
            shares
                .iter()
                .map(|&(q, _)| u32::try_from(q).map_or(Ends::default(), |id| known.ends(id)))
                .collect()
        };
        // Once a queue is loaded through Python, the ends of the rest are read again.
        let mut called = false;
        let mut rooms = Vec::with_capacity(shares.len());
        for (&(queue_id, share), &seen) in shares.iter().zip(&looked) {
            let id = u32::try_from(queue_id).map_err(|_| Stop::Declined)?;
            if id == ERASED || id as usize >= made.len() {
                return declined();
            }
            let mut ends = if called { index.lock().ends(id) } else { seen };
            if !ends.loaded {
                called = true;
                let mut object = made.get_item(id as usize)?;
                if object.is_none() {
                    let mut known = index.lock();
                    if known.seq_range(id).is_none() {
                        known.ends_mut(id).loaded = true;
                        ends = known.ends(id);
                    } else {
                        drop(known);
                        object = queues.get_item(queue_id)?;
                    }
                }
                if !ends.loaded {
                    if !object.get_type().is(block_queue)
                        || get(self.slots.closed, &object)?.is_truthy()?
                    {
                        return declined();
                    }
                    object.call_method0(intern!(py, "_ensure_loaded"))?;
                    ends = index.lock().ends(id);
                    if !ends.loaded {
                        return declined();
                    }
                }
            }
            rooms.push(SharedRoom {
                queue_id,
                base: ends.max,
                count: share,
            });
        }
        Ok(rooms)
    }

    /// `plain_topic` for a topic with blocks.
    fn shared_topic<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
    ) -> Step<PlainTopic<'py>> {
        let slots = &self.slots;
        if !state.get_type().is(slots.topic_type.bind(py)) {
            return declined();
        }
        let info = get(slots.info, state)?;
        let (name, topic_id, plain) = self.topic_facts(py, &info)?;
        match self.topics.bind(py).get_item(&name)? {
            Some(current) if current.is(state) => {}
            _ => return declined(), // deleted meanwhile: the long way says so
        }
        if !plain || get(slots.blocks, state)?.is_none() {
            return declined();
        }
        // The writable queues are read by `shared_locked` only for an item without a
        // queue (a topic's list is made on first use: topics.py, `writable`).
        let writable = PyList::empty(py);
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

    /// The batch written under the pen: None when its queues' rooms must be found the
    /// Python way first (nothing written; `rooms` None: the work finds them itself).
    #[allow(clippy::too_many_arguments)]
    fn shared_under_pen<'py>(
        &self,
        py: Python<'py>,
        state: &Bound<'py, PyAny>,
        topic: &PlainTopic<'py>,
        blocks_object: &Bound<'py, PyAny>,
        (rooms, grouped, queue_count): Asked<'_>,
        (held, keyed): (&[Held<'py>], &[Bound<'py, PyTuple>]),
        (ids, queues): (&[u32], &mut Vec<Bound<'py, PyAny>>),
        round_robin: i64,
        length: usize,
        waited: bool,
    ) -> Step<Option<(Landed<'py>, i64)>> {
        let ready = self.ready(py, waited)?;
        if ready.moved != Moved::Nothing {
            // Another process (or a wait for the pen) may have moved the blocks' ends
            // this plan was made from: the long way plans again under the pen.
            return declined();
        }
        let tail = ready.tail;
        let end = tail + length as u64;
        drop(self.room(&ready, end)?);
        let now = ready.now;
        let segment_fd =
            i32::try_from(get_int(self.slots.fd, &ready.segment)?).map_err(|_| Stop::Declined)?;
        let blocks = Self::blocks_of(blocks_object)?;
        // Rooms found the Python way: so is the plan (it may refresh the index first).
        let given_plan = match rooms {
            Some(rooms) => Some(Self::plan_blocks(&blocks, rooms)?),
            None => None,
        };
        // Each block file's first block, object and descriptor, and its mapping: those
        // of the plan's blocks, or, for a plan the work makes, every file (at most
        // `RESOLVED_FILES`: the caller checked), of which the plan picks the ones it
        // writes.
        let mut files: Vec<(u64, Bound<'py, PyAny>, i32)> = Vec::new();
        let fd_of = |file: &Bound<'py, PyAny>| -> Step<i32> {
            i32::try_from(file.getattr(intern!(py, "fd"))?.extract::<i64>()?)
                .map_err(|_| Stop::Declined)
        };
        match &given_plan {
            Some(plan) => {
                for (block, _) in &plan.targets {
                    let first = block - block % blocks.geometry.per_file;
                    if !files.iter().any(|(f, _, _)| *f == first) {
                        let Some(file) = blocks.files.get_item(first)? else {
                            return declined(); // a new file: the long way creates it
                        };
                        let fd = fd_of(&file)?;
                        files.push((first, file, fd));
                    }
                }
            }
            None => {
                if blocks.files.len() > RESOLVED_FILES {
                    return declined(); // never: the caller found the rooms then
                }
                for (first, file) in blocks.files.iter() {
                    let fd = fd_of(&file)?;
                    files.push((first.extract()?, file, fd));
                }
            }
        }
        let file_len = (blocks.geometry.per_file * blocks.geometry.block_bytes) as usize;
        let targets: Vec<FileTarget> = files
            .iter()
            .map(|(first, file, fd)| FileTarget {
                first: *first,
                fd: *fd,
                map: mapped(file, *fd, file_len),
                file: file.as_ptr() as usize,
            })
            .collect();
        let name_bytes = topic.name_bytes.as_bytes();
        let fields: Vec<_> = held
            .iter()
            .map(|(fields, hashed, born)| (fields.each_ref().map(|f| f.as_bytes()), *hashed, *born))
            .collect();
        let index = blocks.index.get();
        let geometry = blocks.geometry;
        let allocated_to = blocks.end;
        let extent = ready.header.word(EXTENT_AT);
        let writing = ready.header.word(WRITING_AT);
        let segment_at = tail - ready.base;
        // The batch's work, without the GIL for a batch of more than a few items (the
        // other producer threads run meanwhile; this one holds the thread lock and the
        // pen, so no other write of this store moves what it writes): the queues' rooms
        // found and the blocks planned (unless found the Python way before, and the items
        // grouped by queue with them), the records
        // encoded and each queue's entries packed, the write begun (its extent marked,
        // as `begin`), the records written with one pwrite, the allocated blocks
        // remembered in the native index, the entries stored into the block files.
        // Under a fault plan the work keeps the GIL (the plan's hook is Python) and its
        // writes go through the seam's sites: the records at `log.record`, the entries at
        // `block.entry`.
        let work = move |planned: Option<Python<'_>>| -> Result<Worked, Unwritten> {
            let grouped_here;
            let Grouped { places, shares } = match grouped {
                Some(grouped) => grouped,
                None => {
                    grouped_here = group(ids);
                    &grouped_here
                }
            };
            let (found, plan) = match (rooms, given_plan) {
                (Some(_), Some(plan)) => (None, plan),
                _ => {
                    let Some(found) = known_rooms(index, shares, queue_count) else {
                        return Err(Unwritten::Unloaded);
                    };
                    let plan = Self::plan_known(index, geometry.per_block, allocated_to, &found)
                        .map_err(Unwritten::Declined)?;
                    (Some(found), plan)
                }
            };
            let Some(rooms) = found.as_deref().or(rooms) else {
                return Err(Unwritten::Declined(Stop::Declined)); // never: one or the other
            };
            // The files the plan writes; a block of a file not created yet: the long
            // way creates it (nothing is written yet).
            let mut used = vec![false; targets.len()];
            for (block, _) in &plan.targets {
                let first = block - block % geometry.per_file;
                let Some(at) = targets.iter().position(|f| f.first == first) else {
                    return Err(Unwritten::Declined(Stop::Declined));
                };
                used[at] = true;
            }
            let writes: Vec<FileTarget> = targets
                .iter()
                .zip(&used)
                .filter(|(_, used)| **used)
                .map(|(target, _)| *target)
                .collect();
            let bases: Vec<(u64, u64)> = rooms.iter().map(|room| (room.base, room.count)).collect();
            let mut run = place_run(
                tail,
                end,
                now,
                name_bytes,
                bases.iter().copied(),
                fields.iter().copied(),
                places,
            )
            .map_err(Unwritten::Declined)?;
            run.entries.each_mut(|queue_entries| {
                crate::consume_queue::seal(queue_entries); // as `BlockQueue.write_many`
            });
            // Stores into mappings need no order (no two pieces overlap: one a (queue,
            // seq)); the pwrites join adjacent pieces, and a fault plan records the
            // writes in the order the long way makes them: by place.
            let in_order = planned.is_some() || writes.iter().any(|f| f.map.is_none());
            let pieces = Self::pieces(geometry, &bases, &plan, &run.entries, in_order);
            extent.store(end, Ordering::Relaxed);
            writing.store(1, Ordering::Release);
            let written = match planned {
                Some(py) => {
                    Self::write_at_site(py, Site::LogRecord, segment_fd, &run.out, segment_at)
                }
                None => Self::write_at(segment_fd, &run.out, segment_at),
            };
            if let Err(error) = written {
                return Err(Unwritten::Records(error));
            }
            // The allocated blocks remembered before their writes, as `_new_block` does.
            let mut known = index.lock();
            for (queue_id, seq, block) in &plan.allocated {
                known.remember(*queue_id, *seq, *block);
            }
            drop(known);
            let stored = Self::write_pieces(geometry, &pieces, &writes, planned);
            // The records and entries let go here, without the GIL (a few hundred frees).
            drop(pieces);
            run.out = Vec::new();
            run.entries = QueueEntries::default();
            let worked = Worked {
                run,
                rooms: found,
                plan,
                used,
            };
            match stored {
                Ok(()) => Ok(worked),
                Err(error) => Err(Unwritten::Entries(error, Box::new(worked))),
            }
        };
        let outcome = if io_seam::planned() {
            work(Some(py))
        } else if held.len() >= DETACH_ITEMS {
            // Ended as a blocking call ends: the next native append of another thread
            // makes way, so this thread, holding the thread lock, does not wait for the
            // GIL behind other threads' items and results (put33-s52).
            returning::blocking(py, move || work(None))
        } else {
            work(None)
        };
        let worked = match outcome {
            Ok(worked) => worked,
            Err(Unwritten::Unloaded) => return Ok(None), // nothing begun
            Err(Unwritten::Declined(stop)) => return Err(stop), // nothing begun
            Err(Unwritten::Records(error)) => return Err(self.write_failed(py, error, tail)),
            Err(Unwritten::Entries(error, worked)) => {
                self.blocks_moved(py, blocks_object, &worked.plan, worked.written(&files))?;
                return Err(self.write_failed(py, error, tail));
            }
        };
        self.blocks_moved(py, blocks_object, &worked.plan, worked.written(&files))?;
        self.dirty.bind(py).add(blocks_object)?;
        let Worked {
            run:
                Run {
                    queue_offsets,
                    starts,
                    ..
                },
            rooms: found,
            ..
        } = worked;
        let Some(rooms) = found.as_deref().or(rooms) else {
            return declined(); // never: the work found them when not given
        };
        let stored = now.into_pyobject(py)?.into_any();
        // The keys to the key index in one `put_many` (as the dict batch of a topic with
        // files per queue), then the allocation end; a failure clears all of it.
        let put = self.put_keys(py, &topic.name, keyed.iter().zip(&starts), &stored);
        if let Err(error) = put.and_then(|()| {
            blocks_object
                .call_method1(intern!(py, "publish_end"), (end,))
                .map(drop)
        }) {
            return Err(self.write_failed(py, error, tail));
        }
        self.slots
            .round_robin
            .set(state, round_robin.into_pyobject(py)?.into_any());
        // As `BlockQueue.write_many`: each queue's end moved, one change more, in the
        // index that keeps its ends (no Python object per queue).
        let mut notes = Vec::with_capacity(rooms.len());
        {
            let mut known = index.lock();
            known.prefetch(rooms.iter().map(|room| room.queue_id as u32));
            for room in rooms {
                let end_offset = room.base + room.count;
                let ends = known.ends_mut(room.queue_id as u32);
                ends.max = end_offset;
                ends.changes += 1;
                notes.push((room.queue_id, end_offset));
            }
        }
        self.publish(py, &ready, end, topic.topic_id, &notes)?;
        let landed = Landed {
            topic: topic.name.clone(),
            queues: std::mem::take(queues),
            queue_offsets,
            starts,
            stored,
        };
        Ok(Some((landed, end as i64)))
    }

    /// What the batch's new blocks leave in the `BlockStore` (they are remembered in
    /// its index already): the allocation end moved, the block files written dirty.
    fn blocks_moved<'a, 'py: 'a>(
        &self,
        py: Python<'py>,
        blocks_object: &Bound<'py, PyAny>,
        plan: &BlockPlan,
        files: impl Iterator<Item = &'a (u64, Bound<'py, PyAny>, i32)>,
    ) -> PyResult<()> {
        blocks_object.setattr(intern!(py, "end"), plan.end)?;
        let dirty = blocks_object
            .getattr(intern!(py, "dirty"))?
            .cast_into::<PySet>()?;
        for (_, file, _) in files {
            dirty.add(file)?;
        }
        Ok(())
    }

    fn blocks_of<'py>(blocks: &Bound<'py, PyAny>) -> Step<Blocks<'py>> {
        let py = blocks.py();
        let per_block: u64 = blocks
            .getattr(intern!(py, "entries_per_block"))?
            .extract()?;
        let per_file: u64 = blocks.getattr(intern!(py, "blocks_per_file"))?.extract()?;
        let block_bytes: u64 = blocks.getattr(intern!(py, "block_bytes"))?.extract()?;
        if per_block == 0
            || per_file == 0
            || block_bytes != BLOCK_HEADER_SIZE as u64 + per_block * ENTRY_SIZE as u64
        {
            return declined();
        }
        Ok(Blocks {
            index: blocks
                .getattr(intern!(py, "index"))?
                .cast_into::<BlockIndex>()
                .map_err(|_| Stop::Declined)?,
            files: blocks
                .getattr(intern!(py, "files"))?
                .cast_into::<PyDict>()
                .map_err(PyErr::from)?,
            end: blocks.getattr(intern!(py, "end"))?.extract()?,
            store: blocks.clone(),
            geometry: Geometry {
                per_block,
                per_file,
                block_bytes,
            },
        })
    }

    /// `plan_blocks` for an index that misses no block another process allocated (not
    /// `stale`: no refresh), without the GIL: `per` entries a block, the allocated run
    /// ending at `end`.
    fn plan_known(index: &BlockIndex, per: u64, end: u64, rooms: &[SharedRoom]) -> Step<BlockPlan> {
        let known = index.lock();
        Self::plan_rooms(rooms, per, end, |owner, seq| Ok(known.recent(owner, seq)))
    }

    /// The block of each of the batch's `(queue, seq)`s, as `BlockStore.write_many`
    /// decides it, without writing or remembering anything: the block known, or, for
    /// one not known, the next at the end of the allocated run. A block this process
    /// does not know while others may have allocated blocks since it looked (`stale`)
    /// is looked for first (`BlockStore.refresh`, as `_block_for_write`), with the
    /// index let go meanwhile (`refresh` remembers what it finds).
    fn plan_blocks(blocks: &Blocks<'_>, rooms: &[SharedRoom]) -> Step<BlockPlan> {
        let py = blocks.store.py();
        let mut index = Some(blocks.index.get().lock());
        Self::plan_rooms(
            rooms,
            blocks.geometry.per_block,
            blocks.end,
            |owner, seq| {
                let known = index.as_ref().and_then(|index| index.recent(owner, seq));
                if known.is_some() || !blocks.store.getattr(intern!(py, "stale"))?.is_truthy()? {
                    return Ok(known);
                }
                index = None;
                blocks.store.call_method0(intern!(py, "refresh"))?;
                blocks.store.setattr(intern!(py, "stale"), false)?;
                let found_end: u64 = blocks.store.getattr(intern!(py, "end"))?.extract()?;
                if found_end != blocks.end {
                    // Blocks were taken in past the end this plan allocates from: the long
                    // way plans again (nothing is written yet).
                    return declined();
                }
                let relocked = blocks.index.get().lock();
                let found = relocked.get(owner, seq);
                index = Some(relocked);
                Ok(found)
            },
        )
    }

    /// The plan of the rooms' `(queue, seq)`s, each block found by `block_of` (None: not
    /// allocated yet, so the next at `end`).
    fn plan_rooms(
        rooms: &[SharedRoom],
        per: u64,
        mut end: u64,
        mut block_of: impl FnMut(u32, u64) -> Step<Option<u64>>,
    ) -> Step<BlockPlan> {
        let mut targets = Vec::with_capacity(rooms.len() + 8);
        let mut allocated = Vec::new();
        // A queue is one room of the batch, so each (queue, seq) comes once here.
        for room in rooms.iter().filter(|room| room.count > 0) {
            let owner = u32::try_from(room.queue_id).map_err(|_| Stop::Declined)?;
            if owner == ERASED {
                return declined();
            }
            let last = (room.base + room.count - 1) / per;
            for seq in room.base / per..=last {
                match block_of(owner, seq)? {
                    Some(block) => targets.push((block, false)),
                    None => {
                        targets.push((end, true));
                        allocated.push((owner, seq, end));
                        end += 1;
                    }
                }
            }
        }
        Ok(BlockPlan {
            targets,
            allocated,
            end,
        })
    }

    /// `BlockStore.write_many`'s pieces for the batch's entries (the `i`th of `entries`: queue
    /// `i`'s, from its end `shares[i].0`): each chunk into its planned block, a new
    /// block whole (its header, zeros, the chunk); sorted by place when `in_order`.
    fn pieces<'a>(
        geometry: Geometry,
        shares: &[(u64, u64)],
        plan: &BlockPlan,
        entries: &'a QueueEntries,
        in_order: bool,
    ) -> Vec<Piece<'a>> {
        let per = geometry.per_block;
        let mut targets = plan.targets.iter();
        let mut owners = plan.allocated.iter();
        let mut pieces: Vec<Piece<'a>> = Vec::with_capacity(plan.targets.len());
        for ((base, _), data) in shares.iter().zip(entries.iter()) {
            let mut index = *base;
            let mut rest = data;
            while !rest.is_empty() {
                let slot = index % per;
                let n = ((rest.len() / ENTRY_SIZE) as u64).min(per - slot);
                let chunk = &rest[..n as usize * ENTRY_SIZE];
                let at = BLOCK_HEADER_SIZE + slot as usize * ENTRY_SIZE;
                let Some(&(block, fresh)) = targets.next() else {
                    break; // never: a target per (queue, seq) of the entries
                };
                if fresh {
                    let Some(&(owner, seq, _)) = owners.next() else {
                        break; // never: an allocation per fresh target
                    };
                    let mut whole = vec![0u8; geometry.block_bytes as usize];
                    whole[..BLOCK_HEADER_SIZE].copy_from_slice(&header_bytes(owner, seq));
                    whole[at..at + chunk.len()].copy_from_slice(chunk);
                    pieces.push((block, 0, Cow::Owned(whole)));
                } else {
                    pieces.push((block, at, Cow::Borrowed(chunk)));
                }
                rest = &rest[chunk.len()..];
                index += n;
            }
        }
        if in_order {
            pieces.sort_unstable_by_key(|(block, at, _)| (*block, *at));
        }
        pieces
    }

    /// The pieces into their block files: stored into the files' mappings, or, for a
    /// file that cannot be mapped, written with `pwrite`s, adjacent ones joined. Runs
    /// without the GIL: the mappings are used under `MAPS`' lock, and only those still
    /// there (a file closed meanwhile, by its store's close in another thread, has its
    /// mapping let go: EBADF).
    fn write_pieces(
        geometry: Geometry,
        pieces: &[Piece<'_>],
        files: &[FileTarget],
        planned: Option<Python<'_>>,
    ) -> PyResult<()> {
        let size = geometry.block_bytes;
        let file_len = (geometry.per_file * size) as usize;
        if files.iter().all(|f| f.map.is_some()) {
            if let Some(py) = planned {
                // Under a fault plan each piece through the seam, its file looked up in
                // `MAPS` again for its store: the plan's hook, run before, may have let
                // the file go.
                for (block, at, data) in pieces {
                    let (target, position) = Self::piece_place(geometry, files, *block, *at)?;
                    Self::write_site(
                        py,
                        Site::BlockEntry,
                        target.fd,
                        position as u64,
                        data,
                        || {
                            let maps = Self::maps()?;
                            Self::store_piece(&maps, target, position, data, file_len)
                        },
                    )?;
                }
                return Ok(());
            }
            let maps = Self::maps_to_store()?;
            for (block, at, data) in pieces {
                let (target, position) = Self::piece_place(geometry, files, *block, *at)?;
                Self::store_piece(&maps, target, position, data, file_len)?;
            }
            return Ok(());
        }
        let put = |fd: i32, data: &[u8], at: u64| match planned {
            Some(py) => Self::write_at_site(py, Site::BlockEntry, fd, data, at),
            None => Self::write_at(fd, data, at),
        };
        let mut run: Vec<u8> = Vec::new();
        let mut run_at = 0u64; // the run's place in its file
        let mut run_file = u64::MAX;
        let mut run_end = u64::MAX; // the absolute place after the run
        let fd_of = |first: u64| files.iter().find(|f| f.first == first).map(|f| f.fd);
        for (block, at, data) in pieces {
            let first = block - block % geometry.per_file;
            let position = block * size + *at as u64;
            if position == run_end && first == run_file {
                run.extend_from_slice(data);
                run_end += data.len() as u64;
                continue;
            }
            if !run.is_empty() {
                put(fd_of(run_file).unwrap_or(-1), &run, run_at)?;
            }
            run.clear();
            run.extend_from_slice(data);
            run_file = first;
            run_at = position - first * size;
            run_end = position + data.len() as u64;
        }
        if !run.is_empty() {
            put(fd_of(run_file).unwrap_or(-1), &run, run_at)?;
        }
        Ok(())
    }

    /// The block files' mappings, locked (a mapping found there is not let go while the
    /// guard is held).
    fn maps() -> PyResult<std::sync::RwLockReadGuard<'static, Vec<BlockMap>>> {
        MAPS.read()
            .map_err(|_| PyOSError::new_err((libc::EIO, "block file mappings")))
    }

    /// `maps` for a batch's stores: when the flush thread holds it, counted among the
    /// waiting (`STORES_WAITING`), so that it lets the batch in between its runs
    /// (`let_stores_in`).
    fn maps_to_store() -> PyResult<std::sync::RwLockReadGuard<'static, Vec<BlockMap>>> {
        if let Ok(maps) = MAPS.try_read() {
            return Ok(maps);
        }
        STORES_WAITING.fetch_add(1, Ordering::SeqCst);
        let maps = Self::maps();
        STORES_WAITING.fetch_sub(1, Ordering::SeqCst);
        maps
    }

    /// A piece's file among the batch's and its place in that file.
    fn piece_place(
        geometry: Geometry,
        files: &[FileTarget],
        block: u64,
        at: usize,
    ) -> PyResult<(&FileTarget, usize)> {
        let first = block - block % geometry.per_file;
        let target = files
            .iter()
            .find(|f| f.first == first)
            .ok_or_else(|| PyOSError::new_err((libc::EINVAL, "a block of no batch file")))?;
        Ok((
            target,
            ((block - first) * geometry.block_bytes) as usize + at,
        ))
    }

    /// `data` stored at `position` of `target`'s mapping, if that mapping is still in
    /// `maps` for the same file (a store's close in another thread lets it go: EBADF).
    fn store_piece(
        maps: &[BlockMap],
        target: &FileTarget,
        position: usize,
        data: &[u8],
        file_len: usize,
    ) -> PyResult<()> {
        let Some((map, marks)) = target.map.and_then(|at| {
            maps.iter()
                .find(|m| m.at == at && m.file.as_ptr() as usize == target.file)
                .map(|m| (at, m))
        }) else {
            return Err(PyOSError::new_err((libc::EBADF, "a block file closed")));
        };
        if position + data.len() > file_len {
            return Err(PyOSError::new_err((libc::EINVAL, "a block past its file")));
        }
        // SAFETY: `map` is a live mapping of `file_len` bytes of the block file (found in
        // `maps`, whose lock the caller holds, so it is not unmapped meanwhile), its space
        // reserved; [position, position + len) lies inside it (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                (map as *mut u8).add(position),
                data.len(),
            );
        }
        marks.mark(position, data.len());
        Ok(())
    }
}
