//! Walking a commit-log segment record by record, explicit about bad bytes: the events
//! of `scan.scan_segment` (docs/RECOVERY.md, "What a reader does with bad bytes (commit
//! log)").
//!
//! Consecutive intact records come as one `Run`, which also carries what recovery
//! dispatches for each record: its topic, its tag's hash and its keys and properties.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::consume_queue::Entry;
use crate::crc::{crc32c_lanes, LANES};
use crate::prefetch;
use crate::record::{self, Header, AT_MAGIC, END_OF_SEGMENT_MAGIC, MARKER_SIZE, RECORD_MAGIC};
use crate::tags::TagHashes;

/// At most this many bytes of records start in one run.
pub const RUN_BYTES: usize = 4 << 20;

/// Consecutive intact records of one segment.
#[derive(Debug, Default)]
pub struct Run {
    /// Commit-log offset of the first record.
    pub offset: u64,
    /// Bytes of the run.
    pub length: u64,
    pub headers: Vec<Header>,
    /// Per record: the tag's hash (0 = no tag).
    pub tag_hashes: Vec<u64>,
    /// Per record: its topic, an index into `topics`.
    pub topic_of: Vec<u32>,
    /// The distinct topics of the run, in the order met.
    pub topics: Vec<Vec<u8>>,
    /// The records with keys or properties: (record index, keys, properties).
    pub extras: Vec<(usize, Vec<u8>, Vec<u8>)>,
    /// The records grouped by queue (`group_records`), built as the records are pushed.
    pub groups: Vec<Group>,
    /// The group of the last record pushed.
    last_group: usize,
    /// (topic, queue id) to its group, once the run has `GROUPS_SEARCHED` groups: a
    /// run over a million queues has nearly a group a record, and searching them one by
    /// one made the walk quadratic (9 µs a record over 36,000-record runs,
    /// docs/PERFORMANCE.md mill33-s50).
    group_of: HashMap<(u32, u32), usize>,
}

/// Groups searched one by one before a run keeps them in `Run::group_of`.
const GROUPS_SEARCHED: usize = 16;

/// The records of one queue in a run (`Run::groups`), in log order.
#[derive(Debug, PartialEq, Eq)]
pub struct Group {
    pub topic: u32,
    pub queue_id: u32,
    pub records: Vec<usize>,
}

/// A group's consume-queue entries and time facts, ready to be written.
#[derive(Debug, PartialEq, Eq)]
pub struct Packed<'a> {
    /// The queue offsets of the entries, when they do not follow on from the first.
    pub offsets: Option<Vec<u64>>,
    pub first_queue_offset: u64,
    pub entries: Vec<u8>,
    /// (queue offset, store ms) of each record whose queue offset is a multiple of
    /// `interval`.
    pub marks: Vec<(u64, i64)>,
    pub max_store_ms: i64,
    /// The records kept (those at or past the `since` offset given).
    pub records: Cow<'a, [usize]>,
}

impl Run {
    fn push(&mut self, data: &[u8], pos: usize, header: Header, tags: &mut TagHashes) {
        let record = &data[pos..pos + header.length as usize];
        let parts = record::Parts::of(record, &header);
        let topic = match self.topics.last() {
            Some(last) if last.as_slice() == parts.topic => self.topics.len() - 1,
            _ => match self.topics.iter().position(|t| t.as_slice() == parts.topic) {
                Some(found) => found,
                None => {
                    self.topics.push(parts.topic.to_vec());
                    self.topics.len() - 1
                }
            },
        };
        if header.keys_len != 0 || header.props_len != 0 {
            self.extras.push((
                self.headers.len(),
                parts.keys.to_vec(),
                parts.properties.to_vec(),
            ));
        }
        self.place(topic as u32, header.queue_id);
        self.topic_of.push(topic as u32);
        self.tag_hashes.push(tags.hash(parts.tag));
        self.headers.push(header);
        self.length += u64::from(header.length);
    }

