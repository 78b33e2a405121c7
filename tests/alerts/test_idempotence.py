"""Evaluating again changes nothing; two evaluations at once fire and mail once."""

import pytest
from django.db import IntegrityError, transaction

from console.alerts import evaluate as evaluate_module
from console.alerts.models import AlertEvent, AlertRule
from tests.alerts.alerttools import at, evaluate, group, make_rule

pytestmark = pytest.mark.django_db

LAGGING, CAUGHT_UP = [group(lag=500)], [group(lag=0)]


def snapshot():
    return list(AlertEvent.objects.order_by("id").values())


def test_second_evaluation_at_the_same_time_changes_nothing(mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100)
    assert evaluate(LAGGING, None, at(0))
    before = snapshot()
    assert evaluate(LAGGING, None, at(0)) == []
    assert snapshot() == before
    assert len(mailoutbox) == 1


def test_second_resolution_at_the_same_time_changes_nothing(mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100)
    evaluate(LAGGING, None, at(0))
    evaluate(CAUGHT_UP, None, at(10))
    before = snapshot()
    assert evaluate(CAUGHT_UP, None, at(10)) == []
    assert snapshot() == before
    assert len(mailoutbox) == 2


def test_second_pending_evaluation_changes_nothing():
    make_rule(AlertRule.LAG_MESSAGES, 100, for_seconds=60)
    evaluate(LAGGING, None, at(0))
    before = snapshot()
    assert evaluate(LAGGING, None, at(0)) == []
    assert snapshot() == before


def test_only_one_open_event_per_rule_and_subject():
    rule = make_rule(AlertRule.LAG_MESSAGES, 100)
    evaluate(LAGGING, None, at(0))
    with pytest.raises(IntegrityError), transaction.atomic():
        AlertEvent.objects.create(
            rule=rule,
            rule_name=rule.name,
            kind=rule.kind,
            subject="billing",
            state=AlertEvent.PENDING,
            since=at(5),
        )


def race(monkeypatch, groups, now):
    """Run a whole second evaluation after the first has read the open events (so the first
    works on a stale view), as if both ran at once."""
    original = evaluate_module._open_events
    other = []

    def read_then_let_the_other_run(rule):
        seen = original(rule)
        monkeypatch.setattr(evaluate_module, "_open_events", original)
        other.append(evaluate(groups, None, now))
        return seen

    monkeypatch.setattr(evaluate_module, "_open_events", read_then_let_the_other_run)
    first = evaluate(groups, None, now)
    return first, other[0]


def test_two_evaluations_at_once_open_one_event_and_send_one_email(monkeypatch, mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100)
    first, second = race(monkeypatch, LAGGING, at(0))
    assert AlertEvent.objects.count() == 1
    assert len(first) + len(second) == 1
    assert len(mailoutbox) == 1


def test_two_evaluations_at_once_fire_a_pending_event_once(monkeypatch, mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100, for_seconds=60)
    evaluate(LAGGING, None, at(0))
    first, second = race(monkeypatch, LAGGING, at(60))
    assert [(c.before, c.after) for c in first + second] == [("pending", "firing")]
    assert AlertEvent.objects.get().state == AlertEvent.FIRING
    assert len(mailoutbox) == 1


def test_two_evaluations_at_once_resolve_once(monkeypatch, mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100)
    evaluate(LAGGING, None, at(0))
    first, second = race(monkeypatch, CAUGHT_UP, at(10))
    assert [(c.before, c.after) for c in first + second] == [("firing", "resolved")]
    assert [m.subject.split(":")[0] for m in mailoutbox] == [
        "[Tidemark] FIRING",
        "[Tidemark] RESOLVED",
    ]


def test_two_evaluations_at_once_send_one_reminder(monkeypatch, mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100, repeat_seconds=600)
    evaluate(LAGGING, None, at(0))
    race(monkeypatch, LAGGING, at(600))
    assert len(mailoutbox) == 2
