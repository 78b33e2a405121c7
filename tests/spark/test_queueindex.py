"""Consume-queue lookups by commit-log position: what the planner knows without reading
the log (no Spark needed). The queues here have files of their own whatever
TIDEMARK_TEST_LAYOUT says (``PER_QUEUE``): topics whose queues share block files are not
looked up (``QueueIndex.supported``)."""

from __future__ import annotations

import bisect

from storeadapter.spark import logview
from storeadapter.spark.queueindex import QueueIndex
from tests.engine.storetools import SHARED_LAYOUT, read_all, small_config

PER_QUEUE = {"shared_layout_above": 1024}


def _fill(store) -> None:
    store.create_topic("t", queues=3)
    store.create_topic("u", queues=1)
    for i in range(60):
        store.append_batch("t", [f"t{i}-{j} ".encode() * 5 for j in range(4)])
        store.append("u", f"u{i}".encode())


def _starts(store, topic: str, queue: int) -> list[int]:
    return [m.commit_offset for m in read_all(store, topic, queue)]


def test_offset_at_counts_a_queue_s_records_below_any_position(open_store, store_path):
    # Queue files of 16 entries: lookups cross many files.
    store = open_store(config=small_config(queue_file_entries=16, **PER_QUEUE))
    _fill(store)
    snap = logview.snapshot(store_path)
    positions = sorted({0, 1, snap.end - 1, snap.end} | set(range(0, snap.end, 997)))
    with QueueIndex(snap) as index:
        for name in ("t", "u"):
            topic = snap.topics[name]
            for queue in range(topic.queues):
                starts = _starts(store, name, queue)
                assert index.range_of(topic, queue) == (0, len(starts))
                for position in positions:
                    assert index.offset_at(topic, queue, position) == bisect.bisect_left(
                        starts, position
                    )
                for offset, start in enumerate(starts):
                    assert index.position_of(topic, queue, offset) == start
                assert index.position_of(topic, queue, len(starts)) is None


def test_lookups_stop_at_the_snapshot_s_end(open_store, store_path):
    store = open_store(config=small_config(queue_file_entries=16, **PER_QUEUE))
    _fill(store)
    snap = logview.snapshot(store_path)
    store.append_batch("t", [b"later"] * 9)  # appended after the snapshot
    with QueueIndex(snap) as index:
        topic = snap.topics["t"]
        total = sum(index.range_of(topic, q)[1] for q in range(3))
        assert total == 240
        assert index.count([(topic, q) for q in range(3)], 0, snap.end + 10_000) == 240


def test_after_retention_the_queue_starts_at_its_first_remaining_record(
    open_store, store_path, fake_clock
):
    store = open_store(config=small_config(queue_file_entries=16, retention_hours=1, **PER_QUEUE))
    _fill(store)
    fake_clock.advance(2 * 3_600_000)
    store.append("u", b"new")  # a newer record keeps the active segment alive
    assert store.delete_expired().deleted_segments
    snap = logview.snapshot(store_path)
    with QueueIndex(snap) as index:
        topic = snap.topics["t"]
        for queue in range(3):
            low, _ = store.queue_range("t", queue)
            starts = _starts(store, "t", queue)
            assert index.offset_at(topic, queue, snap.min_offset) == low
            for offset, start in enumerate(starts, start=low):
                assert index.position_of(topic, queue, offset) == start


def test_topics_whose_queues_share_block_files_are_not_looked_up(open_store, store_path):
    store = open_store(config=small_config(**SHARED_LAYOUT))
    _fill(store)
    snap = logview.snapshot(store_path)
    assert snap.topics["t"].shared
    assert not QueueIndex.supported(snap.topics["t"])
