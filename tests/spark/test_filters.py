"""Topic and store-time filters: right answers, and what they keep from being decoded."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import functions as F
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, IsNotNull, LessThan

from storeadapter.spark import scanning
from storeadapter.spark.source import SCHEMA, TidemarkDataSource
from tests.engine.storetools import flip_bit, segment_paths
from tests.spark.sparktools import engine_rows, spark_rows, tidemark

STEP_MS = 1_000


@pytest.fixture
def timed_store(open_store, store_path, fake_clock):
    """Topics ``a`` (2 queues) and ``b`` (1 queue); every batch of 6 messages gets a store
    time 1 s after the previous one's, so segments cover distinct stretches of time."""
    store = open_store()
    store.create_topic("a", queues=2)
    store.create_topic("b", queues=1)
    for i in range(30):
        fake_clock.advance(STEP_MS)
        store.append_batch("a", [f"a{i}-{j} ".encode() * 6 for j in range(4)])
        store.append_batch("b", [f"b{i}-{j} ".encode() * 6 for j in range(2)])
    assert len(segment_paths(store_path)) >= 5
    return store


def _where(rows, topics=None, since=None, until=None):
    return [
        r
        for r in rows
        if (topics is None or r["topic"] in topics)
        and (since is None or r["store_time"] >= since)
        and (until is None or r["store_time"] < until)
    ]


def _ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat()


def test_topic_and_time_options(spark, timed_store, store_path, fake_clock):
    everything = engine_rows(timed_store)
    times = sorted({r["store_time"] for r in everything})
    since, until = times[10], times[20]

    rows = spark_rows(tidemark(spark, store_path, topics="b", since=since, until=until))
    assert rows == _where(everything, {"b"}, since, until)
    assert len(rows) == 20

    rows = spark_rows(tidemark(spark, store_path, since=_iso(since), until=_iso(until)))
    assert rows == _where(everything, None, since, until)

    assert spark_rows(tidemark(spark, store_path, topics="a,b", until=times[0])) == []


def test_where_clauses_on_topic_and_store_time_are_pushed_down(spark, timed_store, store_path):
    everything = engine_rows(timed_store)
    times = sorted({r["store_time"] for r in everything})
    since, until = times[24], times[27]
    window = (F.col("store_time") >= F.timestamp_millis(F.lit(since))) & (
        F.col("store_time") < F.timestamp_millis(F.lit(until))
    )
    df = tidemark(spark, store_path).where(window & (F.col("topic") == "a"))
    assert spark_rows(df) == _where(everything, {"a"}, since, until)
    # The pushed window left out the segments wholly before it: fewer tasks than segments.
    assert df.rdd.getNumPartitions() < len(segment_paths(store_path)) / 2

    df = tidemark(spark, store_path).where(F.col("topic").isin("b", "nope"))
    assert spark_rows(df) == _where(everything, {"b"})


def _reader(store_path, **options):
    return TidemarkDataSource({"path": str(store_path), **options}).reader(SCHEMA)


def _read_all(reader) -> int:
    rows = 0
    for partition in reader.partitions():
        for batch in reader.read(partition):
            rows += batch.num_rows
    return rows


def test_records_outside_the_filters_are_not_decoded(timed_store, store_path):
    everything = engine_rows(timed_store)
    times = sorted({r["store_time"] for r in everything})
    since = times[-3]
    scanning.counters.reset()
    assert _read_all(_reader(store_path)) == len(everything)
    assert scanning.counters.decoded == len(everything)
    assert scanning.counters.skipped == 0

    # A window over the last three batches: the segments before it are never opened.
    reader = _reader(store_path, since=str(since))
    partitions = reader.partitions()
    assert len(partitions) <= 2
    scanning.counters.reset()
    wanted = len(_where(everything, None, since))
    assert _read_all(reader) == wanted
    assert scanning.counters.decoded == wanted
    assert scanning.counters.decoded + scanning.counters.skipped < len(everything) / 3

    # One topic: the other topic's records are passed over on their headers.
    scanning.counters.reset()
    assert _read_all(_reader(store_path, topics="b")) == len(_where(everything, {"b"}))
    assert scanning.counters.decoded == len(_where(everything, {"b"}))
    assert scanning.counters.skipped == len(_where(everything, {"a"}))


