//! Encoding a batch of records at the commit-log tail into one buffer, with each
//! queue's consume-queue entries (what `Writer._write_records` writes).

use std::sync::{Mutex, MutexGuard, TryLockError};

use crate::consume_queue::{Entry, ENTRY_SIZE};
use crate::record::{encode_at, encode_into, place_shift, set_place, Fields, Place};

/// A batch of bodies alone (no tag, keys or properties), dealt to `turn`'s queues in
/// turn: message `i` goes to queue `turn[i % n]` at queue offset `bases[i % n] + i / n`.
pub struct PlainBatch<'a> {
    pub topic: &'a [u8],
    pub tail: u64,
    pub now: i64,
    pub turn: &'a [u32],
    pub bases: &'a [u64],
}

/// Where a batch's messages went: each one's commit offset, queue and queue offset, and
/// each turn queue's packed entries.
#[derive(Debug, Default)]
pub struct Placement {
    pub starts: Vec<u64>,
    pub queue_ids: Vec<u32>,
    pub queue_offsets: Vec<u64>,
    /// Per queue of the turn (in the turn's order), the packed entries.
    pub entries: Vec<Vec<u8>>,
}

/// Room for the entries of `count` records dealt over `width` queues, a buffer a queue.
fn entry_room(count: usize, width: usize) -> Vec<Vec<u8>> {
    // Made one by one: `vec![v; n]` clones `v`, and a clone has no spare room.
    (0..width)
        .map(|_| Vec::with_capacity((count / width.max(1) + 1) * ENTRY_SIZE))
        .collect()
}

/// A plain record's entry (no tag) for `length` bytes at `start`, with a zero check
/// (`seal` gives the checks).
#[inline]
fn pack_plain_entry(entries: &mut Vec<u8>, start: u64, length: usize) {
    Entry {
        commit_offset: start,
        size: length as u32,
        tag_hash: 0,
    }
    .pack_unchecked_into(entries);
}

/// Every entry's check, one call a queue (its CRCs are independent chains the CPU
/// overlaps: fewer instructions than a check an entry as it is packed).
fn seal(entries: &mut [Vec<u8>]) {
    for entries in entries {
        crate::crc::seal_checks(entries, ENTRY_SIZE);
    }
}

impl Placement {
    /// Room for `count` records dealt over `width` queues.
    fn for_batch(count: usize, width: usize) -> Placement {
        Placement {
            starts: Vec::with_capacity(count),
            queue_ids: Vec::with_capacity(count),
            queue_offsets: Vec::with_capacity(count),
            entries: entry_room(count, width),
        }
    }

    /// A record of `length` bytes at `start`, its entry packed for the turn's `slot`
    /// with a zero check (`seal` gives the checks).
    #[inline]
    fn push(&mut self, slot: usize, start: u64, length: usize, queue_id: u32, queue_offset: u64) {
        pack_plain_entry(&mut self.entries[slot], start, length);
        self.starts.push(start);
        self.queue_ids.push(queue_id);
        self.queue_offsets.push(queue_offset);
    }

    /// Every entry's check (`seal`).
    fn seal(mut self) -> Placement {
        seal(&mut self.entries);
        self
    }
}

/// The bytes a plain batch takes in the log.
pub fn plain_length(topic: &[u8], bodies: &[&[u8]]) -> usize {
    bodies
        .iter()
        .map(|b| b.len() + crate::record::RECORD_OVERHEAD + topic.len())
        .sum()
}

/// Encode the batch into `out` (exactly `plain_length` bytes).
pub fn encode_plain(batch: &PlainBatch<'_>, bodies: &[&[u8]], out: &mut [u8]) -> Placement {
    let width = batch.turn.len();
    let mut placed = Placement::for_batch(bodies.len(), width);
    let mut tail = batch.tail;
    let mut at = 0;
    for (i, body) in bodies.iter().enumerate() {
        let slot = i % width;
        let fields = Fields {
            commit_offset: tail,
            queue_offset: batch.bases[slot] + (i / width) as u64,
            born_ms: batch.now,
            store_ms: batch.now,
            queue_id: batch.turn[slot],
            topic: batch.topic,
            tag: b"",
            keys: b"",
            properties: b"",
        };
        let length = encode_at(&mut out[at..], &fields, body);
        placed.push(slot, tail, length, fields.queue_id, fields.queue_offset);
        tail += length as u64;
        at += length;
    }
    placed.seal()
}

/// A plain batch encoded before its place is known (`encode_plain_unplaced`): each
/// record's length and how a change of its place carries to its CRC.
#[derive(Debug, Default)]
pub struct Unplaced {
    pub lengths: Vec<u32>,
    pub shifts: Vec<crate::crc::ZeroShift>,
}

