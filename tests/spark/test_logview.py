"""How far a reader reads, and what it does when the store moves under it (no Spark
needed: the reader's pieces are called in this process)."""

from __future__ import annotations

import pytest

from storeadapter.spark import logview, planning, scanning
from storeadapter.spark.source import SCHEMA, TidemarkDataSource
from tests.engine.storetools import copy_store, segment_paths, small_config, tail


def _fill(store, count: int, topic: str = "t") -> None:
    store.append_batch(topic, [f"message {i} ".encode() * 10 for i in range(count)])


def _messages(snap, **selection) -> list:
    wanted = planning.Selection(**selection).resolve(snap.topics)
    found = []
    for log_range in planning.plan_ranges(snap, wanted, split_bytes=1024):
        found.extend(scanning.read_range(log_range, wanted, snap.id_prefix))
    return found


def test_published_tail_and_flushed_checkpoint(open_store, store_path):
    # No flush but the one at open: the checkpoint stays where the log was then.
    store = open_store(config=small_config(flush_interval_ms=3_600_000))
    store.create_topic("t", queues=2)
    opened_at = logview.snapshot(store_path).flushed
    _fill(store, 50)

    published = logview.snapshot(store_path)
    assert published.end == published.published_tail == tail(store)
    assert len(_messages(published)) == 50
    flushed = logview.snapshot(store_path, upto=logview.UPTO_FLUSHED)
    assert flushed.end == opened_at < published.end
    assert _messages(flushed) == []

    store.flush()
    flushed = logview.snapshot(store_path, upto=logview.UPTO_FLUSHED)
    assert flushed.end == tail(store)
    assert len(_messages(flushed)) == 50


def test_without_a_state_file_the_tail_is_found_by_scanning(open_store, store_path, tmp_path):
    store = open_store()
    store.create_topic("t", queues=1)
    _fill(store, 70)
    store.close()
    copy = copy_store(store_path, tmp_path / "copy")
    (copy / "state").unlink()
    snap = logview.snapshot(copy)
    assert snap.end == logview.snapshot(store_path).end
    assert len(_messages(snap)) == 70


def test_a_segment_deleted_by_retention_before_it_is_read_is_counted(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=1)
    _fill(store, 70)
    snap = logview.snapshot(store_path)
    wanted = planning.Selection().resolve(snap.topics)
    ranges = planning.plan_ranges(snap, wanted)
    first = segment_paths(store_path)[0]
    in_first = [r for r in ranges if r.segment == first.name]
    first.unlink()  # as retention would, between planning and reading
    scanning.counters.reset()
    for log_range in in_first:
        assert list(scanning.read_range(log_range, wanted, snap.id_prefix)) == []
    assert scanning.counters.missing_segments == len(in_first)


def test_the_stream_reader_by_itself(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=2)
    _fill(store, 30)
    options = {"path": str(store_path)}
    reader = TidemarkDataSource(options).streamReader(SCHEMA)
    start = reader.initialOffset()
    assert start == {"position": 0}
    end = reader.latestOffset(start, None)
    assert end == {"position": tail(store)}
    rows = sum(batch.num_rows for p in reader.partitions(start, end) for batch in reader.read(p))
    assert rows == 30
    assert reader.partitions(end, end) == []

    # availableNow: the end is where the log was when the query started.
    reader.prepareForTriggerAvailableNow()
    _fill(store, 5)
    assert reader.latestOffset(end, None) == end
    fresh = TidemarkDataSource(options).streamReader(SCHEMA)
    assert fresh.latestOffset(end, None) == {"position": tail(store)}

    latest = TidemarkDataSource({**options, "startingPosition": "latest"}).streamReader(SCHEMA)
    assert latest.initialOffset() == {"position": tail(store)}
    second = store.read("t", 0, 1, 1)[0].commit_offset
    at = TidemarkDataSource({**options, "startingPosition": str(second)}).streamReader(SCHEMA)
    assert at.initialOffset() == {"position": second}
    wrong = TidemarkDataSource({**options, "startingPosition": str(second + 1)})
    with pytest.raises(ValueError, match="not where a record"):
        wrong.streamReader(SCHEMA).initialOffset()
