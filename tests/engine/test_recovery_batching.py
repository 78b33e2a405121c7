"""Recovery's batched scan (runs of records) finds exactly what the record-by-record scan
finds, and rebuilds the same queues, around damage inside a run of alike records."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from storeadapter.engine import MessageStore
from storeadapter.engine.record import HEADER_SIZE
from storeadapter.engine.scan import RECORD, RUN, UNIFORM_RUN, scan_segment
from storeadapter.engine.segment import Segment
from tests.engine.storetools import (
    lose_queue_files,
    read_everything,
    read_log_bytes,
    rescan_from_start,
    segment_paths,
    simulate_crash,
    small_config,
    write_log_bytes,
)

CONFIG = small_config(segment_bytes=256 << 10, flush_interval_ms=600_000)


def _fill(path: Path, seed: int = 0) -> MessageStore:
    """Batches of alike records (uniform runs), records alike but for their topic, singles
    of varying size, tags, keys and properties."""
    rng = random.Random(seed)
    store = MessageStore.open(path, CONFIG)
    store.create_topic("a", queues=3)
    store.create_topic("bb", queues=2)
    store.create_topic("c", queues=1)
    for round_ in range(6):
        for i in range(40):  # alike records, but of two topics in turn
            store.append("a" if i % 2 else "c", b"z" * 30)
        store.append_batch("a", [bytes([round_]) * 40] * 60)
        store.append_batch("bb", [{"body": b"y" * 40, "tag": "t"}] * 30)
        for i in range(20):
            store.append(
                "a" if i % 2 else "bb",
                rng.randbytes(rng.randrange(1, 90)),
                key=f"k{i}" if i % 3 == 0 else None,
                tag="x" if i % 4 == 0 else None,
                properties={"p": str(i)} if i % 5 == 0 else None,
            )
        store.append_batch("a", [bytes([round_]) * 400] * 20)  # CRCs over views, not copies
    return store


def _with_segment(path: Path, use):
    segment = Segment.open(segment_paths(path)[0])
    try:
        return use(segment)
    finally:
        segment.close()


def _events(segment: Segment, runs: bool) -> list[tuple]:
    """The scan's findings, runs expanded to one (RECORD, offset, length) per record."""
    found = []
    for event in scan_segment(segment, 0, False, 0, runs=runs):
        if event.kind == UNIFORM_RUN:
            length = event.header.header[0]
            found.extend(
                (RECORD, event.offset + i * length, length) for i in range(event.header.count)
            )
        elif event.kind == RUN:
            found.extend((RECORD, h[2], h[0]) for h in event.header)
        elif event.kind == RECORD:
            found.append((RECORD, event.offset, event.length))
        else:
            found.append((event.kind, event.offset, event.length, event.reason))
    return found


def _uniform_offsets(segment: Segment) -> list[int]:
    """Commit offsets of records that the batched scan checks as part of a uniform run."""
    offsets = []
    for event in scan_segment(segment, 0, False, 0, runs=True):
        if event.kind == UNIFORM_RUN:
            length = event.header.header[0]
            offsets.extend(event.offset + i * length for i in range(event.header.count))
    return offsets


def _rewrite_offset(path: Path, offset: int, new: int) -> None:
    """Make the record at ``offset`` claim to live at ``new``, with a valid CRC."""
    length = struct.unpack("<I", read_log_bytes(path, offset, 4))[0]
    record = bytearray(read_log_bytes(path, offset, length))
    struct.pack_into("<Q", record, 8, new)
    struct.pack_into("<I", record, length - 8, crc32c(bytes(record[: length - 8])))
    write_log_bytes(path, offset, bytes(record))


DAMAGE = ["body_bit", "crc", "offset", "trailing_length", "magic", "zeros"]


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_batched_scan_reports_the_same_as_record_by_record(
    tmp_path: Path, damage: str, where: str
) -> None:
    path = tmp_path / "store"
    _fill(path).close()
    uniform = _with_segment(path, _uniform_offsets)
    assert len(uniform) > 100
    victim = {"first": uniform[0], "middle": uniform[len(uniform) // 2], "last": uniform[-1]}[where]
    length = struct.unpack("<I", read_log_bytes(path, victim, 4))[0]
    if damage == "body_bit":
        at = victim + length - 12
        write_log_bytes(path, at, bytes([read_log_bytes(path, at, 1)[0] ^ 1]))
    elif damage == "crc":
        at = victim + length - 8
        write_log_bytes(path, at, bytes([read_log_bytes(path, at, 1)[0] ^ 0x80]))
    elif damage == "offset":
        _rewrite_offset(path, victim, victim + 1)
    elif damage == "trailing_length":
        write_log_bytes(path, victim + length - 4, struct.pack("<I", length + 1))
    elif damage == "magic":
        write_log_bytes(path, victim + 4, b"XXXX")
    else:
        write_log_bytes(path, victim + HEADER_SIZE, bytes(length - HEADER_SIZE))
    batched = _with_segment(path, lambda segment: _events(segment, runs=True))
    single = _with_segment(path, lambda segment: _events(segment, runs=False))
    assert batched == single
    assert any(found[0] != RECORD and found[1] == victim for found in single)


def test_recovery_rebuilds_lost_queues_identically(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = _fill(path)
    before = read_everything(store)
    keys_before = store.query_by_key("a", "k3") + store.query_by_key("bb", "k0")
    store.close()
    simulate_crash(path)
    (path / "checkpoint").unlink(missing_ok=True)
    lose_queue_files(path, "a")
    lose_queue_files(path, "bb")
    lose_queue_files(path, "c")
    store = MessageStore.open(path, CONFIG)
    try:
        report = store.last_recovery
        assert report.corruptions == []
        assert report.records == sum(len(messages) for messages in before.values())
        assert report.redispatched == report.records
        assert read_everything(store) == before
        assert store.query_by_key("a", "k3") + store.query_by_key("bb", "k0") == keys_before
    finally:
        store.close()
    simulate_crash(path)
    (path / "checkpoint").unlink(missing_ok=True)
    store = MessageStore.open(path, CONFIG)
    try:
        assert store.last_recovery.redispatched == 0  # idempotent
        assert read_everything(store) == before
    finally:
        store.close()


def test_damage_inside_a_run_skips_only_that_record(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = _fill(path)
    before = read_everything(store)
    store.close()
    uniform = _with_segment(path, _uniform_offsets)
    victim = uniform[len(uniform) // 3]
    length = struct.unpack("<I", read_log_bytes(path, victim, 4))[0]
    write_log_bytes(path, victim + length - 12, b"\xff")
    simulate_crash(path, keep_checkpoint=True)
    rescan_from_start(path)  # below the durable watermark: damage, skipped and reported
    lose_queue_files(path, "a")
    lose_queue_files(path, "bb")
    store = MessageStore.open(path, CONFIG)
    try:
        report = store.last_recovery
        assert [(c.commit_offset, c.length) for c in report.corruptions] == [(victim, length)]
        after = read_everything(store)
        lost = [m for messages in before.values() for m in messages if m.commit_offset == victim]
        assert len(lost) == 1
        for key, messages in before.items():
            assert [m for m in messages if m.commit_offset != victim] == [
                m for m in after[key] if m.commit_offset != victim
            ]
    finally:
        store.close()
