//! Reads by queue offset: a batch of consume-queue entries checked against the records
//! they point at, as `Reading.read_result`'s inline fast path checks them.

use crate::consume_queue::{self, Entry, Stored, ENTRY_SIZE};
use crate::prefetch;
use crate::record::{self, Header, RECORD_MAGIC, RECORD_OVERHEAD};

/// Why a walk over entries stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Every entry was looked at.
    End,
    /// `max_messages` were found.
    Full,
    /// The entry at `next` points outside this segment: the caller finds its segment.
    Outside,
    /// The entry at `next` is not accepted at once: the caller checks it the long way,
    /// which says what is wrong with it, if anything.
    Slow,
}

/// The queue a read is for, and what it wants.
pub struct Wanted<'a> {
    pub topic: &'a [u8],
    pub queue_id: u32,
    /// Queue offset of the first entry given.
    pub first_queue_offset: u64,
    /// Only entries with this tag hash, and records with this tag.
    pub tag: Option<(u64, &'a [u8])>,
    pub max_messages: usize,
    /// The records of the entries below this index were asked for by the caller (a
    /// store core walk's `ask_for_records`): not asked for again.
    pub asked: usize,
}

/// A record accepted for a read: where it starts in the segment, and its header.
#[derive(Clone, Copy, Debug)]
pub struct Found {
    pub entry: usize,
    pub pos: usize,
    pub header: Header,
}

/// The entries from index `start` of `entries` (packed, 20 bytes each) whose records lie
/// in `data` (a segment whose first byte is commit offset `base`): each record checked as
/// intact (frame, magic, lengths, CRC32C, own offset), of the entry's size, and this
/// topic's, queue's and queue offset's. Returns what was found, the index of the entry
/// the walk stopped at (one past the last looked at, for End and Full) and why.
pub fn read_entries(
    data: &[u8],
    base: u64,
    entries: &[u8],
    start: usize,
    wanted: &Wanted<'_>,
    found: &mut Vec<Found>,
) -> (usize, Stop) {
    let count = entries.len() / ENTRY_SIZE;
    let end = base + data.len() as u64;
    let wanted_tag = wanted.tag.map(|(hash, _)| consume_queue::entry_tag(hash));
    let mut index = start;
    // The first records' lines asked for together, then each some entries ahead of the
    // one being checked: their misses overlap each other and the checks.
    for ahead in start.max(wanted.asked)..count.min(start + prefetch::RECORDS_AHEAD) {
        prefetch_record(data, base, &entries[ahead * ENTRY_SIZE..]);
    }
    while index < count {
        if index + prefetch::RECORDS_AHEAD < count
            && index + prefetch::RECORDS_AHEAD >= wanted.asked
        {
            let ahead = (index + prefetch::RECORDS_AHEAD) * ENTRY_SIZE;
            prefetch_record(data, base, &entries[ahead..]);
        }
        let raw = &entries[index * ENTRY_SIZE..(index + 1) * ENTRY_SIZE];
        let entry = Entry::parse(raw);
        if entry.size == 0 && raw.iter().all(|&b| b == 0) {
            index += 1; // not written
            continue;
        }
        if entry.size == 0 || !consume_queue::checked(raw) {
            // Damaged, or written before entries had checks: nothing in it decides
            // until the long way has verified it against its record.
            return (index, Stop::Slow);
        }
        if let Some(tag) = wanted_tag {
            if entry.tag != tag {
                index += 1;
                continue;
            }
        }
        let size = u64::from(entry.size);
        if entry.commit_offset < base || entry.commit_offset >= end {
            return (index, Stop::Outside);
        }
        if entry.commit_offset + size > end {
            return (index, Stop::Slow);
        }
        let pos = (entry.commit_offset - base) as usize;
        let queue_offset = wanted.first_queue_offset + index as u64;
        match accept(data, pos, &entry, queue_offset, wanted) {
            Some(header) => {
                index += 1;
                if let Some((_, tag)) = wanted.tag {
                    let at = pos + record::HEADER_SIZE + usize::from(header.topic_len);
                    if &data[at..at + usize::from(header.tag_len)] != tag {
                        continue;
                    }
                }
                found.push(Found {
                    entry: index - 1,
                    pos,
                    header,
                });
                if found.len() >= wanted.max_messages {
                    return (index, Stop::Full);
                }
            }
            None => return (index, Stop::Slow),
        }
    }
    (index, Stop::End)
}

/// Ask for the record the entry at the start of `entry` points at, if it is in `data`.
#[inline]
fn prefetch_record(data: &[u8], base: u64, entry: &[u8]) {
    let entry = Entry::parse(entry);
    if let Some(pos) = entry.commit_offset.checked_sub(base) {
        if pos < data.len() as u64 {
            prefetch::ahead(data, pos as usize, entry.size as usize);
        }
    }
}

