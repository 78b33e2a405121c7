//! Event streams (docs/FORMAT.md, "Events in the commit log" and "The event index: file"): the
//! records of appends to streams, their consume-queue entries and their event-index
//! entries, encoded in one pass (what `eventrecords.encode_events`, the entry packing of
//! `Writer._write_events` and `EventIndex.put_run` make in Python); and the fields an
//! event record's properties carry, read back for the index's rebuild.
//!
//! The engine decides everything (the checks, the queue, the versions, the entry
//! numbers, the jumps, the slots' old values); this module only lays out bytes.

use crate::consume_queue::Entry;
use crate::record::{encode_at, record_length, Fields};
use crate::tags::TagHashes;

pub const STREAM_PROPERTY: &[u8] = b"STREAM_ID";
pub const VERSION_PROPERTY: &[u8] = b"STREAM_VERSION";
pub const COMMAND_PROPERTY: &[u8] = b"COMMAND_ID";
pub const GROUP_PROPERTY: &[u8] = b"EVENT_GROUP";
/// Between a property's name and its value.
pub const NAME_VALUE_SEPARATOR: u8 = 0x01;
/// Between two properties.
pub const PROPERTY_SEPARATOR: u8 = 0x02;
/// An event-index entry: commit offset, stream hash, command hash (u64 each), version,
/// previous, jump, stream next, command next (u32 each), CRC32C of the 44 bytes before.
pub const INDEX_ENTRY_SIZE: usize = 48;

/// One append to one stream, its place and its index links decided by the caller.
pub struct EventAppend<'a> {
    pub stream_id: &'a [u8],
    pub command_id: Option<&'a [u8]>,
    pub first_version: u64,
    /// Each event's encoded type (its record's tag), one per body.
    pub types: Vec<&'a [u8]>,
    pub bodies: Vec<&'a [u8]>,
    pub queue_id: u32,
    pub queue_offset: u64,
    pub stream_hash: u64,
    pub command_hash: u64,
    /// The entry number of the stream's version before `first_version` (0: none).
    pub previous: u32,
    /// The jump chain of the stream's newest version: (version, entry number) of it and
    /// of each entry its jumps lead to, newest first (`eventindex.run_jumps`).
    pub chain: Vec<(u64, u32)>,
    /// The slots' old values, linked from the append's last entry.
    pub stream_next: u32,
    pub command_next: u32,
}

/// What a batch of appends encodes to: the records back to back, and per append its
/// records' commit offsets and packed consume-queue entries; the event-index entries of
/// all of them, numbered on from the caller's first number.
#[derive(Debug, Default)]
pub struct Encoded {
    pub data: Vec<u8>,
    pub starts: Vec<Vec<u64>>,
    pub entries: Vec<Vec<u8>>,
    /// Per append, the jump chain of its last event.
    pub chains: Vec<Vec<(u64, u32)>>,
    pub index: Vec<u8>,
}

/// The jumps of `count` new versions from `first_version` (entries numbered from
/// `first_number`) of a stream whose newest version's jump chain is `chain`, and the
/// jump chain of the last of them (`eventindex.run_jumps`). A version's jump goes to
/// entry `v - lowbit(v)`: among the new entries, or in `chain` (clearing low bits of a
/// later version reaches no other version below `first_version`); one missing there was
/// lost, and gets no jump (0).
pub fn run_jumps(
    chain: &[(u64, u32)],
    first_version: u64,
    count: u64,
    first_number: u32,
) -> (Vec<u32>, Vec<(u64, u32)>) {
    let below = |version: u64| {
        chain
            .iter()
            .find(|held| held.0 == version)
            .map(|held| held.1)
    };
    let number_of = |version: u64| -> Option<u32> {
        if version >= first_version {
            Some(first_number.wrapping_add((version - first_version) as u32))
        } else {
            below(version)
        }
    };
    let jumps = (first_version..first_version + count)
        .map(|version| {
            let target = version - (version & version.wrapping_neg());
            if target == 0 {
                below(0).unwrap_or(0)
            } else {
                number_of(target).unwrap_or(0)
            }
        })
        .collect();
    let mut last = Vec::new();
    let mut version = first_version + count - 1;
    while version != 0 {
        let Some(number) = number_of(version) else {
            break;
        };
        last.push((version, number));
        version -= version & version.wrapping_neg();
    }
    (jumps, last)
}

