"""The heartbeat: an always-firing alert POSTed to ``TIDEMARK_HEARTBEAT_URL`` every
``TIDEMARK_HEARTBEAT_INTERVAL_S`` (beat entry ``alert-heartbeat``), for an external
dead-man service (healthchecks.io, Dead Man's Snitch, PagerDuty's heartbeats...) that pages
when it stops arriving. Alertmanager's Watchdog pattern: a stopped beat, a worker not
consuming the alerts queue, a dead Redis or a stale alert evaluation all end the heartbeat,
and the silence is what the outside service alerts on.

The body is Alertmanager's webhook (version 4) with one firing alert named ``Watchdog``.
It is sent only while the monitoring is fresh (console/alerts/freshness.py): monitoring
that stopped must not keep saying it is alive.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.utils import timezone

from console.alerts import freshness, notify
from console.alerts.channels import post_json
from console.alerts.models import Heartbeat
from console.alerts.render import console_url, iso

NAME = "alerts.heartbeat"
DEFAULT_INTERVAL_S = 60


class HeartbeatFailed(Exception):
    """The heartbeat's receiver refused it or could not be reached."""


def interval_s() -> int:
    return int(getattr(settings, "TIDEMARK_HEARTBEAT_INTERVAL_S", DEFAULT_INTERVAL_S))


def last_sent() -> Heartbeat | None:
    return Heartbeat.objects.filter(name=NAME).first()


def payload(started: datetime) -> dict:
    """Alertmanager's webhook body with the one always-firing Watchdog alert."""
    labels = {"alertname": "Watchdog", "severity": "none", "service": "tidemark"}
    return {
        "version": "4",
        "groupKey": '{}:{alertname="Watchdog"}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "heartbeat",
        "groupLabels": {"alertname": "Watchdog"},
        "commonLabels": labels,
        "commonAnnotations": {
            "summary": "Tidemark's alerting works: this alert always fires. Page when it "
            "stops arriving."
        },
        "externalURL": console_url("/"),
        "alerts": [
            {
                "status": "firing",
                "labels": labels,
                "annotations": {"summary": "Tidemark's alerting pipeline is alive"},
                "startsAt": iso(started),
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": console_url("/alerts/"),
                "fingerprint": "tidemark-watchdog",
            }
        ],
    }


def beat(now: datetime | None = None) -> str:
    """POST the heartbeat if it is configured and the monitoring is fresh: "sent", or
    "not sent: <why>". Raises HeartbeatFailed when the receiver refused it."""
    now = now or timezone.now()
    url = getattr(settings, "TIDEMARK_HEARTBEAT_URL", "")
    if not url:
        return "not sent: TIDEMARK_HEARTBEAT_URL is not set"
    health = freshness.monitoring_health(now)
    if health.stale:
        return f"not sent: the monitoring is stale ({health.reason})"
    row = last_sent()
    try:
        post_json(url, payload(row.first_at if row else now))
    except Exception as error:
        raise HeartbeatFailed(f"the heartbeat was not taken: {notify.error_text(error)}") from None
    if not Heartbeat.objects.filter(name=NAME).update(ok_at=now):
        Heartbeat.objects.get_or_create(name=NAME, defaults={"first_at": now, "ok_at": now})
    return "sent"
