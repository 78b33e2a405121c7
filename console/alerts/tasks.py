"""The alert tasks: evaluation on its own schedule, and delivery with retries.

``console.alerts.tasks.evaluate_alerts`` runs every ``TIDEMARK_ALERT_INTERVAL_S`` (beat
entry ``evaluate-alerts``), whether or not a sample was written: it reads the current
metrics (``console.monitoring.current``) and the monitoring's freshness, evaluates every
rule (console/alerts/evaluate.py), notes its success (the staleness alert reads it), and
sends a ``send_notification`` task for each notification queued, and for any whose delivery
was lost. It is tracked (``/tasks/`` shows its last run) and holds a Redis lock, so two
runs never overlap; the evaluation is safe without it too.

``console.alerts.tasks.send_notification`` makes one delivery attempt
(console/alerts/notify.py); a failure is retried by Celery with capped exponential backoff
(for as long as the notification tells of something firing), unless its channel says it
is not worth retrying (console/alerts/channels.py).

``console.alerts.tasks.send_heartbeat`` POSTs the always-firing heartbeat
(console/alerts/heartbeat.py) every ``TIDEMARK_HEARTBEAT_INTERVAL_S`` (beat entry
``alert-heartbeat``).

Every task here goes to the ``alerts`` Celery queue (``CELERY_TASK_ROUTES``), consumed by
a worker of its own, so a long job on the default queue never delays a page.
"""

from __future__ import annotations

import importlib
from collections import Counter

from celery import shared_task
from django.db import transaction
from django.utils import timezone

from console.alerts import freshness, heartbeat, notify
from console.alerts.evaluate import evaluate
from console.background.tracking import tracked
from console.monitoring.metrics import GroupMetrics, StoreMetrics

TASK_NAME = "console.alerts.tasks.evaluate_alerts"
SEND_TASK = "console.alerts.tasks.send_notification"
HEARTBEAT_TASK = "console.alerts.tasks.send_heartbeat"
#: The Celery queue of every task here (console/settings.py routes them).
QUEUE = "alerts"


def current_metrics() -> tuple[list[GroupMetrics], StoreMetrics | None]:
    """The groups' and the store's metrics now, from the monitoring (tests replace this)."""
    current = importlib.import_module("console.monitoring.current")
    return current.group_metrics(), current.store_metrics()


def dispatch(notification_ids: list[int]) -> None:
    """Send a delivery task for each notification, once the transaction is committed."""
    for notification_id in notification_ids:
        transaction.on_commit(lambda pk=notification_id: send_notification.delay(pk), robust=True)


@tracked(TASK_NAME, every_s=freshness.evaluation_interval_s())
def run_evaluation() -> dict:
    now = timezone.now()
    previous = freshness.last_evaluation()
    groups, store = current_metrics()
    monitoring = freshness.monitoring_health(now, previous)
    changes = evaluate(groups, store, now, monitoring)
    freshness.record_evaluation(now)
    queued = changes.notifications + notify.lost(now)
    dispatch(queued)
    moves = Counter(f"{c.before or 'none'}->{c.after or 'none'}" for c in changes)
    summary: dict = {"changes": dict(sorted(moves.items())), "notifications": len(queued)}
    if monitoring.stale:
        summary["monitoring"] = monitoring.reason
    if changes.rule_failures:
        summary["rule_failures"] = changes.rule_failures
    return summary


@shared_task(name=TASK_NAME)
def evaluate_alerts() -> dict | None:
    return run_evaluation()


@shared_task(bind=True, name=SEND_TASK, ignore_result=True, max_retries=None)
def send_notification(self, notification_id: int) -> str:
    """Deliver one notification; retried with backoff while attempts remain."""
    try:
        row = notify.attempt(notification_id)
    except notify.DeliveryFailed as failure:
        if failure.final:
            return f"gave up: {failure}"
        attempts = self.request.retries + 1
        raise self.retry(countdown=notify.backoff_s(attempts)) from failure
    return "not pending" if row is None else "sent"


@tracked(HEARTBEAT_TASK, every_s=heartbeat.interval_s())
def run_heartbeat() -> str:
    return heartbeat.beat()


@shared_task(name=HEARTBEAT_TASK, ignore_result=True)
def send_heartbeat() -> str | None:
    """POST the heartbeat; a refused one fails the run (/tasks/ and the log say why)."""
    return run_heartbeat()
