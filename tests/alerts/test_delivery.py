"""Delivery against real servers on loopback: an SMTP server (aiosmtpd) that refuses and
then accepts, and a webhook receiver (http.server) that fails and then takes the JSON.
Each is started and stopped by the test."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller

from console.alerts import compose, notify
from console.alerts.channels import CHANNELS
from console.alerts.evaluate import evaluate as decide
from console.alerts.models import AlertEvent, AlertRule, ChannelLog, Notification
from tests.alerts.alerttools import at, evaluate, group, make_rule

pytestmark = pytest.mark.django_db

LAGGING, CAUGHT_UP = [group(lag=500)], [group(lag=0)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RefusingThenAccepting:
    """An SMTP handler: answers 451 to the first ``refusals`` messages, then takes them."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.received: list[str] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
        if self.refusals > 0:
            self.refusals -= 1
            return "451 4.3.0 Mail server busy, try again later"
        self.received.append(envelope.content.decode("utf-8", "replace"))
        return "250 OK"


@pytest.fixture
def smtp(settings):
    handler = RefusingThenAccepting(refusals=1)
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", port, 5
    yield handler
    controller.stop()


def test_a_refused_firing_mail_is_retried_and_marked_notified_only_once_sent(smtp):
    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag")

    changes = evaluate(LAGGING, None, at(0))  # the server refuses

    (row,) = Notification.objects.all()
    assert (row.state, row.attempts) == (Notification.PENDING, 1)
    assert "451" in row.last_error and "busy" in row.last_error
    assert AlertEvent.objects.get().last_notified_at is None
    assert smtp.received == []

    notify.attempt(changes.notifications[0], at(60))  # the retry, a minute later

    row.refresh_from_db()
    assert (row.state, row.attempts, row.sent_at) == (Notification.SENT, 2, at(60))
    assert AlertEvent.objects.get().last_notified_at == at(60)
    (mail,) = smtp.received
    assert "Subject: [Tidemark] FIRING: billing lag (1 subject)" in mail


def test_a_sent_mail_is_recorded_with_whom_it_told_in_one_commit(smtp, monkeypatch):
    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag")
    changes = evaluate(LAGGING, None, at(0))  # refused: pending

    def crash(*args):
        raise RuntimeError("the worker died after the server took the mail")

    monkeypatch.setattr(compose, "record_told", crash)
    with pytest.raises(RuntimeError):
        notify.attempt(changes.notifications[0], at(60))

    (row,) = Notification.objects.all()
    assert row.state == Notification.SENDING  # not SENT: lost() makes it pending again
    assert AlertEvent.objects.get().last_notified_at is None


