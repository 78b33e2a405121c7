//! The append core's own follow (issue 31, part 11): another process published appends
//! since this one last caught up, and nothing else. The core, holding the pen, the
//! thread lock and the follow lock, takes in their notes from the `state` ring as the
//! store's `_follow` would (store.py `_follow_to` with `_apply_notes`, then the queue
//! dispatcher's followed run, dispatch.py), and the write goes on natively instead of
//! being declined to the long way.
//!
//! Per note it reads 32 bytes; per queue noted it raises the queue's end, counts the
//! change, marks its last file (and, where a time mark fell among the new entries, its
//! time index) for this process's next flush, and puts the queue among the registry's
//! dirty ones. Then the log's tail and last store time, the active segment among those
//! to fsync, `_seen` and `_followed_sequence`.
//!
//! Anything else goes to the store's `_follow` (`Followed::NotHere`), before anything
//! is changed: another kind of change published (topics, offsets, retention, the key
//! index), notes overwritten or not trusted (a writer died mid-update), a tail past the
//! active segment (a roll: new segment files to open), a queue not loaded yet or whose
//! new entries reach past its last file, a store with shared topics (their blocks are
//! marked stale there).

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Mutex;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList, PySet, PyTuple};

use super::{get, get_u64, item, item_int, new_record, AppendCore, Step, WritableView};
use super::{
    RING_AT, RING_ENTRIES, RING_ENTRY, RING_SEQ_AT, SEQUENCE_AT, TAIL_AT, TIME_INDEX_INTERVAL,
};

/// The shared fields after the tail (sharedstate.py `STATE_HEADER`): min offset, the
/// topics, offsets and index versions; `_seen`'s items 1 to 4.
const MIN_OFFSET_AT: usize = TAIL_AT + 8;

/// Notes a follow reads into a buffer on the stack (more: one allocated).
const FEW_NOTES: usize = 8;

/// What `follow_notes` did.
pub(super) enum Followed {
    /// Nothing was published since (the sequence moved by this process's own
    /// publish of nothing new): caught up as it was.
    Nothing,
    /// It took in other processes' appends: queue ends moved.
    Ends,
    /// Not for the core: the store's `_follow` takes it in.
    NotHere,
}

/// What a native follow leaves to `settle_follow`: the queues raised, the active
/// segment (to fsync), `_seen` as it was, the tail and ring sequence followed to.
pub(super) struct Unfollowed<'py> {
    raised: Vec<Raised<'py>>,
    pub(super) active: Bound<'py, PyAny>,
    /// The active segment's base and end (the tail followed to lies between).
    pub(super) base: u64,
    pub(super) end: u64,
    seen: Bound<'py, PyTuple>,
    pub(super) tail: u64,
    ring_seq: u64,
}

/// A raised queue as the write under the pen finds its room (`Unfollowed::room`): the
/// queue, its last file, its new end, the last file's first index and entries.
pub(super) type RaisedRoom<'a, 'py> = (&'a Bound<'py, PyAny>, &'a Bound<'py, PyAny>, u64, u64, u64);

impl<'py> Unfollowed<'py> {
    /// `queue` among the raised ones: its last file, new end and the file's bounds;
    /// None when the follow did not move it (its room is as planned).
    pub(super) fn room<'a>(&'a self, queue: &Bound<'py, PyAny>) -> Option<RaisedRoom<'a, 'py>> {
        self.raised
            .iter()
            .find(|r| r.queue.is(queue))
            .map(|r| (&r.queue, &r.last, r.end, r.first, r.entries))
    }
}

/// `_seen` as this core last read or renewed it (issue 31, part 14): the snapshot,
/// held (so that no other object takes its address while it is known here), and its
/// six items as words. The follow under the pen compares `_seen`'s address with the
/// one known and reads the words, instead of extracting six ints. Python replaces
/// `_seen` whole (a new tuple: another address, read again); the core renews it in
/// place (`renew_snapshot`) and moves the words as it does. Read and moved with the
/// GIL held.
pub(super) struct SeenWords {
    held: Mutex<Option<Py<PyAny>>>,
    at: AtomicUsize,
    words: [AtomicI64; 6],
}

impl SeenWords {
    pub(super) fn new() -> SeenWords {
        SeenWords {
            held: Mutex::new(None),
            at: AtomicUsize::new(0),
            words: Default::default(),
        }
    }

    /// Whether `seen` is the snapshot known here (the core holds a reference to it).
    pub(super) fn holds(&self, seen: &Bound<'_, PyAny>) -> bool {
        self.at.load(Ordering::Relaxed) == seen.as_ptr() as usize
    }

