"""The native segment scan finds what scan.scan_segment finds: the same records, the
same corrupt stretches with the same reasons, the same end, on random logs with damage."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storeadapter.engine import dataplane
from storeadapter.engine.scan import RECORD, scan_segment
from storeadapter.engine.timeindex import MARK
from tests.engine.nativecases import encode

# Not run again in the shared-layout pass: the native segment scan beside the Python one, no topic.
pytestmark = pytest.mark.one_layout

SIZE = 4096


class FakeSegment:
    """A segment held in memory: what both scans read."""

    def __init__(self, data: bytes, base: int) -> None:
        self.map = data
        self.view = memoryview(data)
        self.size = len(data)
        self.base = base
        self.end = base + len(data)


def _log(bodies: list[bytes], base: int, sealed: bool) -> bytearray:
    data = bytearray()
    for i, body in enumerate(bodies):
        data += encode(base + len(data), i, queue_id=i % 3, tag=b"x" if i % 4 else b"", body=body)
    if sealed:
        data += (SIZE - len(data)).to_bytes(4, "little") + b"TDME"
    return data + bytes(SIZE - len(data))


def _python_events(segment, sealed: bool, durable_end: int) -> list[tuple]:
    return [
        (e.kind, e.offset, e.length, e.reason, e.header if e.kind == RECORD else None)
        for e in scan_segment(segment, 0, sealed, durable_end)
    ]


def _native_events(segment, sealed: bool, durable_end: int) -> list[tuple]:
    events = []
    for e in dataplane.scan_runs(segment, 0, sealed, durable_end):
        if e.kind == dataplane.NATIVE_RUN:
            for header in e.header.headers():
                events.append((RECORD, header[2], header[0], "", header))
        else:
            events.append((e.kind, e.offset, e.length, e.reason, None))
    return events


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(st.binary(max_size=120), max_size=24),
    damage=st.lists(st.tuples(st.integers(0, SIZE - 1), st.integers(1, 255)), max_size=3),
    sealed=st.booleans(),
    durable=st.integers(0, SIZE + 100),
    base=st.sampled_from([0, 1 << 30]),
)
def test_a_damaged_segment_scans_to_the_same_events(bodies, damage, sealed, durable, base):
    while sum(len(b) + 65 for b in bodies) > SIZE - 8:
        bodies.pop()
    data = _log(bodies, base, sealed)
    for at, mask in damage:
        data[at] ^= mask
    segment = FakeSegment(bytes(data), base)
    expected = _python_events(segment, sealed, base + durable)
    assert _native_events(segment, sealed, base + durable) == expected


def test_a_run_packs_each_queues_entries_and_time_marks():
    data = _log([b"a"] * 9, 0, sealed=False)
    run = next(dataplane.scan_runs(FakeSegment(bytes(data), 0), 0, False)).header
    assert run.queues() == [(b"t", 0), (b"t", 1), (b"t", 2)]
    groups, items = run.pack([0, None, 100_000], 128, None, "DEDUP_ID", "\x01dedup\x01")
    first, offsets, entries, marks, store_ms = groups[0]
    assert (first, offsets, len(entries), store_ms) == (0, [0, 3, 6], 60, 1)
    assert marks == (0, MARK.pack(1, 1))
    assert groups[1] is None and groups[2] is None and items == []


def test_marks_that_do_not_fill_consecutive_slots_come_as_a_list():
    data = bytearray()
    for queue_offset in (0, 5, 256):
        data += encode(len(data), queue_offset, store_ms=queue_offset)
    run = next(dataplane.scan_runs(FakeSegment(bytes(data + bytes(200)), 0), 0, False)).header
    groups, _ = run.pack([0], 128, None, "DEDUP_ID", "\x01dedup\x01")
    assert groups[0][3] == [(0, 0), (256, 256)]


def test_a_run_gives_the_key_index_items_of_its_records():
    data = bytearray()
    data += encode(0, keys=b"k1\x1fk2", properties=b"DEDUP_ID\x01d1\x02p\x01v")
    second = len(data)
    data += encode(second, 1, keys=b"k3")
    run = next(dataplane.scan_runs(FakeSegment(bytes(data + bytes(200)), 0), 0, False)).header
    _, items = run.pack([0], 128, 1, "DEDUP_ID", "\x01dedup\x01")
    assert items == [("t", "k3", second, 1)]
    _, items = run.pack([0], 128, 0, "DEDUP_ID", "\x01dedup\x01")
    assert [item[1] for item in items] == ["k1", "k2", "\x01dedup\x01d1", "k3"]


LARGE = 16384


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(450, 1500), max_size=12),
    damage=st.lists(st.tuples(st.integers(0, LARGE - 1), st.integers(1, 255)), max_size=3),
    sealed=st.booleans(),
    durable=st.integers(0, LARGE + 100),
)
def test_runs_of_large_records_scan_to_the_same_events_as_python(sizes, damage, sealed, durable):
    data = bytearray()
    for i, size in enumerate(sizes):
        if len(data) + size + 200 > LARGE - 8:
            break
        data += encode(len(data), i, queue_id=i % 3, body=bytes([i]) * size)
    if sealed:
        data += (LARGE - len(data)).to_bytes(4, "little") + b"TDME"
    data += bytes(LARGE - len(data))
    for at, mask in damage:
        data[at] ^= mask
    segment = FakeSegment(bytes(data), 0)
    assert _native_events(segment, sealed, durable) == _python_events(segment, sealed, durable)
