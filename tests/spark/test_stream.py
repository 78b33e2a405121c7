"""Streaming reads: offsets are commit-log positions; appends made between triggers and
while a query runs are picked up, each message once."""

from __future__ import annotations

import json
import logging
import time

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes

from storeadapter.engine import Message
from storeadapter.spark.errors import DataLossError
from storeadapter.spark.source import SCHEMA, TidemarkDataSource
from tests.engine.storetools import segment_paths, small_config, tail
from tests.spark.sparktools import engine_rows, spark_rows

WAIT_S = 120


def _append(store, start: int, count: int) -> None:
    store.append_batch(
        "s",
        [
            Message(body=f"message {i} ".encode() * 8, key=f"k{i}", tag="even" if i % 2 else None)
            for i in range(start, start + count)
        ],
    )


def _last_offset(checkpoint) -> dict:
    """The source offset of the newest batch in a streaming checkpoint."""
    batches = [p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()]
    newest = max(batches, key=lambda p: int(p.name))
    return json.loads(newest.read_text().splitlines()[-1])


def test_available_now_picks_up_appends_made_between_triggers(
    spark, open_store, store_path, tmp_path
):
    store = open_store()
    store.create_topic("s", queues=2)
    _append(store, 0, 30)
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"

    def trigger():
        query = (
            spark.readStream.format("tidemark")
            .option("path", str(store_path))
            .load()
            .writeStream.format("parquet")
            .option("path", str(sink))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(WAIT_S), "the availableNow query did not finish"
        assert query.exception() is None
        return spark_rows(spark.read.parquet(str(sink)))

    assert trigger() == engine_rows(store)
    assert _last_offset(checkpoint)["position"] == tail(store)

    segments = len(segment_paths(store_path))
    _append(store, 30, 40)  # rolls into new segments
    assert len(segment_paths(store_path)) > segments
    rows = trigger()
    assert rows == engine_rows(store)
    assert len(rows) == 70
    # The checkpoint names, beside the position, the last queue offset read per queue.
    last = {str(q): store.queue_range("s", q)[1] - 1 for q in range(2)}
    assert _last_offset(checkpoint) == {"position": tail(store), "queues": {"s": last}}

    assert trigger() == rows  # nothing new: nothing read again


def test_micro_batches_pick_up_appends_while_the_query_runs(spark, open_store, store_path):
    store = open_store()
    store.create_topic("s", queues=2)
    _append(store, 0, 20)
    query = (
        spark.readStream.format("tidemark")
        .option("path", str(store_path))
        .option("topics", "s")
        .load()
        .writeStream.format("memory")
        .queryName("tidemark_live")
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        _wait_for_rows(spark, query, 20)
        _append(store, 20, 15)
        _wait_for_rows(spark, query, 35)
        _append(store, 35, 5)
        _wait_for_rows(spark, query, 40)
        assert spark_rows(spark.table("tidemark_live")) == engine_rows(store)
    finally:
        query.stop()


def _wait_for_rows(spark, query, count: int) -> None:
    """Wait until the memory sink holds ``count`` rows (never more). ``processAllAvailable``
    waits for the query to catch up without a Spark job a poll; the poll after it stays,
    for the trigger that had asked for the latest offset just before the append (it may
    report no new data after this call began)."""
    query.processAllAvailable()
    deadline = time.monotonic() + WAIT_S
    while True:
        assert query.exception() is None, query.exception()
        found = spark.table("tidemark_live").count()
        if found >= count:
            assert found == count
            return
        assert time.monotonic() < deadline, f"{found} rows after {WAIT_S} s, not {count}"
        time.sleep(0.2)


def _stream_reader(store_path, **options):
    return TidemarkDataSource({"path": str(store_path), **options}).streamReader(SCHEMA)


def _batch_rows(reader, start: dict, end: dict) -> list[dict]:
    return [
        row
        for partition in reader.partitions(start, end)
        for batch in reader.read(partition)
        for row in batch.to_pylist()
    ]


def test_max_offsets_per_trigger_bounds_every_micro_batch_the_first_included(
    spark, open_store, store_path
):
    store = open_store()
    store.create_topic("s", queues=2)
    _append(store, 0, 95)
    sizes: list[int] = []
    query = (
        spark.readStream.format("tidemark")
        .option("path", str(store_path))
        .option("maxOffsetsPerTrigger", "20")
        .load()
        .writeStream.foreachBatch(lambda df, _batch_id: sizes.append(df.count()))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(WAIT_S)
    assert sizes == [20, 20, 20, 20, 15]


def test_max_bytes_per_trigger_bounds_a_micro_batch_by_log_bytes(open_store, store_path):
    store = open_store()
    store.create_topic("s", queues=2)
    _append(store, 0, 40)
    reader = _stream_reader(store_path, maxBytesPerTrigger="1000")
    limit = reader.getDefaultReadLimit()
    assert limit == ReadMaxBytes(1000)
    start = reader.initialOffset()
    seen = []
    while start["position"] < tail(store):
        end = reader.latestOffset(start, limit)
        assert 0 < end["position"] - start["position"] <= 1000
        seen.extend(row["message_id"] for row in _batch_rows(reader, start, end))
        start = end
    assert seen == [row["message_id"] for row in engine_rows(store)]


def test_retention_past_a_stream_s_position_fails_it_with_the_count_lost(
    open_store, store_path, fake_clock, caplog
):
    store = open_store(config=small_config(retention_hours=1))
    store.create_topic("s", queues=2)
    _append(store, 0, 10)
    reader = _stream_reader(store_path)
    start = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())  # read: 10
    _append(store, 10, 40)  # not read yet
    fake_clock.advance(2 * 3_600_000)
    _append(store, 50, 1)
    deleted = store.delete_expired()
    lost = sum(q.dropped for q in deleted.queues) - 10
    assert lost > 0

    with pytest.raises(DataLossError, match=f"so {lost} messages of its topics are gone"):
        reader.latestOffset(start, ReadAllAvailable())

    going_on = _stream_reader(store_path, failOnDataLoss="false")
    with caplog.at_level(logging.WARNING):
        end = going_on.latestOffset(start, ReadAllAvailable())
        rows = _batch_rows(going_on, start, end)
    assert f"{lost} messages of its topics are gone" in caplog.text
    assert [r["message_id"] for r in rows] == [r["message_id"] for r in engine_rows(store)]


def test_a_stream_from_per_queue_offsets_keeps_them_until_it_passes_them(open_store, store_path):
    store = open_store()
    store.create_topic("s", queues=2)
    _append(store, 0, 40)
    starting = json.dumps({"s": {"0": 15, "1": 2}})
    reader = _stream_reader(store_path, startingOffsets=starting, maxOffsetsPerTrigger="5")
    start = reader.initialOffset()
    assert start["from"] == {"s": {"0": 15}}  # queue 1 starts where the stream does
    seen = []
    while start["position"] < tail(store):
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        rows = _batch_rows(reader, start, end)
        assert 0 < len(rows) <= 5
        seen.extend((row["queue"], row["queue_offset"]) for row in rows)
        start = end
    assert "from" not in start
    ends = [store.queue_range("s", q)[1] for q in range(2)]
    assert sorted(seen) == [(0, o) for o in range(15, ends[0])] + [
        (1, o) for o in range(2, ends[1])
    ]


def test_a_query_behind_retention_fails_with_the_sentence(
    spark, open_store, store_path, tmp_path, fake_clock
):
    store = open_store(config=small_config(retention_hours=1))
    store.create_topic("s", queues=2)
    _append(store, 0, 10)

    def run():
        return (
            spark.readStream.format("tidemark")
            .option("path", str(store_path))
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )

    assert run().awaitTermination(WAIT_S)
    _append(store, 10, 40)  # never read: retention deletes most of them
    fake_clock.advance(2 * 3_600_000)
    _append(store, 50, 1)
    lost = sum(q.dropped for q in store.delete_expired().queues) - 10
    with pytest.raises(Exception, match=f"DataLossError: .* so {lost} messages of its topics"):
        run().awaitTermination(WAIT_S)
