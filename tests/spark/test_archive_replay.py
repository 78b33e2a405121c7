"""Archive segments to Parquet and replay them: the round trip, the partition layout, reruns
that replace rather than duplicate, replay's dedup and time filter; the commands' arguments."""

from __future__ import annotations

import datetime as dt
import time
from io import StringIO
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command

from storeadapter.engine.names import DEDUP_PROPERTY
from storeadapter.spark import logview
from storeadapter.spark.errors import ArchiveVerificationError
from storeadapter.spark.jobs import archive as archive_jobs
from storeadapter.spark.jobs.archive import (
    archive_schema,
    archive_segment,
    archive_store,
    read_manifest,
)
from storeadapter.spark.jobs.replay import replay
from tests.engine.storetools import small_config
from tests.spark.sparktools import engine_rows

DAY_MS = 86_400_000
#: Two days ago at 23:00 UTC: the messages span two store dates, and the store times the
#: writer's tasks give replayed messages (the real clock) come after them.
START_MS = (int(time.time() * 1000) // DAY_MS - 2) * DAY_MS + 23 * 3_600_000


def content(row: dict) -> tuple:
    """What a replay keeps (its dedup id, the original message id, is a property too)."""
    properties = {k: v for k, v in row["properties"].items() if k != DEDUP_PROPERTY}
    return (row["keys"], row["tag"], properties, row["body"], row["born_time"])


def date_of(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d")


def fill_two_hours(store, fake_clock) -> None:
    """Topics ``a`` and ``b`` over two store dates (a message a minute for two hours from
    23:00), and an empty topic ``restored``."""
    for name in ("a", "b", "restored"):
        store.create_topic(name, queues=2)
    fake_clock.ms = START_MS
    for i in range(120):
        fake_clock.ms = START_MS + i * 60_000
        store.append_batch(
            "a" if i % 3 else "b",
            [
                {
                    "body": f"message {i} ".encode() * (1 + i % 4),
                    "key": [f"k{i % 5}", f"n{i}"] if i % 2 else None,
                    "tag": f"t{i % 3}" if i % 4 else None,
                    "properties": {"i": str(i)} if i % 5 else None,
                }
            ],
        )
    store.flush()


@pytest.fixture
def archived_store(open_store, fake_clock):
    """``fill_two_hours`` over several 4 KiB segments (two sealed, one open)."""
    store = open_store()
    fill_two_hours(store, fake_clock)
    return store


@pytest.fixture
def one_segment_store(open_store, fake_clock, store_path):
    """``fill_two_hours`` in one (open) segment: for what does not depend on segments,
    archived by one write and one read back instead of one each per segment."""
    store = open_store(config=small_config(segment_bytes=64 << 10))
    fill_two_hours(store, fake_clock)
    assert len(logview.snapshot(store_path).segments) == 1
    return store


def archived_rows(spark, out_dir, topic=None) -> list[dict]:
    from pyspark.sql import functions as F

    df = spark.read.schema(archive_schema()).option("basePath", str(out_dir)).parquet(str(out_dir))
    if topic is not None:
        df = df.where(F.col("topic") == topic)
    return [
        {**row.asDict(recursive=True), "store_time": None}
        for row in df.select(
            "message_id", "topic", "commit_offset", "date", F.unix_millis("store_time")
        ).collect()
    ]


def test_archive_layout_rerun_and_round_trip(spark, archived_store, store_path, tmp_path):
    out = tmp_path / "archive"
    everything = engine_rows(archived_store)
    snap = logview.snapshot(store_path)
    sealed = [s for s in snap.segments if snap.is_sealed(s)]
    assert len(sealed) >= 2 and len({date_of(r["store_time"]) for r in everything}) == 2

    summary = archive_store(spark, store_path, out)
    assert [s["segment"] for s in summary["segments"]] == [s.name for s in sealed]
    manifest = read_manifest(out)
    assert sorted(manifest["segments"]) == [s.name for s in sealed]
    in_sealed = [r for r in everything if r["commit_offset"] < sealed[-1].end]
    assert summary["messages"] == len(in_sealed)
    assert summary["bytes"] == sum(len(r["body"]) for r in in_sealed)

    # Layout: topic=<topic>/date=<store date>/segment-<segment>-<n>.parquet, each file
    # holding that topic's messages of that date from that segment.
    expected_files = {
        (r["topic"], date_of(r["store_time"]), s.name)
        for r in in_sealed
        for s in sealed
        if s.base <= r["commit_offset"] < s.end
    }
    files = sorted(p.relative_to(out) for p in out.rglob("*.parquet"))
    assert {(p.parts[0], p.parts[1], p.name.rsplit("-", 1)[0]) for p in files} == {
        (f"topic={t}", f"date={d}", f"segment-{name}") for t, d, name in expected_files
    }
    rows = archived_rows(spark, out)
    by_offset = {r["commit_offset"]: r for r in everything}
    assert sorted(r["commit_offset"] for r in rows) == [r["commit_offset"] for r in in_sealed]
    for row in rows:
        original = by_offset[row["commit_offset"]]
        assert (row["message_id"], row["topic"], row["date"]) == (
            original["message_id"],
            original["topic"],
            date_of(original["store_time"]),
        )

    # A rerun of a segment replaces its files; archive_store skips what the manifest lists
    # and, asked to, archives the open segment too.
    again = archive_segment(spark, store_path, sealed[0].base, out)
    assert again["messages"] == summary["segments"][0]["messages"]
    assert len(archived_rows(spark, out)) == len(in_sealed)
    assert archive_store(spark, store_path, out)["segments"] == []
    rest = archive_store(spark, store_path, out, sealed_only=False)
    assert [s["sealed"] for s in rest["segments"]] == [False]
    assert len(archived_rows(spark, out)) == len(everything)
    assert sorted(read_manifest(out)["segments"]) == [s.name for s in sealed]

    # Replay into another topic: the same messages, in order; twice appends once.
    originals = [r for r in everything if r["topic"] == "a"]
    assert replay(spark, out, "a", into_topic="restored", store_path=store_path) == len(originals)
    restored = engine_rows(archived_store, ["restored"])
    assert [content(r) for r in restored] == [content(r) for r in originals]
    assert [r["properties"][DEDUP_PROPERTY] for r in restored] == [
        r["message_id"] for r in originals
    ]
    assert replay(spark, out, "a", into_topic="restored", store_path=store_path) == len(originals)
    assert len(engine_rows(archived_store, ["restored"])) == len(originals)


def test_replay_time_filter(spark, one_segment_store, store_path, tmp_path):
    out = tmp_path / "archive"
    archive_store(spark, store_path, out, sealed_only=False)
    since, until = START_MS + 30 * 60_000, START_MS + 75 * 60_000
    everything = engine_rows(one_segment_store, ["b"])
    window = [r for r in everything if since <= r["store_time"] < until]
    assert window
    sent = replay(
        spark,
        out,
        "b",
        since=dt.datetime.fromtimestamp(since / 1000, dt.UTC).isoformat(),
        until=until,
        into_topic="restored",
        store_path=store_path,
    )
    assert sent == len(window)
    assert [content(r) for r in engine_rows(one_segment_store, ["restored"])] == [
        content(r) for r in window
    ]
    assert replay(spark, out, "b", until=START_MS, store_path=store_path) == 0
    with pytest.raises(ValueError, match="since"):
        replay(spark, out, "b", since="yesterday", store_path=store_path)


@pytest.mark.django_db
def test_commands(spark, one_segment_store, store_path, tmp_path, settings):
    # One open segment: archived only with --include-open (archive_store's loop over the
    # segments is test_archive_layout_rerun_and_round_trip's).
    settings.TIDEMARK_STORE_DIR = store_path
    out = tmp_path / "archive"
    stdout = StringIO()
    call_command("archive_segments", "--out", str(out), "--include-open", stdout=stdout)
    everything = engine_rows(one_segment_store)
    assert f"1 segments archived to {out} ({len(everything)} messages" in stdout.getvalue()
    stdout = StringIO()
    call_command(
        "replay_archive",
        "--archive",
        str(out),
        "--topic",
        "b",
        "--into",
        "restored",
        stdout=stdout,
    )
    count = sum(1 for r in everything if r["topic"] == "b")
    assert stdout.getvalue().startswith(f"replay_archive: {count} archived messages of b")
    assert len(engine_rows(one_segment_store, ["restored"])) == count


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("command", "arguments", "message"),
    [
        ("archive_segments", ["--out", " "], "--out needs the archive directory"),
        ("archive_segments", ["--out", "A", "--segment", "x"], "--segment must be a segment's"),
        ("archive_segments", ["--out", "A", "--segment", "-4"], "--segment must not be negative"),
        ("archive_segments", ["--out", "A"], "There is no store at"),
        ("replay_archive", ["--archive", "A", "--topic", " "], "--topic needs a topic name"),
        ("replay_archive", ["--archive", "A", "--topic", "a", "--into", ""], "--into needs"),
        ("replay_archive", ["--archive", "A", "--topic", "a", "--since", "soon"], "--since must"),
        (
            "replay_archive",
            ["--archive", "A", "--topic", "a", "--since", "2000", "--until", "1000"],
            "--since must be earlier than --until",
        ),
        ("replay_archive", ["--archive", "nowhere", "--topic", "a"], "There is no archive at"),
        ("replay_archive", ["--archive", "A", "--topic", "a"], "There is no store at"),
    ],
)
def test_commands_refuse_bad_arguments(settings, tmp_path, command, arguments, message):
    settings.TIDEMARK_STORE_DIR = tmp_path / "no-store"
    (tmp_path / "A").mkdir()
    arguments = [str(tmp_path / a) if a in ("A", "nowhere") else a for a in arguments]
    with pytest.raises(CommandError, match=message):
        call_command(command, *arguments)


@pytest.mark.django_db
def test_replay_command_refuses_an_unknown_topic(archived_store, store_path, tmp_path, settings):
    settings.TIDEMARK_STORE_DIR = store_path
    with pytest.raises(CommandError, match="The store has no topic 'elsewhere'"):
        call_command(
            "replay_archive", "--archive", str(tmp_path), "--topic", "a", "--into", "elsewhere"
        )


def test_a_segment_is_recorded_only_with_what_its_files_read_back(
    spark, archived_store, store_path, tmp_path
):
    out = tmp_path / "archive"
    snap = logview.snapshot(store_path)
    first = snap.segments[0]
    in_first = [r for r in engine_rows(archived_store) if r["commit_offset"] < first.end]

    summary = archive_segment(spark, store_path, first.base, out)

    record = read_manifest(out)["segments"][first.name]
    assert record["verified"] is True and summary["verified"] is True
    assert record["messages"] == len(in_first)
    assert record["bytes"] == sum(len(r["body"]) for r in in_first)
    files = sorted(out.rglob(f"segment-{first.name}-*.parquet"))
    assert [Path(f["path"].removeprefix("file:")).name for f in record["files"]] == [
        f.name for f in files
    ]
    for listed, path in zip(record["files"], files, strict=True):
        table = pq.read_table(path)
        assert listed["rows"] == table.num_rows
        assert listed["bytes"] == sum(len(b) for b in table.column("body").to_pylist())
    assert sum(f["rows"] for f in record["files"]) == len(in_first)
    assert sum(int(f["checksum"]) for f in record["files"]) == int(record["checksum"])


def test_timestamps_are_written_as_int64_microseconds(spark, archived_store, store_path, tmp_path):
    out = tmp_path / "archive"
    archive_segment(spark, store_path, logview.snapshot(store_path).segments[0].base, out)
    schema = pq.ParquetFile(next(out.rglob("*.parquet"))).schema
    for name in ("born_time", "store_time"):
        column = schema.column(schema.names.index(name))
        assert column.physical_type == "INT64"
        assert "timeUnit=microseconds" in str(column.logical_type)


def test_files_that_do_not_read_back_as_the_segment_are_not_recorded(
    spark, archived_store, store_path, tmp_path, monkeypatch
):
    out = tmp_path / "archive"
    first = logview.snapshot(store_path).segments[0]
    archive_segment(spark, store_path, first.base, out)
    assert first.name in read_manifest(out)["segments"]
    moved = archive_jobs._move_into_place

    def lose_one(archive, tmp, name):  # as an executor writing where the driver cannot see
        files = moved(archive, tmp, name)
        Path(files[0].removeprefix("file:")).unlink()
        return files[1:]

    monkeypatch.setattr(archive_jobs, "_move_into_place", lose_one)
    with pytest.raises(ArchiveVerificationError, match=f"archive of segment {first.name}"):
        archive_segment(spark, store_path, first.base, out)
    # The rerun took the segment's record away before it touched its files.
    assert first.name not in read_manifest(out)["segments"]


@pytest.mark.django_db
def test_the_command_says_why_an_archive_was_not_verified(
    spark, archived_store, store_path, tmp_path, settings, monkeypatch
):
    settings.TIDEMARK_STORE_DIR = store_path
    moved = archive_jobs._move_into_place

    def lose_one(archive, tmp, name):
        files = moved(archive, tmp, name)
        Path(files[0].removeprefix("file:")).unlink()
        return files[1:]

    monkeypatch.setattr(archive_jobs, "_move_into_place", lose_one)
    with pytest.raises(CommandError, match="The archive stopped: ArchiveVerificationError: "):
        call_command("archive_segments", "--out", str(tmp_path / "archive"))
