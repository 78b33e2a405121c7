"""/tasks/: the health of the periodic tasks, and whether a Celery worker answers.

Every task in ``CELERY_BEAT_SCHEDULE`` is listed, with what its ``TaskRun`` row says about
its last run (console/background/tracking.py), plus any row no schedule names. A task is
STALE when it has not finished within 3× its interval, or never ran (the rule and the
lines are console/background/health.py's, shared with /api/v1/tasks/). Read-only.
"""

from __future__ import annotations

from typing import Any

import redis
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe
from kombu.utils.url import maybe_sanitize_url

from console.accounts.roles import require_role
from console.background.health import STALE_FACTOR, task_health
from console.celery import app as celery_app

#: Seconds to wait for Redis and for workers to answer; the page never waits longer.
PING_TIMEOUT_S = 0.5


def worker_status() -> dict[str, Any]:
    """Whether the broker and a worker answer, as ``{"ok": bool, "text": str}``.

    Never raises: with Redis or every worker gone, it says so.
    """
    broker = str(celery_app.conf.broker_url or settings.REDIS_URL)
    shown = maybe_sanitize_url(broker)
    if broker.startswith(("redis://", "rediss://", "unix://")):
        try:
            client = redis.Redis.from_url(
                broker, socket_connect_timeout=PING_TIMEOUT_S, socket_timeout=PING_TIMEOUT_S
            )
            try:
                client.ping()
            finally:
                client.close()
        except (redis.RedisError, OSError, ValueError) as error:
            return {
                "ok": False,
                "text": f"Redis does not answer at {shown} ({error}): no task runs until it does.",
            }
    try:
        replies = celery_app.control.inspect(timeout=PING_TIMEOUT_S).ping() or {}
    except Exception as error:  # noqa: BLE001 - the page must render whatever the broker does
        return {"ok": False, "text": f"Could not ask the workers through {shown}: {error}."}
    if not replies:
        return {
            "ok": False,
            "text": f"No Celery worker answers through {shown}: scheduled tasks do not run.",
        }
    names = ", ".join(sorted(replies))
    count = len(replies)
    return {
        "ok": True,
        "text": f"{count} worker{'' if count == 1 else 's'} answer{'s' if count == 1 else ''} "
        f"through {shown}: {names}.",
    }


@require_role("viewer")
@require_safe
def tasks(request: HttpRequest) -> HttpResponse:
    lines = task_health()
    context = {
        "tasks": lines,
        "stale_count": sum(1 for line in lines if line.stale),
        "worker": worker_status(),
        "stale_factor": STALE_FACTOR,
    }
    return render(request, "background/tasks.html", context)
