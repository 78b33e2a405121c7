//! Threads returning from a blocking call, and the native appends that make way for them.
//!
//! A native `append` keeps the GIL for the whole call and never lets go of it, so a loop
//! of appends hands the GIL over only when CPython asks it to: a thread whose blocking
//! call (a write, an fdatasync) has ended waits for the GIL for the interpreter's switch
//! interval (5 ms) before it asks. An offset commit makes two such calls; beside a loop of
//! appends in the same process each cost 5 ms (issue 31's commit p99; docs/PERFORMANCE.md,
//! commit31-s51).
//!
//! The blocking calls of the commit path (`fileio.pwrite_all`'s pwrite and
//! `fileio.fdatasync`: `pwrite` and `fdatasync` here), the waits of the `Pen` and
//! the `ThreadLock`, and a shared topic's batch work under the thread lock
//! (shared_core.rs), are made by `blocking`: a thread counts itself in `ASKED` when its
//! call has ended, before it takes the GIL back, and in `TAKEN` once it has it. A native
//! append starts with `make_way`: when some thread has asked and not yet taken it (two
//! relaxed loads when none has), the append lets go of the GIL until one has taken it,
//! at most `MAKE_WAY_FOR`, then takes it back (after that thread's Python work, or its
//! next blocking call). A wait that ran out (the asker was not scheduled, or it will
//! never take the GIL: a daemon thread at the interpreter's exit) is remembered in
//! `PASSED`, so that appends do not wait for the same ask again.
//!
//! Letting go of the GIL on every append hands it over too, but costs ~460 instructions
//! an append (+7 %, callgrind) where this costs one (PERFORMANCE.md, commit31-s51).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyOSError;
use pyo3::ffi;
use pyo3::prelude::*;

use super::Bytes;

/// How many threads ever counted themselves back from a blocking call.
static ASKED: AtomicU64 = AtomicU64::new(0);
/// How many of them have taken the GIL back.
static TAKEN: AtomicU64 = AtomicU64::new(0);
/// `ASKED` when a `make_way` last ran out of time (no waiting for that ask again).
static PASSED: AtomicU64 = AtomicU64::new(u64::MAX);
/// How many times an append let go of the GIL for a returning thread (tests, benches).
static MADE_WAY: AtomicU64 = AtomicU64::new(0);

/// The longest an append waits, without the GIL, for a returning thread to take it.
/// A thread woken on another core takes it in tens of µs.
const MAKE_WAY_FOR: Duration = Duration::from_millis(1);

/// Run `work` (a blocking system call) without the GIL, counting this thread in
/// `ASKED` when it ends and in `TAKEN` once the GIL is back.
pub(crate) fn blocking<T, F>(py: Python<'_>, work: F) -> T
where
    F: Send + FnOnce() -> T,
    T: Send,
{
    let out = py.detach(move || {
        let out = work();
        ASKED.fetch_add(1, Ordering::Relaxed);
        out
    });
    TAKEN.fetch_add(1, Ordering::Release);
    out
}

/// Called by a native append, holding the GIL, before it takes any lock (and by a
/// shared topic's batch after it lets go of the thread lock): when a thread
/// returning from a blocking call waits for the GIL, let go of it until that thread
/// (or another) has taken it, at most `MAKE_WAY_FOR`.
#[inline]
pub(crate) fn make_way(py: Python<'_>) {
    let asked = ASKED.load(Ordering::Relaxed);
    if asked == TAKEN.load(Ordering::Relaxed) || asked == PASSED.load(Ordering::Relaxed) {
        return;
    }
    wait_for_taker(py, asked);
}

#[cold]
#[inline(never)]
fn wait_for_taker(py: Python<'_>, asked: u64) {
    let taken = TAKEN.load(Ordering::Relaxed);
    if asked == taken {
        return;
    }
    MADE_WAY.fetch_add(1, Ordering::Relaxed);
    py.detach(|| {
        let until = Instant::now() + MAKE_WAY_FOR;
        while TAKEN.load(Ordering::Acquire) == taken {
            if Instant::now() >= until {
                PASSED.store(asked, Ordering::Relaxed);
                return;
            }
            std::thread::yield_now();
        }
    });
}

/// The OSError `os` raises for `errno` (its subclass, its args), set and fetched.
fn errno_error(py: Python<'_>, errno: i32) -> PyErr {
    // SAFETY: `__errno_location` is this thread's errno; `PyErr_SetFromErrno` reads it
    // and sets the error indicator (the GIL is held), which `PyErr::take` takes at once.
    unsafe {
        *libc::__errno_location() = errno;
        ffi::PyErr_SetFromErrno(ffi::PyExc_OSError);
    }
    PyErr::take(py).unwrap_or_else(|| PyOSError::new_err(errno))
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// `os.pwrite(fd, data, offset)` (`data` bytes-like): how many bytes were written; an
/// EINTR runs the signal handlers and writes again, any other error raises OSError as
/// `os.pwrite` does. A `blocking` call (`fileio.pwrite_all` writes through it).
#[pyfunction]
pub(crate) fn pwrite(
    py: Python<'_>,
    fd: i32,
    data: &Bound<'_, PyAny>,
    offset: i64,
) -> PyResult<usize> {
    let held = Bytes::of(data)?;
    let bytes = held.slice();
    let (pointer, length) = (bytes.as_ptr() as usize, bytes.len());
    loop {
        let written = blocking(py, move || {
            // SAFETY: `pointer` and `length` are `bytes`', `held`'s buffer, which stays
            // exported (neither freed nor resized) until `held` drops, after this call;
            // pwrite only reads it.
            let written =
                unsafe { libc::pwrite(fd, pointer as *const libc::c_void, length, offset) };
            if written < 0 {
                Err(last_errno())
            } else {
                Ok(written as usize)
            }
        });
        match written {
            Ok(written) => return Ok(written),
            Err(libc::EINTR) => py.check_signals()?,
            Err(errno) => return Err(errno_error(py, errno)),
        }
    }
}

/// `os.fdatasync(fd)`, a `blocking` call (`fileio.fdatasync` syncs through it).
#[pyfunction]
pub(crate) fn fdatasync(py: Python<'_>, fd: i32) -> PyResult<()> {
    loop {
        // SAFETY: fdatasync takes a descriptor number and touches no memory of ours.
        let errno = blocking(py, || match unsafe { libc::fdatasync(fd) } {
            0 => 0,
            _ => last_errno(),
        });
        match errno {
            0 => return Ok(()),
            libc::EINTR => py.check_signals()?,
            errno => return Err(errno_error(py, errno)),
        }
    }
}

/// How many times a native append let go of the GIL for a thread returning from a
/// blocking call.
#[pyfunction]
pub(crate) fn made_way() -> u64 {
    MADE_WAY.load(Ordering::Relaxed)
}
