"""Is the monitoring itself working? The age of the last sample and of the last alert
evaluation that succeeded, for the built-in "monitoring is stale" alert and the dashboard.

Monitoring that stopped says nothing, so silence would read as health: Prometheus' habit
is a watchdog alert and ``absent()``. Here the evaluation fires the built-in
``monitoring_stale`` rule when the newest sample is older than ``STALE_FACTOR`` sample
intervals, or when the previous successful evaluation is older than ``STALE_FACTOR``
evaluation intervals (so an evaluation that failed for a while says so once it works
again). An evaluation that does not run at all cannot alert: the dashboard says so, and
``/metrics`` exports the tasks' freshness for an outside watchdog.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.utils import timezone

from console.alerts.kinds import Monitoring, format_seconds
from console.alerts.models import Heartbeat
from console.monitoring.models import StoreSample

EVALUATION = "alerts.evaluate"
#: Stale after this many intervals without success.
STALE_FACTOR = 3


def evaluation_interval_s() -> float:
    return float(
        getattr(settings, "TIDEMARK_ALERT_INTERVAL_S", settings.TIDEMARK_SAMPLE_INTERVAL_S)
    )


def last_evaluation() -> Heartbeat | None:
    return Heartbeat.objects.filter(name=EVALUATION).first()


def record_evaluation(now: datetime) -> None:
    """Note a successful evaluation at ``now``."""
    updated = Heartbeat.objects.filter(name=EVALUATION).update(ok_at=now)
    if not updated:
        Heartbeat.objects.get_or_create(name=EVALUATION, defaults={"first_at": now, "ok_at": now})


#: ``monitoring_health``'s ``latest_ms`` when the caller has not read the latest sample.
UNREAD = object()


def monitoring_health(
    now: datetime | None = None,
    evaluation: Heartbeat | None = None,
    latest_ms: int | None | object = UNREAD,
) -> Monitoring:
    """How fresh sampling and evaluation are at ``now``; ``evaluation`` defaults to the
    stored heartbeat (the evaluator passes the one it read before it ran), ``latest_ms``
    to the newest sample's time as stored (None: there is no sample; a page that has read
    the latest sample passes its time)."""
    now = now or timezone.now()
    if evaluation is None:
        evaluation = last_evaluation()
    now_ms = now.timestamp() * 1000
    sample_every = float(settings.TIDEMARK_SAMPLE_INTERVAL_S)
    evaluate_every = evaluation_interval_s()
    reasons: list[str] = []
    ages: list[float] = []
    latest = (
        StoreSample.objects.order_by("-ts_ms").values_list("ts_ms", flat=True).first()
        if latest_ms is UNREAD
        else latest_ms
    )
    if latest is not None:
        age = max(0.0, (now_ms - latest) / 1000)
        ages.append(age)
        if age > STALE_FACTOR * sample_every:
            reasons.append(
                f"the newest sample is {format_seconds(age)} old (one is taken every "
                f"{format_seconds(sample_every)})"
            )
    elif evaluation is not None:
        waiting = (now - evaluation.first_at).total_seconds()
        if waiting > STALE_FACTOR * sample_every:
            ages.append(waiting)
            reasons.append(f"no sample was written in {format_seconds(waiting)}")
    if evaluation is not None:
        age = max(0.0, (now - evaluation.ok_at).total_seconds())
        ages.append(age)
        if age > STALE_FACTOR * evaluate_every:
            reasons.append(
                f"the last alert evaluation that succeeded was {format_seconds(age)} ago (one "
                f"runs every {format_seconds(evaluate_every)})"
            )
    elif latest is not None and (now_ms - latest) / 1000 < STALE_FACTOR * sample_every:
        pass  # sampling works; the first evaluation is due
    elif latest is not None:
        reasons.append("alerts were never evaluated")
    return Monitoring(
        stale=bool(reasons),
        age_s=max(ages) if ages else None,
        reason="; ".join(reasons) if reasons else "sampling and alert evaluation are running",
    )
