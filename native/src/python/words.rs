//! The words an append checks, kept by the parts that change them (issue 31, part 10).
//!
//! The native append read four attributes of three Python objects per call to learn
//! whether the store takes writes (`_closed`, `_forked`, the writer's `failure`, the
//! disk's `ratio`) and four more after the write to learn whether to ask the flusher,
//! the warmer or the waiting pulls for anything (`_flushed`, `engaged`, `asked`,
//! `waiting`). Those change rarely (a close, a fork, a failure, a measure; a flush, a
//! warm ask, a pull beginning or ending its wait), so the parts that change them move
//! a word here as they do, and the append reads the word:
//!
//! * `Refusals`: one bit per reason the store refuses writes; the append declines (the
//!   long way raises the typed error) while any is set.
//! * `Asks`: the lowest log end at which an append must ask someone for something
//!   (the flusher's `flushed + flush_dirty_bytes`, the warmer's `asked +
//!   WARM_ASK_BYTES` once engaged, and any end at all while a pull waits); below it an
//!   append asks nobody.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

use pyo3::prelude::*;

/// The reasons the store refuses writes, one bit each (the engine names them:
/// dataplane.py's `REFUSED_*`); 0 while it takes them.
#[pyclass(module = "storeadapter.engine._native", frozen)]
pub struct Refusals {
    word: AtomicU64,
}

#[pymethods]
impl Refusals {
    #[new]
    fn new() -> Refusals {
        Refusals {
            word: AtomicU64::new(0),
        }
    }

    /// Set (`on`) or clear the bits of `bits`.
    fn set(&self, bits: u64, on: bool) {
        if on {
            self.word.fetch_or(bits, Ordering::SeqCst);
        } else {
            self.word.fetch_and(!bits, Ordering::SeqCst);
        }
    }

    /// The bits set now.
    #[getter]
    fn value(&self) -> u64 {
        self.refused()
    }
}

impl Refusals {
    /// The bits set now (0: the store takes writes).
    pub fn refused(&self) -> u64 {
        self.word.load(Ordering::Acquire)
    }
}

/// `dataplane.REFUSED_CLOSED` and `REFUSED_FORKED`: the two refusals that also stop
/// reads (a failed writer or a full disk refuses writes only).
pub const REFUSED_CLOSED: u64 = 1;
pub const REFUSED_FORKED: u64 = 2;

/// Never: an ask that is off.
const NEVER: i64 = i64::MAX;
/// At every end: a pull waits.
const ALWAYS: i64 = i64::MIN;

/// When an append past its end must ask the flusher, the warmer, the waiting pulls.
#[pyclass(module = "storeadapter.engine._native", frozen)]
pub struct Asks {
    /// Bytes past the flushed end at which a flush is asked for; None: never (sync
    /// mode, where each append waits for its own fdatasync).
    flush_every: Option<i64>,
    warm_every: i64,
    flush_at: AtomicI64,
    warm_at: AtomicI64,
    wake_at: AtomicI64,
    /// The lowest of the three: the one word an append reads.
    lowest: AtomicI64,
    /// Taken by the parts moving a word, so that `lowest` is the least of the three
    /// as last moved (two moves never interleave their stores).
    moving: Mutex<()>,
}

#[pymethods]
impl Asks {
    #[new]
    #[pyo3(signature = (flush_every, warm_every))]
    fn new(flush_every: Option<i64>, warm_every: i64) -> Asks {
        let flush_at = flush_every.unwrap_or(NEVER);
        Asks {
            flush_every,
            warm_every,
            flush_at: AtomicI64::new(flush_at),
            warm_at: AtomicI64::new(NEVER),
            wake_at: AtomicI64::new(NEVER),
            lowest: AtomicI64::new(flush_at),
            moving: Mutex::new(()),
        }
    }

    /// The log is durable below `flushed` (the flusher's `_flushed` moved).
    fn flushed(&self, flushed: i64) {
        let at = self
            .flush_every
            .map_or(NEVER, |every| flushed.saturating_add(every));
        self.move_word(&self.flush_at, at);
    }

    /// The warmer's state: engaged (a read happened), last asked at `asked`.
    fn warm(&self, engaged: bool, asked: i64) {
        let at = if engaged {
            asked.saturating_add(self.warm_every)
        } else {
            NEVER
        };
        self.move_word(&self.warm_at, at);
    }

    /// How many pulls wait for an append (`Arrivals.waiting`).
    fn pulls(&self, waiting: i64) {
        self.move_word(&self.wake_at, if waiting > 0 { ALWAYS } else { NEVER });
    }

    /// (flush at, warm at, wake at, lowest): the ends past which an append asks.
    #[getter]
    fn ends(&self) -> (i64, i64, i64, i64) {
        (
            self.flush_at.load(Ordering::Acquire),
            self.warm_at.load(Ordering::Acquire),
            self.wake_at.load(Ordering::Acquire),
            self.lowest.load(Ordering::Acquire),
        )
    }
}

impl Asks {
    fn move_word(&self, word: &AtomicI64, at: i64) {
        let _moving = self.moving.lock().unwrap_or_else(|p| p.into_inner());
        word.store(at, Ordering::SeqCst);
        let lowest = self
            .flush_at
            .load(Ordering::SeqCst)
            .min(self.warm_at.load(Ordering::SeqCst))
            .min(self.wake_at.load(Ordering::SeqCst));
        self.lowest.store(lowest, Ordering::SeqCst);
    }

    /// Whether an append that ended at `end` asks anyone for anything.
    pub fn due(&self, end: i64) -> bool {
        end > self.lowest.load(Ordering::Acquire)
    }

    /// Whether it asks for a flush.
    pub fn flush_due(&self, end: i64) -> bool {
        end > self.flush_at.load(Ordering::Acquire)
    }

    /// Whether it asks the warmer.
    pub fn warm_due(&self, end: i64) -> bool {
        end > self.warm_at.load(Ordering::Acquire)
    }

    /// Whether a pull waits for it.
    pub fn wake_due(&self) -> bool {
        self.wake_at.load(Ordering::Acquire) == ALWAYS
    }
}

/// One number several parts read and move, kept where the native calls read it
/// without a Python look-up (the sequence word this process last caught up to:
/// store.py's `_followed_sequence`).
#[pyclass(module = "storeadapter.engine._native", frozen)]
pub struct Word {
    value: AtomicI64,
}

#[pymethods]
impl Word {
    #[new]
    fn new(value: i64) -> Word {
        Word {
            value: AtomicI64::new(value),
        }
    }

    #[getter]
    fn get_value(&self) -> i64 {
        self.load()
    }

    #[setter]
    fn set_value(&self, value: i64) {
        self.store(value);
    }
}

impl Word {
    pub fn load(&self) -> i64 {
        self.value.load(Ordering::Acquire)
    }

    pub fn store(&self, value: i64) {
        self.value.store(value, Ordering::Release);
    }
}
