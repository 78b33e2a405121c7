"""What /metrics says of the alerting itself (console/monitoring/prometheus.py yields these),
for a Prometheus outside the pipeline to alert on: notifications by state and channel,
the last successful delivery and the oldest undelivered notification per channel, firing
events, failing evaluations and evaluation time per rule, and the last evaluation and heartbeat.
docs/deploy/tidemark.rules.yml has the rules that read them."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, Max, Min
from prometheus_client.core import GaugeMetricFamily, Metric

from console.alerts import channels, evaluate, freshness, heartbeat
from console.alerts.models import AlertEvent, AlertRule, Notification

CHANNELS = list(channels.CHANNELS)
STATES = [state for state, _ in Notification.STATES]


def _gauge(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"tidemark_{name}", doc, labels=labels)


def notification_families() -> Iterator[Metric]:
    counts = {
        (row["state"], row["channel"]): row["n"]
        for row in Notification.objects.values("state", "channel").annotate(n=Count("id"))
    }
    by_state = _gauge(
        "alert_notifications",
        "Alert notifications kept, by state (pending, sending, sent, failed, superseded) "
        "and channel.",
        ["state", "channel"],
    )
    for state in STATES:
        for channel in CHANNELS:
            by_state.add_metric([state, channel], counts.get((state, channel), 0))
    yield by_state
    last = _gauge(
        "alert_last_delivery_timestamp_seconds",
        "When a notification was last delivered on the channel.",
        ["channel"],
    )
    sent = Notification.objects.filter(state=Notification.SENT, sent_at__isnull=False)
    for row in sent.values("channel").annotate(at=Max("sent_at")):
        last.add_metric([row["channel"]], row["at"].timestamp())
    yield last
    oldest = _gauge(
        "alert_oldest_undelivered_timestamp_seconds",
        "When the oldest notification still waiting for delivery (pending or sending) on "
        "the channel was queued.",
        ["channel"],
    )
    waiting = Notification.objects.filter(state__in=(Notification.PENDING, Notification.SENDING))
    for row in waiting.values("channel").annotate(at=Min("created_at")):
        oldest.add_metric([row["channel"]], row["at"].timestamp())
    yield oldest


def rule_families() -> Iterator[Metric]:
    rules = list(AlertRule.objects.filter(enabled=True).order_by("name"))
    firing_counts = dict(
        AlertEvent.objects.filter(state=AlertEvent.FIRING, rule__enabled=True)
        .values_list("rule_id")
        .annotate(n=Count("id"))
    )
    firing = _gauge("alerts_firing", "Subjects the enabled rule fires for.", ["rule"])
    failing = _gauge(
        "alert_rule_failing",
        "1 when the enabled rule's latest evaluation failed (e.g. a broken pattern; the "
        "alerts page says why), else 0.",
        ["rule"],
    )
    for rule in rules:
        firing.add_metric([rule.name], firing_counts.get(rule.pk, 0))
        failing.add_metric([rule.name], 1 if rule.failure else 0)
    yield firing
    yield failing
    took = _gauge(
        "alert_rule_evaluation_seconds",
        "How long the enabled rule's latest evaluation took, in seconds.",
        ["rule", "kind"],
    )
    for timing in evaluate.rule_timings():
        took.add_metric([timing.rule_name, timing.kind], timing.seconds)
    yield took


def pipeline_families() -> Iterator[Metric]:
    """The last evaluation and heartbeat (families without a sample until they happened)."""
    evaluated = _gauge(
        "alert_last_evaluation_timestamp_seconds", "When the alert evaluation last succeeded."
    )
    row = freshness.last_evaluation()
    if row is not None:
        evaluated.add_metric([], row.ok_at.timestamp())
    yield evaluated
    beat = _gauge(
        "alert_heartbeat_timestamp_seconds",
        "When the heartbeat (TIDEMARK_HEARTBEAT_URL) was last taken by its receiver.",
    )
    row = heartbeat.last_sent()
    if row is not None:
        beat.add_metric([], row.ok_at.timestamp())
    yield beat


def alert_families() -> Iterator[Metric]:
    yield from notification_families()
    yield from rule_families()
    yield from pipeline_families()