/// The properties of an event are these two around its version's decimal digits
/// (`eventrecords._around_version`).
pub fn around_version(
    stream_id: &[u8],
    command_id: Option<&[u8]>,
    group: Option<(u64, u64)>,
) -> (Vec<u8>, Vec<u8>) {
    let mut before = Vec::with_capacity(STREAM_PROPERTY.len() + stream_id.len() + 20);
    before.extend_from_slice(STREAM_PROPERTY);
    before.push(NAME_VALUE_SEPARATOR);
    before.extend_from_slice(stream_id);
    before.push(PROPERTY_SEPARATOR);
    before.extend_from_slice(VERSION_PROPERTY);
    before.push(NAME_VALUE_SEPARATOR);
    let mut after = Vec::new();
    if let Some(command) = command_id {
        after.push(PROPERTY_SEPARATOR);
        after.extend_from_slice(COMMAND_PROPERTY);
        after.push(NAME_VALUE_SEPARATOR);
        after.extend_from_slice(command);
    }
    if let Some((first, last)) = group {
        after.push(PROPERTY_SEPARATOR);
        after.extend_from_slice(GROUP_PROPERTY);
        after.push(NAME_VALUE_SEPARATOR);
        after.extend_from_slice(format!("{first}-{last}").as_bytes());
    }
    (before, after)
}

