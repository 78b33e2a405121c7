"""The eye outside the pipeline: what /metrics says of delivery, the always-firing heartbeat
webhook an external dead-man service watches (Alertmanager's Watchdog), and the alert
tasks' own Celery queue."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client.parser import text_string_to_metric_families

from console.alerts import freshness, heartbeat
from console.alerts.models import AlertRule, Notification
from console.celery import app as celery_app
from console.monitoring.prometheus import render
from tests.alerts.alerttools import T0, at, group, make_rule
from tests.alerts.alerttools import evaluate as decide_and_send

pytestmark = pytest.mark.django_db


def samples() -> dict[str, list]:
    found: dict[str, list] = {}
    for family in text_string_to_metric_families(render().decode()):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def value(found: dict, name: str, **labels: str) -> float:
    (hit,) = [
        v for got, v in found.get(name, []) if all(got.get(k) == w for k, w in labels.items())
    ]
    return hit


class Hook(BaseHTTPRequestHandler):
    bodies: list[dict] = []
    status = 200

    def do_POST(self):  # noqa: N802 - http.server's name
        Hook.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(Hook.status)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def hook(settings):
    Hook.bodies, Hook.status = [], 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.TIDEMARK_HEARTBEAT_URL = f"http://127.0.0.1:{server.server_address[1]}/watchdog"
    yield Hook
    server.shutdown()
    server.server_close()
    thread.join()


# ---------------------------------------------------------------------------- /metrics


def test_metrics_count_notifications_by_state_and_channel(mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag")
    decide_and_send([group("billing", lag=500)], None, at(0))
    decide_and_send([group("billing", lag=0)], None, at(10))

    found = samples()

    assert value(found, "tidemark_alert_notifications", state="sent", channel="email") == 2
    assert value(found, "tidemark_alert_notifications", state="pending", channel="email") == 0
    assert value(found, "tidemark_alert_notifications", state="failed", channel="webhook") == 0


def test_metrics_give_the_last_successful_delivery_per_channel(mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag")
    decide_and_send([group("billing", lag=500)], None, at(0))

    found = samples()

    sent = value(found, "tidemark_alert_last_delivery_timestamp_seconds", channel="email")
    assert sent == at(0).timestamp()
    assert "webhook" not in {
        labels["channel"] for labels, _ in found["tidemark_alert_last_delivery_timestamp_seconds"]
    }


def test_metrics_give_the_age_of_the_oldest_undelivered_notification(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 1
    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag")
    decide_and_send([group("billing", lag=500)], None, at(0))  # refused: pending

    found = samples()

    oldest = value(found, "tidemark_alert_oldest_undelivered_timestamp_seconds", channel="email")
    assert oldest == at(0).timestamp()


def test_metrics_count_firing_events_per_rule():
    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag", recipients="")
    decide_and_send([group("billing", lag=500), group("ledger", lag=500)], None, at(0))

    assert value(samples(), "tidemark_alerts_firing", rule="billing lag") == 2


def test_metrics_give_each_rules_latest_evaluation_time():
    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag", recipients="")
    decide_and_send([group("billing", lag=500)], None, at(0))

    took = value(
        samples(), "tidemark_alert_rule_evaluation_seconds", rule="billing lag", kind="lag_messages"
    )

    assert took >= 0


# --------------------------------------------------------------------------- heartbeat


def test_the_heartbeat_posts_an_always_firing_watchdog_alert(hook):
    freshness.record_evaluation(T0)

    assert heartbeat.beat(at(5)) == "sent"

    (body,) = hook.bodies
    assert (body["version"], body["status"]) == ("4", "firing")
    (alert,) = body["alerts"]
    assert alert["labels"]["alertname"] == "Watchdog"
    assert alert["status"] == "firing"
    assert value(samples(), "tidemark_alert_heartbeat_timestamp_seconds") == at(5).timestamp()


def test_the_heartbeat_stops_when_the_alert_evaluation_stops(hook):
    freshness.record_evaluation(T0)

    outcome = heartbeat.beat(T0 + timedelta(minutes=10))

    assert outcome.startswith("not sent: the monitoring is stale")
    assert hook.bodies == []


def test_without_a_heartbeat_url_nothing_is_posted(settings):
    settings.TIDEMARK_HEARTBEAT_URL = ""
    assert heartbeat.beat(at(0)) == "not sent: TIDEMARK_HEARTBEAT_URL is not set"


def test_a_refused_heartbeat_raises_so_the_task_shows_the_failure(hook):
    hook.status = 500
    freshness.record_evaluation(T0)

    with pytest.raises(heartbeat.HeartbeatFailed, match="HTTP 500"):
        heartbeat.beat(at(5))


def test_beat_posts_the_heartbeat_every_interval(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["alert-heartbeat"]
    assert entry["task"] == "console.alerts.tasks.send_heartbeat"
    assert entry["schedule"] == settings.TIDEMARK_HEARTBEAT_INTERVAL_S


# ------------------------------------------------------------------------------ queues


@pytest.mark.parametrize(
    "task",
    [
        "console.alerts.tasks.evaluate_alerts",
        "console.alerts.tasks.send_notification",
        "console.alerts.tasks.send_heartbeat",
    ],
)
def test_alert_tasks_go_to_their_own_queue(task):
    route = celery_app.amqp.router.route({}, task)
    assert route["queue"].name == "alerts"


def test_the_store_upkeep_stays_on_the_default_queue():
    route = celery_app.amqp.router.route({}, "console.monitoring.tasks.topic_statistics")
    assert route["queue"].name == "celery"


def test_a_plain_worker_consumes_both_queues():
    assert {q.name for q in celery_app.amqp.queues.values()} >= {"celery", "alerts"}


def test_the_delivery_metrics_exist_before_anything_was_sent():
    found = samples()
    assert value(found, "tidemark_alert_notifications", state="sent", channel="email") == 0
    assert Notification.objects.count() == 0


def test_the_heartbeat_task_is_tracked_so_tasks_shows_it_ran(redis_db, settings):
    from console.alerts.tasks import HEARTBEAT_TASK, send_heartbeat
    from console.background.health import task_health

    settings.TIDEMARK_HEARTBEAT_URL = ""
    send_heartbeat()

    (line,) = [line for line in task_health() if line.name == "alert-heartbeat"]
    assert line.row is not None and line.row.name == HEARTBEAT_TASK
    assert not line.stale