    /// Put the record about to be pushed in its queue's group (`group_records` as the
    /// walk goes). Records of a batch go to its queues in turn, so after the group of the
    /// last record the next one is tried before the others.
    fn place(&mut self, topic: u32, queue_id: u32) {
        let record = self.headers.len();
        let hit = |g: &Group| g.topic == topic && g.queue_id == queue_id;
        let count = self.groups.len();
        let last = self.last_group;
        let found = if last < count && hit(&self.groups[last]) {
            Some(last)
        } else if last + 1 < count && hit(&self.groups[last + 1]) {
            Some(last + 1)
        } else if count <= GROUPS_SEARCHED {
            self.groups.iter().position(hit)
        } else {
            if self.group_of.is_empty() {
                self.group_of = (self.groups.iter().enumerate())
                    .map(|(at, g)| ((g.topic, g.queue_id), at))
                    .collect();
            }
            self.group_of.get(&(topic, queue_id)).copied()
        };
        let group = found.unwrap_or_else(|| {
            self.groups.push(Group {
                topic,
                queue_id,
                records: Vec::new(),
            });
            if !self.group_of.is_empty() {
                self.group_of.insert((topic, queue_id), count);
            }
            count
        });
        self.groups[group].records.push(record);
        self.last_group = group;
    }

    /// The records grouped by (topic, queue id), groups in the order first met: what
    /// the walk builds in `groups` (the reference the tests hold it to).
    pub fn group_records(&self) -> Vec<Group> {
        let mut groups: Vec<Group> = Vec::new();
        let mut last = usize::MAX;
        for (i, header) in self.headers.iter().enumerate() {
            let topic = self.topic_of[i];
            let queue_id = header.queue_id;
            let hit = |g: &Group| g.topic == topic && g.queue_id == queue_id;
            if last == usize::MAX || !hit(&groups[last]) {
                last = match groups.iter().position(hit) {
                    Some(found) => found,
                    None => {
                        groups.push(Group {
                            topic,
                            queue_id,
                            records: Vec::new(),
                        });
                        groups.len() - 1
                    }
                };
            }
            groups[last].records.push(i);
        }
        groups
    }

    /// The entries of `records` (one queue's, in log order) whose commit offsets are at
    /// or past `since`; None when none are.
    pub fn pack<'a>(&self, records: &'a [usize], since: u64, interval: u64) -> Option<Packed<'a>> {
        // Commit offsets grow in log order: when the first record counts, all do.
        let all = records
            .first()
            .is_some_and(|&i| self.headers[i].commit_offset >= since);
        let kept: Cow<'a, [usize]> = if all {
            Cow::Borrowed(records)
        } else {
            records
                .iter()
                .copied()
                .filter(|&i| self.headers[i].commit_offset >= since)
                .collect()
        };
        let first = self.headers[*kept.first()?].queue_offset;
        let mut entries = Vec::with_capacity(kept.len() * crate::consume_queue::ENTRY_SIZE);
        let mut follows = true;
        let mut marks = Vec::new();
        let mut max_store_ms = i64::MIN;
        // A mask where the interval is a power of two (the time index's 128): a division
        // per record was a tenth of the packing.
        let mask = interval.is_power_of_two().then(|| interval - 1);
        let on_mark = |queue_offset: u64| match mask {
            Some(mask) => queue_offset & mask == 0,
            None => queue_offset.is_multiple_of(interval),
        };
        for (n, &i) in kept.iter().enumerate() {
            let header = &self.headers[i];
            Entry {
                commit_offset: header.commit_offset,
                size: header.length,
                tag_hash: self.tag_hashes[i],
            }
            .pack_unchecked_into(&mut entries);
            if header.queue_offset != first.wrapping_add(n as u64) {
                follows = false;
            }
            if on_mark(header.queue_offset) {
                marks.push((header.queue_offset, header.store_ms));
            }
            max_store_ms = max_store_ms.max(header.store_ms);
        }
        crate::crc::seal_checks(&mut entries, crate::consume_queue::ENTRY_SIZE);
        let offsets =
            (!follows).then(|| kept.iter().map(|&i| self.headers[i].queue_offset).collect());
        Some(Packed {
            offsets,
            first_queue_offset: first,
            entries,
            marks,
            max_store_ms,
            records: kept,
        })
    }
}

/// What a scan finds at a position.
#[derive(Debug)]
pub enum Event {
    Run(Run),
    Corrupt {
        offset: u64,
        length: u64,
        reason: String,
    },
    EndOfSegment {
        offset: u64,
        length: u64,
    },
    Tail {
        offset: u64,
    },
    GarbageTail {
        offset: u64,
        length: u64,
        reason: String,
    },
}

