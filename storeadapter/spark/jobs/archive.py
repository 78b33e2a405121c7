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

**Verified, or not recorded.** While writing, the writer's tasks total what they write
(row count, body bytes, and a checksum: the sum of a 64-bit hash of every column of
every row). The files are then read back by Spark (so by the executors, from where the
driver listed them) and totalled per file: the sums must equal the segment's. Only then
is the segment recorded as archived: ``out/_verified/<segment>.json`` lists its
messages, bytes, checksum and every file with its own rows, bytes and checksum (local
files and directories fsynced first). Files the executors wrote where the driver cannot
see them (a ``file://`` directory that is not shared), or that came back short, fail the
segment with ``ArchiveVerificationError`` and no record. Retention deletes only segments
with a record (``verified_segments``). A rerun of a segment removes its record first,
then replaces its files.

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


def _total_columns():
    """Rows, body bytes and checksum of a DataFrame of archived columns, as aggregates."""
    from pyspark.sql import functions as F

    return [
        F.count(F.lit(1)).alias("rows"),
        F.coalesce(F.sum(F.octet_length("body")), F.lit(0)).alias("bytes"),
        F.coalesce(F.sum(_row_hash()), F.lit(0)).cast("string").alias("checksum"),
    ]


def _as_totals(row) -> dict:
    return {"rows": int(row["rows"]), "bytes": int(row["bytes"]), "checksum": str(row["checksum"])}


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
    from pyspark.sql import Observation

    snap = logview.snapshot(str(store_path))
    listed = _find_segment(snap, segment_base)
    sealed = snap.is_sealed(listed)
    archive = ArchiveFS(spark, out_dir)
    archive.mkdirs(archive.root)
    record_uri = archive.uri(VERIFIED_DIR, f"{listed.name}.json")
    archive.delete(record_uri)  # the files are about to change: no longer verified
    tmp = archive.uri(f"_tmp-{listed.name}-{uuid.uuid4().hex[:8]}")
    written = Observation(f"archive-{listed.name}")
    try:
        # One pass over the segment: the writer's tasks total what they write.
        source = _segment_messages(spark, snap, listed, store_path)
        _write_parquet(spark, source.observe(written, *_total_columns()), tmp)
        expected = _as_totals(written.get)
        files = _move_into_place(archive, tmp, listed.name)
    finally:
        archive.delete(tmp)
    found = _read_back(spark, archive, files)
    _verify(archive, listed.name, expected, found, files)
    summary = {
        "segment": listed.name,
        "sealed": sealed,
        "verified": False,
        "messages": expected["rows"],
        "bytes": expected["bytes"],
        "checksum": expected["checksum"],
        "files": len(files),
    }
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
    """Per file, as Spark reads it back: rows, body bytes and checksum."""
    from pyspark.sql import functions as F

    if not files:
        return {}
    df = (
        spark.read.schema(archive_schema())
        .option("basePath", archive.root)
        .parquet(*files)
        .groupBy(F.input_file_name().alias("file"))
        .agg(*_total_columns())
    )
    return {_same_uri(row["file"], files): _as_totals(row) for row in df.collect()}


def _same_uri(path: str, files: list[str]) -> str:
    """``input_file_name`` may spell a file's URI differently (``file:/x`` for
    ``file:///x``): the listed URI it names."""

    def bare(uri: str) -> str:
        return uri.split(":", 1)[-1].lstrip("/")

    return next((listed for listed in files if bare(listed) == bare(path)), path)


def _verify(
    archive: ArchiveFS,
    segment_name: str,
    expected: dict,
    found: dict[str, dict],
    files: list[str],
) -> None:
    """The files read back hold the segment's rows: as many, the same body bytes, the same
    checksum (which covers every column, the topic read from the file's directory too)."""
    got = {
        "rows": sum(f["rows"] for f in found.values()),
        "bytes": sum(f["bytes"] for f in found.values()),
        "checksum": str(sum(int(f["checksum"]) for f in found.values())),
    }
    if got == expected and set(found) == set(files):
        return
    raise ArchiveVerificationError(
        f"the archive of segment {segment_name} at {archive.root} does not hold what the "
        f"segment holds: read back {got['rows']} of its {expected['rows']} messages "
        f"({got['bytes']} of {expected['bytes']} body bytes, checksum "
        f"{'equal' if got['checksum'] == expected['checksum'] else 'different'}) from "
        f"{len(found)} of the {len(files)} files listed; it is not recorded as archived, "
        "so retention keeps the segment. The driver and every executor must share the "
        "archive directory (a file:// path on one machine is not shared)"
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
