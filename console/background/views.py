"""/tasks/: the health of the periodic tasks, and whether a Celery worker answers.

Every task in ``CELERY_BEAT_SCHEDULE`` is listed, with what its ``TaskRun`` row says about
its last run (console/background/tracking.py), plus any row no schedule names. A task is
STALE when it has not finished within 3× its interval, or never ran (the rule and the
lines are console/background/health.py's, shared with /api/v1/tasks/). Read-only.

The page renders from the stored rows only; the workers' answer (a broker round-trip of up
to a second) is /tasks/workers/, a fragment the page loads after with htmx.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from console.background.health import STALE_FACTOR, task_health
from console.background.workers import worker_status


@require_safe
def tasks(request: HttpRequest) -> HttpResponse:
    lines = task_health()
    context = {
        "tasks": lines,
        "stale_count": sum(1 for line in lines if line.stale),
        "stale_factor": STALE_FACTOR,
    }
    return render(request, "background/tasks.html", context)


@require_safe
def workers(request: HttpRequest) -> HttpResponse:
    """The workers' answer, as the fragment /tasks/ swaps in once it has rendered."""
    return render(request, "background/workers.html", {"worker": worker_status()})
