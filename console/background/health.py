"""The health of the periodic tasks, for /tasks/ and /api/v1/tasks/.

Every task in ``CELERY_BEAT_SCHEDULE`` is listed, with what its ``TaskRun`` row says about
its last run (console/background/tracking.py), plus any row no schedule names. A task is
STALE when it has not finished within ``STALE_FACTOR`` × its interval, or never ran although
the schedule began longer ago than that (a task not yet due is *waiting*, not stale).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery.schedules import schedule as celery_schedule
from django.conf import settings
from django.utils import timezone

from console.background.models import TaskRun

#: A task that has not finished for this many intervals is flagged stale.
STALE_FACTOR = 3


@dataclass
class TaskHealth:
    """One line of /tasks/ (and one task of /api/v1/tasks/)."""

    name: str  # the schedule entry's name, or the row's for an unscheduled task
    task: str  # the Celery task name
    every_s: float | None
    schedule_text: str
    row: TaskRun | None
    stale: bool
    stale_reason: str
    running: bool
    scheduled: bool
    #: Never ran, and not due yet: why (empty otherwise).
    waiting: str = ""

    @property
    def progress(self) -> float | None:
        """How far the current run has come (0..1), or None when not running or not said."""
        if not self.running or self.row is None or self.row.progress is None:
            return None
        return self.row.progress

    @property
    def progress_percent(self) -> int | None:
        return None if self.progress is None else round(self.progress * 100)

    @property
    def started_ms(self) -> int | None:
        return _ms(self.row.last_started_at if self.row else None)

    @property
    def finished_ms(self) -> int | None:
        return _ms(self.row.last_finished_at if self.row else None)


def _ms(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


def interval_seconds(value: Any) -> float | None:
    """The seconds between runs of a beat schedule value, or None (e.g. a crontab)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, celery_schedule):
        return value.run_every.total_seconds()
    return None


def every_text(seconds: float | None, fallback: str) -> str:
    if not seconds:
        return fallback
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"every {seconds / size:g} {unit}"
    return f"every {seconds:g} s"


def staleness(
    row: TaskRun | None, every_s: float | None, now: datetime, began: datetime | None
) -> tuple[bool, str]:
    """(stale, why): never ran although the schedule ``began`` STALE_FACTOR × the interval
    ago, or nothing finished for STALE_FACTOR × the interval."""
    if row is None or row.last_started_at is None:
        if waiting_for_first_run(every_s, now, began):
            return False, ""
        return True, "never ran"
    if not every_s:
        return False, ""
    reference = row.last_finished_at or row.last_started_at
    late = now - reference
    if late > timedelta(seconds=STALE_FACTOR * every_s):
        minutes = late.total_seconds() / 60
        return True, f"nothing finished for {minutes:.0f} min (> {STALE_FACTOR}× its interval)"
    return False, ""


def waiting_for_first_run(every_s: float | None, now: datetime, began: datetime | None) -> bool:
    """Whether a task that never ran may still be waiting for its first run: no worker
    ran anything yet, or the schedule began less than STALE_FACTOR × its interval ago."""
    if began is None or not every_s:
        return True
    return now - began <= timedelta(seconds=STALE_FACTOR * every_s)


def waiting_text(every_s: float | None, began: datetime | None) -> str:
    if began is None:
        return "not run yet: no worker has run any task here"
    if not every_s:
        return "not run yet: it runs on demand"
    due = began + timedelta(seconds=every_s)
    return f"not due yet: the first run is due by {due:%Y-%m-%d %H:%M:%S} UTC"


def is_running(row: TaskRun | None) -> bool:
    if row is None or row.last_started_at is None:
        return False
    return row.last_finished_at is None or row.last_started_at > row.last_finished_at


def task_health(now: datetime | None = None) -> list[TaskHealth]:
    """Every scheduled task and every recorded one, scheduled first, in schedule order."""
    now = now or timezone.now()
    rows = {row.name: row for row in TaskRun.objects.all()}
    began = min((row.created_at for row in rows.values()), default=None)
    used: set[str] = set()
    lines = []
    for key, entry in getattr(settings, "CELERY_BEAT_SCHEDULE", {}).items():
        task = str(entry.get("task", key))
        # @tracked names its row; accept the task's full name, its short name or the key.
        candidates = (task, task.rsplit(".", 1)[-1], key)
        row = next((rows[name] for name in candidates if name in rows), None)
        if row is not None:
            used.add(row.name)
        value = entry.get("schedule")
        every = interval_seconds(value)
        if every is None and row is not None:
            every = row.every_s
        stale, why = staleness(row, every, now, began)
        never = row is None or row.last_started_at is None
        lines.append(
            TaskHealth(
                name=key,
                task=task,
                every_s=every,
                schedule_text=every_text(interval_seconds(value), str(value)),
                row=row,
                stale=stale,
                stale_reason=why,
                running=is_running(row),
                scheduled=True,
                waiting=waiting_text(every, began) if never and not stale else "",
            )
        )
    for name, row in rows.items():
        if name in used:
            continue
        stale, why = staleness(row, row.every_s, now, began)
        lines.append(
            TaskHealth(
                name=name,
                task=name,
                every_s=row.every_s,
                schedule_text=every_text(row.every_s, "on demand"),
                row=row,
                stale=stale,
                stale_reason=why,
                running=is_running(row),
                scheduled=False,
            )
        )
    return lines
