"""Archive commit-log segments to Parquet, partitioned by topic and store date (no Django),
and record a segment as archived only once its files, read back, hold what it holds.

    from storeadapter.spark import spark_session
    from storeadapter.spark.jobs.archive import archive_store

    summary = archive_store(spark_session(), "var/store", "var/archive")

``archive_segment`` reads exactly one segment's messages (a ``tidemark`` read bounded by
the segment's first and last commit-log positions; each of its tasks checks it read the
records the store's consume queues list there, ``scanning.py``), and writes them with
Spark's Parquet writer (timestamps as INT64 microseconds, not legacy INT96) to
``out/_tmp-<segment>-<run>``; then, through the cluster's own file system
(``archivefs.py``: any URI the cluster can write), it removes the segment's earlier files
and moves the new ones to ``out/topic=<topic>/date=<YYYY-MM-DD>/segment-<segment>-<n>
.parquet`` (the UTC date of the store time). Every topic is archived, retry and
dead-letter topics too; corrupt stretches are not.

**Verified, or not recorded.** The files are then read back by Spark (so by the
executors, from where the driver listed them): for every topic and date, the row count,
the body bytes and a checksum (the sum of a 64-bit hash of every column of every row)
must equal those of the segment's read. Only then is the segment recorded as archived:
``out/_verified/<segment>.json`` lists its messages, bytes, checksum and every file with
its own rows, bytes and checksum (local files and directories fsynced first). Files the
executors wrote where the driver cannot see them (a ``file://`` directory that is not
shared), or that came back short, fail the segment with ``ArchiveVerificationError``
and no record. Retention deletes only segments with a record (``verified_segments``).
A rerun of a segment removes its record first, then replaces its files.

``archive_store`` archives every sealed segment without a record; the open segment only
when asked, and never records it (it is archived again later).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from storeadapter.spark import FORMAT_NAME, logview
from storeadapter.spark.errors import ArchiveVerificationError
from storeadapter.spark.jobs.archivefs import ArchiveFS

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

VERIFIED_DIR = "_verified"
DAY_MS = 86_400_000
TIMESTAMP_TYPE_CONF = "spark.sql.parquet.outputTimestampType"
#: The columns kept in the archive (topic is also a partition column, with date).
ARCHIVE_COLUMNS = (
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
)


def archive_schema():
    """The schema of an archive read back, the partition columns as strings."""
    from pyspark.sql.types import StringType, StructField, StructType

    from storeadapter.spark.source import SCHEMA

    fields = [SCHEMA[name] for name in ARCHIVE_COLUMNS]
    return StructType([*fields, StructField("date", StringType())])


def _local_verified(out_dir: str | os.PathLike) -> dict[str, dict]:
    directory = Path(str(out_dir).removeprefix("file://")) / VERIFIED_DIR
    found: dict[str, dict] = {}
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return found
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        try:
            record = json.loads((directory / name).read_text())
        except (OSError, ValueError):
            continue  # torn or unreadable: not verified
        if record.get("verified") is True:
            found[record["segment"]] = record
    return found


def read_manifest(out_dir: str | os.PathLike, spark: SparkSession | None = None) -> dict:
    """The archive's verified segments: ``{"segments": {segment name: record}}``, each
    record ``{segment, messages, bytes, checksum, files: [{path, rows, bytes, checksum}],
    verified: true, verified_at_ms}``. Without ``spark``, ``out_dir`` must be local."""
    if spark is None:
        return {"segments": _local_verified(out_dir)}
    archive = ArchiveFS(spark, out_dir)
    found = {}
    for info in archive.glob(archive.uri(VERIFIED_DIR, "*.json")):
        record = archive.read_json(info.path)
        if record and record.get("verified") is True:
            found[record["segment"]] = record
    return {"segments": found}


def verified_segments(out_dir: str | os.PathLike, spark: SparkSession | None = None) -> set[str]:
    """The names of the segments whose archive was read back and verified."""
    return set(read_manifest(out_dir, spark)["segments"])


def _find_segment(snap: logview.LogSnapshot, segment_base: int | str) -> logview.SegmentFile:
    base = int(segment_base)
    for listed in snap.segments:
        if listed.base == base:
            return listed
    names = ", ".join(s.name for s in snap.segments) or "none"
    raise ValueError(f"the store at {snap.path} has no segment {base} (its segments: {names})")


def _row_hash():
    """A 64-bit hash of every archived column of a row (the same on the segment's read
    and on the Parquet read back, whose types are the same)."""
    from pyspark.sql import functions as F

    columns = [F.to_json("properties") if c == "properties" else F.col(c) for c in ARCHIVE_COLUMNS]
    return F.xxhash64(*columns).cast("decimal(38,0)")


def _totals(df: DataFrame, *keys) -> dict[tuple, tuple[int, int, str]]:
    """(rows, body bytes, checksum) per value of ``keys``."""
    from pyspark.sql import functions as F

    rows = df.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("rows"),
        F.coalesce(F.sum(F.octet_length("body")), F.lit(0)).alias("bytes"),
        F.coalesce(F.sum(_row_hash()), F.lit(0)).cast("string").alias("checksum"),
    )
    return {
        tuple(row[k] for k in keys): (int(row["rows"]), int(row["bytes"]), str(row["checksum"]))
        for row in rows.collect()
    }


def archive_segment(
    spark: SparkSession,
    store_path: str | os.PathLike,
    segment_base: int | str,
    out_dir: str | os.PathLike,
) -> dict:
    """Write one segment's messages to Parquet under ``out_dir`` (replacing the files an
    earlier run wrote for it), read them back, and record a sealed segment as verified;
    ``{"segment", "messages", "bytes", "checksum", "files", "sealed", "verified"}``.
    ValueError when the store has no such segment; ``ArchiveVerificationError`` when the
    files read back differ from the segment."""
    snap = logview.snapshot(str(store_path))
    listed = _find_segment(snap, segment_base)
    sealed = snap.is_sealed(listed)
    archive = ArchiveFS(spark, out_dir)
    archive.mkdirs(archive.root)
    record_uri = archive.uri(VERIFIED_DIR, f"{listed.name}.json")
    archive.delete(record_uri)  # the files are about to change: no longer verified
    tmp = archive.uri(f"_tmp-{listed.name}-{uuid.uuid4().hex[:8]}")
    summary = {"segment": listed.name, "sealed": sealed, "verified": False}
    try:
        source = _segment_messages(spark, snap, listed, store_path).cache()
        try:
            expected = _totals(source, "topic", "date")
            if expected:
                _write_parquet(spark, source, tmp)
        finally:
            source.unpersist()
        files = _move_into_place(archive, tmp, listed.name)
    finally:
        archive.delete(tmp)
    found = _read_back(spark, archive, files)
    _verify(archive, listed.name, expected, found, files)
    messages = sum(rows for rows, _, _ in expected.values())
    summary.update(
        messages=messages,
        bytes=sum(size for _, size, _ in expected.values()),
        checksum=str(sum(int(checksum) for _, _, checksum in expected.values())),
        files=len(files),
    )
    if sealed:
        archive.make_durable(files)
        record = {
            **summary,
            "verified": True,
            "verified_at_ms": int(time.time() * 1000),
            "store_id": snap.id_prefix,
            "files": [{"path": path, **found[path]} for path in files],
        }
        archive.write_bytes(record_uri, json.dumps(record, indent=1, sort_keys=True).encode())
        summary["verified"] = True
    return summary


def _segment_messages(spark, snap, listed, store_path) -> DataFrame:
    from pyspark.sql import functions as F

    end = min(listed.end, snap.end)
    reader = (
        spark.read.format(FORMAT_NAME)
        .option("startingOffsets", str(listed.base))
        .option("endingOffsets", str(end))
    )
    if snap.topics:
        reader = reader.option("topics", ",".join(sorted(snap.topics)))
    day = F.floor(F.unix_millis("store_time") / DAY_MS).cast("int")
    return (
        reader.load(str(store_path))
        .where(F.col("corrupt").isNull())
        .select(
            *ARCHIVE_COLUMNS,
            F.date_format(F.date_from_unix_date(day), "yyyy-MM-dd").alias("date"),
        )
    )


def _write_parquet(spark, messages: DataFrame, target: str) -> None:
    """Spark's Parquet writer, timestamps as INT64 microseconds (not legacy INT96)."""
    previous = spark.conf.get(TIMESTAMP_TYPE_CONF, None)
    spark.conf.set(TIMESTAMP_TYPE_CONF, "TIMESTAMP_MICROS")
    try:
        messages.write.partitionBy("topic", "date").mode("overwrite").parquet(target)
    finally:
        if previous is None:
            spark.conf.unset(TIMESTAMP_TYPE_CONF)
        else:
            spark.conf.set(TIMESTAMP_TYPE_CONF, previous)


