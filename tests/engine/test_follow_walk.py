"""The follow's walk over other processes' records (follow.py ``follow_log``), read
natively a segment at a time (``dataplane.follow_spans``; issue 31 part 12): the same
spans of queue offsets, store time and segments to fsync as a walk record by record,
with the end-of-segment markers, damaged records and queues that start inside the
walked stretch taken one by one."""

from __future__ import annotations

import time

import pytest

from storeadapter.engine import dataplane
from storeadapter.engine.errors import StoreFormatError
from storeadapter.engine.follow import follow_log
from tests.engine.storetools import small_config


@pytest.fixture
def behind(open_store, store_path, no_keep_up):
    """A writer and a second store object that has not followed it since the topics
    were made: its log's tail is where the writer's appends begin."""
    # No timed flush meanwhile (a flush follows the writer first), nor a look between
    # flushes (``no_keep_up``).
    config = small_config(flush_mode="async", segment_bytes=64 << 10, flush_interval_ms=600_000)
    writer = open_store(store_path, config)
    writer.create_topic("a", queues=2, layout="files")
    writer.create_topic("bb", queues=3, layout="files")
    reader = open_store(store_path, config)
    reader.queue_range("a", 0)  # caught up with the topics
    return writer, reader


def _append(writer, count: int) -> list:
    results = []
    for i in range(count):
        topic = ("a", "bb")[i % 2]
        results.append(writer.append(topic, f"m{i}".encode() * (1 + i % 5)))
    return results


def _expected(results, since: dict | None = None) -> dict:
    since = since or {}
    spans: dict = {}
    for r in results:
        key = (r.topic.encode(), r.queue)
        if r.commit_offset < since.get(key, 0):
            continue
        low, high = spans.get(key, (r.queue_offset, r.queue_offset))
        spans[key] = (min(low, r.queue_offset), max(high, r.queue_offset))
    return {key: (low, high + 1) for key, (low, high) in spans.items()}


def _follow(reader, end: int, since: dict | None = None) -> dict:
    since = since or {}
    followed = follow_log(
        reader.commitlog, end, lambda topic, queue: ((topic, queue), since.get((topic, queue), 0))
    )
    return {queue: (low, high) for queue, low, high in followed}


def test_the_reader_stays_behind_while_the_writer_appends(behind):
    # The fixture's promise, which the walks below build on: no flush and no look of the
    # reader's flush thread at the notes ring (``MessageStore._keep_up``) follows the
    # writer meanwhile, however many notes it publishes and however long it takes.
    writer, reader = behind
    start = reader.commitlog.tail
    _append(writer, 3000)
    time.sleep(0.3)  # past the longest time between two looks (``KEEP_UP_MAX_S``)

    assert reader.commitlog.tail == start


def test_the_walk_notes_each_queues_span_across_segments(behind):
    writer, reader = behind
    start = reader.commitlog.tail
    results = _append(writer, 3000)  # 64 bytes of frame a record: several segments
    end = writer.commitlog.tail
    assert len({r.commit_offset // (64 << 10) for r in results}) > 2

    assert _follow(reader, end) == _expected(results)
    log = reader.commitlog
    assert log.tail == end
    assert log.last_store_ms == max(r.store_time_ms for r in results)
    # Every segment holding a followed record is among those this process fsyncs next.
    holding = {s.base for s in log.segments if s.end > start and s.base < end}
    assert holding <= {s.base for s in log.unsynced}


def test_native_spans_stop_at_the_end_of_segment_marker(behind):
    writer, reader = behind
    results = _append(writer, 3000)
    segment = writer.commitlog.segments[0]
    stop, store_ms, met = dataplane.follow_spans(segment, 0, segment.end - segment.base)
    in_first = [r for r in results if r.commit_offset < segment.end]
    last = max(in_first, key=lambda r: r.commit_offset)
    # Stopped at the marker after the segment's last record, not at its end.
    assert stop == last.commit_offset - segment.base + _length(segment, last)
    assert stop < segment.end - segment.base
    assert store_ms is not None
    assert {(t, q): (low, high + 1) for t, q, low, high, _first in met} == _expected(in_first)
    firsts = {(t, q): first for t, q, _low, _high, first in met}
    for key in firsts:
        assert firsts[key] == min(
            r.commit_offset for r in in_first if (r.topic.encode(), r.queue) == key
        )


def _length(segment, result) -> int:
    at = result.commit_offset - segment.base
    return int.from_bytes(segment.view[at : at + 4], "little")


def test_a_queue_starting_inside_the_stretch_counts_only_its_records_from_there(behind):
    writer, reader = behind
    results = _append(writer, 400)
    end = writer.commitlog.tail
    # Queue bb/1 counts only from its 20th record on (a queue added to a topic since).
    of_queue = [r for r in results if (r.topic, r.queue) == ("bb", 1)]
    since = {(b"bb", 1): of_queue[20].commit_offset}

    assert _follow(reader, end, since) == _expected(results, since)


def test_a_damaged_record_below_the_published_tail_is_a_format_error(behind):
    writer, reader = behind
    results = _append(writer, 50)
    end = writer.commitlog.tail
    damaged = results[30].commit_offset
    segment = writer.commitlog.segments[-1]
    at = damaged - segment.base
    segment.map[at + 4 : at + 8] = b"XXXX"  # its magic

    with pytest.raises(StoreFormatError, match=f"no record at commit-log offset {damaged}"):
        follow_log(reader.commitlog, end, lambda topic, queue: None)
