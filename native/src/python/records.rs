//! The records the engine hands out (`AppendResult`, `StoredMessage`: tuple subclasses
//! made by `new_record`) freed by a deallocator of their own, and their memory kept for
//! the next records (CPython 3.11).
//!
//! A record's type is a class made by Python (a NamedTuple), so its deallocator is the
//! interpreter's `subtype_dealloc`: it takes the object off the collector's lists, enters
//! the trashcan, looks for a finalizer, weak references, slots and a dict the class might
//! have added, puts the object back on the collector's lists, and calls `tupledealloc`,
//! which takes it off again, enters the trashcan again, lets go of the items and frees the
//! memory (a tuple subclass never goes to the tuples' free list), before `subtype_dealloc`
//! lets go of the type. A batch's caller freeing its 500 results paid ~430 instructions a
//! result for that (docs/PERFORMANCE.md, put33-s53).
//!
//! `adopt` gives such a type `record_dealloc`, which does what those two do for a record
//! (a tuple subclass adding nothing to the tuple: no slots, no dict, no weak references,
//! as `check_record_type` and `adopt` make sure): a finalizer, if the class is given one
//! later; the collector's lists; the trashcan (deep chains of records made in Python);
//! the items; the memory; the type. The memory of a record `new_record` made (untracked
//! and not counted among the collector's allocations, `alloc_uncounted`) of at most
//! `KEPT_ITEMS` items is kept (up to `KEPT` of each length) for `take`, which
//! `new_record` makes the next record of that length with: a batch's results freed feed
//! the next batch's. A record made by Python (tracked and counted) is freed by its
//! type's `tp_free`, which counts it off.
//!
//! The items such a record alone holds, of the kinds its makers lay out by hand (ints
//! of up to three digits, message ids, bodies, empty keys lists and properties dicts),
//! are freed into `Pools` in the same way (`keep_item`), which those makers take from
//! first (`take_object`, `take_body`): a check read's ten messages made and freed cost
//! six allocations and six deallocations each through the interpreter's allocator
//! (~490 instructions a message, docs/PERFORMANCE.md, check33-s56).
//!
//! A class derived from an adopted type in Python keeps `subtype_dealloc`, which does its
//! own part (its dict, its finalizer, its weak references) and then calls the nearest
//! base's other deallocator, `record_dealloc`, as it would `tupledealloc`; since that base
//! is a heap type, `subtype_dealloc` leaves the type's reference to it (CPython's rule for
//! a heap type's deallocator): `record_dealloc` lets go of it in every case.
//!
//! Only on CPython 3.11 (`uncounted_alloc`), whose `subtype_dealloc`, `tupledealloc` and
//! trashcan (`_PyTrash_begin`, `_PyTrash_end`, looked up, not linked) this follows.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};

use super::{uncounted_alloc, GC_HEAD};

/// Records of at most this many items have their memory kept when freed.
const KEPT_ITEMS: usize = 16;
/// How many freed records of each length are kept (a batch's results, 500 by default,
/// fit; ~110 KB at 7 items).
const KEPT: u32 = 1024;

type TrashBegin = unsafe extern "C" fn(*mut ffi::PyThreadState, *mut ffi::PyObject) -> c_int;
type TrashEnd = unsafe extern "C" fn(*mut ffi::PyThreadState);

/// The interpreter's trashcan, which `Py_TRASHCAN_BEGIN`/`END` call on CPython 3.11.
struct Trashcan {
    begin: TrashBegin,
    end: TrashEnd,
}

/// The trashcan's functions, looked up once (None: not found, nothing is adopted).
fn trashcan() -> Option<&'static Trashcan> {
    static FOUND: OnceLock<Option<Trashcan>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            // SAFETY: dlsym reads two NUL-terminated names; what it finds under them in
            // CPython 3.11's library (adoption requires 3.11) are these two functions.
            unsafe {
                let begin = libc::dlsym(libc::RTLD_DEFAULT, c"_PyTrash_begin".as_ptr());
                let end = libc::dlsym(libc::RTLD_DEFAULT, c"_PyTrash_end".as_ptr());
                if begin.is_null() || end.is_null() {
                    return None;
                }
                Some(Trashcan {
                    begin: std::mem::transmute::<*mut c_void, TrashBegin>(begin),
                    end: std::mem::transmute::<*mut c_void, TrashEnd>(end),
                })
            }
        })
        .as_ref()
}

