"""The expiry task with ``TIDEMARK_ARCHIVE_DIR`` set: every segment it deletes was archived
to Parquet first, and a segment whose archive failed is kept (with every later one) and
named in a failed run; the archive and replay jobs as Celery tasks."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from console.background.models import TaskRun
from console.background.tasks import (
    ARCHIVE_TASK,
    EXPIRE_TASK,
    REPLAY_TASK,
    archive_segments,
    expire_segments,
    replay_archive,
)
from storeadapter.spark.jobs import archive as archive_jobs
from storeadapter.spark.jobs.archive import read_manifest
from tests.spark.sparktools import engine_rows
from tests.spark.test_archive_replay import archived_rows

pytestmark = pytest.mark.django_db

HOUR_MS = 3_600_000
#: 80 hours before an expiry run at 04:10 UTC (retention: 72 hours).
OLD_MS = int(datetime(2027, 1, 11, 20, 10, tzinfo=UTC).timestamp() * 1000)
RUN_MS = OLD_MS + 80 * HOUR_MS


@pytest.fixture
def store_options():
    return {"segment_bytes": 4096, "retention_hours": 72}


@pytest.fixture
def archive_dir(settings, tmp_path):
    settings.TIDEMARK_ARCHIVE_DIR = tmp_path / "archive"
    settings.TIDEMARK_RETENTION_HOUR = 4
    return settings.TIDEMARK_ARCHIVE_DIR


@pytest.fixture
def sealed_segments():
    """How many sealed segments ``old_log`` makes (each archived by two Spark jobs): three
    for a failure in the second with more than one after it; a test of every segment
    being archived overrides it with two (``parametrize``)."""
    return 3


@pytest.fixture
def old_log(store, fake_clock, sealed_segments):
    """Topic ``a`` in every segment; topic ``late`` only from the second segment on;
    ``sealed_segments`` sealed segments and an open one, all 80 hours old at RUN_MS."""
    fake_clock.ms = OLD_MS
    store.create_topic("a", queues=2)
    store.create_topic("late", queues=1)
    i = 0
    while store.stats(topics=False).segment_count < sealed_segments + 1:
        fake_clock.ms = OLD_MS + i * 1000
        if store.stats(topics=False).segment_count > 1:
            store.append("late", f"late {i}".encode(), key=f"k{i}")
        store.append("a", f"message {i} ".encode() * 20, key=f"k{i}")
        i += 1
    store.flush()
    fake_clock.ms = RUN_MS
    return store


#: For a test that every segment is archived: two, not three (one archive fewer).
TWO_SEALED = pytest.mark.parametrize("sealed_segments", [2])


def segment_names(store) -> list[str]:
    return [segment.name for segment in store.stats(topics=False).segments]


@TWO_SEALED
def test_expiry_archives_every_segment_before_deleting_it(
    spark, redis_db, archive_dir, old_log, store
):
    plan = store.retention_plan()
    doomed = {segment["name"] for segment in plan}
    before = engine_rows(store)

    result = expire_segments.apply()

    assert result.successful(), result.traceback
    assert doomed and set(read_manifest(archive_dir)["segments"]) == doomed
    assert not doomed & set(segment_names(store))
    gone = [row for row in before if row["commit_offset"] < plan[-1]["end"]]
    archived = archived_rows(spark, archive_dir)
    assert sorted(r["message_id"] for r in archived) == sorted(r["message_id"] for r in gone)
    run = TaskRun.objects.get(name=EXPIRE_TASK)
    assert run.last_outcome == TaskRun.OK
    assert f"deleted {len(plan)} segments" in run.last_message
    assert f"Archive: archived {len(plan)} segments ({len(gone)} messages)" in run.last_message


def test_a_failed_archive_keeps_its_segment_and_every_later_one(
    spark, redis_db, archive_dir, old_log, store
):
    plan = store.retention_plan()
    archive_dir.mkdir()
    (archive_dir / "topic=late").write_text("in the way of the partition directory")

    result = expire_segments.apply()

    assert result.failed()
    first_with_late = plan[1]["name"]
    assert set(read_manifest(archive_dir)["segments"]) == {plan[0]["name"]}
    names = segment_names(store)
    assert plan[0]["name"] not in names
    assert {segment["name"] for segment in plan[1:]} <= set(names)
    run = TaskRun.objects.get(name=EXPIRE_TASK)
    assert run.last_outcome == TaskRun.FAILED
    assert "ArchiveFailedError" in run.last_message
    assert f"the archive of segment {first_with_late} failed" in run.last_message
    assert f"Kept {len(plan) - 1} segments from {first_with_late} on" in run.last_message


def test_the_next_run_archives_and_deletes_what_a_failure_kept(
    spark, redis_db, archive_dir, old_log, store, fake_clock
):
    plan = store.retention_plan()
    archive_dir.mkdir()
    (archive_dir / "topic=late").write_text("in the way")
    expire_segments.apply()
    (archive_dir / "topic=late").unlink()

    fake_clock.ms += 24 * HOUR_MS
    result = expire_segments.apply()

    assert result.successful(), result.traceback
    assert set(read_manifest(archive_dir)["segments"]) >= {s["name"] for s in plan}
    assert not {s["name"] for s in plan} & set(segment_names(store))


def test_without_an_archive_directory_expiry_archives_nothing(
    redis_db, settings, tmp_path, old_log, store
):
    settings.TIDEMARK_ARCHIVE_DIR = None
    settings.TIDEMARK_RETENTION_HOUR = 4
    plan = store.retention_plan()

    result = expire_segments.apply()

    assert result.successful(), result.traceback
    assert not {s["name"] for s in plan} & set(segment_names(store))
    assert "Archive" not in TaskRun.objects.get(name=EXPIRE_TASK).last_message


@TWO_SEALED
def test_the_archive_task_archives_sealed_segments_and_says_how_far_it_got(
    spark, redis_db, archive_dir, old_log, store
):
    sealed = segment_names(store)[:-1]

    result = archive_segments.apply()

    assert result.successful(), result.traceback
    assert set(read_manifest(archive_dir)["segments"]) == set(sealed)
    run = TaskRun.objects.get(name=ARCHIVE_TASK)
    assert run.last_outcome == TaskRun.OK and run.progress is None
    assert json.loads(run.last_message)["segments"] == len(sealed)


@TWO_SEALED
def test_the_replay_task_appends_archived_messages_back(
    spark, redis_db, archive_dir, old_log, store
):
    archive_segments.apply()
    store.create_topic("restored", queues=1)
    archived = archived_rows(spark, archive_dir, "late")

    result = replay_archive.apply(kwargs={"topic": "late", "into": "restored"})

    assert result.successful(), result.traceback
    assert result.get() == {"sent": len(archived), "topic": "late", "into": "restored"}
    assert len(engine_rows(store, ["restored"])) == len(archived) > 0
    assert TaskRun.objects.get(name=REPLAY_TASK).last_outcome == TaskRun.OK


def test_the_replay_task_fails_with_a_sentence_for_an_unknown_topic(redis_db, archive_dir, old_log):
    archive_dir.mkdir()

    result = replay_archive.apply(kwargs={"topic": "late", "into": "nowhere"})

    assert result.failed()
    run = TaskRun.objects.get(name=REPLAY_TASK)
    assert run.last_outcome == TaskRun.FAILED
    assert "The store has no topic 'nowhere'" in run.last_message


def test_retention_keeps_a_segment_whose_archive_does_not_read_back(
    spark, redis_db, archive_dir, old_log, store, monkeypatch
):
    plan = store.retention_plan()
    moved = archive_jobs._move_into_place

    def lose_one(archive, tmp, name):  # a file the executors wrote where the driver cannot see
        files = moved(archive, tmp, name)
        Path(files[-1].removeprefix("file:")).unlink()
        return files[:-1]

    monkeypatch.setattr(archive_jobs, "_move_into_place", lose_one)
    result = expire_segments.apply()

    assert result.failed()
    assert read_manifest(archive_dir)["segments"] == {}
    assert {s["name"] for s in plan} <= set(segment_names(store))
    report = store.stats(topics=False).last_retention
    assert report["deleted_segments"] == []
    assert [s["name"] for s in report["held_segments"]] == [s["name"] for s in plan]
    run = TaskRun.objects.get(name=EXPIRE_TASK)
    assert "ArchiveVerificationError" in run.last_message
    assert f"Kept {len(plan)} segments from {plan[0]['name']} on" in run.last_message
    assert "their archive is not verified yet" in run.last_message
