//! `storeadapter.engine._native`: the PyO3 module. Each call takes a whole batch, so
//! crossing the boundary is paid per batch; the GIL is released while a batch is
//! encoded, checked or scanned.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PySet, PyString, PyTuple, PyType};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU8, Ordering};

mod append_core;
mod appending;
mod block_index;
mod entries;
mod events;
mod filter;
mod hashing;
mod io_seam;
mod layout;
mod log_sync;
mod mapped;
mod notes;
mod open_ends;
mod pen;
mod prepare;
mod reader;
mod records;
mod returning;
mod scan;
mod slots;
mod store_core;
mod thread_lock;
mod warm;
mod window;
mod words;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(appending::encode_plain, m)?)?;
    m.add_function(wrap_pyfunction!(appending::encode_placed, m)?)?;
    m.add_function(wrap_pyfunction!(events::encode_events, m)?)?;
    m.add_function(wrap_pyfunction!(reader::read_entries, m)?)?;
    m.add_function(wrap_pyfunction!(reader::decode_at, m)?)?;
    m.add_function(wrap_pyfunction!(reader::read_members, m)?)?;
    m.add_function(wrap_pyfunction!(reader::check_at, m)?)?;
    m.add_function(wrap_pyfunction!(reader::canonical_offset, m)?)?;
    m.add_function(wrap_pyfunction!(scan::scan_step, m)?)?;
    m.add_function(wrap_pyfunction!(scan::follow_spans, m)?)?;
    m.add_function(wrap_pyfunction!(entries::seal_entries, m)?)?;
    m.add_function(wrap_pyfunction!(entries::entry_checked, m)?)?;
    m.add_function(wrap_pyfunction!(hashing::key_hash, m)?)?;
    m.add_function(wrap_pyfunction!(hashing::tag_hash, m)?)?;
    m.add_function(wrap_pyfunction!(hashing::stream_hashes, m)?)?;
    m.add_function(wrap_pyfunction!(layout::record_layout, m)?)?;
    m.add_function(wrap_pyfunction!(warm::populate, m)?)?;
    m.add_function(wrap_pyfunction!(prepare::prepare_items, m)?)?;
    m.add_class::<scan::Run>()?;
    m.add_class::<filter::Filter>()?;
    m.add_class::<store_core::StoreCore>()?;
    m.add_class::<pen::Pen>()?;
    m.add_class::<thread_lock::ThreadLock>()?;
    m.add_class::<append_core::AppendCore>()?;
    m.add_class::<log_sync::LogSyncer>()?;
    m.add_class::<words::Refusals>()?;
    m.add_class::<words::Asks>()?;
    m.add_class::<words::Word>()?;
    m.add_class::<block_index::BlockIndex>()?;
    m.add_class::<block_index::QueueEnd>()?;
    m.add_function(wrap_pyfunction!(append_core::seam_changed, m)?)?;
    m.add_function(wrap_pyfunction!(io_seam::set_io, m)?)?;
    m.add_function(wrap_pyfunction!(io_seam::pin_clock, m)?)?;
    m.add_function(wrap_pyfunction!(append_core::seam_generation, m)?)?;
    m.add_function(wrap_pyfunction!(append_core::drop_block_pages, m)?)?;
    m.add_function(wrap_pyfunction!(returning::pwrite, m)?)?;
    m.add_function(wrap_pyfunction!(returning::fdatasync, m)?)?;
    m.add_function(wrap_pyfunction!(returning::made_way, m)?)?;
    m.add_function(wrap_pyfunction!(notes::noted_ends, m)?)?;
    m.add_function(wrap_pyfunction!(append_core::refault_block_pages, m)?)?;
    m.add_function(wrap_pyfunction!(append_core::unmap_block_file, m)?)?;
    m.add("RUN_BYTES", crate::scan::RUN_BYTES)?;
    m.add("INTERFACE", INTERFACE)?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

/// The interface this module offers `storeadapter/engine/dataplane.py` (which checks it
/// at import, so an engine never runs on a module built from another `native/`): one
/// more whenever a function, class, method or argument is added, removed or changed,
/// with `storeadapter/engine/_native.pyi` and `dataplane.NATIVE_INTERFACE`.
pub const INTERFACE: u32 = 47;

/// Below this much work (bytes of records) a call keeps the GIL: handing it over and
/// taking it back costs more than the work, and may wait for another thread's turn
/// (a single `append` would then pay a thread switch).
const DETACH_BYTES: usize = 64 << 10;