def test_push_filters_takes_what_the_reader_applies_exactly_and_hands_back_the_rest(
    timed_store, store_path
):
    everything = engine_rows(timed_store)
    times = sorted({r["store_time"] for r in everything})
    since = dt.datetime.fromtimestamp(times[-2] / 1000, dt.UTC)
    kept = [
        In(("topic",), ("b", "zzz")),
        EqualTo(("queue",), 0),
        GreaterThanOrEqual(("store_time",), since),
        LessThan(("store_time",), since + dt.timedelta(days=1)),
    ]
    handed_back = [IsNotNull(("topic",)), EqualTo(("tag",), "x"), In(("queue",), ("0",))]
    reader = _reader(store_path)
    assert list(reader.pushFilters(kept + handed_back)) == handed_back
    assert reader.selection.topics == {"b", "zzz"}
    assert reader.selection.since_ms == _ms(since)
    scanning.counters.reset()
    assert _read_all(reader) == len(_where(everything, {"b"}, _ms(since)))
    assert scanning.counters.decoded == len(_where(everything, {"b"}, _ms(since)))


def test_queue_and_offset_filters_are_pushed_down_and_shown_by_explain(
    spark, timed_store, store_path, capsys
):
    everything = engine_rows(timed_store)
    low, high = everything[40]["commit_offset"], everything[120]["commit_offset"]
    df = tidemark(spark, store_path).where(
        (F.col("queue") == 1)
        & (F.col("queue_offset") >= 10)
        & (F.col("queue_offset") < 50)
        & (F.col("commit_offset") >= low)
        & (F.col("commit_offset") <= high)
    )
    assert spark_rows(df) == [
        r
        for r in everything
        if r["queue"] == 1 and 10 <= r["queue_offset"] < 50 and low <= r["commit_offset"] <= high
    ]
    # The commit_offset range became the plan's bounds: fewer tasks than segments.
    assert df.rdd.getNumPartitions() < len(segment_paths(store_path))
    df.explain("formatted")
    plan = capsys.readouterr().out
    pushed = next(line for line in plan.splitlines() if line.startswith("PushedFilters"))
    for shown in (
        "EqualTo(queue,1)",
        "GreaterThanOrEqual(queue_offset,10)",
        "LessThan(queue_offset,50)",
        f"GreaterThanOrEqual(commit_offset,{low})",
        f"LessThanOrEqual(commit_offset,{high})",
    ):
        assert shown in pushed


def test_a_queue_offset_range_reads_only_the_log_around_it(timed_store, store_path):
    everything = engine_rows(timed_store)
    reader = _reader(store_path, topics="b")
    list(reader.pushFilters([GreaterThanOrEqual(("queue_offset",), 50)]))
    scanning.counters.reset()
    assert _read_all(reader) == len([r for r in everything if r["topic"] == "b"]) - 50
    assert scanning.counters.skipped < len(everything) / 3


def test_pushed_filters_drop_damage_rows_as_sql_would_but_commit_offsets_keep_them(
    spark, timed_store, store_path
):
    target = engine_rows(timed_store)[30]
    flip_bit(store_path, target["commit_offset"] + 70)
    damaged = tidemark(spark, store_path).where(F.col("corrupt").isNotNull())
    assert [r["commit_offset"] for r in spark_rows(damaged)] == [target["commit_offset"]]
    by_offset = tidemark(spark, store_path).where(F.col("commit_offset") == target["commit_offset"])
    assert [r["corrupt"] is not None for r in spark_rows(by_offset)] == [True]
    by_queue = tidemark(spark, store_path).where(F.col("queue") >= 0)
    assert all(r["corrupt"] is None for r in spark_rows(by_queue))
