"""Helpers for the Spark tests: rows out of Spark and messages out of the engine, in one
comparable shape."""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from storeadapter.engine import Message, MessageStore, StoredMessage
from tests.engine.storetools import read_everything

HOUR_MS = 3_600_000
#: Java options for the tests' short-lived JVMs (driver, executors, master and workers):
#: the client compiler only and the serial collector. Most of a test's JVM time was the
#: server compiler's and the parallel collector's threads, on two cores shared with the
#: other test worker; a test's jobs are too short for their gains.
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

COLUMNS = (
    "message_id",
    "topic",
    "queue",
    "queue_offset",
    "commit_offset",
    "born_time",
    "store_time",
    "tag",
    "keys",
    "properties",
    "body",
    "corrupt",
)


def spark_rows(df) -> list[dict]:
    """Every row of a tidemark DataFrame as a dict (timestamps as epoch ms), in log order."""
    from pyspark.sql import functions as F

    assert tuple(df.columns) == COLUMNS
    selected = df.select(
        *[
            F.unix_millis(name).alias(name) if name in ("born_time", "store_time") else name
            for name in COLUMNS
        ]
    )
    rows = []
    for row in selected.collect():
        item = row.asDict(recursive=True)
        if item["body"] is not None:
            item["body"] = bytes(item["body"])
        rows.append(item)
    return sorted(rows, key=lambda r: r["commit_offset"])


def message_row(message: StoredMessage) -> dict:
    """An engine message in the shape of ``spark_rows``."""
    return {
        "message_id": message.message_id,
        "topic": message.topic,
        "queue": message.queue,
        "queue_offset": message.queue_offset,
        "commit_offset": message.commit_offset,
        "born_time": message.born_time_ms,
        "store_time": message.store_time_ms,
        "tag": message.tag,
        "keys": list(message.keys),
        "properties": dict(message.properties),
        "body": message.body,
        "corrupt": None,
    }


def engine_rows(store: MessageStore, topics: Iterable[str] | None = None) -> list[dict]:
    """What the engine's own queue reads return for every message, in log order."""
    wanted = None if topics is None else set(topics)
    messages = [
        message
        for (topic, _queue), found in read_everything(store).items()
        if wanted is None or topic in wanted
        for message in found
    ]
    return sorted((message_row(m) for m in messages), key=lambda r: r["commit_offset"])


def tidemark(spark, path, **options):
    """A batch read of the store at ``path`` with ``options``."""
    reader = spark.read.format("tidemark")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load(str(path))


def engine_totals(rows: list[dict]) -> dict:
    """What ``clusterjobs.totals`` computes on the executors, from ``engine_rows``."""
    return {
        "count": len(rows),
        "distinct": len({r["message_id"] for r in rows}),
        "id_crc": sum(zlib.crc32(r["message_id"].encode()) for r in rows),
        "body_crc": sum(zlib.crc32(r["body"]) for r in rows),
    }


def fill(store, start: int, count: int, topics=("orders", "audit")) -> None:
    """Messages ``start`` to ``start + count`` of ``topics[0]`` (bodies of many sizes,
    13 keys), in batches of 10, each batch followed by one message of ``topics[1]``."""
    for i in range(start, start + count, 10):
        store.append_batch(
            topics[0],
            [
                Message(f"order {j} ".encode() * (1 + j % 9), key=f"k{j % 13}")
                for j in range(i, min(i + 10, start + count))
            ],
        )
        store.append(topics[1], f"audit {i}".encode())