fn accept(
    data: &[u8],
    pos: usize,
    entry: &Stored,
    queue_offset: u64,
    wanted: &Wanted<'_>,
) -> Option<Header> {
    let size = entry.size as usize;
    if size < RECORD_OVERHEAD + wanted.topic.len() {
        return None;
    }
    let record = &data[pos..pos + size];
    let header = Header::parse(record);
    let topic_at = record::HEADER_SIZE;
    let intact = header.length == entry.size
        && record::trailing_length(record, size) == entry.size
        && header.magic == RECORD_MAGIC
        && header.commit_offset == entry.commit_offset
        && header.queue_offset == queue_offset
        && header.queue_id == wanted.queue_id
        && usize::from(header.topic_len) == wanted.topic.len()
        && record::same_bytes(
            &record[topic_at..topic_at + wanted.topic.len()],
            wanted.topic,
        )
        && u64::from(header.length) == header.fields_length()
        && crate::crc::crc32c(&record[..size - record::CRC_FROM_END])
            == record::stored_crc(record, size);
    intact.then_some(header)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{encode_into, Fields};

    fn log(count: u64) -> (Vec<u8>, Vec<u8>) {
        let mut data = Vec::new();
        let mut entries = Vec::new();
        for i in 0..count {
            let fields = Fields {
                commit_offset: data.len() as u64,
                queue_offset: i,
                born_ms: 1,
                store_ms: 1,
                queue_id: 3,
                topic: b"topic",
                tag: if i % 2 == 0 { b"even" } else { b"odd" },
                keys: b"",
                properties: b"",
            };
            let offset = data.len() as u64;
            let length = encode_into(&mut data, &fields, b"body");
            Entry {
                commit_offset: offset,
                size: length as u32,
                tag_hash: crate::tags::tag_hash(fields.tag),
            }
            .pack_into(&mut entries);
        }
        (data, entries)
    }

    fn wanted(max: usize, tag: Option<(u64, &'static [u8])>) -> Wanted<'static> {
        Wanted {
            topic: b"topic",
            queue_id: 3,
            first_queue_offset: 0,
            tag,
            max_messages: max,
            asked: 0,
        }
    }

    #[test]
    fn intact_entries_are_read_up_to_the_maximum() {
        let (data, entries) = log(10);
        let mut found = Vec::new();
        assert_eq!(
            read_entries(&data, 0, &entries, 0, &wanted(4, None), &mut found),
            (4, Stop::Full)
        );
        assert_eq!(found.len(), 4);
    }

    #[test]
    fn a_tag_filter_keeps_only_that_tag() {
        let (data, entries) = log(10);
        let mut found = Vec::new();
        let tag = Some((crate::tags::tag_hash(b"odd"), &b"odd"[..]));
        read_entries(&data, 0, &entries, 0, &wanted(100, tag), &mut found);
        assert_eq!(
            found.iter().map(|f| f.entry).collect::<Vec<_>>(),
            vec![1, 3, 5, 7, 9]
        );
    }

    #[test]
    fn a_damaged_entry_stops_the_walk_for_the_long_way_even_when_its_tag_is_not_wanted() {
        let (data, mut entries) = log(10);
        entries[3 * ENTRY_SIZE + 13] ^= 4; // entry 3 is "odd": its tag hash now differs
        let mut found = Vec::new();
        let tag = Some((crate::tags::tag_hash(b"odd"), &b"odd"[..]));
        assert_eq!(
            read_entries(&data, 0, &entries, 0, &wanted(100, tag), &mut found),
            (3, Stop::Slow)
        );
        assert_eq!(found.iter().map(|f| f.entry).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn an_entry_without_a_check_goes_the_long_way() {
        let (data, mut entries) = log(4);
        let old = crate::tags::tag_hash(b"even").to_le_bytes();
        entries[2 * ENTRY_SIZE + 12..3 * ENTRY_SIZE].copy_from_slice(&old);
        let mut found = Vec::new();
        assert_eq!(
            read_entries(&data, 0, &entries, 0, &wanted(100, None), &mut found),
            (2, Stop::Slow)
        );
    }

    #[test]
    fn a_damaged_record_stops_the_walk_for_the_long_way() {
        let (mut data, entries) = log(10);
        let at = Entry::parse(&entries[3 * ENTRY_SIZE..]).commit_offset as usize;
        data[at + 70] ^= 1;
        let mut found = Vec::new();
        assert_eq!(
            read_entries(&data, 0, &entries, 0, &wanted(100, None), &mut found),
            (3, Stop::Slow)
        );
    }

    #[test]
    fn an_entry_past_the_segment_stops_the_walk_for_its_segment() {
        let (data, entries) = log(10);
        let half = Entry::parse(&entries[5 * ENTRY_SIZE..]).commit_offset as usize;
        let mut found = Vec::new();
        let result = read_entries(
            &data[..half],
            0,
            &entries,
            0,
            &wanted(100, None),
            &mut found,
        );
        assert_eq!(result, (5, Stop::Outside));
    }
}
