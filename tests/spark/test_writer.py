"""The writer: DataFrame rows appended through the engine's append_batch, one store
opened per Spark task beside the test's own."""

from __future__ import annotations

import pytest

from tests.engine.storetools import INDEX_ENTRIES, INDEX_SLOTS, MAX_MESSAGE_BYTES
from tests.spark.sparktools import engine_rows, spark_rows, tidemark

# The engine tests' small settings (segment_bytes comes from the store itself).
STORE_OPTIONS = {
    "index_slots": INDEX_SLOTS,
    "index_entries": INDEX_ENTRIES,
    "maxMessageBytes": MAX_MESSAGE_BYTES,
    "batchSize": 7,
}


def _write(df, path, **options):
    writer = df.write.format("tidemark").mode("append").option("path", str(path))
    for name, value in {**STORE_OPTIONS, **options}.items():
        writer = writer.option(name, value)
    writer.save()


def _content(row: dict) -> tuple:
    """What a writer controls of a message (a Spark map keeps no order: sorted)."""
    properties = sorted(row["properties"].items())
    return (row["topic"], row["keys"], row["tag"], properties, row["body"])


def _same_items(found, expected) -> bool:
    """Whether two lists hold the same items, in any order (items need not sort)."""
    return sorted(map(repr, found)) == sorted(map(repr, expected))


def test_rows_written_come_back_from_the_engine(spark, open_store, store_path):
    store = open_store()
    store.create_topic("in", queues=2)
    store.create_topic("other", queues=1)
    rows = [
        (
            "in" if i % 3 else "other",
            None if i % 5 == 0 else f"key{i}",
            None if i % 4 == 0 else f"tag{i % 3}",
            None if i % 2 else {"n": str(i), "src": "spark"},
            f"payload {i} ".encode() * (i % 9),
        )
        for i in range(60)
    ]
    df = spark.createDataFrame(
        rows, "topic string, key string, tag string, properties map<string,string>, body binary"
    ).repartition(3)
    _write(df, store_path)

    stored = engine_rows(store)
    assert _same_items(
        [_content(r) for r in stored],
        [
            (topic, [key] if key else [], tag, sorted((props or {}).items()), body)
            for topic, key, tag, props, body in rows
        ],
    )
    for name in ("in", "other"):  # every queue offset is taken once, from 0 up
        offsets = sorted((r["queue"], r["queue_offset"]) for r in stored if r["topic"] == name)
        per_queue: dict[int, list[int]] = {}
        for queue, offset in offsets:
            per_queue.setdefault(queue, []).append(offset)
        assert all(found == list(range(len(found))) for found in per_queue.values())


def test_a_read_written_back_to_another_topic_round_trips(spark, open_store, store_path):
    store = open_store()
    store.create_topic("src", queues=3)
    store.append_batch(
        "src",
        [
            {
                "body": f"m{i}".encode() * i,
                "key": [f"a{i}", f"b{i}"],
                "tag": "t",
                "properties": {"i": str(i)},
            }
            for i in range(25)
        ],
    )
    store.create_topic("copy", queues=1)

    source = tidemark(spark, store_path, topics="src").where("corrupt IS NULL")
    _write(source, store_path, topic="copy")

    copied = spark_rows(tidemark(spark, store_path, topics="copy"))
    assert copied == engine_rows(store, ["copy"])
    assert len(copied) == 25
    originals = engine_rows(store, ["src"])
    assert sorted(r["born_time"] for r in copied) == sorted(r["born_time"] for r in originals)
    assert _same_items(
        [_content(r)[1:] for r in copied], [_content(r)[1:] for r in engine_rows(store, ["src"])]
    )


def test_the_writer_only_appends(spark, open_store, store_path):
    open_store().create_topic("t", queues=1)
    df = spark.createDataFrame([(b"x",)], "body binary")
    with pytest.raises(Exception, match="only appends"):
        df.write.format("tidemark").mode("overwrite").option("topic", "t").save(str(store_path))
    with pytest.raises(Exception, match="topic"):
        df.write.format("tidemark").mode("append").save(str(store_path))
