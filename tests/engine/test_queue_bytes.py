"""``queue_bytes``: a queue's record bytes per commit-log segment, from its entries alone."""

from __future__ import annotations

import pytest

from storeadapter.engine import OffsetOutOfRangeError, StoreError
from storeadapter.engine import clock as store_clock

HOUR_MS = 3_600_000
START_MS = 1_700_000_000_000


def _held(store, topic: str = "t") -> int:
    total = 0
    for queue in range(len(store.queue_ranges(topic))):
        total += sum(store.queue_bytes(topic, queue, 0).by_segment.values())
    return total


def test_a_topic_alone_in_one_segment_holds_the_whole_log(store):
    for i in range(10):
        store.append("t", b"x" * (10 + i), queue=i % 4)

    assert store.stats(topics=False).segment_count == 1
    assert _held(store) == store.stats(topics=False).commit_log.tail


def test_a_longer_body_counts_its_extra_bytes(store):
    store.append("t", b"x" * 10, queue=0)
    store.append("t", b"x" * 35, queue=1)

    short = sum(store.queue_bytes("t", 0, 0).by_segment.values())
    long = sum(store.queue_bytes("t", 1, 0).by_segment.values())

    assert long - short == 25


def test_reading_in_steps_adds_up_to_reading_at_once(store):
    for _ in range(9):
        store.append("t", b"y" * 50, queue=2)
    whole = store.queue_bytes("t", 2, 0)
    parts: dict[int, int] = {}
    at = 0
    while at < whole.max_offset:
        step = store.queue_bytes("t", 2, at, max_entries=2)
        for base, size in step.by_segment.items():
            parts[base] = parts.get(base, 0) + size
        at = step.next_offset

    assert parts == whole.by_segment
    assert whole.next_offset == 9


def test_records_are_summed_per_segment_they_are_in(store):
    results = [store.append("t", b"z" * 200, queue=0) for _ in range(40)]
    bases = [s.base for s in store.stats(topics=False).segments]
    assert len(bases) > 1

    by_segment = store.queue_bytes("t", 0, 0).by_segment

    assert set(by_segment) == {max(b for b in bases if b <= r.commit_offset) for r in results}


def test_retention_leaves_the_deleted_segments_out(store, monkeypatch):
    now = {"ms": START_MS}
    monkeypatch.setattr(store_clock, "now_ms", lambda: now["ms"])
    for _ in range(30):
        store.append("t", b"o" * 200, queue=0)
    now["ms"] = START_MS + 80 * HOUR_MS
    for _ in range(30):
        store.append("t", b"n" * 200, queue=0)

    store.delete_expired(now_ms=START_MS + 90 * HOUR_MS)
    low, high = store.queue_range("t", 0)
    held = store.queue_bytes("t", 0, 0)

    assert low > 0
    assert min(held.by_segment) >= store.stats(topics=False).commit_log.min_offset
    assert held.next_offset == high


def test_a_start_past_the_end_reads_nothing(store):
    store.append("t", b"a", queue=0)

    assert store.queue_bytes("t", 0, 5) == ({}, 5, 0, 1)


@pytest.mark.parametrize("start", [-1, "0", True])
def test_a_bad_start_is_refused_with_a_sentence(store, start):
    with pytest.raises(OffsetOutOfRangeError, match="queue offset"):
        store.queue_bytes("t", 0, start)


def test_a_bad_entry_count_is_refused_with_a_sentence(store):
    with pytest.raises(StoreError, match="max_entries"):
        store.queue_bytes("t", 0, 0, max_entries=0)
