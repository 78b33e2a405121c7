"""Batch reads through a real Spark session return exactly what the engine's reads return."""

from __future__ import annotations

import pytest

from storeadapter.engine import Message, dlq_topic, retry_topic
from storeadapter.spark import logview, planning
from storeadapter.spark.queueindex import QueueIndex
from tests.engine.storetools import segment_paths, small_config
from tests.spark.sparktools import engine_rows, spark_rows, tidemark


def populate(store, count: int = 120) -> None:
    """Two topics, messages with and without keys, tags and properties, bodies of many
    sizes (empty and non-ASCII included)."""
    store.create_topic("orders", queues=3)
    store.create_topic("audit", queues=1)
    batch = []
    for i in range(count):
        batch.append(
            Message(
                body=(f"order {i} ünïcode ".encode() * (i % 7)) if i % 11 else b"",
                key=None
                if i % 4 == 0
                else ([f"k{i}", f"shared{i % 3}"] if i % 4 == 1 else f"k{i}"),
                tag=None if i % 3 == 0 else f"tag{i % 5}",
                properties=None if i % 2 else {"n": str(i), "kind": "even"},
            )
        )
        if len(batch) == 10:
            store.append_batch("orders", batch)
            store.append("audit", f"audit {i}".encode(), key=f"a{i}")
            batch = []


def test_batch_read_returns_every_message_as_the_engine_reads_it(spark, open_store, store_path):
    store = open_store()
    populate(store)
    segments = len(segment_paths(store_path))
    assert segments >= 3

    df = tidemark(spark, store_path)
    assert df.rdd.getNumPartitions() == segments  # one task per segment
    assert spark_rows(df) == engine_rows(store)


def test_a_large_segment_is_read_in_byte_ranges_each_with_its_expected_count(
    spark, open_store, store_path
):
    store = open_store(config=small_config(segment_bytes=32 << 10, max_message_bytes=4096))
    populate(store, count=300)
    snap = logview.snapshot(store_path)
    wanted = planning.Selection().resolve(snap.topics)
    with QueueIndex(snap) as index:
        ranges = planning.plan_ranges(snap, wanted, split_bytes=2048, index=index)
    assert len(ranges) > 2 * len(snap.segments)
    # Cut at byte positions, not at records: each range holds the records starting in it,
    # as many as the consume queues said when it was planned.
    offsets = [row["commit_offset"] for row in engine_rows(store)]
    assert {r.first_offset for r in ranges} - set(offsets) - {s.base for s in snap.segments}
    for log_range in ranges:
        inside = [o for o in offsets if log_range.first_offset <= o < log_range.stop_offset]
        assert log_range.expected == len(inside)

    df = tidemark(spark, store_path, splitBytes=2048)
    assert df.rdd.getNumPartitions() == len(ranges)
    assert spark_rows(df) == engine_rows(store)


def test_deleted_topics_never_appear_and_group_topics_only_by_name(spark, open_store, store_path):
    store = open_store()
    store.create_topic("gone", queues=2)
    store.append_batch("gone", [f"old {i}".encode() for i in range(20)])
    store.create_topic("kept", queues=2)
    store.append_batch("kept", [f"kept {i}".encode() for i in range(20)])
    store.delete_topic("gone")
    store.create_topic("gone", queues=1)  # a namesake: the old records are not its own
    store.append_batch("gone", [f"new {i}".encode() for i in range(5)])
    for name in (retry_topic("g"), dlq_topic("g")):
        store.create_topic(name, queues=1)
        store.append_batch(name, [f"{name} {i}".encode() for i in range(3)])

    everything = spark_rows(tidemark(spark, store_path))
    assert {r["topic"] for r in everything} == {"gone", "kept"}
    assert everything == engine_rows(store, ["gone", "kept"])
    assert [r["body"] for r in everything if r["topic"] == "gone"] == [
        f"new {i}".encode() for i in range(5)
    ]

    dead = spark_rows(tidemark(spark, store_path, topics=f"{dlq_topic('g')},kept"))
    assert dead == engine_rows(store, [dlq_topic("g"), "kept"])


def test_a_store_without_messages_reads_as_empty(spark, open_store, store_path):
    open_store().create_topic("quiet", queues=2)
    assert tidemark(spark, store_path).collect() == []


def test_a_topic_the_store_lacks_is_an_error(spark, open_store, store_path):
    open_store().create_topic("real", queues=1)
    with pytest.raises(Exception, match="no topic 'unreal'"):
        tidemark(spark, store_path, topics="unreal").collect()


def test_a_read_beside_a_live_writer_sees_exactly_the_published_messages(
    spark, open_store, store_path
):
    store = open_store()
    populate(store, count=60)  # the store stays open, its flusher running: a live writer
    assert spark_rows(tidemark(spark, store_path)) == engine_rows(store)


def test_a_read_changes_no_file_of_the_store(spark, open_store, store_path):
    store = open_store()
    populate(store, count=40)
    store.close()
    before = _files(store_path)
    assert len(tidemark(spark, store_path).collect()) == 44
    assert _files(store_path) == before


def _files(root) -> dict:
    return {
        str(path.relative_to(root)): (path.stat().st_mtime_ns, path.read_bytes())
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }
