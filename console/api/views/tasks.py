"""API: the health of the periodic tasks, read-only, as the /tasks/ page shows it.

- ``/api/v1/tasks/``: GET every scheduled task (in schedule order), then any recorded task no
  schedule names, with its interval, last run, outcome, counts, progress and ``stale``.

The lines and the STALE rule (never ran, or nothing finished within 3× the interval) are
console/background/health.py's, the page's own.
"""

from __future__ import annotations

from typing import Any

from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.api.pagination import Pagination, paginated
from console.background.health import STALE_FACTOR, TaskHealth, task_health
from console.background.models import TaskRun


class TaskSerializer(serializers.Serializer):
    name = serializers.CharField(
        help_text="The schedule entry, or the task for an unscheduled one."
    )
    task = serializers.CharField(help_text="The Celery task.")
    scheduled = serializers.BooleanField(help_text="False: recorded, but no schedule runs it.")
    every_s = serializers.FloatField(allow_null=True, help_text="Seconds between runs.")
    schedule = serializers.CharField(help_text='As the page says it: "every 5 s".')
    last_started_ms = serializers.IntegerField(allow_null=True)
    last_finished_ms = serializers.IntegerField(allow_null=True)
    last_duration_ms = serializers.FloatField(allow_null=True)
    outcome = serializers.ChoiceField(
        choices=TaskRun.OUTCOMES, allow_null=True, help_text="How the last run ended."
    )
    message = serializers.CharField(allow_blank=True, help_text="What the last run said.")
    runs = serializers.IntegerField()
    failures = serializers.IntegerField()
    running = serializers.BooleanField()
    progress = serializers.FloatField(
        allow_null=True, help_text="How far the current run has come (0..1), when it says."
    )
    stale = serializers.BooleanField(
        help_text=f"Nothing finished within {STALE_FACTOR}× its interval, or never ran "
        "although it was due."
    )
    stale_reason = serializers.CharField(allow_blank=True)
    waiting = serializers.CharField(
        allow_blank=True, help_text="Never ran and not due yet: why; empty otherwise."
    )


def task_data(line: TaskHealth) -> dict[str, Any]:
    row = line.row
    return {
        "name": line.name,
        "task": line.task,
        "scheduled": line.scheduled,
        "every_s": line.every_s,
        "schedule": line.schedule_text,
        "last_started_ms": line.started_ms,
        "last_finished_ms": line.finished_ms,
        "last_duration_ms": row.last_duration_ms if row else None,
        "outcome": (row.last_outcome or None) if row else None,
        "message": row.last_message if row else "",
        "runs": row.runs if row else 0,
        "failures": row.failures if row else 0,
        "running": line.running,
        "progress": line.progress,
        "stale": line.stale,
        "stale_reason": line.stale_reason,
        "waiting": line.waiting,
    }


class TaskList(APIView):
    @extend_schema(operation_id="tasks_list", responses={200: paginated(TaskSerializer)})
    def get(self, request: Request) -> Response:
        paginator = Pagination()
        page = paginator.paginate_queryset(task_health(), request, view=self)
        return paginator.get_paginated_response([task_data(line) for line in page])


urlpatterns = [path("tasks/", TaskList.as_view(), name="api-tasks")]
