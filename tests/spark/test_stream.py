"""Streaming reads: offsets are commit-log positions; appends made between triggers and
while a query runs are picked up, each message once."""

from __future__ import annotations

import json
import time

from storeadapter.engine import Message
from tests.engine.storetools import segment_paths, tail
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
    deadline = time.monotonic() + WAIT_S
    while True:
        assert query.exception() is None, query.exception()
        found = spark.table("tidemark_live").count()
        if found >= count:
            assert found == count
            return
        assert time.monotonic() < deadline, f"{found} rows after {WAIT_S} s, not {count}"
        time.sleep(0.2)
