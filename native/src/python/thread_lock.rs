//! `_native.ThreadLock`: the store's locks between the threads of one process (its write
//! lock and its follow lock, store.py), native so that the append core takes and lets go
//! of them without a Python call (docs/PERFORMANCE.md, "Issue 31 (part 7)").
//!
//! Python uses one as it used `threading.Lock` / `threading.RLock`: `acquire(blocking,
//! timeout)`, `release()`, `with lock:`, `locked()`. Waiting for one held by another
//! thread releases the GIL (the holder may want it), in slices of `SLICE`, between which
//! the main thread sees its signals (a KeyboardInterrupt ends the wait, as it ends
//! `threading.Lock`'s). The core only ever tries it (`try_acquire`): it holds the GIL,
//! and declines when the lock is busy (the Python path then waits).
//!
//! The lock is one word: its owner's thread number (`thread_number`), 0 when free,
//! taken with a compare-and-swap. A reentrant lock counts how deep its owner holds it.
//! Waiters sleep on a condition variable; a release wakes one when any is waiting.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use super::returning;

/// How long one wait without the GIL lasts before signals are looked at.
const SLICE: Duration = Duration::from_millis(50);

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD: Cell<u64> = const { Cell::new(0) };
}

/// This thread's number: never 0, never another live or past thread's.
fn thread_number() -> u64 {
    THREAD.with(|number| match number.get() {
        0 => {
            let fresh = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
            number.set(fresh);
            fresh
        }
        known => known,
    })
}

#[pyclass(module = "storeadapter.engine._native", frozen)]
pub struct ThreadLock {
    /// The owner's thread number; 0: free.
    owner: AtomicU64,
    /// How deep the owner holds it (only the owner reads or writes it).
    depth: AtomicU64,
    reentrant: bool,
    waiters: AtomicUsize,
    gate: Mutex<()>,
    wake: Condvar,
}

impl ThreadLock {
    /// Take it if free (or, reentrant, held by this thread); never waits.
    pub(crate) fn try_acquire(&self) -> bool {
        let me = thread_number();
        if self.reentrant && self.owner.load(Ordering::Relaxed) == me {
            self.depth.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        if self
            .owner
            .compare_exchange(0, me, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
        {
            self.depth.store(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Let go of it (once, of a reentrant lock held deeper). A reentrant lock only by
    /// its owner; a plain one by any thread, as `threading.Lock`.
    pub(crate) fn release_lock(&self) -> Result<(), &'static str> {
        let owner = self.owner.load(Ordering::Relaxed);
        if owner == 0 {
            return Err("release unlocked lock");
        }
        if self.reentrant {
            if owner != thread_number() {
                return Err("cannot release un-acquired lock");
            }
            let depth = self.depth.load(Ordering::Relaxed);
            if depth > 1 {
                self.depth.store(depth - 1, Ordering::Relaxed);
                return Ok(());
            }
        }
        self.depth.store(0, Ordering::Relaxed);
        self.owner.store(0, Ordering::SeqCst);
        // A waiter counts itself (SeqCst) before it tries the word: either it sees it
        // free, or this load sees it waiting and wakes it. One waiter woken, not all:
        // the lock goes to one thread, and each waiter woken for nothing was a futex
        // wake and two context switches (with 8 producer threads, ~7 a batch:
        // docs/PERFORMANCE.md, put33-s51). The one woken either takes the lock or
        // finds it taken again, by a thread whose release wakes the next; a waiter
        // whose wait ends without the lock (`wait_until`'s deadline) hands its wake on.
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _gate = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Wait (without the GIL) until it is taken or `until` passes; true when taken.
    fn wait_until(&self, until: Instant) -> bool {
        let mut gate = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let taken = loop {
            if self.try_acquire() {
                break true;
            }
            let now = Instant::now();
            if now >= until {
                break false;
            }
            gate = self
                .wake
                .wait_timeout(gate, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        };
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        if !taken
            && self.owner.load(Ordering::SeqCst) == 0
            && self.waiters.load(Ordering::SeqCst) > 0
        {
            // Leaving without the lock while it is free: a release's wake may have come
            // to this thread; the next waiter gets it.
            self.wake.notify_one();
        }
        taken
    }

    /// Take it, waiting without the GIL when busy, until `deadline` (None: for ever); a
    /// native append makes way when a wait ends (`returning::blocking`).
    fn acquire_until(&self, py: Python<'_>, deadline: Option<Instant>) -> PyResult<bool> {
        loop {
            let slice_end = Instant::now() + SLICE;
            let until = deadline.map_or(slice_end, |d| d.min(slice_end));
            if returning::blocking(py, || self.wait_until(until)) {
                return Ok(true);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
            py.check_signals()?;
        }
    }
}

#[pymethods]
impl ThreadLock {
    /// A free lock; `reentrant`: its owner may take it again (as `threading.RLock`).
    #[new]
    #[pyo3(signature = (reentrant = false))]
    fn new(reentrant: bool) -> ThreadLock {
        ThreadLock {
            owner: AtomicU64::new(0),
            depth: AtomicU64::new(0),
            reentrant,
            waiters: AtomicUsize::new(0),
            gate: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    /// Take it, as `threading.Lock.acquire`: waits (without the GIL) unless `blocking`
    /// is false, at most `timeout` seconds when one is given; true when taken.
    #[pyo3(signature = (blocking = true, timeout = -1.0))]
    fn acquire(&self, py: Python<'_>, blocking: bool, timeout: f64) -> PyResult<bool> {
        if !blocking && timeout != -1.0 {
            return Err(PyValueError::new_err(
                "can't specify a timeout for a non-blocking call",
            ));
        }
        if timeout < 0.0 && timeout != -1.0 {
            return Err(PyValueError::new_err(
                "timeout value must be a non-negative number",
            ));
        }
        let wait = match timeout {
            t if t < 0.0 => None,
            t => Some(
                Duration::try_from_secs_f64(t)
                    .map_err(|_| PyValueError::new_err("timeout value is too large"))?,
            ),
        };
        if self.try_acquire() {
            return Ok(true);
        }
        if !blocking {
            return Ok(false);
        }
        if wait.is_none() && !self.reentrant && self.held_here() {
            // `threading.Lock` would wait for ever here; say so instead.
            return Err(PyRuntimeError::new_err(
                "this thread already holds the lock: waiting would never end",
            ));
        }
        self.acquire_until(py, wait.map(|w| Instant::now() + w))
    }

    /// Let go of it; RuntimeError when it is not held (by this thread, for a reentrant
    /// lock), as `threading`'s locks.
    fn release(&self) -> PyResult<()> {
        self.release_lock().map_err(PyRuntimeError::new_err)
    }

    /// Whether some thread holds it.
    fn locked(&self) -> bool {
        self.owner.load(Ordering::SeqCst) != 0
    }

    /// Whether this thread holds it.
    fn held_here(&self) -> bool {
        self.owner.load(Ordering::SeqCst) == thread_number()
    }

    fn __enter__(&self, py: Python<'_>) -> PyResult<bool> {
        self.acquire(py, true, -1.0)
    }

    #[pyo3(signature = (*_exc_info))]
    fn __exit__(&self, _exc_info: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.release()?;
        Ok(false)
    }
}
