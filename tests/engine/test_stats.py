"""stats(): what the console's storage and topic pages show."""

from __future__ import annotations

import dataclasses
import json

import pytest

from storeadapter.engine import QueueStats, StoreStats, TopicStats
from tests.engine.storetools import (
    SEGMENT_BYTES,
    segment_paths,
    simulate_crash,
    small_config,
    tail,
)


def test_stats_lists_every_segment(store, store_path):
    for i in range(60):
        store.append("t", f"m{i}".encode() * 40)

    stats = store.stats()

    names = [p.name for p in segment_paths(store_path)]
    assert [s.name for s in stats.segments] == names
    assert stats.segment_count == len(names) >= 3
    assert [s.base for s in stats.segments] == [int(n) for n in names]
    assert all(s.size == SEGMENT_BYTES for s in stats.segments)


def test_stats_disk_bytes_is_the_sum_over_segments(store):
    for i in range(60):
        store.append("t", f"m{i}".encode() * 40)

    stats = store.stats()

    assert stats.disk_bytes == sum(s.disk_bytes for s in stats.segments)
    assert stats.disk_bytes >= SEGMENT_BYTES * (stats.segment_count - 1)


def test_stats_commit_log_tail_is_the_end_of_the_last_record(store, store_path):
    store.append("t", b"first")
    store.append("t", b"second")

    log = store.stats().commit_log

    assert log.min_offset == 0
    assert log.tail == tail(store) > 0


def test_stats_per_queue_offsets_counts_and_last_store_time(store):
    results = [store.append("t", f"m{i}", queue=i % 3) for i in range(10)]

    queues = store.stats().topics["t"].queues

    for queue in range(3):
        mine = [r for r in results if r.queue == queue]
        assert queues[queue].min_offset == 0
        assert queues[queue].max_offset == len(mine)
        assert queues[queue].messages == len(mine)
        assert queues[queue].last_store_time_ms == mine[-1].store_time_ms
    assert queues[3] == QueueStats(
        min_offset=0,
        max_offset=0,
        messages=0,
        last_store_time_ms=None,
    )
    assert store.stats().topics["t"].messages == 10


def test_stats_lists_every_topic(open_store):
    store = open_store()
    store.create_topic("b", queues=1)
    store.create_topic("a", queues=2)

    topics = store.stats().topics

    assert list(topics) == ["a", "b"]
    assert len(topics["a"].queues) == 2


def test_stats_reports_the_flush_mode(open_store, tmp_path):
    for mode in ("async", "sync"):
        config = small_config(
            flush_mode=mode,
        )
        assert open_store(tmp_path / mode, config).stats().flush_mode == mode


def test_stats_last_recovery_after_a_clean_open(open_store):
    report = open_store().stats().last_recovery

    assert report.clean_shutdown is True
    assert report.truncated_at is None
    assert report.corruptions == []
    assert report.duration_ms >= 0
    assert {"records", "redispatched", "dropped_queue_entries", "truncated_bytes"} <= {
        f.name for f in dataclasses.fields(report)
    }


def test_stats_last_recovery_after_a_crash(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=1)
    for i in range(12):
        store.append("t", f"m{i}")
    end = tail(store)
    store.close()
    simulate_crash(store_path)

    report = open_store().stats().last_recovery

    assert report.clean_shutdown is False
    assert report.records == 12
    assert report.scanned_bytes == end
    assert report.tail == end


def test_stats_lists_groups_and_has_no_failure(store):
    store.append("t", b"x", queue=0)
    store.commit_offset("readers", "t", 0, 1)

    stats = store.stats()

    assert stats.groups == ["readers"]
    assert stats.failed is None
    assert stats.corruptions == []


def test_stats_reads_disk_use_when_asked(open_store, monkeypatch):
    """A process that does not write still shows the disk's use now, not as of its
    last flush."""
    from storeadapter.engine import fileio

    store = open_store()
    monkeypatch.setattr(fileio, "disk_usage", lambda _path: (42, 100))
    assert store.stats(topics=False).disk_ratio == 0.42


def test_stats_are_a_frozen_dataclass_read_by_attribute(store):
    store.append("t", b"m", queue=0)

    stats = store.stats()

    assert isinstance(stats, StoreStats)
    assert isinstance(stats.topics["t"], TopicStats)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.disk_bytes = 0  # type: ignore[misc]


def test_stats_as_a_dict_leave_out_the_topics_not_asked_for(store):
    store.append("t", b"m", queue=0)

    asked = store.stats().as_dict()
    not_asked = store.stats(topics=False).as_dict()

    assert list(asked) == [*list(not_asked)[:9], "topics", *list(not_asked)[9:]]
    assert json.loads(json.dumps(asked))["topics"]["t"]["queues"]["0"]["messages"] == 1
    assert not_asked["corruptions"] == [] and "corruptions" in not_asked["last_recovery"]


def test_topic_totals_are_the_topic_stats_messages_and_newest_store_time(store):
    results = [store.append("t", f"m{i}", queue=i % 3) for i in range(10)]

    messages, newest = store.topic_totals("t")

    assert messages == store.topic_stats("t").messages == 10
    assert newest == max(r.store_time_ms for r in results)


def test_topic_totals_of_a_topic_without_messages_have_no_store_time(store):
    assert store.topic_totals("t") == (0, None)


def test_topic_totals_of_a_topic_that_is_not_there_raise_as_topic_stats_does(store):
    from storeadapter.engine import TopicNotFoundError

    with pytest.raises(TopicNotFoundError):
        store.topic_totals("missing")
