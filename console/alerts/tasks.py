"""The alert evaluation task, sent by name after each metrics sample.

``console.alerts.tasks.evaluate_alerts`` reads the current metrics
(``console.monitoring.current``) and evaluates every rule on them
(console/alerts/evaluate.py). It is tracked (``/tasks/`` shows its last run) and holds a
Redis lock, so two runs never overlap; the evaluation is safe without it too.
"""

from __future__ import annotations

import importlib
from collections import Counter

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from console.alerts.evaluate import evaluate
from console.background.tracking import tracked
from console.monitoring.metrics import GroupMetrics, StoreMetrics

TASK_NAME = "console.alerts.tasks.evaluate_alerts"


def current_metrics() -> tuple[list[GroupMetrics], StoreMetrics | None]:
    """The groups' and the store's metrics now, from the monitoring (tests replace this)."""
    current = importlib.import_module("console.monitoring.current")
    return current.group_metrics(), current.store_metrics()


@tracked(TASK_NAME, every_s=settings.TIDEMARK_SAMPLE_INTERVAL_S)
def run_evaluation() -> dict:
    groups, store = current_metrics()
    changes = evaluate(groups, store, timezone.now())
    moves = Counter(f"{c.before or 'none'}->{c.after or 'none'}" for c in changes)
    summary: dict = {"changes": dict(sorted(moves.items())), "emails": changes.emails}
    if changes.email_failures:
        summary["email_failures"] = changes.email_failures
    if changes.rule_failures:
        summary["rule_failures"] = changes.rule_failures
    return summary


@shared_task(name=TASK_NAME)
def evaluate_alerts() -> dict | None:
    return run_evaluation()
