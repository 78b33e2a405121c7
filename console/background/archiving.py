"""The Spark archive and replay jobs for the console: run by ``manage.py archive_segments``
and ``manage.py replay_archive``, by their Celery tasks, and by the expiry task.

With ``TIDEMARK_ARCHIVE_DIR`` set, the expiry task archives every segment retention is
about to delete (``archive_due``) and then lets retention delete only segments whose archive
was read back and verified (``archived_segments``): a segment whose archive failed or could
not be verified is kept, with every later one, until a run archives it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from storeadapter.access import store_exists
from storeadapter.engine import MessageStore
from storeadapter.spark_support import require_spark

Progress = Callable[[float], None]


class ArchiveError(Exception):
    """A job cannot start: no store, no archive, a bad segment or topic. Its text is a
    sentence for the operator."""


@dataclass
class ArchiveOutcome:
    """What ``archive_due`` did before a retention run."""

    archived: list[dict] = field(default_factory=list)  # archive_segment summaries
    failed_segment: str | None = None
    error: str = ""

    def text(self) -> str:
        messages = sum(summary["messages"] for summary in self.archived)
        done = f"archived {len(self.archived)} segments ({messages} messages)"
        if self.failed_segment is None:
            return done
        return f"{done}; the archive of segment {self.failed_segment} failed: {self.error}"


def store_dir() -> Path:
    path = Path(settings.TIDEMARK_STORE_DIR)
    if not store_exists(path):
        raise ArchiveError(f"There is no store at {path} (TIDEMARK_STORE_DIR).")
    return path


def archived_segments(archive_dir: str | os.PathLike) -> set[str]:
    """The names of the segments whose archive was read back, verified and made durable.
    A local directory is read directly; another URI (``hdfs://``, ``s3a://``…) through
    Spark's file system."""
    require_spark()
    from storeadapter.spark.jobs.archive import verified_segments

    text = str(archive_dir)
    if "://" in text and not text.startswith("file://"):
        return verified_segments(text, _spark("tidemark-archive", console_progress=False))
    return verified_segments(text)


def _spark(app_name: str, console_progress: bool):
    require_spark()
    from storeadapter.spark import spark_session

    shown = "true" if console_progress else "false"
    return spark_session(app_name, config={"spark.ui.showConsoleProgress": shown})


def archive_due(
    store: MessageStore,
    now_ms: int,
    archive_dir: str | os.PathLike,
    progress: Progress | None = None,
) -> ArchiveOutcome:
    """Archive, oldest first, the segments retention would delete at ``now_ms`` that the
    archive does not list yet; stop at the first that fails (a later one could not be
    deleted before it anyway)."""
    from storeadapter.spark.errors import sentence_of
    from storeadapter.spark.jobs.archive import archive_segment

    outcome = ArchiveOutcome()
    listed = archived_segments(archive_dir)
    due = [segment for segment in store.retention_plan(now_ms) if segment["name"] not in listed]
    if not due:
        return outcome
    spark = _spark("tidemark-archive", console_progress=False)
    for done, segment in enumerate(due, start=1):
        try:
            summary = archive_segment(spark, store.path, segment["base"], archive_dir)
        except Exception as error:  # Spark, Parquet or the disk: keep the segment
            outcome.failed_segment = segment["name"]
            outcome.error = sentence_of(error)
            return outcome
        outcome.archived.append(summary)
        if progress is not None:
            progress(done / len(due))
    return outcome


def run_archive(
    out_dir: str | os.PathLike,
    segment: int | None = None,
    include_open: bool = False,
    *,
    console_progress: bool = False,
    progress: Progress | None = None,
) -> dict:
    """Archive one segment again (``segment``), or every sealed segment the manifest does
    not list yet; ``{"segments": [summaries], "messages", "bytes"}``."""
    require_spark()
    from storeadapter.spark.errors import our_sentence
    from storeadapter.spark.jobs.archive import archive_segment, archive_store

    source = store_dir()
    out = str(out_dir)
    if "://" not in out and Path(out).exists() and not Path(out).is_dir():
        raise ArchiveError(f"The archive path {out} is a file, not a directory.")
    spark = _spark("tidemark-archive", console_progress)
    try:
        if segment is None:
            return archive_store(
                spark, source, out, sealed_only=not include_open, progress=progress
            )
        summaries = [archive_segment(spark, source, segment, out)]
    except ValueError as error:
        raise ArchiveError(f"{error}.") from None
    except Exception as error:
        sentence = our_sentence(error)  # a task that could not read or verify: its sentence
        if sentence is None:
            raise
        raise ArchiveError(f"The archive stopped: {sentence}") from None
    return {
        "segments": summaries,
        "messages": summaries[0]["messages"],
        "bytes": summaries[0]["bytes"],
    }


def run_replay(
    archive_dir: str | os.PathLike,
    topic: str,
    since_ms: int | None = None,
    until_ms: int | None = None,
    into: str | None = None,
    *,
    console_progress: bool = False,
) -> dict:
    """Append the archived messages of ``topic`` in the window to ``into`` (default the
    same topic); ``{"sent", "topic", "into"}``."""
    require_spark()
    from storeadapter.spark import logview
    from storeadapter.spark.jobs.replay import replay

    topic = topic.strip()
    target = (into or topic).strip()
    if not topic or not target:
        raise ArchiveError("A replay needs the archived topic's name.")
    if since_ms is not None and until_ms is not None and since_ms >= until_ms:
        raise ArchiveError("The replay's start must be earlier than its end.")
    archive = str(archive_dir)
    if "://" not in archive and not Path(archive).is_dir():
        raise ArchiveError(f"There is no archive at {archive}.")
    source = store_dir()
    if target not in logview.load_topics(source):
        raise ArchiveError(f"The store has no topic {target!r}: create it before replaying.")
    sent = replay(
        _spark("tidemark-replay", console_progress),
        archive,
        topic,
        since_ms,
        until_ms,
        into_topic=target,
        store_path=source,
    )
    return {"sent": sent, "topic": topic, "into": target}