/// The first half of `encode_plain`, which needs neither the tail nor the queues: each
/// record into `out` (exactly `plain_length` bytes, whatever they held: every one is
/// written) with its place zero, its CRC taken. Done before the pen, it takes the copy and the CRC (31 of a 1 KiB batch's
/// ~120 µs under the pen, procs31-s50) out of the other writers' way.
pub fn encode_plain_unplaced(topic: &[u8], bodies: &[&[u8]], out: &mut [u8]) -> Unplaced {
    let mut unplaced = Unplaced {
        lengths: Vec::with_capacity(bodies.len()),
        shifts: Vec::with_capacity(bodies.len()),
    };
    let fields = Fields {
        commit_offset: 0,
        queue_offset: 0,
        born_ms: 0,
        store_ms: 0,
        queue_id: 0,
        topic,
        tag: b"",
        keys: b"",
        properties: b"",
    };
    // The shifts of the lengths met lately (a shift takes about a microsecond), the
    // last one's first.
    let mut last = (usize::MAX, crate::crc::zero_shift(0));
    let mut known: Vec<(usize, crate::crc::ZeroShift)> = Vec::new();
    let mut at = 0;
    for body in bodies {
        let length = encode_at(&mut out[at..], &fields, body);
        if length != last.0 {
            let shift = match known.iter().find(|(l, _)| *l == length) {
                Some((_, shift)) => *shift,
                None => {
                    let shift = place_shift(length);
                    if known.len() == 16 {
                        known.remove(0);
                    }
                    known.push((length, shift));
                    shift
                }
            };
            last = (length, shift);
        }
        unplaced.lengths.push(length as u32);
        unplaced.shifts.push(last.1);
        at += length;
    }
    unplaced
}

/// The second half of `encode_plain`, under the pen: each record of `out` (encoded by
/// `encode_plain_unplaced`) placed at the tail and dealt to the queues in turn; the
/// entries, packed a queue of the turn (in the turn's order). The bytes are then
/// `encode_plain`'s; where each message went is `PlainPlaces::each`, after the pen.
pub fn place_plain(batch: &PlainBatch<'_>, unplaced: &Unplaced, out: &mut [u8]) -> Vec<Vec<u8>> {
    let width = batch.turn.len();
    let mut entries = entry_room(unplaced.lengths.len(), width);
    let mut tail = batch.tail;
    let mut at = 0;
    // Message i's queue is slot i % width of the turn, at round i / width (counted,
    // not divided: a division a record cost more than the rest of its place).
    let (mut slot, mut round) = (0usize, 0u64);
    for (length, shift) in unplaced.lengths.iter().zip(&unplaced.shifts) {
        let length = *length as usize;
        let place = Place {
            commit_offset: tail,
            queue_offset: batch.bases[slot] + round,
            born_ms: batch.now,
            store_ms: batch.now,
            queue_id: batch.turn[slot],
        };
        set_place(&mut out[at..at + length], &place, *shift);
        pack_plain_entry(&mut entries[slot], tail, length);
        tail += length as u64;
        at += length;
        slot += 1;
        if slot == width {
            slot = 0;
            round += 1;
        }
    }
    seal(&mut entries);
    entries
}

/// The most bytes of records `KeptRecords` keeps between batches (a batch of 500 bodies
/// of 4 KiB is about 2 MB); a larger batch gets a buffer of its own, let go after it.
pub const KEPT_RECORDS_BYTES: usize = 4 << 20;

/// A plain batch's records buffer, kept from one batch to the next (one a store core).
/// Made afresh for each batch, a 1 KiB batch's 520 KB buffer was given new pages
/// whenever glibc handed the last one back (about 58 page faults a batch,
/// procs31-s52); kept, its pages stay. Not zeroed between batches:
/// `encode_plain_unplaced` writes every byte of the room it is given.
#[derive(Debug, Default)]
pub struct KeptRecords {
    kept: Mutex<Vec<u8>>,
}

/// Room for one batch's records: the kept buffer while this batch holds it, or a
/// fresh one (another thread holds the kept one, or the batch is over the cap).
pub struct RecordsRoom<'a> {
    kept: Option<MutexGuard<'a, Vec<u8>>>,
    fresh: Vec<u8>,
    length: usize,
}

impl KeptRecords {
    /// Room for `length` bytes of records: the kept buffer when no other thread holds
    /// it (`try_lock`: never waited for) and `length` is at most `KEPT_RECORDS_BYTES`,
    /// else a fresh one. The kept buffer only grows (the part it grows by is zeroed
    /// once); the room's bytes are whatever the last batch left there.
    pub fn take(&self, length: usize) -> RecordsRoom<'_> {
        let kept = if length <= KEPT_RECORDS_BYTES {
            match self.kept.try_lock() {
                Ok(guard) => Some(guard),
                // A panic while it was held left bytes only: they are all written again.
                Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
                Err(TryLockError::WouldBlock) => None,
            }
        } else {
            None
        };
        let mut room = RecordsRoom {
            kept,
            fresh: Vec::new(),
            length,
        };
        let buffer = room.buffer();
        if buffer.len() < length {
            buffer.resize(length, 0);
        }
        room
    }
}