/// Run `work` without the GIL when it covers at least `DETACH_BYTES`, else with it.
pub(crate) fn detach_if<T, F>(py: Python<'_>, bytes: usize, work: F) -> T
where
    F: pyo3::marker::Ungil + FnOnce() -> T,
    T: pyo3::marker::Ungil,
{
    if bytes >= DETACH_BYTES {
        py.detach(work)
    } else {
        work()
    }
}

/// A read-only view of an object's bytes (a segment's mmap, bytes), held for a call.
pub(crate) struct Bytes {
    buffer: PyBuffer<u8>,
}

impl Bytes {
    pub(crate) fn of(object: &Bound<'_, PyAny>) -> PyResult<Bytes> {
        let buffer = PyBuffer::<u8>::get(object)?;
        if !buffer.is_c_contiguous() {
            return Err(PyTypeError::new_err("a contiguous buffer is needed"));
        }
        Ok(Bytes { buffer })
    }

    pub(crate) fn slice(&self) -> &[u8] {
        let len = self.buffer.len_bytes();
        if len == 0 {
            return &[];
        }
        // SAFETY: the buffer is C-contiguous and `len` bytes long (checked in `of`), and
        // it stays exported, so neither freed nor resized (an mmap refuses to close while
        // exported), for as long as `self` lives, which bounds the slice's lifetime. The
        // engine reads only bytes below the published tail, which no writer changes.
        unsafe { std::slice::from_raw_parts(self.buffer.buf_ptr() as *const u8, len) }
    }
}

/// A new instance of `cls`, a tuple subclass without fields of its own (a NamedTuple
/// such as StoredMessage), holding `items`: what `tuple.__new__(cls, items)` makes,
/// without building the plain tuple first, and not tracked by the garbage collector
/// (see `untrack`): every result type holds strings, numbers, bytes and the lists and
/// dicts `Extras` makes, which are untracked too.
pub(crate) fn new_record<'py, const N: usize>(
    py: Python<'py>,
    cls: &Bound<'py, PyType>,
    items: [Bound<'py, PyAny>; N],
) -> PyResult<Bound<'py, PyAny>> {
    let tp = cls.as_type_ptr();
    let adopted = records::adopted(tp);
    let counted = !adopted && !uncounted_alloc(py, tp);
    // SAFETY: `tp` is a live type object (`cls` holds a reference); `check_record_type`
    // made sure it is a tuple subclass with the tuple's layout, so its `tp_alloc` (or
    // `alloc_uncounted`, which makes what it makes, untracked, or `records::take`, which
    // makes the same on a freed record's memory: adoption checked `uncounted_alloc`)
    // makes a tuple of N empty slots, each filled exactly once below with a reference we
    // own (PyTuple_SET_ITEM steals it), as CPython's own tuple_subtype_new does.
    unsafe {
        let object = if adopted {
            records::take(tp, N)
        } else if counted {
            let alloc = (*tp).tp_alloc.unwrap_or(ffi::PyType_GenericAlloc);
            alloc(tp, N as ffi::Py_ssize_t)
        } else {
            alloc_uncounted(tp, N)
        };
        if object.is_null() {
            return Err(PyErr::fetch(py));
        }
        for (i, item) in items.into_iter().enumerate() {
            ffi::PyTuple_SET_ITEM(object, i as ffi::Py_ssize_t, item.into_ptr());
        }
        let record = Bound::from_owned_ptr(py, object);
        if counted {
            untrack(&record);
        }
        Ok(record)
    }
}