/// The freed records' memory kept, by length: a list linked through each block's first
/// word (its collector header's, rewritten when the block is taken).
struct Kept {
    heads: [*mut u8; KEPT_ITEMS + 1],
    counts: [u32; KEPT_ITEMS + 1],
}

/// `Kept`, touched only with the GIL held (by `record_dealloc` and `take`), which
/// serializes every access on CPython 3.11.
struct GilHeld(UnsafeCell<Kept>);

// SAFETY: every access holds the GIL (see `GilHeld`); the pointers are blocks of the
// interpreter's object allocator, which any thread holding the GIL may use.
unsafe impl Sync for GilHeld {}

static KEPT_BLOCKS: GilHeld = GilHeld(UnsafeCell::new(Kept {
    heads: [std::ptr::null_mut(); KEPT_ITEMS + 1],
    counts: [0; KEPT_ITEMS + 1],
}));

/// The deallocator of a class made by Python (`subtype_dealloc`): that of a tuple
/// subclass made once for the purpose.
fn subtype_dealloc(py: Python<'_>) -> Option<usize> {
    static FOUND: OnceLock<Option<usize>> = OnceLock::new();
    if let Some(found) = FOUND.get() {
        return *found;
    }
    let made = || -> PyResult<usize> {
        let namespace = PyDict::new(py);
        namespace.set_item("__slots__", PyTuple::empty(py))?;
        let class =
            py.get_type::<PyType>()
                .call1(("_Probe", (py.get_type::<PyTuple>(),), namespace))?;
        let tp = class.cast::<PyType>()?.as_type_ptr();
        // SAFETY: reading a field of a live type object (`class` holds it).
        Ok(unsafe { (*tp).tp_dealloc }.map_or(0, |f| f as usize))
    };
    let found = made().ok().filter(|&f| f != 0);
    let _ = FOUND.set(found);
    found
}

fn is_record_dealloc(dealloc: Option<ffi::destructor>) -> bool {
    dealloc.map(|f| f as usize) == Some(record_dealloc as ffi::destructor as usize)
}

/// Whether `tp` frees its objects with `record_dealloc`.
#[inline]
pub(crate) fn adopted(tp: *mut ffi::PyTypeObject) -> bool {
    // SAFETY: reading a field of a live type object (the caller holds it).
    is_record_dealloc(unsafe { (*tp).tp_dealloc })
}

/// Give `tp`, a tuple subclass with the tuple's layout (`check_record_type`), the
/// deallocator `record_dealloc`, where it may: CPython 3.11 (`uncounted_alloc`), a class
/// made by Python whose bases up to `tuple` are such classes too, with no weak references
/// and no `tp_del`. Anything else keeps its deallocator.
pub(crate) fn adopt(py: Python<'_>, tp: *mut ffi::PyTypeObject) {
    if adopted(tp) || !uncounted_alloc(py, tp) || trashcan().is_none() {
        return;
    }
    let Some(subtype) = subtype_dealloc(py) else {
        return;
    };
    // SAFETY: reading fields of live type objects (`tp` and its bases, which it holds)
    // with the GIL held; writing `tp`'s deallocator with the GIL held, which every
    // deallocation of its objects holds too (a deallocation already under way in
    // `subtype_dealloc` finds `record_dealloc` as its base's, which does the same work).
    unsafe {
        let tuple = std::ptr::addr_of_mut!(ffi::PyTuple_Type);
        let mut base = tp;
        while base != tuple {
            if base.is_null() {
                return;
            }
            let dealloc = (*base).tp_dealloc;
            if ffi::PyType_HasFeature(base, ffi::Py_TPFLAGS_HEAPTYPE) == 0
                || (*base).tp_weaklistoffset != 0
                || (*base).tp_del.is_some()
                || !(dealloc.map(|f| f as usize) == Some(subtype) || is_record_dealloc(dealloc))
            {
                return;
            }
            base = (*base).tp_base;
        }
        (*tp).tp_dealloc = Some(record_dealloc);
    }
}