/// The events from in-segment `start` on: up to and including the first run, or to the
/// end of the scan (END_OF_SEGMENT, TAIL or GARBAGE_TAIL). Returns them and, when the
/// scan is not over, where to go on from.
///
/// `data` is the whole segment, whose first byte is commit offset `base`. A sealed
/// segment must end in an end-of-segment marker; in the last one, `durable_end` (the
/// durable watermark) divides damage, which is skipped, from the torn end, which ends
/// the log.
pub fn scan_step(
    data: &[u8],
    base: u64,
    start: usize,
    sealed: bool,
    durable_end: u64,
    run_bytes: usize,
) -> (Vec<Event>, Option<usize>) {
    let size = data.len();
    let durable = usize::try_from(durable_end.saturating_sub(base))
        .unwrap_or(usize::MAX)
        .min(size);
    let mut events = Vec::new();
    let mut pos = start;
    let at = |pos: usize| base + pos as u64;
    while pos + MARKER_SIZE <= size {
        let run = intact_run(data, base, pos, run_bytes);
        if !run.headers.is_empty() {
            pos += run.length as usize;
            events.push(Event::Run(run));
            return (events, Some(pos));
        }
        let length = record::u32_at(data, pos);
        let magic = record::magic_at(data, pos);
        let reason = if magic == RECORD_MAGIC {
            match record::check(data, pos, at(pos)) {
                Err(damage) => damage.to_string(),
                Ok(_) => unreachable!("an intact record starts a run"),
            }
        } else if magic == END_OF_SEGMENT_MAGIC && length as usize == size - pos {
            events.push(Event::EndOfSegment {
                offset: at(pos),
                length: u64::from(length),
            });
            return (events, None);
        } else if length == 0 && magic == 0 {
            if !sealed && pos >= durable {
                events.push(Event::Tail { offset: at(pos) });
                return (events, None);
            }
            "zeroed bytes where a record should start".to_string()
        } else {
            format!("no record starts here (magic 0x{magic:08x})")
        };
        if !sealed && pos >= durable {
            events.push(Event::GarbageTail {
                offset: at(pos),
                length: (size - pos) as u64,
                reason,
            });
            return (events, None);
        }
        let limit = if sealed { size } else { durable };
        let resume = match find_next_record(data, base, pos + 1, limit) {
            Some(found) => found,
            None if sealed => {
                events.push(Event::GarbageTail {
                    offset: at(pos),
                    length: (size - pos) as u64,
                    reason,
                });
                return (events, None);
            }
            None => durable,
        };
        events.push(Event::Corrupt {
            offset: at(pos),
            length: (resume - pos) as u64,
            reason,
        });
        pos = resume;
    }
    events.push(Event::Tail { offset: at(pos) });
    (events, None)
}

/// The intact records from `pos` on, while each checks and none starts `run_bytes` or
/// more past `pos`.
pub fn intact_run(data: &[u8], base: u64, pos: usize, run_bytes: usize) -> Run {
    let mut run = Run {
        offset: base + pos as u64,
        ..Run::default()
    };
    let mut tags = TagHashes::default();
    let stop = pos.saturating_add(run_bytes);
    let mut at = pos;
    // Up to LANES records framed (every rule but the CRC), then their CRCs together; the
    // run ends before the first that fails either, as with `record::check` one by one.
    let mut batch = [(0usize, Header::default()); LANES];
    // Lines asked for ahead of the walk, up to here (`prefetch::STREAM_AHEAD`), when
    // the run starts with a large record: over 50 B records the asking cost more than
    // it saved (docs/PERFORMANCE.md, issue 29 part 6).
    let large = data
        .get(pos..pos + 4)
        .is_some_and(|length| record::u32_at(length, 0) >= prefetch::STREAM_FROM);
    let mut asked = if large { pos } else { usize::MAX };
    'walk: while at < stop {
        let want = at.saturating_add(prefetch::STREAM_AHEAD).min(stop);
        if asked < want {
            prefetch::stretch(data, asked.max(at), want);
            asked = want;
        }
        let mut framed = 0;
        let mut next = at;
        while framed < LANES && next < stop {
            let Some(header) = record::check_but_crc(data, next, base + next as u64) else {
                break;
            };
            batch[framed] = (next, header);
            framed += 1;
            next += header.length as usize;
        }
        let covered = |&(start, header): &(usize, Header)| {
            &data[start..start + header.length as usize - record::CRC_FROM_END]
        };
        let crcs = if framed == LANES {
            crc32c_lanes(std::array::from_fn(|i| covered(&batch[i])))
        } else {
            let mut crcs = [0; LANES];
            for (crc, record) in crcs.iter_mut().zip(&batch[..framed]) {
                *crc = crate::crc::crc32c(covered(record));
            }
            crcs
        };
        for (&(start, header), crc) in batch[..framed].iter().zip(crcs) {
            if crc != record::stored_crc(data, start + header.length as usize) {
                break 'walk;
            }
            run.push(data, start, header, &mut tags);
            at = start + header.length as usize;
        }
        if framed < LANES {
            break;
        }
    }
    run
}