/// The decimal digits of `value`, written at the end of `out`.
fn push_decimal(out: &mut Vec<u8>, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// The bytes `appends` take in the log, and whether every field fits the record format
/// (a topic or type of at most 255 bytes, properties of at most 65,535).
pub fn encoded_length(topic: &[u8], appends: &[EventAppend<'_>]) -> Option<usize> {
    if topic.len() > 255 {
        return None;
    }
    let mut total = 0usize;
    for append in appends {
        let count = append.bodies.len() as u64;
        let group = (count > 1).then(|| (append.first_version, append.first_version + count - 1));
        let (before, after) = around_version(append.stream_id, append.command_id, group);
        for (i, body) in append.bodies.iter().enumerate() {
            let mut digits = Vec::with_capacity(20);
            push_decimal(&mut digits, append.first_version + i as u64);
            let props = before.len() + digits.len() + after.len();
            let tag = append.types.get(i)?;
            if tag.len() > 255 || props > 0xFFFF {
                return None;
            }
            total += crate::record::RECORD_OVERHEAD + topic.len() + tag.len() + props + body.len();
        }
    }
    Some(total)
}

/// Encode `appends` one after another from commit offset `start`, stamped `store_ms`,
/// their index entries numbered from `first_number`. Each append's records go to its
/// queue from its queue offset; the caller checked the fields' sizes (`encoded_length`)
/// and that each append has a type per body.
pub fn encode_appends(
    topic: &[u8],
    store_ms: i64,
    start: u64,
    first_number: u32,
    appends: &[EventAppend<'_>],
    length: usize,
) -> Encoded {
    let mut out = Encoded {
        data: vec![0; length],
        starts: Vec::with_capacity(appends.len()),
        entries: Vec::with_capacity(appends.len()),
        chains: Vec::with_capacity(appends.len()),
        index: Vec::new(),
    };
    let events: usize = appends.iter().map(|a| a.bodies.len()).sum();
    out.index.reserve(events * INDEX_ENTRY_SIZE);
    let mut tags = TagHashes::default();
    let mut commit_offset = start;
    let mut at = 0usize;
    let mut number = first_number;
    let mut props = Vec::with_capacity(256);
    for append in appends {
        let count = append.bodies.len() as u64;
        let group = (count > 1).then(|| (append.first_version, append.first_version + count - 1));
        let (before, after) = around_version(append.stream_id, append.command_id, group);
        let mut starts = Vec::with_capacity(append.bodies.len());
        let mut entries = Vec::with_capacity(append.bodies.len() * 20);
        let mut previous = append.previous;
        let (jumps, chain) = run_jumps(&append.chain, append.first_version, count, number);
        for (i, body) in append.bodies.iter().enumerate() {
            let version = append.first_version + i as u64;
            props.clear();
            props.extend_from_slice(&before);
            push_decimal(&mut props, version);
            props.extend_from_slice(&after);
            let tag = append.types[i];
            let fields = Fields {
                commit_offset,
                queue_offset: append.queue_offset + i as u64,
                born_ms: store_ms,
                store_ms,
                queue_id: append.queue_id,
                topic,
                tag,
                keys: b"",
                properties: &props,
            };
            let size = encode_at(&mut out.data[at..], &fields, body);
            debug_assert_eq!(size, record_length(&fields, body.len()));
            Entry {
                commit_offset,
                size: size as u32,
                tag_hash: tags.hash(tag),
            }
            .pack_into(&mut entries);
            let last = i + 1 == append.bodies.len();
            IndexEntry {
                commit_offset,
                stream_hash: append.stream_hash,
                command_hash: append.command_hash,
                version: version as u32,
                previous,
                jump: jumps[i],
                stream_next: if last { append.stream_next } else { 0 },
                command_next: if last { append.command_next } else { 0 },
            }
            .pack_into(&mut out.index);
            starts.push(commit_offset);
            previous = number;
            number = number.wrapping_add(1);
            commit_offset += size as u64;
            at += size;
        }
        out.starts.push(starts);
        out.entries.push(entries);
        out.chains.push(chain);
    }
    out
}

/// CRC-32 (IEEE 802.3, zlib's `crc32`), a byte at a time from a table.
pub fn crc32_ieee(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut value = i as u32;
            let mut bit = 0;
            while bit < 8 {
                value = if value & 1 != 0 {
                    0xEDB8_8320 ^ (value >> 1)
                } else {
                    value >> 1
                };
                bit += 1;
            }
            table[i] = value;
            i += 1;
        }
        table
    };
    let mut crc = !0u32;
    for &byte in data {
        crc = TABLE[((crc ^ u32::from(byte)) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

/// The event index's 64-bit hash (`eventindex._hash64`): CRC32C and zlib's CRC-32 side
/// by side, never 0.
pub fn hash64(data: &[u8]) -> u64 {
    let hash = u64::from(crc32c::crc32c(data)) | u64::from(crc32_ieee(data)) << 32;
    if hash == 0 {
        1
    } else {
        hash
    }
}

/// The stored hash of a stream id (`eventindex.stream_hash`).
pub fn stream_hash(stream_id: &[u8]) -> u64 {
    hash64(stream_id)
}

/// The stored hash of a command id within its stream (`eventindex.command_hash`).
pub fn command_hash(stream_id: &[u8], command_id: &[u8]) -> u64 {
    let mut data = Vec::with_capacity(stream_id.len() + 1 + command_id.len());
    data.extend_from_slice(stream_id);
    data.push(0);
    data.extend_from_slice(command_id);
    hash64(&data)
}

/// An event-index entry's fields (`eventindex.EventEntry` without its number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct IndexEntry {
    pub commit_offset: u64,
    pub stream_hash: u64,
    pub command_hash: u64,
    pub version: u32,
    pub previous: u32,
    pub jump: u32,
    pub stream_next: u32,
    pub command_next: u32,
}

impl IndexEntry {
    /// Append its 48 bytes (the CRC32C last) to `out`.
    pub fn pack_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&self.commit_offset.to_le_bytes());
        out.extend_from_slice(&self.stream_hash.to_le_bytes());
        out.extend_from_slice(&self.command_hash.to_le_bytes());
        for value in [
            self.version,
            self.previous,
            self.jump,
            self.stream_next,
            self.command_next,
        ] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        let crc = crc32c::crc32c(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }
}

/// What an event record's properties say (`eventrecords.event_of` and `event_group`):
/// its stream, version and command id, and its append's versions if it had several.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFields<'a> {
    pub stream_id: &'a [u8],
    pub version: u32,
    pub command_id: Option<&'a [u8]>,
}

/// The event in `properties` (a record's encoded properties), or None when the record
/// is not one: no stream id (or an empty one), a version that is not 1 to 2³²−1 in
/// decimal digits, or properties the Python decoder cannot read (not UTF-8, a property
/// without its separator). The last value of a property named twice is the one kept, as
/// the Python decoder's dict keeps it.
pub fn event_fields(properties: &[u8]) -> Option<EventFields<'_>> {
    let mut stream_id = None;
    let mut version = None;
    let mut command_id = None;
    if properties.is_empty() || std::str::from_utf8(properties).is_err() {
        return None;
    }
    for pair in properties.split(|&b| b == PROPERTY_SEPARATOR) {
        let split = pair.iter().position(|&b| b == NAME_VALUE_SEPARATOR)?;
        let (name, value) = (&pair[..split], &pair[split + 1..]);
        match name {
            STREAM_PROPERTY => stream_id = Some(value),
            VERSION_PROPERTY => version = Some(value),
            COMMAND_PROPERTY => command_id = Some(value),
            _ => {}
        }
    }
    let stream_id = stream_id.filter(|id| !id.is_empty())?;
    let text = version?;
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: u64 = 0;
    for digit in text {
        value = value
            .saturating_mul(10)
            .saturating_add(u64::from(digit - b'0'));
    }
    if value == 0 || value > u64::from(u32::MAX) {
        return None;
    }
    Some(EventFields {
        stream_id,
        version: value as u32,
        command_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{check, Parts};

    fn one<'a>(bodies: Vec<&'a [u8]>, types: Vec<&'a [u8]>) -> EventAppend<'a> {
        EventAppend {
            stream_id: b"s-1",
            command_id: Some(b"c"),
            first_version: 9,
            types,
            bodies,
            queue_id: 3,
            queue_offset: 40,
            stream_hash: 7,
            command_hash: 8,
            previous: 2,
            chain: vec![(8, 1)],
            stream_next: 5,
            command_next: 6,
        }
    }

    #[test]
    fn an_appends_records_carry_its_stream_version_command_and_group() {
        let appends = [one(vec![b"a", b"bb"], vec![b"T", b""])];
        let length = encoded_length(b"t", &appends).unwrap();
        let out = encode_appends(b"t", 77, 1000, 11, &appends, length);
        assert_eq!(out.data.len(), length);
        assert_eq!(out.starts[0][0], 1000);
        let header = check(&out.data, 0, 1000).unwrap();
        assert_eq!((header.queue_id, header.queue_offset), (3, 40));
        let first = &out.data[..header.length as usize];
        let parts = Parts::of(first, &header);
        assert_eq!(parts.tag, b"T");
        assert_eq!(
            parts.properties,
            b"STREAM_ID\x01s-1\x02STREAM_VERSION\x019\x02COMMAND_ID\x01c\x02EVENT_GROUP\x019-10"
        );
        let fields = event_fields(parts.properties).unwrap();
        assert_eq!((fields.stream_id, fields.version), (&b"s-1"[..], 9));
        assert_eq!(fields.command_id, Some(&b"c"[..]));
        let second = check(&out.data, header.length as usize, out.starts[0][1]).unwrap();
        assert_eq!((second.queue_offset, second.tag_len), (41, 0));
        // Entries: the second has no tag hash; only the last index entry is linked.
        assert_eq!(out.entries[0].len(), 40);
        assert_eq!(Entry::parse(&out.entries[0][20..]).tag, 0);
        assert_eq!(out.index.len(), 96);
        let word = |at: usize| u32::from_le_bytes(out.index[at..at + 4].try_into().unwrap());
        // Version 9 jumps to 8 (entry 1 of the chain), version 10 to 8 as well.
        assert_eq!((word(28), word(32), word(36), word(40)), (2, 1, 0, 0));
        assert_eq!(word(48 + 32), 1);
        assert_eq!(out.chains[0], vec![(10, 12), (8, 1)]);
        assert_eq!((word(48 + 28), word(48 + 36), word(48 + 40)), (11, 5, 6));
        assert_eq!(word(44), crc32c::crc32c(&out.index[..44]));
    }

    #[test]
    fn a_single_event_has_no_group_and_no_command_when_none_was_given() {
        let mut append = one(vec![b"x"], vec![b""]);
        append.command_id = None;
        let (before, after) = around_version(append.stream_id, None, None);
        assert_eq!(before, b"STREAM_ID\x01s-1\x02STREAM_VERSION\x01");
        assert!(after.is_empty());
    }

    #[test]
    fn the_index_hashes_are_crc32c_and_zlibs_crc32_side_by_side() {
        assert_eq!(crc32_ieee(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32_ieee(b""), 0);
        assert_eq!(hash64(b""), 1);
        assert_eq!(command_hash(b"s", b"c"), hash64(b"s\x00c"),);
        assert_eq!(
            stream_hash(b"123456789"),
            0xCBF4_3926_u64 << 32 | 0xE306_9283
        );
    }

    #[test]
    fn jumps_follow_the_lowest_bit_and_a_lost_target_gets_none() {
        // A new stream: 1 → none, 2 → none (0), 3 → 2, 4 → none.
        assert_eq!(run_jumps(&[], 1, 4, 1), (vec![0, 0, 2, 0], vec![(4, 4)]));
        // After version 4 (entry 4): 5 → 4, 6 → 4, 7 → 6.
        assert_eq!(
            run_jumps(&[(4, 4)], 5, 3, 5),
            (vec![4, 4, 6], vec![(7, 7), (6, 6), (4, 4)])
        );
        // Version 4 was lost: its chain is empty.
        assert_eq!(run_jumps(&[], 5, 1, 9), (vec![0], vec![(5, 9)]));
    }

    #[test]
    fn what_is_not_an_event_is_refused() {
        assert!(event_fields(b"").is_none());
        assert!(event_fields(b"STREAM_ID\x01s").is_none());
        assert!(event_fields(b"STREAM_ID\x01s\x02STREAM_VERSION\x011\x02odd").is_none());
        assert!(event_fields(b"STREAM_ID\x01\xff\x02STREAM_VERSION\x011").is_none());
        assert!(event_fields(b"STREAM_ID\x01\x02STREAM_VERSION\x011").is_none());
        assert!(event_fields(b"STREAM_ID\x01s\x02STREAM_VERSION\x010").is_none());
        assert!(event_fields(b"STREAM_ID\x01s\x02STREAM_VERSION\x014294967296").is_none());
        assert!(event_fields(b"STREAM_ID\x01s\x02STREAM_VERSION\x01+1").is_none());
        let found = event_fields(b"STREAM_ID\x01s\x02STREAM_VERSION\x014294967295").unwrap();
        assert_eq!(found.version, u32::MAX);
    }
}
