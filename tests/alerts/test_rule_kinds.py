"""Every condition kind fires on hand-made metrics and resolves when they clear."""

import pytest

from console.alerts.models import AlertEvent, AlertRule
from console.monitoring.metrics import ERR, OK, WARN
from tests.alerts.alerttools import at, evaluate, group, make_rule, store

pytestmark = pytest.mark.django_db

FIRING, RESOLVED = AlertEvent.FIRING, AlertEvent.RESOLVED


def only_event() -> AlertEvent:
    (event,) = AlertEvent.objects.all()
    return event


def fire_then_resolve(firing_groups, clear_groups, firing_store=None, clear_store=None):
    evaluate(firing_groups, firing_store, at(0))
    fired = only_event()
    evaluate(clear_groups, clear_store, at(60))
    return fired, only_event()


def test_lag_messages_fires_above_threshold_and_resolves_below():
    make_rule(AlertRule.LAG_MESSAGES, 100)
    fired, resolved = fire_then_resolve([group(lag=500)], [group(lag=50)])
    assert (fired.state, fired.subject, fired.value) == (FIRING, "billing", 500)
    assert fired.started_at == at(0)
    assert (resolved.state, resolved.resolved_at) == (RESOLVED, at(60))


def test_lag_messages_at_the_threshold_does_not_fire():
    make_rule(AlertRule.LAG_MESSAGES, 100)
    evaluate([group(lag=100)], None, at(0))
    assert not AlertEvent.objects.exists()


def test_lag_seconds_fires_and_resolves():
    make_rule(AlertRule.LAG_SECONDS, 60)
    fired, resolved = fire_then_resolve(
        [group(lag=10, lag_seconds=300.0)], [group(lag=1, lag_seconds=5.0)]
    )
    assert (fired.state, fired.value) == (FIRING, 300.0)
    assert resolved.state == RESOLVED


def test_lag_seconds_unknown_does_not_fire():
    make_rule(AlertRule.LAG_SECONDS, 60)
    evaluate([group(lag=10, lag_seconds=None)], None, at(0))
    assert not AlertEvent.objects.exists()


def test_drain_time_fires_when_longer_and_resolves_when_shorter():
    make_rule(AlertRule.DRAIN_SECONDS, 600)
    fired, resolved = fire_then_resolve(
        [group(lag=900, drain_seconds=3600.0)], [group(lag=900, drain_seconds=100.0)]
    )
    assert (fired.state, fired.value) == (FIRING, 3600.0)
    assert resolved.state == RESOLVED


def test_not_draining_fires_whatever_the_threshold():
    make_rule(AlertRule.DRAIN_SECONDS, 10**9)
    evaluate([group(lag=900, drain_seconds=None)], None, at(0))
    event = only_event()
    assert event.state == FIRING
    assert event.value is None
    assert event.value_text == "not draining"


def test_drain_time_without_lag_does_not_fire():
    make_rule(AlertRule.DRAIN_SECONDS, 600)
    evaluate([group(lag=0, drain_seconds=None)], None, at(0))
    assert not AlertEvent.objects.exists()


def test_status_warn_fires_on_warn_and_resolves_on_ok():
    make_rule(AlertRule.STATUS_WARN, None)
    fired, resolved = fire_then_resolve([group(lag=5, status=WARN)], [group(lag=5, status=OK)])
    assert fired.state == FIRING
    assert fired.value_text == WARN
    assert resolved.state == RESOLVED


def test_status_warn_fires_on_err_too():
    make_rule(AlertRule.STATUS_WARN, None)
    evaluate([group(lag=5, status=ERR)], None, at(0))
    assert only_event().state == FIRING


def test_status_err_ignores_warn():
    make_rule(AlertRule.STATUS_ERR, None)
    evaluate([group(lag=5, status=WARN)], None, at(0))
    assert not AlertEvent.objects.exists()


def test_status_err_fires_on_err_and_resolves_on_warn():
    make_rule(AlertRule.STATUS_ERR, None)
    fired, resolved = fire_then_resolve([group(lag=5, status=ERR)], [group(lag=5, status=WARN)])
    assert (fired.state, fired.value_text) == (FIRING, ERR)
    assert resolved.state == RESOLVED


def test_expiry_risk_fires_within_the_hours_and_resolves_when_gone():
    make_rule(AlertRule.EXPIRY_HOURS, 6)
    fired, resolved = fire_then_resolve(
        [group(lag=900, expiry_risk_hours=2.0)], [group(lag=0, expiry_risk_hours=None)]
    )
    assert (fired.state, fired.value) == (FIRING, 2.0)
    assert resolved.state == RESOLVED


def test_expiry_risk_further_away_does_not_fire():
    make_rule(AlertRule.EXPIRY_HOURS, 6)
    evaluate([group(lag=900, expiry_risk_hours=12.0)], None, at(0))
    assert not AlertEvent.objects.exists()


def test_disk_use_fires_on_the_store_and_resolves():
    make_rule(AlertRule.DISK_RATIO, 0.8)
    fired, resolved = fire_then_resolve([], [], firing_store=store(0.9), clear_store=store(0.5))
    assert (fired.state, fired.subject, fired.value) == (FIRING, "store", 0.9)
    assert resolved.state == RESOLVED


def test_disk_rule_without_store_metrics_keeps_its_event():
    make_rule(AlertRule.DISK_RATIO, 0.8)
    evaluate([], store(0.9), at(0))
    changes = evaluate([], None, at(60))
    assert changes == []
    assert only_event().state == FIRING


def test_group_no_longer_reported_resolves():
    make_rule(AlertRule.LAG_MESSAGES, 100)
    evaluate([group(lag=500)], None, at(0))
    evaluate([], None, at(60))
    event = only_event()
    assert event.state == RESOLVED
    assert event.details["reason"] == "no longer reported"


def test_a_firing_event_keeps_the_latest_value():
    make_rule(AlertRule.LAG_MESSAGES, 100)
    evaluate([group(lag=500)], None, at(0))
    evaluate([group(lag=800)], None, at(10))
    event = only_event()
    assert (event.value, event.current_value) == (500, 800)


def test_disabled_rule_resolves_its_firing_event():
    rule = make_rule(AlertRule.LAG_MESSAGES, 100)
    evaluate([group(lag=500)], None, at(0))
    AlertRule.objects.filter(pk=rule.pk).update(enabled=False)
    evaluate([group(lag=500)], None, at(10))
    assert only_event().state == RESOLVED


def test_refiring_after_resolution_opens_a_new_event():
    make_rule(AlertRule.LAG_MESSAGES, 100)
    evaluate([group(lag=500)], None, at(0))
    evaluate([group(lag=0)], None, at(10))
    evaluate([group(lag=500)], None, at(20))
    states = list(AlertEvent.objects.order_by("id").values_list("state", flat=True))
    assert states == [RESOLVED, FIRING]