/// In-segment position of the first intact record, or else of the first valid end
/// marker, in `[start, limit)` (`scan.find_next_record`).
pub fn find_next_record(data: &[u8], base: u64, start: usize, limit: usize) -> Option<usize> {
    let size = data.len();
    // A record's (or marker's) magic sits at AT_MAGIC from its start.
    let from = start + AT_MAGIC;
    let to = (limit + AT_MAGIC).min(size);
    let hits = |magic: &'static [u8; 4]| {
        let window = if from < to { &data[from..to] } else { &[][..] };
        window
            .windows(magic.len())
            .enumerate()
            .filter(move |(_, w)| *w == magic)
            .map(move |(i, _)| from + i - AT_MAGIC)
    };
    if let Some(found) = hits(b"TDMR").find(|&c| record::check(data, c, base + c as u64).is_ok()) {
        return Some(found);
    }
    hits(b"TDME").find(|&c| record::u32_at(data, c) as usize == size - c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{encode_into, Fields};

    fn segment(records: &[(&[u8], u32, u64)], size: usize) -> Vec<u8> {
        let mut data = Vec::new();
        for (body, queue, queue_offset) in records {
            let fields = Fields {
                commit_offset: data.len() as u64,
                queue_offset: *queue_offset,
                born_ms: 7,
                store_ms: 7,
                queue_id: *queue,
                topic: b"t",
                tag: b"",
                keys: b"",
                properties: b"",
            };
            encode_into(&mut data, &fields, body);
        }
        data.resize(size, 0);
        data
    }

    fn all(data: &[u8], sealed: bool, durable: u64) -> Vec<Event> {
        let mut events = Vec::new();
        let mut pos = Some(0);
        while let Some(at) = pos {
            let (found, next) = scan_step(data, 0, at, sealed, durable, RUN_BYTES);
            events.extend(found);
            pos = next;
        }
        events
    }

    #[test]
    fn records_then_zeros_are_a_run_then_the_tail() {
        let data = segment(&[(b"a", 0, 0), (b"bb", 1, 0), (b"c", 0, 1)], 4096);
        let events = all(&data, false, 0);
        assert_eq!(events.len(), 2);
        let Event::Run(run) = &events[0] else {
            panic!()
        };
        assert_eq!(run.headers.len(), 3);
        assert!(matches!(events[1], Event::Tail { offset: 199 }));
        let groups = &run.groups;
        assert_eq!(groups[0].records, vec![0, 2]);
        let packed = run.pack(&groups[0].records, 0, 128).unwrap();
        assert_eq!(packed.offsets, None);
        assert_eq!(packed.marks, vec![(0, 7)]);
        assert_eq!(packed.entries.len(), 40);
    }

    #[test]
    fn the_walks_groups_are_group_records() {
        let queues = [0, 1, 2, 0, 1, 2, 2, 2, 1, 3, 0, 3, 1];
        let records: Vec<(&[u8], u32, u64)> = queues
            .iter()
            .enumerate()
            .map(|(i, &queue)| (b"ab".as_slice(), queue, i as u64))
            .collect();
        let data = segment(&records, 8192);
        let run = intact_run(&data, 0, 0, RUN_BYTES);
        assert_eq!(run.headers.len(), queues.len());
        assert_eq!(run.groups, run.group_records());
        assert_eq!(run.groups[2].records, vec![2, 5, 6, 7]);
    }

    #[test]
    fn the_walks_groups_over_many_queues_are_group_records() {
        // More queues than the walk searches one by one: it keeps them by (topic, queue).
        let queues: Vec<u32> = (0..400u32).map(|i| (i * 7919) % 150).collect();
        let records: Vec<(&[u8], u32, u64)> = queues
            .iter()
            .enumerate()
            .map(|(i, &queue)| (b"ab".as_slice(), queue, i as u64))
            .collect();
        let data = segment(&records, 64 << 10);
        let run = intact_run(&data, 0, 0, RUN_BYTES);
        assert_eq!(run.headers.len(), queues.len());
        assert_eq!(run.groups.len(), 150);
        assert_eq!(run.groups, run.group_records());
    }

    #[test]
    fn a_run_ends_before_a_bad_crc_wherever_it_falls_in_a_batch_of_crcs() {
        let records: Vec<(&[u8], u32, u64)> = (0..11).map(|i| (b"body".as_slice(), 0, i)).collect();
        let clean = segment(&records, 4096);
        let length = 64 + 1 + 4;
        for bad in 0..records.len() {
            let mut data = clean.clone();
            data[bad * length + 60] ^= 0x01; // the body of record `bad`
            let run = intact_run(&data, 0, 0, RUN_BYTES);
            assert_eq!(run.headers.len(), bad);
            assert_eq!(run.length as usize, bad * length);
        }
        let run = intact_run(&clean, 0, 0, RUN_BYTES);
        assert_eq!(run.headers.len(), records.len());
    }

    #[test]
    fn a_run_of_large_records_ends_before_a_bad_crc_wherever_it_falls() {
        // Records of 1 KiB: their CRCs are folded one by one (crc::crc32c_lanes) and the
        // walk asks ahead (prefetch::stretch); the run still ends at the first bad one.
        let body = vec![0x5Au8; 1024];
        let records: Vec<(&[u8], u32, u64)> = (0..11)
            .map(|i| (body.as_slice(), i % 3, i.into()))
            .collect();
        let clean = segment(&records, 16 << 10);
        let length = 64 + 1 + 1024;
        for bad in 0..records.len() {
            for at in [60, 64 + 1 + 700, length - 9] {
                let mut data = clean.clone();
                data[bad * length + at] ^= 0x01;
                let run = intact_run(&data, 0, 0, RUN_BYTES);
                assert_eq!(run.headers.len(), bad, "record {bad}, byte {at}");
                assert_eq!(run.length as usize, bad * length);
            }
        }
        let run = intact_run(&clean, 0, 0, RUN_BYTES);
        assert_eq!(run.headers.len(), records.len());
        assert_eq!(run.groups, run.group_records());
    }

    #[test]
    fn damage_below_the_durable_end_is_skipped_to_the_next_record() {
        let mut data = segment(&[(b"a", 0, 0), (b"b", 0, 1), (b"c", 0, 2)], 4096);
        data[66 + 59] ^= 0xFF; // the second record's body
        let events = all(&data, false, 4096);
        assert!(
            matches!(&events[1], Event::Corrupt { offset: 66, length: 66, reason } if reason == "CRC32C mismatch")
        );
        assert!(matches!(events[2], Event::Run(_)));
    }

    #[test]
    fn damage_past_the_durable_end_is_a_garbage_tail() {
        let mut data = segment(&[(b"a", 0, 0), (b"b", 0, 1)], 4096);
        data[66 + 59] ^= 0xFF;
        let events = all(&data, false, 0);
        assert!(matches!(events[1], Event::GarbageTail { offset: 66, .. }));
    }

    #[test]
    fn a_sealed_segment_ends_at_its_marker() {
        let mut data = segment(&[(b"a", 0, 0)], 4096);
        data[66..70].copy_from_slice(&(4096u32 - 66).to_le_bytes());
        data[70..74].copy_from_slice(b"TDME");
        let events = all(&data, true, 0);
        assert!(matches!(
            events[1],
            Event::EndOfSegment {
                offset: 66,
                length: 4030
            }
        ));
    }
}
