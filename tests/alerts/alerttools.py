"""Hand-made metrics (console/monitoring/metrics.py), rules and silences for the alert tests,
and ``evaluate``: the evaluation followed by one delivery attempt of each notification it
queued (what the worker's ``send_notification`` task does first), at the same time."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta

from console.alerts import notify
from console.alerts.evaluate import Changes
from console.alerts.evaluate import evaluate as decide
from console.alerts.models import AlertRule, Silence
from console.monitoring.metrics import OK, GroupMetrics, QueueMetrics, StoreMetrics

#: The evaluations' clock: tests pass `now` explicitly, never sleep.
T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
RECIPIENT = "ops@example.com"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def queue(
    group: str = "billing",
    topic: str = "orders",
    number: int = 0,
    lag: int = 0,
    lag_seconds: float | None = None,
    status: str = OK,
) -> QueueMetrics:
    return QueueMetrics(
        group=group,
        topic=topic,
        queue=number,
        max_offset=1000 + lag,
        committed=1000,
        lag=lag,
        lag_seconds=lag_seconds,
        last_commit_ms=1_700_000_000_000,
        status=status,
    )


def group(
    name: str = "billing",
    lag: int = 0,
    lag_seconds: float | None = None,
    drain_seconds: float | None = 0.0,
    expiry_risk_hours: float | None = None,
    status: str = OK,
    topics: list[str] | None = None,
    queues: list[QueueMetrics] | None = None,
    consume_rate: float = 10.0,
    produce_rate: float = 5.0,
) -> GroupMetrics:
    """A group's metrics; without `queues`, one queue of topic "orders" carries its figures."""
    if queues is None:
        queues = [queue(name, "orders", 0, lag, lag_seconds, status)]
    if topics is None:
        topics = sorted({q.topic for q in queues}) or ["orders"]
    return GroupMetrics(
        group=name,
        topics=topics,
        lag=lag,
        lag_seconds=lag_seconds,
        consume_rate=consume_rate,
        produce_rate=produce_rate,
        drain_seconds=drain_seconds,
        expiry_risk_hours=expiry_risk_hours,
        status=status,
        sampled_ms=1_700_000_000_000,
        queues=queues,
    )


def store(disk_ratio: float = 0.1) -> StoreMetrics:
    return StoreMetrics(
        disk_bytes=int(disk_ratio * 100_000_000),
        disk_ratio=disk_ratio,
        sampled_ms=1_700_000_000_000,
        produce_rate=5.0,
        consume_rate=10.0,
        backlog=0,
    )


def evaluate(groups, store=None, now=None, monitoring=None) -> Changes:
    """Evaluate, then deliver what it queued once (a failed attempt stays pending)."""
    changes = decide(groups, store, now, monitoring)
    deliver(changes.notifications, now)
    return changes


def deliver(notification_ids: list[int], now=None) -> None:
    for notification_id in notification_ids:
        with contextlib.suppress(notify.DeliveryFailed):
            notify.attempt(notification_id, now)


def make_rule(
    kind: str = AlertRule.LAG_MESSAGES,
    threshold: float | None = 100,
    name: str | None = None,
    **fields,
) -> AlertRule:
    """A rule; without flap damping unless asked (the damping tests ask for it)."""
    fields.setdefault("recipients", RECIPIENT)
    fields.setdefault("for_seconds", 0)
    fields.setdefault("repeat_seconds", 3600)
    fields.setdefault("keep_firing_seconds", 0)
    fields.setdefault("group_interval_seconds", 0)
    return AlertRule.objects.create(
        name=name or f"{kind} rule", kind=kind, threshold=threshold, **fields
    )


def make_silence(rule: AlertRule | None = None, pattern: str = "", **fields) -> Silence:
    fields.setdefault("starts_at", T0 - timedelta(hours=1))
    fields.setdefault("ends_at", T0 + timedelta(hours=1))
    fields.setdefault("reason", "maintenance")
    return Silence.objects.create(rule=rule, subject_pattern=pattern, **fields)


def run_worker(now) -> None:
    """The worker at ``now``: one attempt of each pending notification whose (re)try is due,
    oldest first: what Celery's countdown retries do, under the tests' clock."""
    from console.alerts.models import Notification

    due = Notification.objects.filter(
        state=Notification.PENDING, next_attempt_at__lte=now
    ).order_by("next_attempt_at", "pk")
    deliver(list(due.values_list("pk", flat=True)), now)


def timeline(lagging_until: int, until: int, tick=None, step: int = 10) -> None:
    """Every ``step`` seconds up to ``until``: ``tick(second)`` (the test's servers learn the
    time), an evaluation (group billing lagging before ``lagging_until``, caught up after),
    and the worker's due deliveries, all at the same time."""
    for second in range(0, until + 1, step):
        if tick is not None:
            tick(second)
        lag = 500 if second < lagging_until else 0
        decide([group(lag=lag)], None, at(second))
        run_worker(at(second))
