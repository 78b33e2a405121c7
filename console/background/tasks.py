"""The store's upkeep as Celery tasks: flush, and expiry deletion.

Beat runs them (``CELERY_BEAT_SCHEDULE`` in console/settings.py). Each body runs under
``@tracked``: a Redis lock lets one run at a time (a second one is recorded as skipped), and
its outcome, duration and message land in ``TaskRun`` for /tasks/.

- ``flush_store``: fsync and checkpoint a store in ``async`` flush mode (in ``sync`` mode
  every append is already durable when it returns, so there is nothing to do).
- ``archive_segments`` and ``replay_archive``: the Spark archive and replay jobs, sent on
  demand (``manage.py archive_segments --background`` and ``replay_archive --background``).
- ``expire_segments``: checks every ``TIDEMARK_EXPIRY_CHECK_S``; deletes expired segments
  once in the ``TIDEMARK_RETENTION_HOUR`` hour (UTC, like RocketMQ's deleteWhen "04"), or
  at once whenever disk use is at or past the store's ``disk_warn_ratio``. Whether it
  already deleted in today's window is read from the engine's own retention report
  (``stats().last_retention``, kept in the store directory), so the answer is the same
  for every worker and survives restarts: a second check in the same window does nothing.
  With ``TIDEMARK_ARCHIVE_DIR`` set it first archives the segments due (archiving.py), and
  retention keeps a segment whose archive failed or was not verified (read back equal to
  the segment), with every later one; the run then fails with a sentence naming the
  segment, so /tasks/ shows it.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from celery import shared_task
from django.conf import settings

from console.background.archiving import (
    ArchiveOutcome,
    archive_due,
    archived_segments,
    run_archive,
    run_replay,
)
from console.background.tracking import record_progress, tracked
from console.core.store import get_store
from storeadapter.disk_use import disk_use
from storeadapter.engine import clock
from storeadapter.reports import log_retention

FLUSH_TASK = "console.background.tasks.flush_store"
EXPIRE_TASK = "console.background.tasks.expire_segments"
ARCHIVE_TASK = "console.background.tasks.archive_segments"
REPLAY_TASK = "console.background.tasks.replay_archive"
#: On-demand Spark jobs: no schedule; their lock outlives a run of up to this long.
JOB_LOCK_S = 6 * 3600


class ArchiveFailedError(Exception):
    """Retention kept segments because their archive failed; the text says which."""


def utc_now() -> datetime:
    """Now, from the store's clock (tests replace ``storeadapter.engine.clock.now_ms``)."""
    return datetime.fromtimestamp(clock.now_ms() / 1000, tz=UTC)


def to_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def retention_window(now: datetime, hour: int) -> tuple[datetime, datetime] | None:
    """Today's deletion window (``hour``:00 to ``hour+1``:00 UTC) if ``now`` is in it."""
    now = now.astimezone(UTC)
    if now.hour != hour:
        return None
    start = now.replace(minute=0, second=0, microsecond=0)
    return start, start + timedelta(hours=1)


def deleted_within(report: dict | None, start: datetime, end: datetime) -> bool:
    """Whether the engine's last retention report was made between ``start`` and ``end``."""
    if not report or report.get("now_ms") is None:
        return False
    return to_ms(start) <= int(report["now_ms"]) < to_ms(end)


def size_text(count: float) -> str:
    """Bytes as people read them: "812 bytes", "3.9 KiB", "1.2 GiB"."""
    if count < 1024:
        return f"{int(count)} bytes"
    units = ["KiB", "MiB", "GiB", "TiB"]
    count /= 1024
    while count >= 1024 and len(units) > 1:
        count /= 1024
        units.pop(0)
    return f"{count:.1f} {units[0]}"


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def summarize(report: dict, why: str) -> str:
    """One line for /tasks/: what a retention run deleted, freed and dropped unconsumed."""
    segments = report.get("deleted_segments") or []
    before, after = report.get("disk_ratio_before", 0), report.get("disk_ratio_after", 0)
    disk = f"disk use {before:.0%} → {after:.0%}"
    if not segments:
        return f"{why}: no segment was due for deletion; nothing deleted ({disk})."
    reasons = Counter(segment.get("reason", "?") for segment in segments)
    reason_text = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    lost: Counter[str] = Counter()
    for queue in report.get("queues") or []:
        for group, count in (queue.get("unconsumed_by_group") or {}).items():
            lost[group] += int(count)
    lost = +lost  # only groups that lost some
    if lost:
        dropped = "unconsumed messages dropped: " + ", ".join(
            f"{group} {count}" for group, count in sorted(lost.items())
        )
    else:
        dropped = "no group lost unconsumed messages"
    return (
        f"{why}: deleted {plural(len(segments), 'segment')} ({reason_text}), "
        f"freed {size_text(report.get('freed_bytes', 0))}; {dropped} ({disk})."
    )


