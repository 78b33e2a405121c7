"""Delivery under failures, against real servers on loopback and the engine's clock: a mail
server (aiosmtpd) and a webhook (http.server) that refuse for a while, an evaluation every
10 s and the worker retrying what is due (alerttools.timeline).

Case 1: a retried FIRING must never arrive after its RESOLVED. Case 2: a page is never
dropped while its alert fires, and a RESOLVED goes only where the FIRING went.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller

from console.alerts.evaluate import evaluate
from console.alerts.models import AlertRule, Notification
from tests.alerts.alerttools import at, group, make_rule, run_worker, timeline
from tests.alerts.test_delivery import free_port

pytestmark = pytest.mark.django_db


class ClockedMailServer:
    """An SMTP handler that answers 451 while ``now`` is before ``down_until`` (the test
    moves ``now``), and keeps the kind of each subject it took (FIRING, RESOLVED...)."""

    def __init__(self) -> None:
        self.down_until = 0.0
        self.now = 0.0
        self.subjects: list[str] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
        if self.now < self.down_until:
            return "451 4.3.0 Mail server busy, try again later"
        text = envelope.content.decode("utf-8", "replace")
        subject = next(line for line in text.splitlines() if line.startswith("Subject: "))
        self.subjects.append(subject.removeprefix("Subject: [Tidemark] ").split(":")[0])
        return "250 OK"


@pytest.fixture
def mail(settings):
    handler = ClockedMailServer()
    controller = Controller(handler, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.EMAIL_TIMEOUT = 5
    yield handler
    controller.stop()


class ClockedHook(BaseHTTPRequestHandler):
    """A webhook that answers 503 before ``down_until``, and keeps each payload's status."""

    down_until = 0.0
    now = 0.0
    statuses: list[str] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if ClockedHook.now < ClockedHook.down_until:
            self.send_response(503)
        else:
            ClockedHook.statuses.append(body["alerts"][0]["status"])
            self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def hook():
    ClockedHook.down_until, ClockedHook.now, ClockedHook.statuses = 0.0, 0.0, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), ClockedHook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()
    thread.join()


def clocked(servers, lagging_until: int, until: int) -> None:
    """``timeline``, telling each fake server the time first."""

    def tick(second: int) -> None:
        for server in servers:
            server.now = second

    timeline(lagging_until, until, tick)


def damped_rule(**fields) -> AlertRule:
    """The defaults people get: keep firing 120 s, one state change per 300 s."""
    fields.setdefault("keep_firing_seconds", 120)
    fields.setdefault("group_interval_seconds", 300)
    return make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag", **fields)


def test_a_retried_firing_mail_never_arrives_after_its_resolution(mail):
    damped_rule()
    mail.down_until = 180  # 451 for 3 minutes; lag above the threshold for 1 minute

    clocked([mail], lagging_until=60, until=900)

    assert mail.subjects[-1:] != ["FIRING"]
    assert "RESOLVED" not in mail.subjects  # nobody was told it fired


def test_a_retried_firing_mail_is_followed_by_its_resolution_when_it_got_through(mail):
    damped_rule()
    mail.down_until = 100

    clocked([mail], lagging_until=200, until=900)

    assert mail.subjects == ["FIRING", "RESOLVED"]


def test_a_retried_firing_webhook_never_arrives_after_its_resolution(hook):
    damped_rule(recipients="", webhook_url=hook)
    ClockedHook.down_until = 180

    clocked([ClockedHook], lagging_until=60, until=900)

    assert ClockedHook.statuses[-1:] != ["firing"]
    assert "resolved" not in ClockedHook.statuses


def test_a_firing_is_delivered_however_long_the_mail_server_is_down(mail, settings):
    settings.TIDEMARK_ALERT_MAX_ATTEMPTS = 8
    damped_rule(repeat_seconds=3600)
    mail.down_until = 25 * 60

    clocked([mail], lagging_until=2 * 3600, until=25 * 60 + 700)

    assert mail.subjects == ["FIRING"]
    assert not Notification.objects.filter(state=Notification.FAILED).exists()


def test_with_no_reminders_a_firing_is_still_sent_once_and_then_its_resolution(mail):
    damped_rule(repeat_seconds=0)
    mail.down_until = 25 * 60

    clocked([mail], lagging_until=3600, until=3600 + 700)

    assert mail.subjects == ["FIRING", "RESOLVED"]


def test_a_resolution_goes_only_where_the_firing_was_delivered(mail, hook):
    damped_rule(repeat_seconds=0, webhook_url=hook)
    mail.down_until = 1500  # the mail server is down while it fires, and up after
    ClockedHook.down_until = 0

    clocked([mail, ClockedHook], lagging_until=600, until=2400)

    assert ClockedHook.statuses == ["firing", "resolved"]
    assert mail.subjects == []


def test_a_newer_notification_supersedes_the_older_one_waiting_for_a_retry(mail):
    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag")
    mail.down_until = 15

    first = evaluate([group("billing", lag=500)], None, at(0)).notifications
    run_worker(at(0))  # refused: waits for its retry
    second = evaluate([group("billing", lag=500), group("ledger", lag=500)], None, at(10))
    mail.now = 20
    run_worker(at(20))

    older, newer = (
        Notification.objects.get(pk=first[0]),
        Notification.objects.get(pk=second.notifications[0]),
    )
    assert (older.state, older.superseded_by_id) == (Notification.SUPERSEDED, newer.pk)
    assert newer.state == Notification.SENT
    assert mail.subjects == ["FIRING"]
    assert "(2 subjects)" in newer.headline


def test_a_notification_of_a_deleted_rule_is_not_sent(mail):
    rule = make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag")
    mail.down_until = 15
    (pk,) = evaluate([group("billing", lag=500)], None, at(0)).notifications
    run_worker(at(0))
    rule.delete()

    mail.now = 20
    run_worker(at(20))

    row = Notification.objects.get(pk=pk)
    assert (row.state, row.last_error) == (
        Notification.SUPERSEDED,
        "not sent: its rule was deleted",
    )
    assert mail.subjects == []
