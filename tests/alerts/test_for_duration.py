"""A rule fires only once its condition has held for the for-duration."""

import pytest

from console.alerts.models import AlertEvent, AlertRule
from tests.alerts.alerttools import at, evaluate, group, make_rule

pytestmark = pytest.mark.django_db

LAGGING, CAUGHT_UP = [group(lag=500)], [group(lag=0)]


@pytest.fixture
def rule():
    return make_rule(AlertRule.LAG_MESSAGES, 100, for_seconds=300)


def states() -> list[str]:
    return list(AlertEvent.objects.order_by("id").values_list("state", flat=True))


def test_condition_first_seen_is_pending(rule, mailoutbox):
    evaluate(LAGGING, None, at(0))
    assert states() == [AlertEvent.PENDING]
    assert mailoutbox == []


def test_still_pending_before_the_duration(rule, mailoutbox):
    evaluate(LAGGING, None, at(0))
    evaluate(LAGGING, None, at(299))
    assert states() == [AlertEvent.PENDING]
    assert mailoutbox == []


def test_fires_once_the_duration_has_passed(rule, mailoutbox):
    evaluate(LAGGING, None, at(0))
    evaluate(LAGGING, None, at(300))
    event = AlertEvent.objects.get()
    assert event.state == AlertEvent.FIRING
    assert (event.since, event.started_at) == (at(0), at(300))
    assert len(mailoutbox) == 1


def test_pending_that_clears_leaves_no_event(rule, mailoutbox):
    evaluate(LAGGING, None, at(0))
    evaluate(CAUGHT_UP, None, at(100))
    assert states() == []
    assert mailoutbox == []


def test_a_break_in_the_condition_restarts_the_clock(rule):
    evaluate(LAGGING, None, at(0))
    evaluate(CAUGHT_UP, None, at(100))
    evaluate(LAGGING, None, at(200))
    evaluate(LAGGING, None, at(400))
    assert states() == [AlertEvent.PENDING]
    evaluate(LAGGING, None, at(500))
    assert states() == [AlertEvent.FIRING]


def test_changes_report_each_transition(rule):
    first = evaluate(LAGGING, None, at(0))
    second = evaluate(LAGGING, None, at(300))
    assert [(c.subject, c.before, c.after) for c in first] == [("billing", None, "pending")]
    assert [(c.subject, c.before, c.after) for c in second] == [("billing", "pending", "firing")]
