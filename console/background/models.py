"""The health of each periodic task: its last run, how long it took, how it ended."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class TaskRun(models.Model):
    """One row per task name, updated by every run (console/background/tracking.py)."""

    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"
    OUTCOMES = [(OK, "ok"), (FAILED, "failed"), (SKIPPED, "skipped (another run held it)")]

    name = models.CharField(max_length=100, unique=True)
    #: How often the schedule runs it; a task not finished within 3× this is flagged stale.
    every_s = models.FloatField()
    last_started_at = models.DateTimeField(null=True, blank=True)
    last_finished_at = models.DateTimeField(null=True, blank=True)
    #: When a run last ended well: /metrics' age since the last success.
    last_ok_at = models.DateTimeField(null=True, blank=True)
    last_duration_ms = models.FloatField(null=True, blank=True)
    last_outcome = models.CharField(max_length=10, choices=OUTCOMES, blank=True)
    last_message = models.TextField(blank=True)
    #: Progress of a long run (0..1), or None; shown on /tasks/.
    progress = models.FloatField(null=True, blank=True)
    runs = models.PositiveBigIntegerField(default=0)
    failures = models.PositiveBigIntegerField(default=0)
    #: When a worker first ran the task here: the earliest of these is when the schedule
    #: began, which tells a task not yet due from one that never ran.
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
