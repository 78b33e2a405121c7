//! The native fault seam (issue 31, "The fault seam becomes a native I/O trait").
//!
//! Every write, reservation and sync the store core makes goes through an `Io` at a
//! named `Site`. In production the `Io` is `Direct`: it makes the call (a store into a
//! mapping, a `pwrite`, an `fallocate`, an `fdatasync`) and nothing else. A test installs
//! a recording one (`set_io`, from the Python fault plan: tests/faults/faultyfs.py,
//! `FaultyFS(native=True)`): each call at a site is shown to a Python hook before it is
//! made, `hook(site, fd, offset, what, "before")` (`what`: the bytes of a write, the
//! length of a reservation, None for a sync), which may raise `OSError` (the call fails
//! with that errno, as a failed syscall fails it) or end the process (a kill point
//! before the n-th match); then the call is made and shown again, `"after"` (the hook
//! records it in its power-loss model, in order with the Python side's writes: the GIL
//! is held throughout, and it may kill the process after the n-th match). The group
//! commit's flusher thread takes the GIL for it only while a plan is installed.
//!
//! A plan installed this way names the long way's functions the sites stand in for
//! (`covers`: `fileio.pwrite_all`, `fileio.fdatasync`); the core's check of the genuine
//! long way (`AppendCore::still_genuine`) accepts those replaced, so the core keeps
//! running under the plan instead of declining, and the plan sees the core's calls by
//! site name. The time of the core's writes may be pinned (`pin_clock`), as a test pins
//! `clock.now_ms`, so that two runs of one workload write the same bytes.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// Where the core writes, reserves or syncs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Site {
    /// A record (a single append's, into the segment's mapping) or a batch's records
    /// (one `pwrite`).
    LogRecord,
    /// A queue's entries, stored into its file's mapped window (or a `pwrite`).
    QueueEntry,
    /// A window of a queue file reserved with `fallocate` before entries are stored
    /// into it (window.rs).
    QueueReserve,
    /// A shared topic's entries (or a new block, whole) stored into a block file's
    /// mapping (or a `pwrite`): shared_core.rs.
    BlockEntry,
    /// A queue's time marks (one `pwrite`).
    TimeIndexMark,
    /// The group commit's `fdatasync` of the active segment (sync mode; log_sync.rs).
    LogSync,
}

impl Site {
    pub fn name(self) -> &'static str {
        match self {
            Site::LogRecord => "log.record",
            Site::QueueEntry => "queue.entry",
            Site::QueueReserve => "queue.reserve",
            Site::BlockEntry => "block.entry",
            Site::TimeIndexMark => "timeindex.mark",
            Site::LogSync => "log.sync",
        }
    }
}

/// What a call at a site does to its file.
#[derive(Clone, Copy, Debug)]
pub enum What<'a> {
    /// Writes these bytes at the offset.
    Write(&'a [u8]),
    /// Reserves (`fallocate`, mode 0) this many bytes from the offset.
    Reserve(u64),
    /// Makes the file's data durable (`fdatasync`).
    Sync,
}

/// The core's I/O at named sites. `call` makes the call (`direct`) that does `what` at
/// byte `at` of the file `fd`, as site `site`, and may do more around it.
pub trait Io {
    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        py: Python<'_>,
        site: Site,
        fd: RawFd,
        at: u64,
        what: What<'_>,
        direct: &mut dyn FnMut() -> PyResult<()>,
    ) -> PyResult<()>;

    /// A write of `data` at `at` (`call` with `What::Write`).
    fn write(
        &self,
        py: Python<'_>,
        site: Site,
        fd: RawFd,
        at: u64,
        data: &[u8],
        direct: &mut dyn FnMut() -> PyResult<()>,
    ) -> PyResult<()> {
        self.call(py, site, fd, at, What::Write(data), direct)
    }
}

/// Production: the call, nothing else.
pub struct Direct;

impl Io for Direct {
    fn call(
        &self,
        _py: Python<'_>,
        _site: Site,
        _fd: RawFd,
        _at: u64,
        _what: What<'_>,
        direct: &mut dyn FnMut() -> PyResult<()>,
    ) -> PyResult<()> {
        direct()
    }
}

