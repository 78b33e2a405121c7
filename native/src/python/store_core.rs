//! The store core: the hot read state of one open store in one process (its segment
//! table and the shared state's sequence word), so that a `get` is one native call.
//!
//! The core never decides what damage is: whatever it does not accept at once (an id
//! not written as this store writes them, an offset outside the log, a record that fails
//! a check, a closed or forked store) it declines with None, and the engine's Python
//! path (the long way) says what is wrong, as it always has.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyType};
use pyo3::{PyTraverseError, PyVisit};

use super::reader::{checked_message, Extras};
use super::{check_record_type, id_prefix};
use crate::record::{self, Parts};

/// Where the shared state keeps its sequence word (sharedstate.py `_SEQUENCE_AT`): a
/// little-endian u64 that changes with every write another process publishes.
const SEQUENCE_AT: usize = 8;
/// The followed sequence before the first follow: no sequence word has this value.
const NEVER_FOLLOWED: u64 = u64::MAX;
/// Topic names kept as strings; past this many the cache starts again.
const TOPIC_NAMES: usize = 4096;

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

    /// The segment holding `offset`: its base and mapping.
    fn find(&self, py: Python<'_>, offset: u64) -> Option<(u64, Py<PyAny>)> {
        let index = self
            .segments
            .partition_point(|s| s.base <= offset)
            .checked_sub(1)?;
        let segment = &self.segments[index];
        (offset < segment.end).then(|| (segment.base, segment.map.clone_ref(py)))
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

/// A lock that a panic elsewhere does not make unusable (what it guards is a cache).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The hot read state of one open store in this process (see the module docs). Made by
/// the store's open with the store (whose `_follow` catches up with other processes and
/// whose `_forked` says it may no longer be used), its commit log (`tail`, `segments`),
/// the shared state's mapping, the store's id prefix and the result type.
#[pyclass(frozen, module = "storeadapter.engine._native")]
pub struct StoreCore {
    prefix: [u8; 8],
    store: Py<PyAny>,
    log: Py<PyAny>,
    segments: Py<PyList>,
    shared: Py<PyAny>,
    message_type: Py<PyType>,
    followed: AtomicU64,
    closed: AtomicBool,
    table: Mutex<Table>,
    topics: Mutex<HashMap<Vec<u8>, Py<PyString>>>,
}

#[pymethods]
impl StoreCore {
    #[new]
    fn new(
        store: &Bound<'_, PyAny>,
        log: &Bound<'_, PyAny>,
        shared: &Bound<'_, PyAny>,
        prefix: &str,
        message_type: &Bound<'_, PyType>,
    ) -> PyResult<StoreCore> {
        check_record_type(message_type)?;
        let segments = log
            .getattr(intern!(store.py(), "segments"))?
            .cast_into::<PyList>()?;
        Ok(StoreCore {
            prefix: id_prefix(prefix)?,
            store: store.clone().unbind(),
            log: log.clone().unbind(),
            segments: segments.unbind(),
            shared: shared.clone().unbind(),
            message_type: message_type.clone().unbind(),
            followed: AtomicU64::new(NEVER_FOLLOWED),
            closed: AtomicBool::new(false),
            table: Mutex::new(Table::default()),
            topics: Mutex::new(HashMap::new()),
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
        if self
            .store
            .bind(py)
            .getattr(intern!(py, "_forked"))?
            .is_truthy()?
        {
            return Ok(None);
        }
        self.follow(py)?;
        let tail: u64 = self.log.bind(py).getattr(intern!(py, "tail"))?.extract()?;
        if commit_offset >= tail {
            return Ok(None);
        }
        let Some((base, map)) = self.locate(py, commit_offset)? else {
            return Ok(None);
        };
        let Some(data) = View::of(map.bind(py)) else {
            return Ok(None); // a mapping closed under us: the long way says so
        };
        let data = data.slice();
        let pos = (commit_offset - base) as usize;
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
        checked_message(
            py,
            self.message_type.bind(py),
            message_id.clone(),
            topic.into_bound(py).into_any(),
            &header,
            extras,
            parts.body,
        )
        .map(Some)
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

    /// The store closed: every later call declines, and the mappings are let go.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let old = std::mem::take(&mut *lock(&self.table));
        drop(old);
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.store)?;
        visit.call(&self.log)?;
        visit.call(&self.segments)?;
        visit.call(&self.shared)?;
        Ok(())
    }
}

impl StoreCore {
    /// The commit offset of `message_id` when it is this store's id as the store writes
    /// them (the prefix, then 16 upper-case hex digits).
    fn canonical_offset(&self, message_id: &Bound<'_, PyAny>) -> Option<u64> {
        let text = message_id
            .cast::<PyString>()
            .ok()?
            .to_str()
            .ok()?
            .as_bytes();
        let digits = text.strip_prefix(&self.prefix[..])?;
        if digits.len() != 16 {
            return None;
        }
        digits.iter().try_fold(0u64, |value, &b| {
            let digit = match b {
                b'0'..=b'9' => b - b'0',
                b'A'..=b'F' => b - b'A' + 10,
                _ => return None,
            };
            Some(value << 4 | u64::from(digit))
        })
    }

    /// Catch up with other processes (the store's `_follow`) when the shared sequence
    /// word moved since this core last saw the store caught up.
    fn follow(&self, py: Python<'_>) -> PyResult<()> {
        let sequence = {
            let shared = View::of(self.shared.bind(py));
            let shared = shared.as_ref().map_or(&[][..], View::slice);
            let word = shared.get(SEQUENCE_AT..SEQUENCE_AT + 8);
            word.and_then(|w| w.try_into().ok()).map(u64::from_le_bytes)
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

    /// The segment holding `offset` (its base and mapping), reading the table again
    /// when the commit log's list of segments changed.
    fn locate(&self, py: Python<'_>, offset: u64) -> PyResult<Option<(u64, Py<PyAny>)>> {
        let list = self.segments.bind(py);
        let len = list.len();
        if len == 0 {
            return Ok(None);
        }
        let first = list.get_item(0)?;
        let last = list.get_item(len - 1)?;
        {
            let table = lock(&self.table);
            if table.is_of(len, first.as_ptr(), last.as_ptr()) {
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
        if let Some(text) = lock(&self.topics).get(name) {
            return Some(text.clone_ref(py));
        }
        let text = PyString::new(py, std::str::from_utf8(name).ok()?).unbind();
        let mut topics = lock(&self.topics);
        if topics.len() >= TOPIC_NAMES {
            topics.clear();
        }
        topics.insert(name.to_vec(), text.clone_ref(py));
        Some(text)
    }
}
