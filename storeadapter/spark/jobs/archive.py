"""Archive commit-log segments to Parquet, partitioned by topic and store date (no Django).

    from storeadapter.spark import spark_session
    from storeadapter.spark.jobs.archive import archive_store

    summary = archive_store(spark_session(), "var/store", "var/archive")

``archive_segment`` reads exactly one segment's messages: the ``tidemark`` read is bounded
by the segment's store times (``since``/``until``, so the planner prunes other segments)
and filtered on ``commit_offset`` to the segment's byte range. Its rows go to
``out_dir/topic=<topic>/date=<YYYY-MM-DD>/segment-<segment name>-<n>.parquet`` (the UTC
date of the store time). The files are written to ``out_dir/_tmp-<segment>`` first, then
the segment's earlier files are removed and the new ones moved in, so a rerun replaces a
segment's files rather than adding to them. Every topic is archived, retry and dead-letter
topics too; corrupt stretches are not. ``archive_store`` archives every sealed segment not
listed yet in ``out_dir/_manifest.json`` and lists it there.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from storeadapter.spark import FORMAT_NAME, logview
from storeadapter.spark.planning import store_time_at as _store_time_at

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

MANIFEST = "_manifest.json"
DAY_MS = 86_400_000
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


def read_manifest(out_dir: str | os.PathLike) -> dict:
    """The archive's manifest: ``{"segments": {segment name: {messages, bytes, files}}}``."""
    try:
        found = json.loads((Path(out_dir) / MANIFEST).read_text())
    except FileNotFoundError:
        return {"segments": {}}
    found.setdefault("segments", {})
    return found


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_manifest(out_dir: Path, manifest: dict) -> None:
    tmp = out_dir / f"{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    _fsync(tmp)
    os.replace(tmp, out_dir / MANIFEST)
    _fsync(out_dir)


def _make_durable(out_dir: Path, segment_name: str) -> None:
    """fsync a segment's archive files and their directories: the manifest lists a segment
    (and retention may then delete it) only once its archive would survive a power loss."""
    directories = {out_dir}
    for part in out_dir.glob(f"topic=*/date=*/segment-{segment_name}-*.parquet"):
        _fsync(part)
        directories.update((part.parent, part.parent.parent))
    for directory in sorted(directories, key=lambda d: len(d.parts), reverse=True):
        _fsync(directory)


def record_archived(out_dir: str | os.PathLike, summary: dict) -> None:
    """List an archived sealed segment (an ``archive_segment`` summary) in the manifest."""
    out = Path(out_dir)
    _make_durable(out, summary["segment"])
    manifest = read_manifest(out)
    manifest["segments"][summary["segment"]] = {
        "messages": summary["messages"],
        "bytes": summary["bytes"],
        "files": summary["files"],
    }
    _write_manifest(out, manifest)


def _find_segment(snap: logview.LogSnapshot, segment_base: int | str) -> logview.SegmentFile:
    base = int(segment_base)
    for listed in snap.segments:
        if listed.base == base:
            return listed
    names = ", ".join(s.name for s in snap.segments) or "none"
    raise ValueError(f"the store at {snap.path} has no segment {base} (its segments: {names})")


def _first_store_time(snap: logview.LogSnapshot, listed: logview.SegmentFile) -> int | None:
    segment = logview.ReadOnlySegment(snap.segment_path(listed), listed.size)
    try:
        return _store_time_at(segment, 0)
    finally:
        segment.close()


def _time_bounds(snap: logview.LogSnapshot, listed: logview.SegmentFile):
    """``(since, until)`` store times around the segment's records, None where none can be
    proved: its first record's store time, and just past the next segment's first."""
    since = _first_store_time(snap, listed)
    following = next((s for s in snap.segments if s.base == listed.end), None)
    if since is None or following is None:
        return since, None
    upper = _first_store_time(snap, following)
    return since, (upper + 1 if upper is not None and upper >= since else None)


def archive_segment(
    spark: SparkSession,
    store_path: str | os.PathLike,
    segment_base: int | str,
    out_dir: str | os.PathLike,
) -> dict:
    """Write one segment's messages to Parquet under ``out_dir`` (replacing the files an
    earlier run wrote for it); ``{"segment", "messages", "bytes", "files", "sealed"}``.
    ValueError when the store has no such segment."""
    from pyspark.sql import functions as F

    snap = logview.snapshot(str(store_path))
    listed = _find_segment(snap, segment_base)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "segment": listed.name,
        "messages": 0,
        "bytes": 0,
        "files": 0,
        "sealed": snap.is_sealed(listed),
    }
    tmp = out / f"_tmp-{listed.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    if snap.topics:
        reader = spark.read.format(FORMAT_NAME).option("topics", ",".join(sorted(snap.topics)))
        since, until = _time_bounds(snap, listed)
        if since is not None:
            reader = reader.option("since", since)
        if until is not None:
            reader = reader.option("until", until)
        day = F.floor(F.unix_millis("store_time") / DAY_MS).cast("int")
        messages = (
            reader.load(str(store_path))
            .where(F.col("corrupt").isNull())
            .where((F.col("commit_offset") >= listed.base) & (F.col("commit_offset") < listed.end))
            .select(
                *ARCHIVE_COLUMNS,
                F.date_format(F.date_from_unix_date(day), "yyyy-MM-dd").alias("date"),
            )
            .cache()
        )
        try:
            totals = messages.agg(
                F.count(F.lit(1)).alias("messages"),
                F.coalesce(F.sum(F.octet_length("body")), F.lit(0)).alias("bytes"),
            ).first()
            summary["messages"], summary["bytes"] = int(totals["messages"]), int(totals["bytes"])
            if summary["messages"]:
                messages.write.partitionBy("topic", "date").mode("overwrite").parquet(str(tmp))
        finally:
            messages.unpersist()
    prefix = f"segment-{listed.name}-"
    for old in out.glob(f"topic=*/date=*/{prefix}*.parquet"):
        old.unlink()
    if tmp.is_dir():
        for partition in sorted(tmp.glob("topic=*/date=*")):
            target = out / partition.parent.name / partition.name
            target.mkdir(parents=True, exist_ok=True)
            for n, part in enumerate(sorted(partition.glob("part-*.parquet"))):
                os.replace(part, target / f"{prefix}{n:05d}.parquet")
                summary["files"] += 1
        shutil.rmtree(tmp)
    return summary


def archive_store(
    spark: SparkSession,
    store_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    sealed_only: bool = True,
    progress: Callable[[float], None] | None = None,
) -> dict:
    """Archive every sealed segment the manifest does not list yet, and list it. With
    ``sealed_only`` false the open segment is archived too, but not listed: a later run
    archives it again, replacing its files. ``{"segments": [summaries], "messages",
    "bytes"}``. ``progress`` is told the fraction done after each segment."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    snap = logview.snapshot(str(store_path))
    manifest = read_manifest(out)
    done: list[dict] = []
    due = [
        listed
        for listed in snap.segments
        if listed.name not in manifest["segments"] and (snap.is_sealed(listed) or not sealed_only)
    ]
    for listed in due:
        summary = archive_segment(spark, store_path, listed.base, out)
        done.append(summary)
        if summary["sealed"]:
            record_archived(out, summary)
        if progress is not None:
            progress(len(done) / len(due))
    return {
        "segments": done,
        "messages": sum(s["messages"] for s in done),
        "bytes": sum(s["bytes"] for s in done),
    }


__all__ = [
    "ARCHIVE_COLUMNS",
    "MANIFEST",
    "archive_schema",
    "archive_segment",
    "archive_store",
    "read_manifest",
    "record_archived",
]
