"""Run a periodic task once at a time, and record how each run went.

``@tracked("name", every_s=10)`` wraps a task body: it takes a Redis lock named after the
task (a second run that starts meanwhile is skipped and recorded as such, so two workers or
a slow run never overlap), times the body, and writes the outcome to ``TaskRun`` with
conditional updates (F() increments), never losing a concurrent run's count. The body's
return value (a short sentence or a dict) becomes the run's message.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable
from typing import Any

import redis
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from console.background.models import TaskRun

#: A lock outlives a crashed worker by at most this many times the task's interval.
LOCK_TIMEOUT_FACTOR = 6
MIN_LOCK_TIMEOUT_S = 60


def redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def _message(result: Any) -> str:
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    return json.dumps(result, default=str, sort_keys=True)[:10_000]


def _row(name: str, every_s: float) -> TaskRun:
    row, _ = TaskRun.objects.get_or_create(name=name, defaults={"every_s": every_s})
    if row.every_s != every_s:
        TaskRun.objects.filter(pk=row.pk).update(every_s=every_s)
    return row


def record_progress(name: str, fraction: float) -> None:
    """Say how far a long run has come (0..1); /tasks/ shows it."""
    TaskRun.objects.filter(name=name).update(progress=max(0.0, min(1.0, fraction)))


def tracked(
    name: str, every_s: float, lock_timeout_s: float | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for a task body; see the module docstring. ``every_s`` 0 is a task run
    on demand (never stale); ``lock_timeout_s`` overrides how long its lock may live."""

    def decorator(body: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(body)
        def run(*args: Any, **kwargs: Any) -> Any:
            row = _row(name, every_s)
            timeout = lock_timeout_s or max(MIN_LOCK_TIMEOUT_S, every_s * LOCK_TIMEOUT_FACTOR)
            lock = redis_client().lock(f"tidemark:task:{name}", timeout=timeout, blocking=False)
            if not lock.acquire():
                TaskRun.objects.filter(pk=row.pk).update(
                    last_outcome=TaskRun.SKIPPED,
                    last_message="another run of this task was still going",
                )
                return None
            started = time.monotonic()
            TaskRun.objects.filter(pk=row.pk).update(last_started_at=timezone.now(), progress=None)
            try:
                result = body(*args, **kwargs)
            except Exception as error:
                TaskRun.objects.filter(pk=row.pk).update(
                    last_finished_at=timezone.now(),
                    last_duration_ms=(time.monotonic() - started) * 1000,
                    last_outcome=TaskRun.FAILED,
                    last_message=f"{type(error).__name__}: {error}"[:10_000],
                    runs=F("runs") + 1,
                    failures=F("failures") + 1,
                    progress=None,
                )
                raise
            finally:
                # A lock that expired meanwhile cannot be released; the next run takes anew.
                with contextlib.suppress(redis.exceptions.LockError):
                    lock.release()
            finished = timezone.now()
            TaskRun.objects.filter(pk=row.pk).update(
                last_finished_at=finished,
                last_ok_at=finished,
                last_duration_ms=(time.monotonic() - started) * 1000,
                last_outcome=TaskRun.OK,
                last_message=_message(result),
                runs=F("runs") + 1,
                progress=None,
            )
            return result

        return run

    return decorator