impl RecordsRoom<'_> {
    fn buffer(&mut self) -> &mut Vec<u8> {
        match &mut self.kept {
            Some(kept) => kept,
            None => &mut self.fresh,
        }
    }

    /// Whether this room is the kept buffer.
    pub fn is_kept(&self) -> bool {
        self.kept.is_some()
    }

    /// The room's `length` bytes.
    pub fn bytes(&mut self) -> &mut [u8] {
        let length = self.length;
        &mut self.buffer()[..length]
    }
}

/// Where a plain batch placed by `place_plain` went, kept for its results (made after
/// the pen: the other writers need not wait for them).
#[derive(Debug, Default)]
pub struct PlainPlaces {
    pub tail: u64,
    pub turn: Vec<u32>,
    pub bases: Vec<u64>,
}

impl PlainPlaces {
    /// The places of `batch`.
    pub fn of(batch: &PlainBatch<'_>) -> PlainPlaces {
        PlainPlaces {
            tail: batch.tail,
            turn: batch.turn.to_vec(),
            bases: batch.bases.to_vec(),
        }
    }

    /// Each message's commit offset, queue and queue offset, in order, from its record's
    /// length: `Placement`'s `starts`, `queue_ids` and `queue_offsets`.
    pub fn each<'a>(&'a self, lengths: &'a [u32]) -> impl Iterator<Item = (u64, u32, u64)> + 'a {
        let width = self.turn.len();
        let (mut tail, mut slot, mut round) = (self.tail, 0usize, 0u64);
        lengths.iter().map(move |length| {
            let place = (tail, self.turn[slot], self.bases[slot] + round);
            tail += u64::from(*length);
            slot += 1;
            if slot == width {
                slot = 0;
                round += 1;
            }
            place
        })
    }
}

/// One record of a general batch, its place already chosen.
pub struct Placed<'a> {
    pub fields: Fields<'a>,
    pub body: &'a [u8],
    pub tag_hash: u64,
}

