"""Liveness and readiness checks; no login (load balancers call them), no sensitive data.

``/healthz`` answers as long as the process serves requests: it touches neither the
database nor the store. ``/readyz`` checks what this replica needs to serve requests: the
store open, not failed and below its disk reject ratio, and the database answering.
``/healthz/background`` checks the background work, which every replica shares: Redis
answering at ``REDIS_URL`` and a Celery worker seen lately (some tracked task finished
within ``TIDEMARK_READY_WORKER_WINDOW_S``); a dead worker must not take every web replica
out of rotation, so it is not part of readiness (``/tasks/`` shows it too). Each answers
200 when all its checks pass, else 503 naming the failing ones. Failures are named by kind
only: no URLs, paths or hosts.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from storeadapter.disk_use import disk_use

Check = Callable[[], str]


class NotReady(Exception):
    """A check failed; the message says why, safely shown to anyone."""


@login_not_required
@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: 200 while the process answers."""
    return JsonResponse({"status": "ok"})


def check_store() -> str:
    from console.core.store import get_store

    try:
        store = get_store()
    except Exception as error:
        raise NotReady(f"the store could not be opened ({type(error).__name__})") from None
    if store.closed:
        raise NotReady("the store is closed")
    if store.failed:
        raise NotReady("the store failed a write or fsync and refuses writes")
    try:
        disk = disk_use(store)
    except OSError as error:
        raise NotReady(f"the store's disk could not be measured ({type(error).__name__})") from None
    ratio, limit = disk.ratio, disk.reject_ratio
    if ratio >= limit:
        raise NotReady(f"the store's disk is {ratio:.0%} full (writes refused from {limit:.0%})")
    return f"open and writable; disk {ratio:.0%} full"


def check_redis() -> str:
    import redis

    timeout = settings.TIDEMARK_READY_TIMEOUT_S
    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_connect_timeout=timeout, socket_timeout=timeout
    )
    try:
        client.ping()
    except Exception as error:
        raise NotReady(f"redis did not answer ({type(error).__name__})") from None
    finally:
        client.close()
    return "answered"


def check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as error:
        raise NotReady(f"the database did not answer ({type(error).__name__})") from None
    return "answered"


def check_worker() -> str:
    from console.background.models import TaskRun

    window = settings.TIDEMARK_READY_WORKER_WINDOW_S
    since = timezone.now() - timedelta(seconds=window)
    try:
        seen = TaskRun.objects.filter(last_finished_at__gte=since).exists()
    except Exception as error:
        raise NotReady(f"task runs could not be read ({type(error).__name__})") from None
    if not seen:
        raise NotReady(f"no background task finished in the last {window} s")
    return f"a task finished in the last {window} s"


#: What a web replica needs to serve requests: /readyz.
READY_CHECKS: dict[str, Check] = {"store": check_store, "database": check_database}
#: The shared background work: /healthz/background.
BACKGROUND_CHECKS: dict[str, Check] = {"redis": check_redis, "worker": check_worker}


def run_checks(checks: dict[str, Check]) -> dict[str, dict[str, object]]:
    """Each check's result: ``{"ok": bool, "detail": sentence}``."""
    results: dict[str, dict[str, object]] = {}
    for name, check in checks.items():
        try:
            results[name] = {"ok": True, "detail": check()}
        except NotReady as failure:
            results[name] = {"ok": False, "detail": str(failure)}
    return results


def _answer(checks: dict[str, Check], good: str, bad: str) -> JsonResponse:
    results = run_checks(checks)
    failing = [name for name, result in results.items() if not result["ok"]]
    body = {"status": bad if failing else good, "failing": failing, "checks": results}
    return JsonResponse(body, status=503 if failing else 200)


@login_not_required
@never_cache
@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 when the store and the database answer, else 503 naming the failing."""
    return _answer(READY_CHECKS, "ready", "not ready")


@login_not_required
@never_cache
@require_safe
def background(request: HttpRequest) -> JsonResponse:
    """The background work: 200 when Redis and a worker answer, else 503 naming them."""
    return _answer(BACKGROUND_CHECKS, "ok", "failing")
