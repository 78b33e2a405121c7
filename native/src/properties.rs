//! Property tests (proptest) over the byte-level core: encoded records check and give
//! back what went in, damaged ones never pass, and no input makes a walk panic.

use proptest::collection::vec;
use proptest::prelude::*;

use crate::consume_queue::{Entry, ENTRY_SIZE};
use crate::events::{encode_appends, encoded_length, event_fields, EventAppend, INDEX_ENTRY_SIZE};
use crate::reader::{read_entries, Wanted};
use crate::record::{check, encode_into, Fields, Parts};
use crate::scan::{scan_step, RUN_BYTES};

fn record(
    topic: &[u8],
    tag: &[u8],
    keys: &[u8],
    body: &[u8],
    offset: u64,
    queue_offset: u64,
) -> Vec<u8> {
    let mut out = Vec::new();
    let fields = Fields {
        commit_offset: offset,
        queue_offset,
        born_ms: -5,
        store_ms: 7,
        queue_id: 3,
        topic,
        tag,
        keys,
        properties: b"p\x01v",
    };
    encode_into(&mut out, &fields, body);
    out
}

proptest! {
    #[test]
    fn an_encoded_record_checks_and_gives_back_its_parts(
        topic in vec(any::<u8>(), 1..20),
        tag in vec(any::<u8>(), 0..20),
        keys in vec(any::<u8>(), 0..40),
        body in vec(any::<u8>(), 0..300),
        offset in any::<u64>(),
        queue_offset in any::<u64>(),
    ) {
        let data = record(&topic, &tag, &keys, &body, offset, queue_offset);
        let header = check(&data, 0, offset).unwrap();
        let parts = Parts::of(&data, &header);
        prop_assert_eq!(parts.topic, &topic[..]);
        prop_assert_eq!(parts.tag, &tag[..]);
        prop_assert_eq!(parts.keys, &keys[..]);
        prop_assert_eq!(parts.body, &body[..]);
        prop_assert_eq!(header.queue_offset, queue_offset);
    }

    #[test]
    fn a_record_with_any_byte_changed_is_never_intact(
        body in vec(any::<u8>(), 0..200),
        at in any::<usize>(),
        mask in 1u8..=255,
    ) {
        let mut data = record(b"t", b"x", b"k", &body, 4096, 0);
        let at = at % data.len();
        data[at] ^= mask;
        prop_assert!(check(&data, 0, 4096).is_err());
    }

    #[test]
    fn scanning_arbitrary_bytes_never_panics_and_always_ends(
        data in vec(any::<u8>(), 0..3000),
        sealed in any::<bool>(),
        durable in 0u64..4000,
    ) {
        let mut pos = Some(0);
        let mut steps = 0;
        while let Some(at) = pos {
            let (_, next) = scan_step(&data, 1 << 20, at, sealed, (1 << 20) + durable, RUN_BYTES);
            prop_assert!(next.is_none_or(|n| n > at));
            pos = next;
            steps += 1;
            prop_assert!(steps <= data.len() + 1);
        }
    }

    #[test]
    fn reading_arbitrary_entries_never_panics(
        data in vec(any::<u8>(), 0..2000),
        entries in vec((any::<u64>(), any::<u32>(), any::<u64>()), 0..40),
        base in 0u64..100,
    ) {
        let mut packed = Vec::new();
        for (commit_offset, size, tag_hash) in entries {
            Entry { commit_offset: commit_offset % 2500, size: size % 300, tag_hash }
                .pack_into(&mut packed);
        }
        let wanted = Wanted {
            topic: b"t",
            queue_id: 3,
            first_queue_offset: 0,
            tag: None,
            max_messages: 10,
            asked: 0,
        };
        let mut found = Vec::new();
        let (next, _) = read_entries(&data, base, &packed, 0, &wanted, &mut found);
        prop_assert!(next <= packed.len() / ENTRY_SIZE);
    }

    #[test]
    fn encoded_appends_check_and_read_back_as_their_streams_events(
        streams in vec((vec(b'a'..=b'z', 1..12), any::<bool>(), 1u64..5_000_000_000, 1usize..8), 1..5),
        body in vec(any::<u8>(), 0..60),
        start in 0u64..1 << 40,
    ) {
        let bodies = [body.as_slice(); 8];
        let appends: Vec<EventAppend<'_>> = streams
            .iter()
            .map(|(id, command, first, count)| EventAppend {
                stream_id: id,
                command_id: command.then_some(&b"cmd"[..]),
                first_version: (*first).min(u64::from(u32::MAX) + 1 - *count as u64),
                types: vec![&b"T"[..]; *count],
                bodies: bodies[..*count].to_vec(),
                queue_id: 1,
                queue_offset: 9,
                stream_hash: 2,
                command_hash: 3,
                previous: 4,
                chain: vec![(1, 5)],
                stream_next: 6,
                command_next: 7,
            })
            .collect();
        let length = encoded_length(b"topic", &appends).unwrap();
        let out = encode_appends(b"topic", 11, start, 1, &appends, length);
        prop_assert_eq!(out.data.len(), length);
        let mut events = 0;
        for (append, starts) in appends.iter().zip(&out.starts) {
            for (i, &offset) in starts.iter().enumerate() {
                let pos = (offset - start) as usize;
                let header = check(&out.data, pos, offset).unwrap();
                let parts = Parts::of(&out.data[pos..pos + header.length as usize], &header);
                let found = event_fields(parts.properties).unwrap();
                prop_assert_eq!(found.stream_id, append.stream_id);
                prop_assert_eq!(u64::from(found.version), append.first_version + i as u64);
                prop_assert_eq!(found.command_id, append.command_id);
                let entry = &out.index[events * INDEX_ENTRY_SIZE..(events + 1) * INDEX_ENTRY_SIZE];
                prop_assert_eq!(&entry[..8], &offset.to_le_bytes()[..]);
                prop_assert_eq!(&entry[44..], &crc32c::crc32c(&entry[..44]).to_le_bytes()[..]);
                events += 1;
            }
        }
        prop_assert_eq!(out.index.len(), events * INDEX_ENTRY_SIZE);
    }

    #[test]
    fn reading_arbitrary_properties_never_panics(properties in vec(any::<u8>(), 0..80)) {
        let _ = event_fields(&properties);
    }
}
