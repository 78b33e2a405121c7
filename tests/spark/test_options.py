"""The format's options are checked, and bound reads as Spark's Kafka source's do:
startingOffsets / endingOffsets as positions or per-queue JSON, minPartitions,
failOnDataLoss."""

from __future__ import annotations

import json

import pytest

from storeadapter.engine import Message
from storeadapter.spark.errors import DataLossError
from storeadapter.spark.options import UnknownOptionError
from storeadapter.spark.source import SCHEMA, TidemarkDataSource
from tests.engine.storetools import small_config
from tests.spark.sparktools import engine_rows, spark_rows, tidemark


@pytest.fixture
def store(open_store):
    """Topic ``t`` (3 queues, 40 messages each) and ``u`` (1 queue), over many segments."""
    store = open_store()
    store.create_topic("t", queues=3)
    store.create_topic("u", queues=1)
    for i in range(40):
        store.append_batch("t", [Message(f"t{i}-{q} ".encode() * 4, queue=q) for q in range(3)])
        store.append("u", f"u{i}".encode())
    return store


def _rows(store_path, **options) -> list[dict]:
    """Read without Spark: every partition the reader plans, read in this process."""
    reader = TidemarkDataSource({"path": str(store_path), **options}).reader(SCHEMA)
    return [
        row for p in reader.partitions() for batch in reader.read(p) for row in batch.to_pylist()
    ]


def test_an_unknown_option_fails_with_the_list_of_known_ones(spark, store, store_path):
    with pytest.raises(Exception, match="no option 'startingofsets'") as failure:
        tidemark(spark, store_path, startingOfsets="latest").collect()
    assert "startingOffsets, failOnDataLoss" in str(failure.value)
    with pytest.raises(UnknownOptionError, match="maxOffsetsPerTrigger is an option of streams"):
        TidemarkDataSource({"path": str(store_path), "maxoffsetspertrigger": "5"}).reader(SCHEMA)
    with pytest.raises(UnknownOptionError, match="'endingoffsets'"):
        TidemarkDataSource({"path": str(store_path), "endingoffsets": "5"}).streamReader(SCHEMA)


def test_a_stream_on_a_topic_the_store_lacks_fails(spark, store, store_path, tmp_path):
    with pytest.raises(ValueError, match="no topic 'nope'"):
        TidemarkDataSource({"path": str(store_path), "topics": "t,nope"}).streamReader(SCHEMA)
    query = (
        spark.readStream.format("tidemark")
        .option("path", str(store_path))
        .option("topics", "nope")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="no topic 'nope'"):
        query.awaitTermination(120)


def test_a_batch_read_between_two_commit_log_positions(spark, store, store_path):
    everything = engine_rows(store)
    low = everything[30]["commit_offset"]
    high = everything[90]["commit_offset"]
    rows = spark_rows(tidemark(spark, store_path, startingOffsets=low, endingOffsets=high))
    assert rows == everything[30:90]
    # Any byte position works: records that start in [low + 1, high + 1).
    rows = _rows(store_path, startingOffsets=low + 1, endingOffsets=high + 1)
    assert [r["message_id"] for r in rows] == [r["message_id"] for r in everything[31:91]]


def test_per_queue_offsets_bound_each_queue(spark, store, store_path):
    starting = json.dumps({"t": {"0": 5, "2": -2}})
    ending = json.dumps({"t": {"0": 9, "1": 3, "2": -1}})
    rows = spark_rows(
        tidemark(spark, store_path, topics="t", startingOffsets=starting, endingOffsets=ending)
    )
    got = {(r["queue"], r["queue_offset"]) for r in rows}
    assert got == {(0, o) for o in range(5, 9)} | {(1, o) for o in range(3)} | {
        (2, o) for o in range(40)
    }
    assert len(rows) == len(got)


def test_offsets_are_checked_against_the_store(store, store_path):
    with pytest.raises(ValueError, match='cannot be "latest" for a batch read'):
        TidemarkDataSource({"path": str(store_path), "startingOffsets": "latest"}).reader(SCHEMA)
    for options, message in [
        ({"startingOffsets": '{"nope": {"0": 1}}'}, "lacks"),
        ({"topics": "u", "startingOffsets": '{"t": {"0": 1}}'}, "does not include"),
        ({"startingOffsets": '{"t": {"3": 1}}'}, "names queue 3 of topic 't', which has 3"),
        ({"startingOffsets": '{"t": {"0": 41}}'}, "past its end 40"),
        ({"endingOffsets": "99999999"}, "past the end"),
        ({"startingOffsets": "yesterday"}, "JSON per topic and queue"),
    ]:
        with pytest.raises(ValueError, match=message):
            _rows(store_path, **options)


def test_starting_offsets_retention_deleted_fail_unless_data_loss_is_allowed(
    open_store, store_path, fake_clock
):
    store = open_store(config=small_config(retention_hours=1))
    store.create_topic("t", queues=1)
    store.append_batch("t", [f"old {i} ".encode() * 10 for i in range(40)])
    fake_clock.advance(2 * 3_600_000)
    store.append("t", b"new")
    store.delete_expired()
    first, end = store.queue_range("t", 0)
    assert first > 0
    starting = json.dumps({"t": {"0": 0}})
    with pytest.raises(DataLossError, match=f"retention deleted its records below {first}"):
        _rows(store_path, startingOffsets=starting)
    rows = _rows(store_path, startingOffsets=starting, failOnDataLoss="false")
    assert len(rows) == end - first


def test_min_partitions_cuts_the_log_into_at_least_that_many_ranges(spark, store, store_path):
    df = tidemark(spark, store_path, minPartitions=40)
    assert df.rdd.getNumPartitions() >= 40
    assert spark_rows(df) == engine_rows(store)