/// A new empty list, not tracked by the garbage collector and not counted among its
/// allocations (see `alloc_uncounted`): a message's keys when it has none.
pub(crate) fn empty_list(py: Python<'_>) -> Bound<'_, PyList> {
    // SAFETY: PyList_Type is static and, where `uncounted_alloc` says so, laid out as
    // `alloc_uncounted` needs; an empty list is its zeroed object (no items: `ob_item`
    // NULL, `allocated` 0) of size 0, as PyList_New(0) makes it.
    unsafe {
        let tp = std::ptr::addr_of_mut!(ffi::PyList_Type);
        if uncounted_alloc(py, tp) {
            let kept = records::take_object(records::Kind::List);
            if !kept.is_null() {
                // As `alloc_uncounted` makes it: an untracked header, no items.
                std::ptr::write_bytes(kept, 0, GC_HEAD);
                let object = kept.add(GC_HEAD).cast::<ffi::PyObject>();
                init_header(object, tp, Some(0));
                let list = object.cast::<ffi::PyListObject>();
                (*list).ob_item = std::ptr::null_mut();
                (*list).allocated = 0;
                return Bound::from_owned_ptr(py, object).cast_into_unchecked();
            }
            records::keep_from_now(records::Kind::List, 0);
            let object = alloc_uncounted(tp, 0);
            if !object.is_null() {
                return Bound::from_owned_ptr(py, object).cast_into_unchecked();
            }
            let _ = PyErr::fetch(py); // no memory: PyList_New says so below, or makes one
        }
    }
    let list = PyList::empty(py);
    untrack(&list);
    list
}

/// A new list as `PyList_New(0)` makes it, tracked by the garbage collector (it may come
/// to hold anything: a read's answer, which its caller may append to), but not counted
/// among its young allocations (see `alloc_uncounted`): a read's list of messages.
pub(crate) fn new_list(py: Python<'_>) -> Bound<'_, PyList> {
    // SAFETY: as in `empty_list`; the object is then tracked as `PyList_New` tracks it
    // (PyObject_GC_Track on a new, untracked object of a GC type).
    unsafe {
        let tp = std::ptr::addr_of_mut!(ffi::PyList_Type);
        if uncounted_alloc(py, tp) {
            let object = alloc_uncounted(tp, 0);
            if !object.is_null() {
                ffi::PyObject_GC_Track(object.cast());
                return Bound::from_owned_ptr(py, object).cast_into_unchecked();
            }
            let _ = PyErr::fetch(py); // no memory: PyList_New says so below, or makes one
        }
    }
    PyList::empty(py)
}

/// The most items `new_list_with_room` makes room for (a read's `max_messages` may be
/// anything; past this the list grows as appends make it).
const LIST_ROOM: usize = 1024;

/// `new_list` with room for `room` items made at once (at most `LIST_ROOM`), which
/// `append_in_room` fills without growing it: a read of 10 messages appended one by one
/// grew its list three times (4, 8, 16 items), each a reallocation.
pub(crate) fn new_list_with_room(py: Python<'_>, room: usize) -> Bound<'_, PyList> {
    let list = new_list(py);
    if room == 0 || room > LIST_ROOM {
        return list;
    }
    // SAFETY: the GIL is held; `list` is a new list nobody else holds, empty as
    // `PyList_New(0)` makes it (`ob_item` NULL, `allocated` 0: checked), so giving it an
    // item array of `room` slots from the allocator its `list_dealloc` and `list_resize`
    // free and resize with (`PyMem_*`) leaves it a valid empty list with that room.
    unsafe {
        let raw = list.as_ptr().cast::<ffi::PyListObject>();
        if !(*raw).ob_item.is_null() || (*raw).allocated != 0 {
            return list;
        }
        let items = ffi::PyMem_Malloc(room * std::mem::size_of::<*mut ffi::PyObject>());
        if !items.is_null() {
            (*raw).ob_item = items.cast();
            (*raw).allocated = room as ffi::Py_ssize_t;
        }
    }
    list
}

/// Append `item` to `list` (`PyList_Append`), stored in the list's room when it has some
/// left (no call, no resize check).
pub(crate) fn append_in_room(list: &Bound<'_, PyList>, item: Bound<'_, PyAny>) -> PyResult<()> {
    // SAFETY: the GIL is held and `list` is a live list; a slot at its size below
    // `allocated` is inside its item array and holds nothing, so storing a new reference
    // there and counting it in the size is what `PyList_Append` does when it needs no
    // resize.
    unsafe {
        let raw = list.as_ptr().cast::<ffi::PyListObject>();
        let size = ffi::Py_SIZE(list.as_ptr());
        if size < (*raw).allocated {
            *(*raw).ob_item.add(size as usize) = item.into_ptr();
            (*raw).ob_base.ob_size = size + 1;
            return Ok(());
        }
    }
    list.append(item)
}

/// Whether ints may be laid out by hand here (`int_of`): CPython 3.11 with 30-bit digits
/// of 4 bytes (`sys.int_info`), an int's digits right after its `PyVarObject` header, and
/// ints freed by `PyObject_Free` (`object_dealloc`, as 3.11's ints are). Looked at once
/// in an int `PyLong_FromUnsignedLongLong` made.
#[inline]
fn ints_by_hand(py: Python<'_>) -> bool {
    match INTS_BY_HAND.load(Ordering::Relaxed) {
        0 => ints_by_hand_looked(py),
        answer => answer == 1,
    }
}

/// `ints_by_hand`'s answer (0 not looked at yet, 1 yes, 2 no).
static INTS_BY_HAND: AtomicU8 = AtomicU8::new(0);

#[inline(never)]
fn ints_by_hand_looked(py: Python<'_>) -> bool {
    looked_once(&INTS_BY_HAND, || {
        // SAFETY: the GIL is held; on CPython 3.11 an int is a `PyVarObject` followed by its
        // digits, read here only within the size the int says it has (checked first).
        cpython_3_11(py)
            && unsafe {
                let tp = std::ptr::addr_of_mut!(ffi::PyLong_Type);
                let probe = (1u64 << 62) | (5 << 30) | 7;
                match Bound::from_owned_ptr_or_opt(py, ffi::PyLong_FromUnsignedLongLong(probe)) {
                    None => {
                        let _ = PyErr::fetch(py);
                        false
                    }
                    Some(int) => {
                        let var = int.as_ptr().cast::<ffi::PyVarObject>();
                        let digits = var.add(1).cast::<u32>();
                        let by_hand = (*tp).tp_itemsize == 4
                            && (*tp).tp_basicsize as usize
                                == std::mem::size_of::<ffi::PyVarObject>()
                            && (*tp).tp_free.map(|f| f as usize)
                                == Some(ffi::PyObject_Free as *const () as usize)
                            && (*var).ob_size == 3
                            && (*digits, *digits.add(1), *digits.add(2)) == (7, 5, 4);
                        if by_hand {
                            records::keep_from_now(records::Kind::Int1, 0);
                            records::keep_from_now(records::Kind::Int2, 0);
                            records::keep_from_now(records::Kind::Int3, 0);
                        }
                        by_hand
                    }
                }
            }
    })
}

/// The int `value`, as `PyLong_FromUnsignedLongLong` makes it: the interpreter's shared
/// small ints up to 256 from it, larger ones laid out here on CPython 3.11 (`ints_by_hand`):
/// one allocation, the header and one to three 30-bit digits written, without its count
/// of the digits by a loop and `_PyLong_New`'s checks and `PyObject_InitVar` call (a time
/// in milliseconds, always two digits: ~127 instructions `PyLong_FromLong`'s way).
#[inline(always)]
pub(crate) fn int_of(py: Python<'_>, value: u64) -> PyResult<Bound<'_, PyAny>> {
    const SHIFT: u32 = 30;
    const MASK: u64 = (1 << SHIFT) - 1;
    if value <= 256 {
        return Ok(small_int(py, value as usize));
    }
    if !ints_by_hand(py) {
        return Ok(value.into_pyobject(py)?.into_any());
    }
    let (middle, top) = (value >> SHIFT, value >> (2 * SHIFT));
    let digits: usize = 1 + usize::from(middle != 0) + usize::from(top != 0);
    // SAFETY: the GIL is held and ints are laid out as `ints_by_hand` found: a block of
    // the header and `digits` digits from the allocator ints are freed to, its header
    // written as `PyObject_InitVar` writes it for a static type (one reference, the type
    // not referenced), its size the count of digits (positive: the sign), each digit
    // written, the highest not 0 (as CPython requires of an int's digits).
    unsafe {
        let header = std::mem::size_of::<ffi::PyVarObject>();
        let kind = [
            records::Kind::Int1,
            records::Kind::Int2,
            records::Kind::Int3,
        ][digits - 1];
        let mut block = records::take_object(kind).cast::<ffi::PyVarObject>();
        if block.is_null() {
            block = ffi::PyObject_Malloc(header + 4 * digits).cast::<ffi::PyVarObject>();
        }
        if block.is_null() {
            return Err(pyo3::exceptions::PyMemoryError::new_err(()));
        }
        block.cast::<ffi::Py_ssize_t>().write(1); // 3.11's reference count: the first word
        (*block).ob_base.ob_type = std::ptr::addr_of_mut!(ffi::PyLong_Type);
        (*block).ob_size = digits as ffi::Py_ssize_t;
        let out = block.add(1).cast::<u32>();
        out.write((value & MASK) as u32);
        if digits > 1 {
            out.add(1).write((middle & MASK) as u32);
        }
        if digits > 2 {
            out.add(2).write(top as u32);
        }
        Ok(Bound::from_owned_ptr(py, block.cast()))
    }
}

/// The value of `object` read at its place when it is an int (exactly) of at most two
/// 30-bit digits on CPython 3.11 (`ints_by_hand`): what `PyLong_AsLong` answers for it,
/// without its call, its type check through the flags and its loop over the digits (a
/// queue's end, a file's first index: ~45 instructions a read that way). None for
/// anything else (a subclass, a larger int): the caller extracts it as before.
#[inline]
pub(crate) fn int_value(object: &Bound<'_, PyAny>) -> Option<i64> {
    // SAFETY: the GIL is held and `object` is live.
    unsafe { int_value_at(object.py(), object.as_ptr()) }
}

/// `int_value` of the object at `ptr`, without a reference taken (a slot's value).
///
/// # Safety
/// The GIL is held and `ptr` is a live object (held by someone for the call).
#[inline(always)]
pub(crate) unsafe fn int_value_at(py: Python<'_>, ptr: *mut ffi::PyObject) -> Option<i64> {
    const SHIFT: u32 = 30;
    // The object's type is one word of its header.
    if ffi::Py_TYPE(ptr) != std::ptr::addr_of_mut!(ffi::PyLong_Type) || !ints_by_hand(py) {
        return None;
    }
    // An int on CPython 3.11 laid out as `ints_by_hand` found: a `PyVarObject` whose size
    // is its count of digits (negative: the sign), the digits after it; only digits within
    // that count are read.
    let var = ptr.cast::<ffi::PyVarObject>();
    let size = (*var).ob_size;
    let digits = var.add(1).cast::<u32>();
    let magnitude = match size.unsigned_abs() {
        0 => 0,
        1 => i64::from(*digits),
        2 => i64::from(*digits) | (i64::from(*digits.add(1)) << SHIFT),
        _ => return None,
    };
    Some(if size < 0 { -magnitude } else { magnitude })
}

/// Give the int at `ptr`, which its one holder (a slot, a tuple's item) alone refers
/// to, the value `value` in place of making a new one and letting the old go (a queue's
/// change count, a topic's round-robin: ~90 instructions each a single append): true
/// when done. Done only for an int laid out as `ints_by_hand` found, of exactly one
/// reference (no one else can see it change, as CPython refills a tuple no one else
/// holds), past the shared small ints, whose count of digits `value` keeps (no
/// reallocation; the highest digit stays non-zero).
///
/// # Safety
/// The GIL is held, `ptr` is a live object, and the caller's holder is its one reference
/// (the count is checked to be 1 here, so no other holder, borrowed ones aside: the
/// caller runs no code that holds one across this).
pub(crate) unsafe fn renew_int_at(py: Python<'_>, ptr: *mut ffi::PyObject, value: u64) -> bool {
    const SHIFT: u32 = 30;
    const MASK: u64 = (1 << SHIFT) - 1;
    if value <= 256
        || value >= 1 << (2 * SHIFT)
        || ffi::Py_TYPE(ptr) != std::ptr::addr_of_mut!(ffi::PyLong_Type)
        || ffi::Py_REFCNT(ptr) != 1
        || !ints_by_hand(py)
    {
        return false;
    }
    let var = ptr.cast::<ffi::PyVarObject>();
    let digits: ffi::Py_ssize_t = if value >> SHIFT != 0 { 2 } else { 1 };
    if (*var).ob_size != digits {
        return false;
    }
    let out = var.add(1).cast::<u32>();
    out.write((value & MASK) as u32);
    if digits == 2 {
        out.add(1).write((value >> SHIFT) as u32);
    }
    true
}

/// How many entries `set_add` looks at from an item's place in a set's table: the
/// interpreter's own run of linear probes (`LINEAR_PROBES`) and the first.
const SET_PROBES: usize = 10;

/// `set.add(item)` for an item hashed by its address (its type's hash is `object`'s:
/// no Python code runs for it), when it is most likely in the set already (a queue
/// written again before the next flush): on CPython 3.11, whose `PySetObject` pyo3
/// declares, the entries from the item's place in the set's table are looked at first,
/// and an entry holding the item means it is a member: nothing to add, without
/// `PySet_Add`'s call and search (~96 instructions a queue and its file, two a single
/// append). Otherwise, and anywhere else, `PySet_Add`.
pub(crate) fn set_add(set: &Bound<'_, PySet>, item: &Bound<'_, PyAny>) -> PyResult<()> {
    let (raw, key) = (set.as_ptr(), item.as_ptr());
    // SAFETY: the GIL is held and `set` and `item` are live. The set is exactly a `set`
    // on CPython 3.11 (its type's size checked to be the `PySetObject` read here); its
    // table has `mask + 1` entries, and only entries below that are read. The item's
    // hash is `object`'s (its type's `tp_hash` checked), computed here. An entry's key is
    // only compared by address with the item (which the caller holds, so no other object
    // has its address): an entry holding it is the item's.
    unsafe {
        let set_type = std::ptr::addr_of_mut!(ffi::PySet_Type);
        if cpython_3_11(set.py())
            && ffi::Py_TYPE(raw) == set_type
            && (*set_type).tp_basicsize as usize == std::mem::size_of::<ffi::PySetObject>()
            && (*ffi::Py_TYPE(key)).tp_hash.map(|f| f as usize)
                == ffi::PyBaseObject_Type.tp_hash.map(|f| f as usize)
        {
            let object = raw.cast::<ffi::PySetObject>();
            // `object`'s hash, `_Py_HashPointer`: the address turned right by 4 bits (-1
            // made -2). Were it another, the item would not be found here: `PySet_Add`.
            let hash = match (key as usize).rotate_right(4) {
                usize::MAX => usize::MAX - 1,
                hash => hash,
            };
            let mask = (*object).mask as usize;
            let table = (*object).table;
            let start = hash & mask;
            for at in start..=(start + SET_PROBES - 1).min(mask) {
                let entry = &*table.add(at);
                if entry.key == key {
                    return Ok(());
                }
                if entry.key.is_null() {
                    break; // the end of its run: not in the set
                }
            }
        }
    }
    set.add(item)
}

/// The interpreter's shared int `value` (at most 256), as `PyLong_FromUnsignedLongLong`
/// hands it out: from the table of them (`SMALL_INTS`) once it is found laid out as one,
/// else from that function.
#[inline]
fn small_int(py: Python<'_>, value: usize) -> Bound<'_, PyAny> {
    let base = SMALL_INTS.load(Ordering::Relaxed);
    if base > 1 {
        // SAFETY: `small_ints_looked` found the interpreter's ints 0 to 256 at `base` +
        // `value` × `SMALL_INT_STRIDE` (each the object that function returns); they live
        // as long as the interpreter. One more reference is taken, as it takes one.
        unsafe {
            let object = (base + value * SMALL_INT_STRIDE) as *mut ffi::PyObject;
            ffi::Py_INCREF(object);
            return Bound::from_owned_ptr(py, object);
        }
    }
    small_int_looked(py, value)
}

/// The place of the interpreter's int 0, ints 1 to 256 following it `SMALL_INT_STRIDE`
/// bytes apart (CPython 3.11's `_PyLong_SMALL_INTS`); 0 not looked at yet, 1 not so.
static SMALL_INTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
const SMALL_INT_STRIDE: usize = 32;

#[inline(never)]
fn small_int_looked(py: Python<'_>, value: usize) -> Bound<'_, PyAny> {
    if SMALL_INTS.load(Ordering::Relaxed) == 0 {
        // Each of the 257 ints asked for once and compared with its place in the table;
        // a race between threads looks twice and stores the same answer.
        let made: Vec<Bound<'_, PyAny>> = (0..=256u64)
            .map(|i| match i.into_pyobject(py) {
                Ok(int) => int.into_any(),
                Err(never) => match never {},
            })
            .collect();
        let base = made.first().map_or(0, |zero| zero.as_ptr() as usize);
        let laid_out = cpython_3_11(py)
            && made.len() == 257
            && made
                .iter()
                .enumerate()
                .all(|(i, int)| int.as_ptr() as usize == base + i * SMALL_INT_STRIDE);
        SMALL_INTS.store(if laid_out { base } else { 1 }, Ordering::Relaxed);
    }
    match (value as u64).into_pyobject(py) {
        Ok(int) => int.into_any(),
        Err(never) => match never {},
    }
}

/// Where a bytes object's hash and data lie on CPython 3.11 (`PyBytesObject`: the
/// `PyVarObject` header, `ob_shash`, then the data and a NUL).
const BYTES_HASH_AT: usize = std::mem::size_of::<ffi::PyVarObject>();
const BYTES_DATA_AT: usize = BYTES_HASH_AT + std::mem::size_of::<ffi::Py_hash_t>();

/// Whether bytes may be laid out by hand here (`bytes_of`): CPython 3.11, `PyBytesObject`
/// as above (its basic size the data's place and the NUL, one byte an item), freed by
/// `PyObject_Free`; looked at once in a bytes object `PyBytes_FromStringAndSize` made.
fn bytes_by_hand(py: Python<'_>) -> bool {
    static LOOKED: AtomicU8 = AtomicU8::new(0);
    looked_once(&LOOKED, || {
        // SAFETY: the GIL is held; a new bytes object of 3 bytes, read within its size
        // (`BYTES_DATA_AT` + 4 bytes on the layout checked first by its type's sizes).
        cpython_3_11(py)
            && unsafe {
                let tp = std::ptr::addr_of_mut!(ffi::PyBytes_Type);
                (*tp).tp_basicsize as usize == BYTES_DATA_AT + 1
                    && (*tp).tp_itemsize == 1
                    && (*tp).tp_free.map(|f| f as usize)
                        == Some(ffi::PyObject_Free as *const () as usize)
                    && match Bound::from_owned_ptr_or_opt(
                        py,
                        ffi::PyBytes_FromStringAndSize(c"abc".as_ptr(), 3),
                    ) {
                        None => {
                            let _ = PyErr::fetch(py);
                            false
                        }
                        Some(made) => {
                            let at = made.as_ptr().cast::<u8>();
                            let by_hand = ffi::PyBytes_AsString(made.as_ptr()).cast::<u8>()
                                == at.add(BYTES_DATA_AT)
                                && *at.add(BYTES_HASH_AT).cast::<ffi::Py_hash_t>() == -1
                                && std::slice::from_raw_parts(at.add(BYTES_DATA_AT), 4) == b"abc\0";
                            if by_hand {
                                records::keep_bodies_from_now();
                            }
                            by_hand
                        }
                    }
            }
    })
}

/// The bytes object of `data`, as `PyBytes_FromStringAndSize` makes it: the interpreter's
/// shared empty one for none, else laid out here on CPython 3.11 (`bytes_by_hand`): one
/// allocation, the header, no hash yet, the data and its NUL (a message's body: ~97
/// instructions the interpreter's way).
pub(crate) fn bytes_of<'py>(py: Python<'py>, data: &[u8]) -> Bound<'py, PyAny> {
    if data.is_empty() || data.len() > isize::MAX as usize / 2 || !bytes_by_hand(py) {
        return pyo3::types::PyBytes::new(py, data).into_any();
    }
    // SAFETY: the GIL is held and bytes are laid out as `bytes_by_hand` found: a block of
    // the data's place, the data and the NUL from the allocator bytes are freed to, its
    // header written as `PyObject_InitVar` writes it for a static type, no hash (-1).
    unsafe {
        let size = BYTES_DATA_AT + data.len() + 1;
        let mut block = records::take_body(size);
        if block.is_null() {
            block = ffi::PyObject_Malloc(size).cast::<u8>();
        }
        if block.is_null() {
            let _ = PyErr::fetch(py);
            return pyo3::types::PyBytes::new(py, data).into_any(); // says so, or makes it
        }
        let object = block.cast::<ffi::PyObject>();
        init_header(
            object,
            std::ptr::addr_of_mut!(ffi::PyBytes_Type),
            Some(data.len() as ffi::Py_ssize_t),
        );
        block.add(BYTES_HASH_AT).cast::<ffi::Py_hash_t>().write(-1);
        std::ptr::copy_nonoverlapping(data.as_ptr(), block.add(BYTES_DATA_AT), data.len());
        *block.add(BYTES_DATA_AT + data.len()) = 0;
        Bound::from_owned_ptr(py, object)
    }
}

/// What a new empty dict holds (CPython 3.11's `new_dict(Py_EMPTY_KEYS, ...)`): the
/// interpreter's one shared empty keys table, and a version number.
#[derive(Clone, Copy)]
struct EmptyDict {
    keys: usize,
    version: u64,
}

/// The empty dict `new_dict` lays out, looked at once in a dict `PyDict_New` made; None
/// where it is not laid out by hand: not CPython 3.11, or a dict not as 3.11 makes an
/// empty one (two new dicts not sharing their keys table, or a new dict not counting
/// one more reference to it in the table's first word, `dk_refcnt`).
fn empty_dict(py: Python<'_>) -> Option<EmptyDict> {
    static LOOKED: std::sync::OnceLock<Option<(usize, u64)>> = std::sync::OnceLock::new();
    if let Some(found) = LOOKED.get() {
        return found.map(|(keys, version)| EmptyDict { keys, version });
    }
    // Looked at outside the cell's initialisation: `PyDict_New` may set off a collection,
    // whose finalizers may read messages and come here again (they look for themselves).
    let look = || {
        // SAFETY: `uncounted_alloc` is true only on CPython 3.11, whose `PyDictObject`
        // (the public struct pyo3 declares) is the layout read here; the GIL is held.
        // The keys table is only read (its first word) while the dicts holding it live.
        unsafe {
            let tp = std::ptr::addr_of_mut!(ffi::PyDict_Type);
            if !uncounted_alloc(py, std::ptr::addr_of_mut!(ffi::PyList_Type))
                || (*tp).tp_basicsize as usize != std::mem::size_of::<ffi::PyDictObject>()
                || (*tp).tp_itemsize != 0
                || ffi::PyType_HasFeature(tp, ffi::Py_TPFLAGS_HAVE_GC) == 0
                || (*tp).tp_free.map(|f| f as usize)
                    != Some(ffi::PyObject_GC_Del as *const () as usize)
            {
                return None;
            }
            let first = Bound::from_owned_ptr_or_opt(py, ffi::PyDict_New())?;
            let d1 = first.as_ptr().cast::<ffi::PyDictObject>();
            let keys = (*d1).ma_keys;
            let held = *keys.cast::<ffi::Py_ssize_t>();
            let second = Bound::from_owned_ptr_or_opt(py, ffi::PyDict_New())?;
            let d2 = second.as_ptr().cast::<ffi::PyDictObject>();
            let same = (*d2).ma_keys == keys
                && *keys.cast::<ffi::Py_ssize_t>() == held + 1
                && (*d1).ma_used == 0
                && (*d1).ma_values.is_null()
                && (*d2).ma_values.is_null();
            #[allow(deprecated)]
            let version = (*d2).ma_version_tag;
            same.then_some((keys as usize, version))
        }
    };
    let found = look();
    if let Some((keys, _)) = found {
        // SAFETY: the GIL is held; `new_dict` lays empty dicts out on this table.
        unsafe { records::keep_from_now(records::Kind::Dict, keys) };
    }
    let _ = LOOKED.set(found); // a reentrant look may have set the same answer first
    found.map(|(keys, version)| EmptyDict { keys, version })
}

/// A new empty dict as `PyDict_New` makes it on CPython 3.11 (untracked, holding the
/// shared empty keys table, one more reference to it counted), but not counted among
/// the collector's young allocations (see `alloc_uncounted`): a message's properties.
/// Freed by `dict_dealloc` as any dict (onto the dicts' free list, or counted off by
/// `PyObject_GC_Del`). Its version number (PEP 509) is the one of a dict made once, not
/// a new one: CPython 3.11 reads a dict's version nowhere (its caches go by the keys
/// table's), and the first change gives the dict a new one as for any dict.
pub(crate) fn new_dict(py: Python<'_>) -> Bound<'_, pyo3::types::PyDict> {
    if let Some(EmptyDict { keys, version }) = empty_dict(py) {
        // SAFETY: `empty_dict` found CPython 3.11's layout of an empty dict (above) and
        // that `PyList_Type` passes `uncounted_alloc` (the interpreter checked); the GIL
        // is held. The object is zeroed by `alloc_uncounted` at `PyDictObject`'s size
        // (PyDict_Type has no items) with an untracked GC header, then given what
        // `new_dict` gives it, the keys table's reference count (`dictkeys_incref`)
        // raised for the reference it now holds, which `dict_dealloc` lets go.
        unsafe {
            let tp = std::ptr::addr_of_mut!(ffi::PyDict_Type);
            let kept = records::take_object(records::Kind::Dict);
            let object = if kept.is_null() {
                alloc_uncounted(tp, 0)
            } else {
                // As `alloc_uncounted` leaves it but for the fields written below.
                std::ptr::write_bytes(kept, 0, GC_HEAD);
                let object = kept.add(GC_HEAD).cast::<ffi::PyObject>();
                init_header(object, tp, None);
                object
            };
            if !object.is_null() {
                let dict = object.cast::<ffi::PyDictObject>();
                let keys = keys as *mut ffi::PyDictKeysObject;
                *keys.cast::<ffi::Py_ssize_t>() += 1;
                (*dict).ma_used = 0;
                #[allow(deprecated)]
                {
                    (*dict).ma_version_tag = version;
                }
                (*dict).ma_keys = keys;
                (*dict).ma_values = std::ptr::null_mut();
                return Bound::from_owned_ptr(py, object).cast_into_unchecked();
            }
            let _ = PyErr::fetch(py); // no memory: PyDict_New says so below, or makes one
        }
    }
    pyo3::types::PyDict::new(py)
}

/// CPython's `PyGC_Head`: the collector's two words before a GC object (3.11).
const GC_HEAD: usize = 2 * std::mem::size_of::<usize>();

/// Whether the interpreter is CPython 3.11, whose object layouts `alloc_uncounted`,
/// `new_id_string`, `new_dict` and records.rs write and `dict_version` reads. Looked at
/// once without running Python code (the version string the interpreter was built with);
/// a race between threads looks twice and stores the same answer.
#[inline]
fn cpython_3_11(py: Python<'_>) -> bool {
    static CPYTHON_3_11: AtomicU8 = AtomicU8::new(0);
    if CPYTHON_3_11.load(Ordering::Relaxed) == 1 {
        return true; // the answer once looked at, without `looked_once`'s call
    }
    looked_once(&CPYTHON_3_11, || {
        let version = py.version_info();
        (version.major, version.minor) == (3, 11) && !Python::version_str().contains("PyPy")
    })
}

/// `look`'s answer, looked at once and kept in `kept` (0 not looked at yet, 1 yes, 2 no);
/// threads that race look twice and keep the same answer.
fn looked_once(kept: &AtomicU8, look: impl FnOnce() -> bool) -> bool {
    match kept.load(Ordering::Relaxed) {
        0 => {
            let answer = look();
            kept.store(if answer { 1 } else { 2 }, Ordering::Relaxed);
            answer
        }
        answer => answer == 1,
    }
}

/// The dict's version (PEP 509): on CPython 3.11 a number no other state of any dict had,
/// changed by every insertion, deletion and setting of an item, so an unchanged version
/// means the same items, each the same object. None elsewhere (3.12 deprecates it).
pub(crate) fn dict_version(dict: &Bound<'_, pyo3::types::PyDict>) -> Option<u64> {
    if !cpython_3_11(dict.py()) {
        return None;
    }
    // SAFETY: on CPython 3.11 a dict is laid out as the `PyDictObject` pyo3 declares; the
    // GIL is held and `dict` is live. One word is read.
    #[allow(deprecated)]
    let version = unsafe { (*dict.as_ptr().cast::<ffi::PyDictObject>()).ma_version_tag };
    Some(version)
}

/// Whether `alloc_uncounted` may make objects of `tp` here: CPython 3.11 (whose layout of
/// a GC object's header it writes), and `tp` a GC type whose objects are made by
/// `PyType_GenericAlloc` and freed by `PyObject_GC_Del`, with nothing before its GC
/// header (no managed dict).
fn uncounted_alloc(py: Python<'_>, tp: *mut ffi::PyTypeObject) -> bool {
    // SAFETY: reading fields of a live type object (the caller holds a reference, or it
    // is static).
    cpython_3_11(py)
        && unsafe {
            ffi::PyType_HasFeature(tp, ffi::Py_TPFLAGS_HAVE_GC) != 0
                && ffi::PyType_HasFeature(tp, ffi::Py_TPFLAGS_MANAGED_DICT) == 0
                // Functions of the interpreter's library: one address each, as CPython's
                // own `type->tp_free == PyObject_GC_Del` tests take them.
                && (*tp).tp_alloc.map(|f| f as usize) == Some(ffi::PyType_GenericAlloc as *const () as usize)
                && (*tp).tp_free.map(|f| f as usize) == Some(ffi::PyObject_GC_Del as *const () as usize)
                && (*tp).tp_itemsize as usize <= std::mem::size_of::<usize>()
        }
}

/// A new object of `tp` with room for `items` items, zeroed, as `PyType_GenericAlloc`
/// makes it, but neither tracked by the garbage collector nor counted among its young
/// allocations (NULL with an exception set when out of memory).
///
/// Every GC object made counts one towards the next young-generation collection (700),
/// tracked or not, until it is freed; a read's messages, held by its caller (a bench's
/// round of 64 reads, a consumer's batch), set off a collection every ~230 messages, each
/// walking the young objects and, every tenth and hundredth, the older ones (the tracked
/// lists of a topic of a million queues). A message can take part in no cycle unless its
/// caller builds one (see `untrack`), so it need not call for a collection. Freed, it is
/// counted off as any GC object (`PyObject_GC_Del`).
///
/// # Safety
/// The GIL is held and `uncounted_alloc(py, tp)` is true.
unsafe fn alloc_uncounted(tp: *mut ffi::PyTypeObject, items: usize) -> *mut ffi::PyObject {
    // `_PyObject_VAR_SIZE(tp, items + 1)`: `PyType_GenericAlloc` makes room for one item
    // more (a sentinel), rounded up to a pointer's size.
    let word = std::mem::size_of::<usize>();
    let size = ((*tp).tp_basicsize as usize + (items + 1) * (*tp).tp_itemsize as usize)
        .next_multiple_of(word);
    let memory = ffi::PyObject_Malloc(GC_HEAD + size);
    if memory.is_null() {
        return ffi::PyErr_NoMemory();
    }
    // The GC header zeroed is an untracked object's (`_gc_next` 0); the object zeroed,
    // as `PyType_GenericAlloc` leaves it, then its type, size and reference set.
    std::ptr::write_bytes(memory.cast::<u8>(), 0, GC_HEAD + size);
    let object = memory.cast::<u8>().add(GC_HEAD).cast::<ffi::PyObject>();
    let items = ((*tp).tp_itemsize != 0).then_some(items as ffi::Py_ssize_t);
    init_header(object, tp, items);
    object
}

/// Write the header of a new object of `tp` at `object` as `PyObject_Init` (or, with a
/// size, `PyObject_InitVar`) writes it on CPython 3.11: its type (referenced when a
/// heap type), its size, and one reference (`_Py_NewReference`; with tracemalloc on, the
/// block keeps the trace of its allocation rather than taking the caller's). Inline:
/// the call cost ~22 instructions an object, three objects a message.
///
/// # Safety
/// CPython 3.11 (`cpython_3_11`), the GIL held, `object` a new object's memory of `tp`'s
/// size, with room for `size` items when given.
#[inline]
pub(crate) unsafe fn init_header(
    object: *mut ffi::PyObject,
    tp: *mut ffi::PyTypeObject,
    size: Option<ffi::Py_ssize_t>,
) {
    (*object).ob_type = tp;
    if ffi::PyType_HasFeature(tp, ffi::Py_TPFLAGS_HEAPTYPE) != 0 {
        ffi::Py_INCREF(tp.cast());
    }
    if let Some(size) = size {
        (*object.cast::<ffi::PyVarObject>()).ob_size = size;
    }
    object.cast::<ffi::Py_ssize_t>().write(1); // 3.11's reference count: the first word
}

/// Take a new container that holds no container of its own that is tracked (a result
/// tuple, a message's keys list) off the garbage collector's lists.
///
/// A read makes two such containers per message; tracked, each young-generation
/// collection walks them all (every 700 allocations, so more than once per read of
/// 500), which cost reads at 50 B about 40 % of their CPU (docs/PERFORMANCE.md). No
/// reference cycle can pass through one unless the caller builds it (appends a message
/// to its own keys list): such a cycle would then be left to reference counting, which
/// does not free it. CPython untracks plain tuples of atoms the same way, lazily.
pub(crate) fn untrack(container: &Bound<'_, PyAny>) {
    // SAFETY: `container` is a live object and the GIL is held; PyObject_GC_UnTrack
    // accepts any object of a GC type whether tracked or not, and every container we
    // make (tuple subclasses, lists) is of one. Its deallocator untracks it again, which
    // is allowed.
    unsafe { ffi::PyObject_GC_UnTrack(container.as_ptr().cast()) };
}

/// Refuse a `cls` that `new_record` cannot fill: not a tuple subclass, or one with
/// fields of its own (a `__dict__` or slots); give one it can fill its own deallocator
/// where it may (`records::adopt`).
pub(crate) fn check_record_type(cls: &Bound<'_, PyType>) -> PyResult<()> {
    let tp = cls.as_type_ptr();
    // SAFETY: reading two size fields of live type objects (ours holds a reference;
    // PyTuple_Type is static).
    let same_layout = unsafe {
        (*tp).tp_basicsize == ffi::PyTuple_Type.tp_basicsize
            && (*tp).tp_itemsize == ffi::PyTuple_Type.tp_itemsize
            && (*tp).tp_dictoffset == 0
    };
    if !cls.is_subclass_of::<PyTuple>()? || !same_layout {
        return Err(PyTypeError::new_err(
            "the result type must be a tuple subclass without fields of its own",
        ));
    }
    records::adopt(cls.py(), tp);
    Ok(())
}

/// The characters of a message id (the store's 8 hex digits and the offset's 16).
const ID_CHARS: usize = 24;

/// The store's part of its message ids: 8 hex digits.
pub(crate) fn id_prefix(prefix: &str) -> PyResult<[u8; 8]> {
    prefix
        .as_bytes()
        .try_into()
        .map_err(|_| PyTypeError::new_err("a message id prefix is 8 hex digits"))
}

/// `prefix` and `offset` in 16 upper-case hex digits: a message id, written straight
/// into a new ASCII string (no UTF-8 decoding of what is ASCII by construction).
pub(crate) fn message_id<'py>(
    py: Python<'py>,
    prefix: &[u8; 8],
    offset: u64,
) -> Bound<'py, PyString> {
    let digits = crate::message_id::hex_digits(offset);
    if !prefix.is_ascii() {
        // A prefix is 8 bytes the caller gave (`id_prefix`): only ASCII is written raw.
        let mut text = prefix.to_vec();
        text.extend_from_slice(&digits);
        return PyString::new(py, &String::from_utf8_lossy(&text));
    }
    // SAFETY: the GIL is held. `new_id_string`, as PyUnicode_New(24, 127), makes a
    // compact ASCII string of 24 one-byte characters (or NULL with an exception set,
    // which PyErr::fetch takes);
    // its data is 24 writable bytes until the string is shared, and every byte written
    // is ASCII (the prefix checked above, the digits by construction), as such a string
    // requires.
    unsafe {
        let object = new_id_string(py);
        if object.is_null() {
            let _ = PyErr::fetch(py);
            let mut text = prefix.to_vec();
            text.extend_from_slice(&digits);
            return PyString::new(py, std::str::from_utf8(&text).unwrap_or_default());
        }
        let data = ffi::PyUnicode_1BYTE_DATA(object);
        std::ptr::copy_nonoverlapping(prefix.as_ptr(), data, 8);
        std::ptr::copy_nonoverlapping(digits.as_ptr(), data.add(8), 16);
        Bound::from_owned_ptr(py, object).cast_into_unchecked()
    }
}

/// A new compact ASCII string of `ID_CHARS` characters (not written yet), as
/// `PyUnicode_New(24, 127)` makes it, laid out here on CPython 3.11 (its header's state
/// word copied from one `PyUnicode_New` made): one allocation, the header's four fields
/// and the terminating NUL, without `PyUnicode_New`'s checks of the size and the
/// largest character, the same for every id (a result's `message_id`: ~40 of its 154
/// instructions, docs/PERFORMANCE.md, put33-s54). NULL with an exception set when out
/// of memory.
///
/// # Safety
/// The GIL is held.
unsafe fn new_id_string(py: Python<'_>) -> *mut ffi::PyObject {
    static STATE: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    let header = std::mem::size_of::<ffi::PyASCIIObject>();
    let state = *STATE.get_or_init(|| {
        if !cpython_3_11(py) {
            return None;
        }
        // SAFETY: the GIL is held; a new string of 24 characters, only its header read
        // (its data's place and its state word), then let go.
        unsafe {
            let made = ffi::PyUnicode_New(ID_CHARS as ffi::Py_ssize_t, 127);
            if made.is_null() {
                let _ = PyErr::fetch(py);
                return None;
            }
            let laid_out = ffi::PyUnicode_1BYTE_DATA(made) == made.cast::<u8>().add(header)
                && ffi::PyUnicode_GET_LENGTH(made) == ID_CHARS as ffi::Py_ssize_t;
            let state = (*made.cast::<ffi::PyASCIIObject>()).state;
            ffi::Py_DECREF(made);
            if laid_out {
                records::keep_from_now(records::Kind::Id, state as usize);
            }
            laid_out.then_some(state)
        }
    });
    let Some(state) = state else {
        return ffi::PyUnicode_New(ID_CHARS as ffi::Py_ssize_t, 127);
    };
    let size = header + ID_CHARS + 1;
    let mut memory = records::take_object(records::Kind::Id).cast::<c_void>();
    if memory.is_null() {
        memory = ffi::PyObject_Malloc(size);
    }
    if memory.is_null() {
        return ffi::PyErr_NoMemory();
    }
    // The object's reference and type, its length, no hash yet, its state (not
    // interned, one byte a character, compact, ASCII, ready), no wide copy (3.11's
    // `wstr`), and the NUL after the characters (which the caller writes); the state
    // word's padding is never read.
    let object = memory.cast::<ffi::PyObject>();
    init_header(object, std::ptr::addr_of_mut!(ffi::PyUnicode_Type), None);
    let ascii = object.cast::<ffi::PyASCIIObject>();
    (*ascii).length = ID_CHARS as ffi::Py_ssize_t;
    (*ascii).hash = -1;
    (*ascii).state = state;
    (*ascii).wstr = std::ptr::null_mut();
    *memory.cast::<u8>().add(size - 1) = 0;
    object
}