/// Tests: every call shown to a Python hook before and after it is made.
pub struct Recording {
    hook: Py<PyAny>,
}

impl Io for Recording {
    fn call(
        &self,
        py: Python<'_>,
        site: Site,
        fd: RawFd,
        at: u64,
        what: What<'_>,
        direct: &mut dyn FnMut() -> PyResult<()>,
    ) -> PyResult<()> {
        let hook = self.hook.bind(py);
        let name = PyString::new(py, site.name());
        let shown = match what {
            What::Write(data) => PyBytes::new(py, data).into_any(),
            What::Reserve(length) => length.into_pyobject(py)?.into_any(),
            What::Sync => py.None().into_bound(py),
        };
        hook.call1((&name, fd, at, &shown, "before"))?;
        direct()?;
        hook.call1((&name, fd, at, &shown, "after"))?;
        Ok(())
    }
}

/// The installed plan: its hook, and the long way's objects its sites stand in for
/// (`(namespace, name)`: a replaced one there does not turn the core down).
struct Plan {
    io: Recording,
    covers: Vec<(Py<PyAny>, String)>,
}

static PLANNED: AtomicBool = AtomicBool::new(false);
static PLAN: Mutex<Option<Plan>> = Mutex::new(None);
/// The core's store time when pinned (`pin_clock`); `i64::MIN` when not.
static PINNED_MS: AtomicI64 = AtomicI64::new(i64::MIN);

/// Whether a fault plan's `Io` is installed.
pub fn planned() -> bool {
    PLANNED.load(Ordering::Acquire)
}

/// Run `write` through the `Io` in force: `Direct`, or the installed plan's.
pub fn with_io<R>(py: Python<'_>, write: impl FnOnce(&dyn Io) -> R) -> R {
    if !PLANNED.load(Ordering::Acquire) {
        return write(&Direct);
    }
    let hook = match PLAN.lock() {
        Ok(plan) => plan.as_ref().map(|p| p.io.hook.clone_ref(py)),
        Err(_) => None,
    };
    match hook {
        Some(hook) => write(&Recording { hook }),
        None => write(&Direct),
    }
}

/// Whether the installed plan's sites stand in for `namespace[name]`.
pub fn covers(namespace: &Bound<'_, PyAny>, name: &str) -> bool {
    if !PLANNED.load(Ordering::Acquire) {
        return false;
    }
    match PLAN.lock() {
        Ok(plan) => plan.as_ref().is_some_and(|p| {
            p.covers
                .iter()
                .any(|(space, covered)| space.bind(namespace.py()).is(namespace) && covered == name)
        }),
        Err(_) => false,
    }
}

/// The core's store time: pinned, or the wall clock's milliseconds.
pub fn pinned_ms() -> Option<i64> {
    let pinned = PINNED_MS.load(Ordering::Relaxed);
    (pinned != i64::MIN).then_some(pinned)
}

/// Install (`hook` a callable) or remove (None) the recording `Io` of a fault plan,
/// with the `(namespace, name)` pairs of the long way its sites stand in for. Moves the
/// seam generation, so every core looks the long way up again.
#[pyfunction]
#[pyo3(signature = (hook, covers=Vec::new()))]
pub fn set_io(hook: Option<Py<PyAny>>, covers: Vec<(Py<PyAny>, String)>) -> PyResult<()> {
    let mut plan = PLAN.lock().map_err(|_| {
        pyo3::exceptions::PyRuntimeError::new_err("the I/O plan's lock is poisoned")
    })?;
    *plan = hook.map(|hook| Plan {
        io: Recording { hook },
        covers,
    });
    PLANNED.store(plan.is_some(), Ordering::Release);
    drop(plan);
    super::append_core::seam_changed();
    Ok(())
}

/// Pin the core's store time to `ms` (None: the wall clock again); tests pin
/// `clock.now_ms` to the same value.
#[pyfunction]
#[pyo3(signature = (ms))]
pub fn pin_clock(ms: Option<i64>) {
    PINNED_MS.store(ms.unwrap_or(i64::MIN), Ordering::Relaxed);
}