/// A new object of `tp` (adopted) with `items` items, as `alloc_uncounted` makes it (not
/// tracked, not counted), on the memory of a record of that length freed before when
/// there is one. Its items are to be filled by the caller, each exactly once.
///
/// # Safety
/// The GIL is held, `adopted(tp)`, and `uncounted_alloc(py, tp)` (which adoption
/// checked; the fields it reads do not change for a class made by Python).
pub(crate) unsafe fn take(tp: *mut ffi::PyTypeObject, items: usize) -> *mut ffi::PyObject {
    if items <= KEPT_ITEMS {
        let kept = &mut *KEPT_BLOCKS.0.get();
        let block = kept.heads[items];
        if !block.is_null() {
            kept.heads[items] = *block.cast::<*mut u8>();
            kept.counts[items] -= 1;
            // An untracked object's collector header (both words 0), then its type
            // (referenced), length and one reference, as `alloc_uncounted` makes it.
            std::ptr::write_bytes(block, 0, GC_HEAD);
            let object = block.add(GC_HEAD).cast::<ffi::PyObject>();
            super::init_header(object, tp, Some(items as ffi::Py_ssize_t));
            return object;
        }
    }
    super::alloc_uncounted(tp, items)
}

/// The deallocator of an adopted type's objects, and (called by `subtype_dealloc` as its
/// base's) of its Python subclasses' (see the module's comment).
///
/// # Safety
/// Called by the interpreter with the GIL held, for an object whose reference count
/// reached 0, of an adopted type or a subclass of one.
unsafe extern "C" fn record_dealloc(object: *mut ffi::PyObject) {
    let tp = ffi::Py_TYPE(object);
    // Of an adopted type itself, not a subclass `subtype_dealloc` is freeing.
    let own = adopted(tp);
    // Made by `new_record` (untracked, not counted among the collector's allocations),
    // not by Python (tracked, counted, and to be counted off by `tp_free`).
    // (`_PyObject_GC_IS_TRACKED`: the header's first word, `_gc_next`, is 0 untracked.)
    let made_here = *object.cast::<u8>().sub(GC_HEAD).cast::<usize>() == 0;
    // A record made here is never tracked (unless a finalizer below tracks it).
    let mut tracked = !made_here;
    if own && (*tp).tp_finalize.is_some() {
        // A `__del__` given to the class after its adoption: as `subtype_dealloc`.
        if ffi::PyObject_GC_IsTracked(object) == 0 {
            ffi::PyObject_GC_Track(object.cast());
        }
        tracked = true;
        if ffi::PyObject_CallFinalizerFromDealloc(object) < 0 {
            return; // resurrected
        }
    }
    if tracked {
        ffi::PyObject_GC_UnTrack(object.cast());
    }
    let mut thread = std::ptr::null_mut();
    if own && !made_here {
        // `Py_TRASHCAN_BEGIN`: past a depth of nested deallocations, the object is kept
        // on the trashcan's list and freed (by this function again) once they unwind.
        // A subclass's object is in `subtype_dealloc`'s trashcan already. A record made
        // here nests no record of its own: its items are the ones its maker made (ints,
        // strings, bytes, shared objects) and lists and dicts, whose deallocators count
        // themselves in the trashcan, so a chain of them through records a caller built
        // is counted at every other step.
        let Some(trash) = trashcan() else {
            return; // unreachable: adoption found it
        };
        thread = ffi::PyThreadState_Get();
        if (trash.begin)(thread, object) != 0 {
            return;
        }
    }
    let items = ffi::Py_SIZE(object);
    // A record made here holds the objects `new_record`'s callers made for it: those it
    // alone holds are kept for the next records' (`keep_item`).
    let keep = own && made_here;
    for i in (0..items).rev() {
        let item = ffi::PyTuple_GET_ITEM(object, i);
        if !(item.is_null() || keep && keep_item(item)) {
            ffi::Py_DECREF(item);
        }
    }
    let length = items as usize;
    let kept = &mut *KEPT_BLOCKS.0.get();
    if own && made_here && length <= KEPT_ITEMS && kept.counts[length] < KEPT {
        let block = object.cast::<u8>().sub(GC_HEAD);
        *block.cast::<*mut u8>() = kept.heads[length];
        kept.heads[length] = block;
        kept.counts[length] += 1;
    } else if let Some(free) = (*tp).tp_free {
        free(object.cast());
    }
    ffi::Py_DECREF(tp.cast());
    if !thread.is_null() {
        if let Some(trash) = trashcan() {
            (trash.end)(thread);
        }
    }
}

/// The kinds of object a record's items are kept by when the record is freed (`keep_item`)
/// and taken from when the next ones are made (`take_object`): an offset or a time of one,
/// two or three 30-bit digits (`int_of`), a message id (`message_id`), an empty keys list
/// (`empty_list`) and an empty properties dict (`new_dict`). Bodies are kept by size
/// (`take_body`).
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Int1 = 0,
    Int2 = 1,
    Int3 = 2,
    Id = 3,
    List = 4,
    Dict = 5,
}
const KINDS: usize = 6;