def _move_into_place(archive: ArchiveFS, tmp: str, segment_name: str) -> list[str]:
    """Remove the segment's earlier files, move the new ones in; their final URIs."""
    prefix = f"segment-{segment_name}-"
    for old in archive.glob(archive.uri("topic=*", "date=*", f"{prefix}*.parquet")):
        archive.delete(old.path)
    written = [f for f in archive.files(tmp) if f.path.rsplit("/", 1)[-1].startswith("part-")]
    moved: list[str] = []
    counters: dict[tuple[str, str], int] = {}
    for part in written:
        topic_dir, date_dir = part.path.rsplit("/", 3)[1:3]
        n = counters.get((topic_dir, date_dir), 0)
        counters[(topic_dir, date_dir)] = n + 1
        target = archive.uri(topic_dir, date_dir, f"{prefix}{n:05d}.parquet")
        archive.mkdirs(archive.uri(topic_dir, date_dir))
        archive.rename(part.path, target)
        moved.append(target)
    return moved


def _read_back(spark, archive: ArchiveFS, files: list[str]) -> dict[str, dict]:
    """Per file: rows, body bytes and checksum, as Spark reads it back; and per file its
    topic and date."""
    from pyspark.sql import functions as F

    if not files:
        return {}
    df = (
        spark.read.schema(archive_schema())
        .option("basePath", archive.root)
        .parquet(*files)
        .withColumn("file", F.input_file_name())
    )
    found = {}
    for (path, topic, date), (rows, size, checksum) in _totals(df, "file", "topic", "date").items():
        found[_same_uri(path, files)] = {
            "rows": rows,
            "bytes": size,
            "checksum": checksum,
            "topic": topic,
            "date": date,
        }
    return found


