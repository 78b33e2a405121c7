"""What the alerts page and mail say of queues and long names: no "None" for a queue never
committed on, and a 100-character rule name does not widen the tables past the window."""

from __future__ import annotations

import html

import pytest
from django.utils import timezone

from console.alerts.models import AlertRule
from console.alerts.render import queue_text
from console.monitoring.metrics import OK
from tests.alerts.alerttools import evaluate, group, make_rule, queue

pytestmark = pytest.mark.django_db

NEVER_COMMITTED = queue("ux", "ux-orders", 7, lag=3, status=None)


def never_committed_group():
    return group("ux", lag=3, queues=[NEVER_COMMITTED], status=OK)


def test_a_queue_never_committed_on_says_so():
    row = {"topic": "ux-orders", "queue": 7, "lag": 3, "lag_seconds": None, "status": None}
    assert queue_text(row) == "ux-orders/7: lag 3, not committed on yet"


def test_a_queue_line_gives_its_status_and_how_far_behind():
    row = {"topic": "orders", "queue": 0, "lag": 50, "lag_seconds": 90, "status": "STALL"}
    assert queue_text(row) == "orders/0: lag 50, 90 s behind, STALL"


def test_the_page_never_shows_none_for_a_queue_never_committed_on(as_viewer):
    make_rule(AlertRule.LAG_MESSAGES, 1, name="ux lag", recipients="")
    evaluate([never_committed_group()], None, timezone.now())

    text = html.unescape(as_viewer.get("/alerts/").content.decode())

    assert "ux-orders/7: lag 3, not committed on yet" in text
    assert "None" not in text


def test_the_mail_never_shows_none_for_a_queue_never_committed_on(mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 1, name="ux lag")
    evaluate([never_committed_group()], None, timezone.now())

    (mail,) = mailoutbox
    assert "ux-orders/7: lag 3, not committed on yet" in mail.body
    assert "None" not in mail.body


def test_a_long_rule_name_is_shortened_on_the_page_with_the_whole_in_its_title(as_viewer):
    name = "orders lag of the european fulfilment pipeline " * 3
    name = name[:100]
    make_rule(AlertRule.LAG_MESSAGES, 100, name=name, recipients="")
    evaluate([group("billing", lag=500)], None, timezone.now())

    page = as_viewer.get("/alerts/").content.decode()

    assert f'title="{name}"' in page
    visible = html.unescape(page.replace(f'title="{name}"', ""))
    shown = [line for line in visible.splitlines() if "orders lag of the european" in line]
    assert shown and all(name not in line for line in shown if "tm-visually-hidden" not in line)
