"""The jobs the cluster tests run on the cluster's driver (``clusterdriver.py``: the test
process's own SparkContext on the cluster). Each takes the driver's session and returns
plain data the test compares with what the engine reads."""

from __future__ import annotations

from storeadapter.spark.jobs.archive import archive_segment, archive_store, verified_segments
from storeadapter.spark.jobs.replay import replay


def totals(df) -> dict:
    """How many rows, and checksums of their ids and bodies (sums of CRC32s), computed by
    the executors."""
    from pyspark.sql import functions as F

    row = df.agg(
        F.count(F.lit(1)).alias("count"),
        F.count_distinct("message_id").alias("distinct"),
        F.coalesce(F.sum(F.crc32("message_id")), F.lit(0)).alias("id_crc"),
        F.coalesce(F.sum(F.crc32("body")), F.lit(0)).alias("body_crc"),
    ).first()
    return {name: int(row[name]) for name in ("count", "distinct", "id_crc", "body_crc")}


def read_totals(spark, path: str, **options) -> dict:
    reader = spark.read.format("tidemark")
    for name, value in options.items():
        reader = reader.option(name, value)
    df = reader.load(path)
    return {**totals(df), "partitions": df.rdd.getNumPartitions()}


def stream_to_parquet(spark, path: str, sink: str, checkpoint: str, **options) -> None:
    """One ``availableNow`` run of a stream into a Parquet sink (a restart when the
    checkpoint exists)."""
    reader = spark.readStream.format("tidemark").option("path", path)
    for name, value in options.items():
        reader = reader.option(name, value)
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))


def parquet_totals(spark, path: str) -> dict:
    return totals(spark.read.parquet(path))


def archive(spark, store: str, out: str) -> dict:
    return archive_store(spark, store, out)


def archive_one(spark, store: str, base: int, out: str) -> dict:
    return archive_segment(spark, store, base, out)


def verified(spark, out: str) -> list[str]:
    return sorted(verified_segments(out, spark))


def replay_topic(spark, archive_dir: str, topic: str, into: str, store: str) -> int:
    return replay(spark, archive_dir, topic, into_topic=into, store_path=store)