def test_no_reader_sees_a_sent_notification_before_its_events_are_notified(smtp):
    """Whoever reads the notification sent also reads its event notified and whom it
    told, even a reader of uncommitted rows (the suite's SQLite readers, lock_free_reads
    in tests/conftest.py, on which a worker test once read SENT beside a None
    last_notified_at). Each state the send's statements leave, as its own connection
    reads it, is checked."""
    from django.db import connection

    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag")
    changes = evaluate(LAGGING, None, at(0))  # refused: pending
    seen = []

    def look(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if not seen or seen[-1] is not None:  # not while looking
            seen.append(None)
            sent = Notification.objects.filter(state=Notification.SENT).exists()
            notified = AlertEvent.objects.filter(last_notified_at__isnull=False).exists()
            told = ChannelLog.objects.exists()
            seen[-1] = (sent, notified, told)
        return result

    with connection.execute_wrapper(look):
        notify.attempt(changes.notifications[0], at(60))

    assert seen[-1] == (True, True, True)
    assert [s for s in seen if s[0] and not (s[1] and s[2])] == []


def test_a_refused_resolved_mail_is_not_lost(smtp):
    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag")
    smtp.refusals = 0
    evaluate(LAGGING, None, at(0))
    smtp.refusals = 1

    changes = evaluate(CAUGHT_UP, None, at(10))  # refused
    notify.attempt(changes.notifications[0], at(30))

    assert [("RESOLVED" in m) for m in smtp.received] == [False, True]


def test_a_server_that_is_down_leaves_the_notification_pending_with_its_error(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 5
    make_rule(AlertRule.LAG_MESSAGES, 100)

    evaluate(LAGGING, None, at(0))

    row = Notification.objects.get()
    assert row.state == Notification.PENDING
    assert row.last_error.startswith("ConnectionRefusedError")
    assert row.next_attempt_at == at(0 + notify.backoff_s(1))


def test_the_last_attempt_of_a_resolution_gives_up(settings, smtp):
    settings.TIDEMARK_ALERT_MAX_ATTEMPTS = 2
    smtp.refusals = 0
    make_rule(AlertRule.LAG_MESSAGES, 100)
    evaluate(LAGGING, None, at(0))
    smtp.refusals = 5
    changes = evaluate(CAUGHT_UP, None, at(10))

    with pytest.raises(notify.DeliveryFailed) as failure:
        notify.attempt(changes.notifications[0], at(30))

    assert failure.value.final
    assert Notification.objects.get(pk=changes.notifications[0]).state == Notification.FAILED


def test_a_firing_is_retried_past_the_last_attempt(settings, smtp):
    settings.TIDEMARK_ALERT_MAX_ATTEMPTS = 2
    smtp.refusals = 5
    make_rule(AlertRule.LAG_MESSAGES, 100)
    changes = evaluate(LAGGING, None, at(0))

    with pytest.raises(notify.DeliveryFailed) as failure:
        notify.attempt(changes.notifications[0], at(20))

    assert not failure.value.final
    row = Notification.objects.get()
    assert (row.state, row.next_attempt_at) == (Notification.PENDING, at(20 + 20))


class Receiver(BaseHTTPRequestHandler):
    """Answers ``status`` (503) while ``failures`` last, then 200; keeps every body it took."""

    failures = 1
    status = 503
    bodies: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        status = Receiver.status if Receiver.failures > 0 else 200
        if Receiver.failures > 0:
            Receiver.failures -= 1
        else:
            Receiver.bodies.append(json.loads(body))
        self.send_response(status)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def webhook():
    Receiver.failures, Receiver.status, Receiver.bodies = 1, 503, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()
    thread.join()


def test_a_webhook_gets_an_alertmanager_payload_after_a_retry(webhook, mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag", recipients="", webhook_url=webhook)

    changes = evaluate(LAGGING, None, at(0))  # 503
    row = Notification.objects.get()
    assert (row.channel, row.state, row.last_error) == (
        Notification.WEBHOOK,
        Notification.PENDING,
        "the webhook answered HTTP 503 Service Unavailable",
    )
    notify.attempt(changes.notifications[0], at(20))

    (payload,) = Receiver.bodies
    assert (payload["version"], payload["status"], payload["receiver"]) == (
        "4",
        "firing",
        "billing lag",
    )
    (alert,) = payload["alerts"]
    assert alert["status"] == "firing"
    assert alert["labels"] == {
        "alertname": "billing lag",
        "kind": "lag_messages",
        "subject": "billing",
        "group": "billing",
    }
    assert alert["annotations"]["value"] == "500 messages"
    assert alert["startsAt"] == "2026-03-01T12:00:00Z"
    assert alert["endsAt"] == "0001-01-01T00:00:00Z"
    assert alert["generatorURL"].endswith("/groups/billing/")
    assert mailoutbox == []


def test_a_resolution_reaches_the_webhook_with_its_end(webhook):
    Receiver.failures = 0
    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag", recipients="", webhook_url=webhook)
    evaluate(LAGGING, None, at(0))
    evaluate(CAUGHT_UP, None, at(30))

    resolved = Receiver.bodies[1]
    assert resolved["status"] == "resolved"
    assert resolved["alerts"][0]["endsAt"] == "2026-03-01T12:00:30Z"


def _first_attempt_at_a_webhook(url: str) -> pytest.ExceptionInfo:
    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag", recipients="", webhook_url=url)
    changes = decide(LAGGING, None, at(0))
    with pytest.raises(notify.DeliveryFailed) as failure:
        notify.attempt(changes.notifications[0], at(0))
    return failure


@pytest.mark.parametrize(("status", "reason"), [(400, "Bad Request"), (404, "Not Found")])
def test_a_webhook_answering_4xx_is_not_retried_even_while_firing(webhook, status, reason):
    """As Alertmanager: a 4xx refuses the request itself; sending it again gets the same
    answer."""
    Receiver.status = status

    failure = _first_attempt_at_a_webhook(webhook)

    assert failure.value.final
    row = Notification.objects.get()
    assert (row.state, row.attempts, row.next_attempt_at) == (Notification.FAILED, 1, None)
    assert row.last_error == (
        f"the webhook answered HTTP {status} {reason}; not retried: sending it again would "
        "get the same answer"
    )


@pytest.mark.parametrize(
    ("status", "reason"), [(500, "Internal Server Error"), (502, "Bad Gateway")]
)
def test_a_webhook_answering_5xx_is_retried(webhook, status, reason):
    Receiver.status = status

    failure = _first_attempt_at_a_webhook(webhook)

    assert not failure.value.final
    row = Notification.objects.get()
    assert (row.state, row.next_attempt_at) == (Notification.PENDING, at(notify.backoff_s(1)))
    assert row.last_error == f"the webhook answered HTTP {status} {reason}"


def test_a_webhook_that_cannot_be_reached_is_retried():
    failure = _first_attempt_at_a_webhook(f"http://127.0.0.1:{free_port()}/hook")

    assert not failure.value.final
    row = Notification.objects.get()
    assert (row.state, row.next_attempt_at) == (Notification.PENDING, at(notify.backoff_s(1)))
    assert row.last_error.startswith("URLError: ") and "refused" in row.last_error


def test_every_kind_of_notification_has_its_channel():
    assert list(CHANNELS) == [kind for kind, _ in Notification.CHANNELS]