/// How many objects of each kind, and bodies of each size, are kept: a round of reads
/// held and let go at once (million.py's check: 64 reads of 10) feeds the next round.
const KEPT_OBJECTS: u32 = 1024;
/// Bodies are kept by the size of their block, up to this many bytes (a body of 222).
const KEPT_BODY_BLOCK: usize = 256;
/// The most bytes kept in bodies' blocks altogether.
const KEPT_BODY_BYTES: usize = 1 << 20;

/// The freed items' memory kept (lists linked through each block's first word) and what
/// a kind must look like to be kept, set by its maker's first laying out by hand (the
/// layout it checked then): until then nothing of that kind is kept.
struct Pools {
    heads: [*mut u8; KINDS],
    /// How many are kept of each kind; `KEPT_OBJECTS` (full) until the kind is kept.
    counts: [u32; KINDS],
    /// A message id's state word (`new_id_string`'s).
    id_state: u32,
    /// The interpreter's shared empty keys table (`new_dict`'s).
    empty_keys: usize,
    bodies: [*mut u8; KEPT_BODY_BLOCK + 1],
    body_counts: [u32; KEPT_BODY_BLOCK + 1],
    /// The bytes kept in bodies; `KEPT_BODY_BYTES` (full) until bodies are kept.
    body_bytes: usize,
}

/// `Pools`, touched only with the GIL held, as `KEPT_BLOCKS`.
struct PoolsHeld(UnsafeCell<Pools>);

// SAFETY: as `GilHeld`'s: every access holds the GIL; the blocks are the object
// allocator's.
unsafe impl Sync for PoolsHeld {}

static POOLS: PoolsHeld = PoolsHeld(UnsafeCell::new(Pools {
    heads: [std::ptr::null_mut(); KINDS],
    counts: [KEPT_OBJECTS; KINDS],
    id_state: 0,
    empty_keys: 0,
    bodies: [std::ptr::null_mut(); KEPT_BODY_BLOCK + 1],
    body_counts: [0; KEPT_BODY_BLOCK + 1],
    body_bytes: KEPT_BODY_BYTES,
}));

/// Let freed items of `kind` be kept from now on: its maker lays it out by hand (on the
/// layout it checked). `facts` is the id's state word for `Kind::Id`, the empty keys
/// table for `Kind::Dict`.
///
/// # Safety
/// The GIL is held; the maker of `kind` makes its objects on CPython 3.11's layout, as
/// `keep_item` and the maker's use of `take_object` expect.
pub(crate) unsafe fn keep_from_now(kind: Kind, facts: usize) {
    let pools = &mut *POOLS.0.get();
    match kind {
        Kind::Id => pools.id_state = facts as u32,
        Kind::Dict => pools.empty_keys = facts,
        _ => {}
    }
    if pools.heads[kind as usize].is_null() && pools.counts[kind as usize] == KEPT_OBJECTS {
        pools.counts[kind as usize] = 0;
    }
}

/// Let freed bodies be kept from now on (`bytes_of` lays them out by hand).
///
/// # Safety
/// The GIL is held and bytes are laid out as `bytes_of` found.
pub(crate) unsafe fn keep_bodies_from_now() {
    let pools = &mut *POOLS.0.get();
    if pools.body_bytes == KEPT_BODY_BYTES && pools.body_counts.iter().all(|&n| n == 0) {
        pools.body_bytes = 0;
    }
}

/// A kept block of `kind` (its object's memory; a GC object's block starts at its
/// collector header), to be laid out whole by the caller; null when none is kept.
///
/// # Safety
/// The GIL is held.
#[inline]
pub(crate) unsafe fn take_object(kind: Kind) -> *mut u8 {
    let pools = &mut *POOLS.0.get();
    let block = pools.heads[kind as usize];
    if !block.is_null() {
        pools.heads[kind as usize] = *block.cast::<*mut u8>();
        pools.counts[kind as usize] -= 1;
    }
    block
}

/// A kept block of `size` bytes for a body (a bytes object), null when none is kept.
///
/// # Safety
/// The GIL is held.
#[inline]
pub(crate) unsafe fn take_body(size: usize) -> *mut u8 {
    if size > KEPT_BODY_BLOCK {
        return std::ptr::null_mut();
    }
    let pools = &mut *POOLS.0.get();
    let block = pools.bodies[size];
    if !block.is_null() {
        pools.bodies[size] = *block.cast::<*mut u8>();
        pools.body_counts[size] -= 1;
        pools.body_bytes -= size;
    }
    block
}