    /// Its items, when `seen` is the snapshot known here.
    fn known(&self, seen: &Bound<'_, PyAny>) -> Option<[i64; 6]> {
        if !self.holds(seen) {
            return None;
        }
        Some(std::array::from_fn(|i| {
            self.words[i].load(Ordering::Relaxed)
        }))
    }

    /// Know `seen`, whose items are `words`.
    fn learn(&self, seen: &Bound<'_, PyTuple>, words: [i64; 6]) {
        let old = {
            let Ok(mut held) = self.held.lock() else {
                return;
            };
            for (word, value) in self.words.iter().zip(words) {
                word.store(value, Ordering::Relaxed);
            }
            self.at.store(seen.as_ptr() as usize, Ordering::Relaxed);
            held.replace(seen.clone().into_any().unbind())
        };
        drop(old); // after the lock is let go
    }

    /// The known snapshot's tail and ring sequence were renewed in place.
    pub(super) fn renewed(&self, tail: u64, ring_seq: u64) {
        self.words[0].store(tail as i64, Ordering::Relaxed);
        self.words[5].store(ring_seq as i64, Ordering::Relaxed);
    }
}

/// A queue a followed note moved: its last file, its end here and its new end, and
/// its time index when a mark fell among the new entries.
struct Raised<'py> {
    queue: Bound<'py, PyAny>,
    last: Bound<'py, PyAny>,
    end: u64,
    /// The last file's first index and entries.
    first: u64,
    entries: u64,
    time_index: Option<Bound<'py, PyAny>>,
}

