"""Replay archived messages (``jobs.archive``'s Parquet) back into the store (no Django).

    from storeadapter.spark import spark_session
    from storeadapter.spark.jobs.replay import replay

    sent = replay(spark_session(), "var/archive", "orders", since="2026-11-01",
                  store_path="var/store")

The archive's rows of ``topic`` with ``since <= store_time < until`` are appended through
the ``tidemark`` writer to ``into_topic`` (default ``topic``; it must exist), in their
original log order (one writing task), keeping keys, tag, properties, body and born time.
Each row's ``dedup_id`` is its original message id (stored as the ``DEDUP_ID`` property),
so replaying the same range twice within the store's dedup window appends it once.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from storeadapter.spark import FORMAT_NAME
from storeadapter.spark.jobs.archive import archive_schema
from storeadapter.spark.jobs.archivefs import ArchiveFS
from storeadapter.spark.planning import parse_time

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession


def replay(
    spark: SparkSession,
    archive_dir: str | os.PathLike,
    topic: str,
    since: object = None,
    until: object = None,
    into_topic: str | None = None,
    store_path: str | os.PathLike | None = None,
) -> int:
    """Append the archived messages of ``topic`` in the time window to the store at
    ``store_path``; the number of archived messages sent (duplicates the store's dedup
    dropped included). ValueError for a bad time, a missing archive or store path."""
    from pyspark.sql import functions as F

    if store_path is None:
        raise ValueError("replay needs the store to append to (store_path)")
    if not topic:
        raise ValueError("replay needs the archived topic")
    since_ms = None if since is None else parse_time(since, "since")
    until_ms = None if until is None else parse_time(until, "until")
    archive = ArchiveFS(spark, archive_dir)
    if not archive.exists(archive.root):
        raise ValueError(f"there is no archive at {archive_dir}")
    if not archive.glob(archive.uri("topic=*", "date=*", "*.parquet")):
        return 0
    rows = (
        spark.read.schema(archive_schema())
        .option("basePath", archive.root)
        .parquet(archive.root)
        .where(F.col("topic") == topic)
    )
    if since_ms is not None:
        rows = rows.where(F.unix_millis("store_time") >= since_ms)
    if until_ms is not None:
        rows = rows.where(F.unix_millis("store_time") < until_ms)
    rows = rows.select(
        F.lit(into_topic or topic).alias("topic"),
        "keys",
        "tag",
        "properties",
        "body",
        "born_time",
        F.col("message_id").alias("dedup_id"),
        "commit_offset",
    ).orderBy("commit_offset")
    # One writing task, in log order: replayed messages keep their order (per key too).
    rows = rows.drop("commit_offset").coalesce(1).cache()
    try:
        sent = rows.count()
        if sent:
            rows.write.format(FORMAT_NAME).mode("append").option("path", str(store_path)).save()
    finally:
        rows.unpersist()
    return sent


__all__ = ["replay"]