/// Free `item`, an item of a record being freed whose last reference the record holds,
/// by keeping its memory for the next object of its kind (what its deallocator would do
/// but the allocator's `free`), when it is one of the kinds kept and room is left; false
/// (nothing done) otherwise: the caller lets go of it as usual.
///
/// Kept: an exact int of one to three digits; an exact str laid out as a message id
/// (compact ASCII, 24 characters, not interned, no wide copy); an exact bytes object
/// of a kept size; an exact, untracked, empty list without an item array; an exact,
/// untracked, empty dict on the shared empty keys table (its reference to the table let
/// go, as `dict_dealloc` does). Each of these is freed by its deallocator with no more
/// than that (3.11: `object_dealloc`, `bytes_dealloc`, `unicode_dealloc`, `list_dealloc`
/// and `dict_dealloc` with their free lists, then `PyObject_Free` or `PyObject_GC_Del`);
/// the lists and dicts were made uncounted (`alloc_uncounted`), so the collector's count
/// is not counted down for them either.
///
/// # Safety
/// The GIL is held; `item` is a live object whose one reference is the caller's, let go
/// by this call when it returns true.
#[inline]
unsafe fn keep_item(item: *mut ffi::PyObject) -> bool {
    if ffi::Py_REFCNT(item) != 1 {
        return false;
    }
    let pools = &mut *POOLS.0.get();
    let tp = ffi::Py_TYPE(item);
    let (kind, block) = if tp == std::ptr::addr_of_mut!(ffi::PyLong_Type) {
        let kind = match (*item.cast::<ffi::PyVarObject>()).ob_size {
            1 => Kind::Int1,
            2 => Kind::Int2,
            3 => Kind::Int3,
            _ => return false,
        };
        (kind, item.cast::<u8>())
    } else if tp == std::ptr::addr_of_mut!(ffi::PyUnicode_Type) {
        let ascii = item.cast::<ffi::PyASCIIObject>();
        if (*ascii).length != super::ID_CHARS as ffi::Py_ssize_t
            || (*ascii).state != pools.id_state
            || !(*ascii).wstr.is_null()
        {
            return false;
        }
        (Kind::Id, item.cast::<u8>())
    } else if tp == std::ptr::addr_of_mut!(ffi::PyBytes_Type) {
        let size = super::BYTES_DATA_AT + ffi::Py_SIZE(item) as usize + 1;
        if ffi::Py_SIZE(item) < 1
            || size > KEPT_BODY_BLOCK
            || pools.body_counts[size] >= KEPT_OBJECTS
            || pools.body_bytes + size > KEPT_BODY_BYTES
        {
            return false;
        }
        let block = item.cast::<u8>();
        *block.cast::<*mut u8>() = pools.bodies[size];
        pools.bodies[size] = block;
        pools.body_counts[size] += 1;
        pools.body_bytes += size;
        return true;
    } else if tp == std::ptr::addr_of_mut!(ffi::PyList_Type) {
        let block = item.cast::<u8>().sub(GC_HEAD);
        let list = item.cast::<ffi::PyListObject>();
        if *block.cast::<usize>() != 0 || !(*list).ob_item.is_null() || (*list).allocated != 0 {
            return false; // tracked, or with an item array
        }
        (Kind::List, block)
    } else if tp == std::ptr::addr_of_mut!(ffi::PyDict_Type) {
        let block = item.cast::<u8>().sub(GC_HEAD);
        let dict = item.cast::<ffi::PyDictObject>();
        if *block.cast::<usize>() != 0
            || (*dict).ma_used != 0
            || !(*dict).ma_values.is_null()
            || (*dict).ma_keys as usize != pools.empty_keys
            || pools.empty_keys == 0
        {
            return false;
        }
        if pools.counts[Kind::Dict as usize] >= KEPT_OBJECTS {
            return false;
        }
        // `dictkeys_decref` of the shared table (never its last reference).
        *((*dict).ma_keys.cast::<ffi::Py_ssize_t>()) -= 1;
        (Kind::Dict, block)
    } else {
        return false;
    };
    let k = kind as usize;
    if pools.counts[k] >= KEPT_OBJECTS {
        return false;
    }
    *block.cast::<*mut u8>() = pools.heads[k];
    pools.heads[k] = block;
    pools.counts[k] += 1;
    true
}
