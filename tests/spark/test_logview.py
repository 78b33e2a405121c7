"""How far a reader reads, and what it does when the store moves under it (no Spark
needed: the reader's pieces are called in this process)."""

from __future__ import annotations

import shutil
import socket

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from storeadapter.spark import logview, planning, scanning
from storeadapter.spark.errors import PlanMismatchError, SegmentNotVisibleError
from storeadapter.spark.queueindex import QueueIndex
from storeadapter.spark.source import SCHEMA, TidemarkDataSource
from tests.engine.storetools import SHARED_LAYOUT, copy_store, segment_paths, small_config, tail

#: The two layouts of a topic's queues, whatever TIDEMARK_TEST_LAYOUT says: files per queue
#: (the plan knows how many records each range holds, a stream's offsets list each queue)
#: and shared block files (neither: docs in planning.py and offsets.py).
LAYOUTS = {"per_queue": {"shared_layout_above": 1024}, "shared": SHARED_LAYOUT}


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


def test_a_segment_gone_before_it_is_read_fails_the_read_with_its_path_and_host(
    open_store, store_path
):
    store = open_store()
    store.create_topic("t", queues=1)
    _fill(store, 70)
    snap = logview.snapshot(store_path)
    wanted = planning.Selection().resolve(snap.topics)
    ranges = planning.plan_ranges(snap, wanted)
    first = segment_paths(store_path)[0]
    in_first = [r for r in ranges if r.segment == first.name]
    first.unlink()  # as a host that cannot see it, or retention after planning, would
    for log_range in in_first:
        with pytest.raises(SegmentNotVisibleError) as failure:
            list(scanning.read_range(log_range, wanted, snap.id_prefix))
        assert str(first) in str(failure.value)
        assert f"on host {socket.gethostname()}" in str(failure.value)
        assert "retention" not in str(failure.value)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_stream_that_may_lose_data_skips_only_what_retention_deleted(
    open_store, store_path, fake_clock, layout
):
    store = open_store(config=small_config(retention_hours=1, **LAYOUTS[layout]))
    store.create_topic("t", queues=1)
    _fill(store, 70)
    snap = logview.snapshot(store_path)
    wanted = planning.Selection().resolve(snap.topics)
    with QueueIndex(snap) as index:
        ranges = planning.plan_ranges(snap, wanted, index=index)
    first = segment_paths(store_path)[0]
    fake_clock.advance(2 * 3_600_000)
    _fill(store, 1)
    assert first.name in {s["name"] for s in store.delete_expired().deleted_segments}

    scanning.counters.reset()
    in_first = [r for r in ranges if r.segment == first.name]
    for log_range in in_first:
        assert list(scanning.read_range(log_range, wanted, snap.id_prefix, skip_lost=True)) == []
    assert scanning.counters.missing_segments == len(in_first) > 0
    if layout == "shared":  # the plan does not know how many records were there
        assert [r.expected for r in in_first] == [None] * len(in_first)
        assert scanning.counters.lost_records == 0
    else:
        assert scanning.counters.lost_records == sum(r.expected for r in in_first) > 0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_stream_reader_by_itself(open_store, store_path, layout):
    store = open_store(config=small_config(**LAYOUTS[layout]))
    store.create_topic("t", queues=2)
    _fill(store, 30)
    # Per-queue offsets in a stream's offsets where the queues have files of their own.
    listed = (lambda queues: {"queues": queues}) if layout == "per_queue" else (lambda _: {})
    options = {"path": str(store_path)}
    reader = TidemarkDataSource(options).streamReader(SCHEMA)
    start = reader.initialOffset()
    assert start == {"position": 0, **listed({"t": {"0": -1, "1": -1}})}
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"position": tail(store), **listed({"t": {"0": 14, "1": 14}})}
    rows = sum(batch.num_rows for p in reader.partitions(start, end) for batch in reader.read(p))
    assert rows == 30
    assert reader.partitions(end, end) == []

    # availableNow: the end is where the log was when the query started.
    reader.prepareForTriggerAvailableNow()
    _fill(store, 5)
    assert reader.latestOffset(end, ReadAllAvailable()) == end
    fresh = TidemarkDataSource(options).streamReader(SCHEMA)
    assert fresh.latestOffset(end, ReadAllAvailable())["position"] == tail(store)

    latest = TidemarkDataSource({**options, "startingOffsets": "latest"}).streamReader(SCHEMA)
    assert latest.initialOffset()["position"] == tail(store)
    second = store.read("t", 0, 1, 1)[0].commit_offset
    at = TidemarkDataSource({**options, "startingOffsets": str(second)}).streamReader(SCHEMA)
    assert at.initialOffset() == {"position": second, **listed({"t": {"0": 0, "1": 0}})}


def test_a_range_of_another_store_at_the_planned_path_fails_the_read(
    open_store, store_path, tmp_path
):
    store = open_store()
    store.create_topic("t", queues=1)
    _fill(store, 20)
    snap = logview.snapshot(store_path)
    wanted = planning.Selection().resolve(snap.topics)
    ranges = planning.plan_ranges(snap, wanted)
    store.close()
    other = open_store(tmp_path / "other")  # the same traffic in a store of another id
    other.create_topic("t", queues=1)
    _fill(other, 20)
    other.close()
    shutil.rmtree(store_path)
    copy_store(tmp_path / "other", store_path)  # put where the read was planned
    with pytest.raises(PlanMismatchError, match=f"planned on store {snap.id_prefix}"):
        list(scanning.read_range(ranges[0], wanted, snap.id_prefix))
