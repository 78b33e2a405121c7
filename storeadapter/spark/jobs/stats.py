"""Topic statistics: messages, bytes, distinct keys and a body-size histogram per topic per
minute of store time, computed by Spark over the ``tidemark`` format (no Django here).

    from storeadapter.spark import spark_session
    from storeadapter.spark.jobs.stats import topic_statistics

    rows = topic_statistics(spark_session(), "var/store", since="2026-11-22T06:00")

Each row is a plain dict: ``topic``, ``minute_ms`` (the store time truncated to the minute,
ms since the epoch), ``messages``, ``bytes`` (sum of body lengths), ``distinct_keys``
(exact count of the distinct keys of the minute's messages) and ``size_histogram`` (every
bucket of ``SIZE_BUCKETS`` and ``LARGER``, to its count of messages). Corrupt stretches are
left out; minutes without messages have no row.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from storeadapter.spark import FORMAT_NAME
from storeadapter.spark.planning import parse_time

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

MINUTE_MS = 60_000
#: Body-size buckets, smallest first: a body of n bytes counts in the first with n <= limit.
SIZE_BUCKETS: tuple[tuple[str, int], ...] = (
    ("le_64", 64),
    ("le_256", 256),
    ("le_1k", 1 << 10),
    ("le_4k", 4 << 10),
    ("le_16k", 16 << 10),
)
#: The bucket of bodies larger than the last limit.
LARGER = "gt_16k"
BUCKET_NAMES: tuple[str, ...] = (*(name for name, _ in SIZE_BUCKETS), LARGER)


def size_bucket(size: int) -> str:
    """The histogram bucket of a body of ``size`` bytes."""
    for name, limit in SIZE_BUCKETS:
        if size <= limit:
            return name
    return LARGER


def topic_statistics(
    spark: SparkSession,
    path: str,
    since: object = None,
    until: object = None,
    topics: Iterable[str] | None = None,
) -> list[dict]:
    """Per topic per minute statistics of the store at ``path``, sorted by topic, minute.

    ``since`` / ``until`` bound store time (``since <= store_time < until``; ms since the
    epoch, ISO 8601 or a datetime; ValueError when neither). ``topics`` narrows the read
    (default: the format's default, every topic but retry and dead-letter topics).
    """
    from pyspark.sql import functions as F

    reader = spark.read.format(FORMAT_NAME)
    if since is not None:
        reader = reader.option("since", parse_time(since, "since"))
    if until is not None:
        reader = reader.option("until", parse_time(until, "until"))
    if topics is not None:
        names = sorted({str(name).strip() for name in topics} - {""})
        if not names:
            raise ValueError("topics must name at least one topic")
        reader = reader.option("topics", ",".join(names))

    size = F.coalesce(F.octet_length("body"), F.lit(0))
    bucket = F.when(size <= SIZE_BUCKETS[0][1], SIZE_BUCKETS[0][0])
    for name, limit in SIZE_BUCKETS[1:]:
        bucket = bucket.when(size <= limit, name)
    messages = (
        reader.load(str(path))
        .where("corrupt IS NULL")
        .select(
            "topic",
            (F.floor(F.unix_millis("store_time") / MINUTE_MS) * MINUTE_MS)
            .cast("long")
            .alias("minute_ms"),
            size.alias("size"),
            bucket.otherwise(LARGER).alias("bucket"),
            "keys",
        )
    )
    totals = messages.groupBy("topic", "minute_ms").agg(
        F.count(F.lit(1)).alias("messages"),
        F.sum("size").alias("bytes"),
        *(
            F.sum(F.when(F.col("bucket") == name, 1).otherwise(0)).alias(name)
            for name in BUCKET_NAMES
        ),
    )
    keys = (
        messages.select("topic", "minute_ms", F.explode("keys").alias("key"))
        .groupBy("topic", "minute_ms")
        .agg(F.count_distinct("key").alias("distinct_keys"))
    )
    result = (
        totals.join(keys, ["topic", "minute_ms"], "left")
        .fillna(0, subset=["distinct_keys"])
        .orderBy("topic", "minute_ms")
    )
    return [
        {
            "topic": row["topic"],
            "minute_ms": int(row["minute_ms"]),
            "messages": int(row["messages"]),
            "bytes": int(row["bytes"]),
            "distinct_keys": int(row["distinct_keys"]),
            "size_histogram": {name: int(row[name]) for name in BUCKET_NAMES},
        }
        for row in result.collect()
    ]


__all__ = ["BUCKET_NAMES", "LARGER", "MINUTE_MS", "SIZE_BUCKETS", "size_bucket", "topic_statistics"]