impl AppendCore {
    /// Follow the appends other processes published, up to `sequence` (even; read
    /// under the pen, so no writer moves anything meanwhile), from the ring of notes
    /// in `header`; see the module's docs.
    #[inline(never)] // named in profiles (PERFORMANCE.md)
    pub(super) fn follow_notes<'py>(
        &self,
        py: Python<'py>,
        header: &WritableView,
        sequence: u64,
        defer: bool,
    ) -> Step<(Followed, Option<Unfollowed<'py>>)> {
        let store = self.store_dict.bind(py);
        let log = self.log_dict.bind(py);
        let seen = item(store, intern!(py, "_seen"))?;
        let was = match self.seen_words.known(&seen) {
            Some(was) => was,
            None => {
                if !seen.get_type().is(self.snapshot_type.bind(py)) {
                    return Ok((Followed::NotHere, None));
                }
                let seen = seen.cast::<PyTuple>().map_err(PyErr::from)?;
                if seen.len() != 6 {
                    return Ok((Followed::NotHere, None));
                }
                let mut was = [0i64; 6];
                for (at, value) in was.iter_mut().enumerate() {
                    *value = seen.get_item(at)?.extract()?;
                }
                self.seen_words.learn(seen, was);
                was
            }
        };
        let seen = seen.cast_into::<PyTuple>().map_err(PyErr::from)?;
        let word = |at: usize| header.word(at).load(Ordering::Acquire);
        for (i, at) in (1..5).zip((MIN_OFFSET_AT..).step_by(8)) {
            if u64::try_from(was[i]).ok() != Some(word(at)) {
                return Ok((Followed::NotHere, None)); // topics, offsets, retention or the index
            }
        }
        let tail = word(TAIL_AT);
        let ring_seq = word(RING_SEQ_AT);
        let followed_tail = item_int(log, intern!(py, "tail"))?;
        let (Ok(after), Ok(from)) = (u64::try_from(was[5]), u64::try_from(followed_tail)) else {
            return Ok((Followed::NotHere, None)); // notes not trusted
        };
        if was[0] != followed_tail || tail < from || ring_seq < after {
            return Ok((Followed::NotHere, None));
        }
        if tail == from {
            if ring_seq != after {
                return Ok((Followed::NotHere, None));
            }
            self.followed_word.get().store(sequence as i64);
            return Ok((Followed::Nothing, None));
        }
        if ring_seq - after > RING_ENTRIES || word(SEQUENCE_AT) != sequence {
            return Ok((Followed::NotHere, None));
        }
        // The new tail inside the active segment (else a roll: `refresh` opens files).
        let segments = item(log, intern!(py, "segments"))?
            .cast_into::<PyList>()
            .map_err(PyErr::from)?;
        let Some(active) = segments
            .len()
            .checked_sub(1)
            .map(|i| segments.get_item(i))
            .transpose()?
        else {
            return Ok((Followed::NotHere, None));
        };
        if !active.get_type().is(self.slots.segment_type.bind(py)) {
            return Ok((Followed::NotHere, None));
        }
        let base = get_u64(self.slots.base, &active)?;
        let end = get_u64(self.slots.end, &active)?;
        if base > from || tail >= end || !self.unshared(py, was[2])? {
            return Ok((Followed::NotHere, None));
        }
        // The notes: (topic id, queue, new end) sorted, the last store time.
        // On the stack for a few (a single append's follow: one or two), else allocated.
        let count = (ring_seq - after) as usize;
        let mut few = [(0u64, 0u64, 0u64); FEW_NOTES];
        let mut many = Vec::new();
        if count > FEW_NOTES {
            many.resize(count, (0, 0, 0));
        }
        let notes: &mut [(u64, u64, u64)] = if count > FEW_NOTES {
            &mut many
        } else {
            &mut few[..count]
        };
        let mut store_ms = i64::MIN;
        for seq in after + 1..=ring_seq {
            let at = RING_AT + (seq % RING_ENTRIES) as usize * RING_ENTRY;
            let Some(note) = header.slice(at, RING_ENTRY) else {
                return Ok((Followed::NotHere, None));
            };
            let field = |from: usize, to: usize| -> [u8; 8] {
                let mut bytes = [0u8; 8];
                bytes[..to - from].copy_from_slice(&note[from..to]);
                bytes
            };
            if u64::from_le_bytes(field(0, 8)) != seq {
                return Ok((Followed::NotHere, None)); // overwritten: the records are walked
            }
            let topic_id = u64::from_le_bytes(field(8, 12));
            let queue_id = u64::from_le_bytes(field(12, 16));
            notes[(seq - after - 1) as usize] =
                (topic_id, queue_id, u64::from_le_bytes(field(16, 24)));
            store_ms = store_ms.max(i64::from_le_bytes(field(24, 32)));
        }
        notes.sort_unstable();
        let raised = self.raised_queues(py, notes)?;
        let Some(raised) = raised else {
            return Ok((Followed::NotHere, None));
        };
        // Nothing was changed up to here; from here on nothing declines. Under the pen
        // only the words (the last store time, the sequence followed); the queues'
        // ends and the log's tail in this process are set by `settle_follow`, after the
        // pen when the caller defers it (the write reads them from here meanwhile:
        // `Unfollowed::room`, its `tail` and `base`/`end`).
        let last_store = self.last_store.get();
        if store_ms > last_store.load() {
            last_store.store(store_ms);
        }
        self.followed_word.get().store(sequence as i64);
        self.followed.fetch_add(1, Ordering::Relaxed);
        let unfollowed = Unfollowed {
            raised,
            active,
            base,
            end,
            seen,
            tail,
            ring_seq,
        };
        if defer {
            return Ok((Followed::Ends, Some(unfollowed)));
        }
        self.settle_follow(py, unfollowed, true)?;
        Ok((Followed::Ends, None))
    }

    /// The rest of a native follow (`follow_notes`), which no other process reads:
    /// each raised queue's change count, its last file (and time index, where a mark
    /// fell among the new entries) for this process's next flush, the queue in the
    /// registry's dirty set; the active segment among those to fsync; and, when
    /// `renew_seen`, `_seen` (its tail and ring sequence; a caller that publishes next
    /// renews it itself).
    #[inline(never)] // named in profiles (PERFORMANCE.md)
    pub(super) fn settle_follow<'py>(
        &self,
        py: Python<'py>,
        unfollowed: Unfollowed<'py>,
        renew_seen: bool,
    ) -> Step<()> {
        let Unfollowed {
            raised,
            active,
            seen,
            tail,
            ring_seq,
            ..
        } = unfollowed;
        for queue in &raised {
            self.slots
                .max_offset
                .set(&queue.queue, queue.end.into_pyobject(py)?.into_any());
        }
        let tail_object = tail.into_pyobject(py)?.into_any();
        if renew_seen {
            // Else the caller publishes next and sets the tail itself.
            self.log_dict
                .bind(py)
                .set_item(intern!(py, "tail"), &tail_object)?;
        }
        let slots = &self.slots;
        let dirty = self.dirty.bind(py);
        for queue in &raised {
            let changes = get(slots.changes, &queue.queue)?.extract::<i64>()?;
            slots
                .changes
                .set(&queue.queue, (changes + 1).into_pyobject(py)?.into_any());
            get(slots.dirty, &queue.queue)?
                .cast_into::<PySet>()
                .map_err(PyErr::from)?
                .add(&queue.last)?;
            if let Some(time_index) = &queue.time_index {
                slots
                    .marks_dirty
                    .set(time_index, PyBool::new(py, true).to_owned().into_any());
            }
            dirty.add(&queue.queue)?;
        }
        let unsynced = item(self.log_dict.bind(py), intern!(py, "unsynced"))?
            .cast_into::<PyList>()
            .map_err(PyErr::from)?;
        if !unsynced.contains(&active)? {
            unsynced.append(&active)?;
        }
        if !renew_seen {
            return Ok(());
        }
        let ring_object = ring_seq.into_pyobject(py)?.into_any();
        if !self.renew_snapshot(
            py,
            &seen,
            (&tail_object, tail),
            (Some(&ring_object), ring_seq),
        ) {
            let snapshot = new_record(
                py,
                self.snapshot_type.bind(py),
                [
                    tail_object,
                    seen.get_item(1)?,
                    seen.get_item(2)?,
                    seen.get_item(3)?,
                    seen.get_item(4)?,
                    ring_object,
                ],
            )?;
            self.store_dict
                .bind(py)
                .set_item(intern!(py, "_seen"), snapshot)?;
        }
        Ok(())
    }

    /// The queues `notes` (sorted (topic id, queue, new end)) raise, with what is
    /// changed in each; None when one is not for the core (see the module's docs).
    /// Notes of a topic or queue this process does not know are passed over, as
    /// `_apply_notes` passes them.
    fn raised_queues<'py>(
        &self,
        py: Python<'py>,
        notes: &[(u64, u64, u64)],
    ) -> Step<Option<Vec<Raised<'py>>>> {
        let slots = &self.slots;
        let by_id = self.by_id.bind(py);
        let mut raised = Vec::new();
        for (at, &(topic_id, queue_id, end)) in notes.iter().enumerate() {
            if notes
                .get(at + 1)
                .is_some_and(|next| (next.0, next.1) == (topic_id, queue_id))
            {
                continue; // the queue's last note (its highest end) comes next
            }
            let Some(topic) = by_id.get_item(topic_id)? else {
                continue;
            };
            if !topic.get_type().is(slots.topic_type.bind(py)) {
                return Ok(None);
            }
            let queues = get(slots.queues, &topic)?;
            if queue_id >= queues.len()? as u64 {
                continue;
            }
            let queue = queues.get_item(queue_id)?;
            if !queue.get_type().is(self.queue_type.bind(py))
                || !get(slots.loaded, &queue)?.is_truthy()?
            {
                return Ok(None); // loaded only now: `_unmarked` notes its records
            }
            let start = get_u64(slots.max_offset, &queue)?;
            if end <= start {
                continue;
            }
            let files = get(slots.files, &queue)?
                .cast_into::<PyList>()
                .map_err(PyErr::from)?;
            let Some(last) = files
                .len()
                .checked_sub(1)
                .map(|i| files.get_item(i))
                .transpose()?
            else {
                return Ok(None);
            };
            if !last.get_type().is(slots.file_type.bind(py)) {
                return Ok(None);
            }
            let first = get_u64(slots.first_index, &last)?;
            let entries = get_u64(slots.entries, &last)?;
            if start < first || end > first + entries {
                return Ok(None); // in files this process has not listed yet
            }
            // `mark_written`: a time mark among the new entries leaves the index dirty.
            let time_index = if (end - 1) / TIME_INDEX_INTERVAL * TIME_INDEX_INTERVAL >= start {
                let time_index = get(slots.time_index, &queue)?;
                if !time_index.get_type().is(slots.time_index_type.bind(py)) {
                    return Ok(None);
                }
                Some(time_index)
            } else {
                None
            };
            raised.push(Raised {
                queue,
                last,
                end,
                first,
                entries,
                time_index,
            });
        }
        Ok(Some(raised))
    }

    /// Whether the registry holds no shared topic (their blocks are marked stale by
    /// the store's follow), looked at again only when `topics_version` moved.
    fn unshared(&self, py: Python<'_>, topics_version: i64) -> Step<bool> {
        let key = u64::try_from(topics_version).map_or(0, |v| v + 1);
        if key != 0 && self.unshared_at.load(Ordering::Relaxed) == key {
            return Ok(true);
        }
        for topic in self.topics.bind(py).values() {
            if !topic.get_type().is(self.slots.topic_type.bind(py))
                || !get(self.slots.blocks, &topic)?.is_none()
            {
                return Ok(false);
            }
        }
        self.unshared_at.store(key, Ordering::Relaxed);
        Ok(true)
    }
}
