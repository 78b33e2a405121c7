"""Whether the broker and a Celery worker answer: a broker round-trip, never on a page's request.

/tasks/ loads this answer after it has rendered (console/background/views.py ``workers``).
"""

from __future__ import annotations

from typing import Any

import redis
from django.conf import settings
from kombu.utils.url import maybe_sanitize_url

from console.celery import app as celery_app

#: Seconds to wait for Redis and for workers to answer; the answer never waits longer.
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
