//! `_native.noted_ends`: the queue ends noted in the `state` ring (sharedstate.py), taken
//! in per queue, for the store's follow (store.py `_follow_to`, `_apply_notes`).
//!
//! A store object that follows appends another object or process made reads one note
//! per append since it last looked (up to the ring's 8,192). In Python that cost about
//! 1 µs a note, with the pen held: the committer of a second store object beside a loop
//! of appends spent most of each commit there (docs/PERFORMANCE.md, commit31-s51). Here
//! a note is four word loads.
//!
//! A note is read as `SharedState.notes` reads it, for a reader that may not hold the
//! pen: its sequence, its fields, then its sequence again (a writer overwriting the slot
//! writes the new sequence first); a sequence that is not the one asked for refuses the
//! whole read (None), as does a ring that wrapped past `after` meanwhile.

use std::collections::HashMap;
use std::sync::atomic::{fence, AtomicU64, Ordering};

use pyo3::prelude::*;

use super::Bytes;

/// The ring's place in `state` and its shape (sharedstate.py `_HEADER_SIZE`,
/// `_RING_SEQ_AT`, `RING_ENTRY`, `RING_ENTRIES`).
const RING_AT: usize = 4096;
const RING_SEQ_AT: usize = 64;
const RING_ENTRY: usize = 32;
const RING_ENTRIES: u64 = 8192;

/// What `noted_ends` answers: ((topic id, queue, highest end noted), …) in the order the
/// queues were first noted, and the latest store time noted (None: no note).
type Noted = (Vec<(u32, u32, u64)>, Option<i64>);

/// The notes numbered `after + 1` to `upto` of the ring in `map` (the `state` file's
/// mapping), taken in per queue (see `Noted`); None where `SharedState.notes` answers
/// None (more notes than the ring holds, a slot overwritten, the ring wrapped).
#[pyfunction]
pub(crate) fn noted_ends(map: &Bound<'_, PyAny>, after: i64, upto: i64) -> PyResult<Option<Noted>> {
    let held = Bytes::of(map)?;
    let bytes = held.slice();
    let (Ok(after), Ok(upto)) = (u64::try_from(after), u64::try_from(upto)) else {
        return Ok(None);
    };
    if upto.saturating_sub(after) > RING_ENTRIES {
        return Ok(None);
    }
    if bytes.len() < RING_AT + RING_ENTRIES as usize * RING_ENTRY
        || !(bytes.as_ptr() as usize).is_multiple_of(8)
    {
        return Ok(None);
    }
    let word = |at: usize| -> &AtomicU64 {
        // SAFETY: `at` is 8-aligned (the mapping is, checked above, and every `at`
        // is a multiple of 8) and `at + 8` is inside `bytes` (the ring's bounds,
        // checked above); the buffer stays exported while `held` lives; other
        // processes write these words concurrently, so they are read as atomics.
        unsafe { &*bytes.as_ptr().add(at).cast::<AtomicU64>() }
    };
    let mut ends: Vec<(u32, u32, u64)> = Vec::new();
    let mut places: HashMap<u64, usize> = HashMap::new();
    let mut store_ms: Option<i64> = None;
    for seq in after + 1..=upto {
        let at = RING_AT + (seq % RING_ENTRIES) as usize * RING_ENTRY;
        if word(at).load(Ordering::Acquire) != seq {
            return Ok(None);
        }
        let queue = word(at + 8).load(Ordering::Relaxed);
        let end = word(at + 16).load(Ordering::Relaxed);
        let noted_ms = word(at + 24).load(Ordering::Relaxed) as i64;
        fence(Ordering::Acquire);
        if word(at).load(Ordering::Relaxed) != seq {
            return Ok(None); // overwritten while it was read
        }
        store_ms = Some(store_ms.map_or(noted_ms, |ms| ms.max(noted_ms)));
        match places.get(&queue) {
            Some(&place) => ends[place].2 = ends[place].2.max(end),
            None => {
                places.insert(queue, ends.len());
                ends.push((queue as u32, (queue >> 32) as u32, end));
            }
        }
    }
    if word(RING_SEQ_AT)
        .load(Ordering::Acquire)
        .saturating_sub(after)
        > RING_ENTRIES
    {
        return Ok(None); // the ring wrapped while it was read
    }
    Ok(Some((ends, store_ms)))
}