@shared_task(name=FLUSH_TASK, expires=settings.TIDEMARK_FLUSH_INTERVAL_S * 2)
@tracked(FLUSH_TASK, every_s=settings.TIDEMARK_FLUSH_INTERVAL_S)
def flush_store() -> str:
    """fsync the commit log, consume queues and index, then write the checkpoint."""
    store = get_store()
    mode = store.config.flush_mode
    if mode != "async":
        return f"{mode} flush mode: every append is durable when it returns; nothing to do."
    store.flush()
    return "async flush mode: fsynced and checkpointed."


@shared_task(name=EXPIRE_TASK, expires=settings.TIDEMARK_EXPIRY_CHECK_S)
@tracked(EXPIRE_TASK, every_s=settings.TIDEMARK_EXPIRY_CHECK_S)
def expire_segments() -> str:
    """Delete expired segments at the retention hour, or at once past the disk warning."""
    store = get_store()
    now = utc_now()
    hour = settings.TIDEMARK_RETENTION_HOUR
    stats = store.stats(topics=False)
    ratio = disk_use(store).ratio
    warn = store.config.disk_warn_ratio
    window = retention_window(now, hour)
    if ratio >= warn:
        why = f"disk use {ratio:.0%} is at or past the {warn:.0%} warning"
    elif window is not None and not deleted_within(stats.last_retention, *window):
        why = f"retention hour {hour:02d}:00 UTC"
    elif window is not None:
        return (
            f"retention hour {hour:02d}:00 UTC: already deleted in this window "
            f"({now:%Y-%m-%d}); nothing to do."
        )
    else:
        return (
            f"checked: deletion runs at {hour:02d}:00 UTC or past the {warn:.0%} disk "
            f"warning (disk use {ratio:.0%}); nothing to do."
        )
    archive_dir = settings.TIDEMARK_ARCHIVE_DIR
    if not archive_dir:
        report = store.delete_expired(now_ms=to_ms(now)).as_dict()
        text = summarize(report, why)
        log_retention(report, text)
        return text
    outcome = archive_due(
        store, to_ms(now), archive_dir, progress=lambda done: record_progress(EXPIRE_TASK, done)
    )
    listed = archived_segments(archive_dir)
    report = store.delete_expired(
        now_ms=to_ms(now), may_delete=lambda segment: segment["name"] in listed
    ).as_dict()
    text = f"{summarize(report, why)} {archived_text(outcome, report)}"
    log_retention(report, text)
    if outcome.failed_segment is not None:
        raise ArchiveFailedError(text)
    return text


def archived_text(outcome: ArchiveOutcome, report: dict) -> str:
    """What the archive did before retention, and which segments retention kept for it."""
    text = f"Archive: {outcome.text()}."
    held = report.get("held_segments") or []
    if held:
        first = held[0]["name"]
        text += (
            f" Kept {plural(len(held), 'segment')} from {first} on: "
            "their archive is not verified yet"
        ) + ("." if outcome.failed_segment else "; the next run archives them.")
    return text


@shared_task(name=ARCHIVE_TASK, ignore_result=True)
@tracked(ARCHIVE_TASK, every_s=0, lock_timeout_s=JOB_LOCK_S)
def archive_segments(
    out: str | None = None, segment: int | None = None, include_open: bool = False
) -> dict:
    """Archive sealed segments not archived yet (or one ``segment`` again) to Parquet under
    ``out`` (default ``TIDEMARK_ARCHIVE_DIR``)."""
    out = out or settings.TIDEMARK_ARCHIVE_DIR
    if not out:
        raise ValueError("No archive directory: pass one, or set TIDEMARK_ARCHIVE_DIR.")
    record_progress(ARCHIVE_TASK, 0.0)
    summary = run_archive(
        out, segment, include_open, progress=lambda done: record_progress(ARCHIVE_TASK, done)
    )
    return {
        "segments": len(summary["segments"]),
        "messages": summary["messages"],
        "bytes": summary["bytes"],
        "out": str(out),
    }


@shared_task(name=REPLAY_TASK, ignore_result=True)
@tracked(REPLAY_TASK, every_s=0, lock_timeout_s=JOB_LOCK_S)
def replay_archive(
    topic: str,
    since_ms: int | None = None,
    until_ms: int | None = None,
    into: str | None = None,
    archive: str | None = None,
) -> dict:
    """Append archived messages of ``topic`` in a store-time window back into the store."""
    archive = archive or settings.TIDEMARK_ARCHIVE_DIR
    if not archive:
        raise ValueError("No archive directory: pass one, or set TIDEMARK_ARCHIVE_DIR.")
    record_progress(REPLAY_TASK, 0.0)
    return run_replay(archive, topic, since_ms, until_ms, into)
