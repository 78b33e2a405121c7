"""The native encoder of appends to streams writes the records ``eventrecords``'s Python
encoder writes, the consume-queue entries ``queuebase.pack_entry`` packs and the event-index
entries ``eventindex.encode_entry`` packs; a native scan's runs (``Run.events``) find in
event records what ``eventrecords.event_of`` finds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storeadapter.engine import _native, dataplane
from storeadapter.engine.errors import CorruptRecordError
from storeadapter.engine.eventindex import (
    EventEntry,
    command_hash,
    encode_entry,
    run_jumps,
    stream_hash,
)
from storeadapter.engine.eventrecords import encode_events, event_of
from storeadapter.engine.queuebase import pack_entry
from storeadapter.engine.record import decode_record
from storeadapter.engine.results import STATUS_OK, EventAppendResult
from storeadapter.engine.tags import tag_hash
from tests.engine.nativecases import encode

# Not run again in the shared-layout pass: the native event encoder beside the Python one, no topic.
pytestmark = pytest.mark.one_layout

TOPIC = b"accounts"
PREFIX = "0000ABCD"
_TEXT = st.text(
    st.characters(blacklist_characters="\x01\x02\x1f", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=12,
)
_TYPES = st.sampled_from([b"", b"Deposited", b"Withdrawn", "Überwiesen".encode()])


@st.composite
def appends(draw) -> dict:
    count = draw(st.integers(1, 12))
    first = draw(st.one_of(st.integers(1, 30), st.integers(1, 0xFFFFFFFF - count + 1)))
    mixed = draw(st.booleans())
    kind = draw(_TYPES)
    return {
        "stream_id": draw(_TEXT),
        "command_id": draw(st.one_of(st.none(), _TEXT)),
        "first": first,
        "types": [draw(_TYPES) if mixed else kind for _ in range(count)],
        "bodies": [draw(st.binary(max_size=120)) for _ in range(count)],
        "queue": draw(st.integers(0, 7)),
        "queue_offset": draw(st.integers(0, 2**40)),
        "previous": draw(st.integers(0, 2**32 - 1)),
        "chain": [
            (version, draw(st.integers(1, 2**32 - 1)))
            for version in sorted(
                draw(st.lists(st.integers(1, max(1, first - 1)), unique=True, max_size=6)),
                reverse=True,
            )
            if version < first
        ],
        "stream_next": draw(st.integers(0, 2**32 - 1)),
        "command_next": draw(st.integers(0, 2**32 - 1)),
    }


def _row(a: dict) -> tuple:
    command = command_hash(a["stream_id"], a["command_id"]) if a["command_id"] else 0
    return (
        a["stream_id"], a["command_id"], a["first"], a["types"], a["bodies"], a["queue"],
        a["queue_offset"], stream_hash(a["stream_id"]), command, a["previous"], a["chain"],
        a["stream_next"], a["command_next"],
    )  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    batch=st.lists(appends(), min_size=1, max_size=5),
    start=st.integers(0, 2**40),
    now=st.integers(0, 2**45),
    first_number=st.integers(1, 2**31),
)
def test_appends_encode_as_the_python_encoder_and_index_pack_them(batch, start, now, first_number):
    rows = [_row(a) for a in batch]
    data, placed, index_entries = dataplane.encode_events(
        TOPIC, now, start, first_number, rows, PREFIX, "accounts"
    )
    expected = b""
    wanted_index = b""
    number = first_number
    for a, row, (entries, last, results, chain) in zip(batch, rows, placed, strict=True):
        records, starts, lengths = encode_events(
            TOPIC, a["stream_id"], a["first"], a["command_id"], a["types"], a["bodies"],
            start + len(expected), a["queue"], a["queue_offset"], now,
        )  # fmt: skip
        expected += records
        assert entries == b"".join(map(pack_entry, starts, lengths, map(tag_hash, a["types"])))
        assert last == starts[-1]
        count = len(starts)
        assert results == [
            EventAppendResult(
                f"{PREFIX}{offset:016X}",
                "accounts",
                a["queue"],
                a["queue_offset"] + i,
                offset,
                now,
                STATUS_OK,
                a["stream_id"],
                a["first"] + i,
            )  # fmt: skip
            for i, offset in enumerate(starts)
        ]
        assert all(type(result) is EventAppendResult for result in results)
        previous = a["previous"]
        jumps, wanted_chain = run_jumps(a["chain"], a["first"], count, number)
        assert chain == wanted_chain
        for i, offset in enumerate(starts):
            final = i == count - 1
            wanted_index += encode_entry(
                EventEntry(
                    number, offset, row[7], row[8], a["first"] + i, previous, jumps[i],
                    a["stream_next"] if final else 0, a["command_next"] if final else 0,
                )
            )  # fmt: skip
            previous = number
            number += 1
    assert data == expected
    assert index_entries == wanted_index


def test_a_field_too_long_for_the_format_is_refused():
    row = list(_row({
        "stream_id": "s", "command_id": None, "first": 1, "types": [b"t" * 256],
        "bodies": [b"x"], "queue": 0, "queue_offset": 0, "previous": 0, "chain": [],
        "stream_next": 0, "command_next": 0,
    }))  # fmt: skip
    try:
        dataplane.encode_events(TOPIC, 0, 0, 1, [tuple(row)], PREFIX, "accounts")
    except ValueError:
        pass
    else:
        raise AssertionError("a 256-byte type was encoded")


@settings(max_examples=100, deadline=None)
@given(
    batch=st.lists(appends(), min_size=1, max_size=4),
    others=st.lists(st.binary(max_size=40), max_size=3),
    damage=st.one_of(st.none(), st.integers(0, 10_000)),
)
def test_event_records_read_back_natively_as_event_of_reads_them(batch, others, damage):
    """A segment's runs of intact records (the native scan) give the events that
    ``decode_record`` and ``event_of`` give for each of its intact records."""
    data = b""
    positions = []
    for body in others:  # records that are not events, or not of the topic
        positions.append(len(data))
        data += encode(len(data), 0, 1, 1, 0, TOPIC, body=body)
        positions.append(len(data))
        data += encode(len(data), 0, 1, 1, 0, b"other", body=body, properties=b"STREAM_ID\x01s")
    for a in batch:
        records, starts, _lengths = encode_events(
            TOPIC, a["stream_id"], a["first"], a["command_id"], a["types"], a["bodies"],
            len(data), a["queue"], a["queue_offset"], 5,
        )  # fmt: skip
        positions.extend(starts)
        data += records
    if damage is not None:
        raw = bytearray(data)
        raw[damage % len(raw)] ^= 0x40
        data = bytes(raw)
    expected = []
    for pos in positions:
        try:
            message = decode_record(memoryview(data), pos, len(data), pos, "")
        except CorruptRecordError:
            continue
        event = event_of(message)
        if message.topic.encode() != TOPIC or event is None:
            continue
        command = command_hash(event.stream_id, event.command_id) if event.command_id else 0
        expected.append(
            (
                pos, 1, message.queue, event.stream_id, event.version, event.command_id,
                stream_hash(event.stream_id), command,
            )
        )  # fmt: skip
    found = []
    position = 0
    while position is not None:
        events, position = _native.scan_step(data, 0, position, True, 0)
        for kind, _offset, _length, _reason, run in events:
            if kind == dataplane.NATIVE_RUN:
                found.extend(run.events([b"other", TOPIC]))
    assert found == expected


@settings(max_examples=200, deadline=None)
@given(stream_id=_TEXT, command_id=st.one_of(st.none(), _TEXT))
def test_the_index_hashes_are_computed_natively_as_in_python(stream_id, command_id):
    command = command_hash(stream_id, command_id) if command_id is not None else 0
    assert dataplane.stream_hashes(stream_id, command_id) == (stream_hash(stream_id), command)
