"""Each alert rule's evaluation time is kept for /metrics (the web process reads what the
worker measured)."""

from __future__ import annotations

import pytest

from console.alerts.evaluate import evaluate, rule_timings
from console.alerts.models import AlertRule

pytestmark = pytest.mark.django_db


def test_each_rule_evaluated_has_its_latest_evaluation_time():
    lag = AlertRule.objects.create(name="lag", kind=AlertRule.LAG_MESSAGES, threshold=10)
    status = AlertRule.objects.create(name="err", kind=AlertRule.STATUS_ERR)

    evaluate([], None)
    evaluate([], None)

    timings = rule_timings()
    assert [(t.rule_id, t.rule_name, t.kind) for t in timings] == [
        (status.pk, "err", AlertRule.STATUS_ERR),
        (lag.pk, "lag", AlertRule.LAG_MESSAGES),
    ]
    assert all(t.seconds >= 0 for t in timings)


def test_a_rule_disabled_since_has_no_evaluation_time():
    lag = AlertRule.objects.create(name="lag", kind=AlertRule.LAG_MESSAGES, threshold=10)
    evaluate([], None)
    AlertRule.objects.filter(pk=lag.pk).update(enabled=False)

    evaluate([], None)

    assert rule_timings() == []