def _same_uri(path: str, files: list[str]) -> str:
    """``input_file_name`` may spell a file's URI differently (``file:/x`` for
    ``file:///x``): the listed URI it names."""
    for listed in files:
        if path == listed or path.split(":", 1)[-1].lstrip("/") == listed.split(":", 1)[-1].lstrip(
            "/"
        ):
            return listed
    return path


def _verify(
    archive: ArchiveFS,
    segment_name: str,
    expected: dict[tuple, tuple[int, int, str]],
    found: dict[str, dict],
    files: list[str],
) -> None:
    got: dict[tuple, list[int]] = {}
    for item in found.values():
        totals = got.setdefault((item["topic"], item["date"]), [0, 0, 0])
        totals[0] += item["rows"]
        totals[1] += item["bytes"]
        totals[2] += int(item["checksum"])
    got_totals = {key: (rows, size, str(checksum)) for key, (rows, size, checksum) in got.items()}
    if got_totals == expected and len(found) == len(files):
        return
    want = sum(rows for rows, _, _ in expected.values())
    have = sum(rows for rows, _, _ in got_totals.values())
    differing = sorted(
        f"topic {topic} date {date}"
        for topic, date in set(expected) | set(got_totals)
        if expected.get((topic, date)) != got_totals.get((topic, date))
    )
    raise ArchiveVerificationError(
        f"the archive of segment {segment_name} at {archive.root} does not hold what the "
        f"segment holds: read back {have} of its {want} messages in {len(found)} of the "
        f"{len(files)} files listed (differing: {', '.join(differing[:5]) or 'none'}); it is "
        "not recorded as archived, so retention keeps the segment. The driver and every "
        "executor must share the archive directory (a file:// path on one machine is not "
        "shared)"
    )


def archive_store(
    spark: SparkSession,
    store_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    sealed_only: bool = True,
    progress: Callable[[float], None] | None = None,
) -> dict:
    """Archive every sealed segment not verified yet; with ``sealed_only`` false the open
    segment too (not recorded: a later run archives it again, replacing its files).
    ``{"segments": [summaries], "messages", "bytes"}``. ``progress`` is told the fraction
    done after each segment."""
    snap = logview.snapshot(str(store_path))
    verified = verified_segments(out_dir, spark)
    done: list[dict] = []
    due = [
        listed
        for listed in snap.segments
        if listed.name not in verified and (snap.is_sealed(listed) or not sealed_only)
    ]
    for listed in due:
        done.append(archive_segment(spark, store_path, listed.base, out_dir))
        if progress is not None:
            progress(len(done) / len(due))
    return {
        "segments": done,
        "messages": sum(s["messages"] for s in done),
        "bytes": sum(s["bytes"] for s in done),
    }


__all__ = [
    "ARCHIVE_COLUMNS",
    "VERIFIED_DIR",
    "archive_schema",
    "archive_segment",
    "archive_store",
    "read_manifest",
    "verified_segments",
]