/// Records placed one by one (tags, keys, properties, routing decided by the caller),
/// encoded back to back from `records[0]`'s commit offset; the entry of each, packed.
pub fn encode_placed(records: &[Placed<'_>]) -> (Vec<u8>, Vec<u8>) {
    let mut data = Vec::new();
    let mut entries = Vec::with_capacity(records.len() * 20);
    for record in records {
        let length = encode_into(&mut data, &record.fields, record.body);
        Entry {
            commit_offset: record.fields.commit_offset,
            size: length as u32,
            tag_hash: record.tag_hash,
        }
        .pack_into(&mut entries);
    }
    (data, entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encoded before the pen and placed under it, a batch of bodies of many lengths
    /// (more than the shifts kept) is byte for byte what `encode_plain` writes.
    #[test]
    fn a_batch_placed_after_its_encoding_is_the_same_bytes() {
        let owned: Vec<Vec<u8>> = (0..60)
            .map(|i| (0..(i * 37) % 1500).map(|b| (b * 7 + i) as u8).collect())
            .collect();
        let bodies: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        let batch = PlainBatch {
            topic: b"topic",
            tail: 123_456_789,
            now: 1_700_000_000_123,
            turn: &[3, 1, 7],
            bases: &[10, 200, 3000],
        };
        let length = plain_length(b"topic", &bodies);
        let mut want = vec![0; length];
        let placed_then = encode_plain(&batch, &bodies, &mut want);
        let mut got = vec![0; length];
        let unplaced = encode_plain_unplaced(b"topic", &bodies, &mut got);
        let entries = place_plain(&batch, &unplaced, &mut got);
        assert!(got == want);
        let places: Vec<(u64, u32, u64)> =
            PlainPlaces::of(&batch).each(&unplaced.lengths).collect();
        let starts: Vec<u64> = places.iter().map(|p| p.0).collect();
        assert_eq!(starts, placed_then.starts);
        let ids: Vec<u32> = places.iter().map(|p| p.1).collect();
        assert_eq!(ids, placed_then.queue_ids);
        let offsets: Vec<u64> = places.iter().map(|p| p.2).collect();
        assert_eq!(offsets, placed_then.queue_offsets);
        assert_eq!(entries, placed_then.entries);
        // Each entry is what `Entry::pack_into` makes (its check included).
        let mut want_entries = vec![Vec::new(); 3];
        for (i, (start, next)) in starts.iter().zip(&starts[1..]).enumerate() {
            Entry {
                commit_offset: *start,
                size: (next - start) as u32,
                tag_hash: 0,
            }
            .pack_into(&mut want_entries[i % 3]);
        }
        for (got, want) in entries.iter().zip(&want_entries) {
            assert_eq!(&got[..want.len()], &want[..]);
        }
    }

    /// Encoded into a buffer that held other bytes (a longer batch's records, or 0xa5
    /// throughout), a batch is the same bytes as into a zeroed one: a kept records
    /// buffer needs no zeroing.
    #[test]
    fn a_batch_encoded_over_old_bytes_is_the_same_bytes() {
        let owned: Vec<Vec<u8>> = (0..40)
            .map(|i| (0..(i * 53) % 1100).map(|b| (b * 11 + i) as u8).collect())
            .collect();
        let bodies: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        let batch = PlainBatch {
            topic: b"topic",
            tail: 4096,
            now: 1_700_000_000_123,
            turn: &[0, 1],
            bases: &[5, 6],
        };
        let length = plain_length(b"topic", &bodies);
        let mut want = vec![0; length];
        let unplaced = encode_plain_unplaced(b"topic", &bodies, &mut want);
        place_plain(&batch, &unplaced, &mut want);

        let longer: Vec<&[u8]> = bodies.iter().rev().chain(&bodies).copied().collect();
        let mut filled = vec![0xa5; plain_length(b"a-longer-topic", &longer)];
        let mut used = filled.clone();
        let unplaced = encode_plain_unplaced(b"a-longer-topic", &longer, &mut used);
        place_plain(&batch, &unplaced, &mut used);
        for old in [&mut filled, &mut used] {
            let unplaced = encode_plain_unplaced(b"topic", &bodies, &mut old[..length]);
            place_plain(&batch, &unplaced, &mut old[..length]);
            assert!(old[..length] == want[..]);
        }
    }

    /// The kept buffer is taken again by the next batch, never waited for: a second
    /// room while the first is held is a fresh one, as is a batch over the cap, and
    /// neither grows the kept buffer.
    #[test]
    fn the_kept_records_buffer_is_reused_tried_and_capped() {
        let kept = KeptRecords::default();
        {
            let mut room = kept.take(1000);
            assert!(room.is_kept());
            room.bytes().fill(7);
            let mut other = kept.take(500);
            assert!(!other.is_kept());
            assert_eq!(other.bytes(), &[0u8; 500][..]);
        }
        {
            let mut room = kept.take(300);
            assert!(room.is_kept());
            assert_eq!(room.bytes(), &[7u8; 300][..]); // not zeroed: written over
        }
        {
            let mut huge = kept.take(KEPT_RECORDS_BYTES + 1);
            assert!(!huge.is_kept());
            assert_eq!(huge.bytes().len(), KEPT_RECORDS_BYTES + 1);
        }
        assert_eq!(kept.kept.lock().unwrap().len(), 1000);
        let mut grown = kept.take(2000);
        assert_eq!(&grown.bytes()[..1000], &[7u8; 1000][..]);
        assert_eq!(&grown.bytes()[1000..], &[0u8; 1000][..]);
    }

    /// Each queue of the turn gets room for its share of the batch's entries up front,
    /// so packing them under the pen never grows (reallocates) a buffer.
    #[test]
    fn each_queue_s_entries_have_room_for_their_share() {
        for (count, width) in [(500, 4), (7, 3), (1, 1), (3, 5)] {
            let placed = Placement::for_batch(count, width);
            assert_eq!(placed.entries.len(), width);
            for (slot, entries) in placed.entries.iter().enumerate() {
                let share = count / width + usize::from(slot < count % width);
                assert!(
                    entries.capacity() >= share * 20,
                    "{count} over {width}, slot {slot}"
                );
            }
        }
    }

    #[test]
    fn a_plain_batch_is_dealt_to_the_queues_in_turn() {
        let bodies: Vec<&[u8]> = vec![b"a", b"bb", b"c", b"dd", b"e"];
        let batch = PlainBatch {
            topic: b"t",
            tail: 100,
            now: 5,
            turn: &[2, 0],
            bases: &[10, 20],
        };
        let mut data = vec![0; plain_length(b"t", &bodies)];
        let out = encode_plain(&batch, &bodies, &mut data);
        assert_eq!(out.queue_ids, vec![2, 0, 2, 0, 2]);
        assert_eq!(out.queue_offsets, vec![10, 20, 11, 21, 12]);
        assert_eq!(out.starts, vec![100, 166, 233, 299, 366]);
        assert_eq!(out.entries[0].len(), 60);
        let header = crate::record::check(&data, 66, 166).unwrap();
        assert_eq!((header.queue_id, header.queue_offset), (0, 20));
    }
}
