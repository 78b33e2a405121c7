"""The built-in "monitoring is stale" alert, and the dashboard's banner."""

from __future__ import annotations

from datetime import timedelta

import pytest

from console.alerts.freshness import monitoring_health, record_evaluation
from console.alerts.models import AlertEvent, AlertRule, Heartbeat
from tests.alerts.alerttools import RECIPIENT, T0, at, evaluate, make_rule

pytestmark = pytest.mark.django_db


@pytest.fixture
def sampled_at(store):
    """Write one (empty) sample at a given time: ``sampled_at(seconds)``."""
    from console.monitoring.sampler import take_sample

    def take(seconds: float):
        report = take_sample(int(at(seconds).timestamp() * 1000))
        assert report.written, report.skipped

    return take


def test_sampling_that_stopped_fires_the_built_in_alert_to_every_rules_recipients(
    sampled_at, mailoutbox
):
    make_rule(AlertRule.LAG_MESSAGES, 100, recipients=RECIPIENT)
    sampled_at(0)
    evaluate([], None, at(5), monitoring_health(at(5)))
    assert not AlertEvent.objects.exists()

    evaluate([], None, at(60), monitoring_health(at(60)))  # no sample for 60 s (6 intervals)

    event = AlertEvent.objects.get(subject="monitoring")
    assert (event.rule.kind, event.state) == (AlertRule.MONITORING_STALE, AlertEvent.FIRING)
    (mail,) = mailoutbox
    assert mail.subject == "[Tidemark] FIRING: Monitoring is stale (1 subject)"
    assert mail.to == [RECIPIENT]
    assert "the newest sample is 60 s old" in mail.body


def test_evaluation_that_failed_for_a_while_fires_when_it_works_again(sampled_at):
    sampled_at(100)
    Heartbeat.objects.create(name="alerts.evaluate", first_at=T0, ok_at=at(0))

    health = monitoring_health(at(105))

    assert health.stale
    assert "the last alert evaluation that succeeded was 105 s ago" in health.reason


def test_fresh_monitoring_is_not_stale(sampled_at):
    sampled_at(0)
    record_evaluation(at(1))

    assert not monitoring_health(at(5)).stale


def test_the_dashboard_says_when_the_monitoring_is_stale(as_viewer, store, sampled_at):
    sampled_at(0)
    record_evaluation(at(0))
    Heartbeat.objects.filter(name="alerts.evaluate").update(ok_at=T0 - timedelta(days=1))

    page = as_viewer.get("/").content.decode()

    assert "Monitoring is stale" in page
    assert "the last alert evaluation that succeeded was" in page
