"""A pattern put in the database by hand (or by an older release) that RE2 refuses: the
rule's evaluation fails, says why in RE2's words, and shows it on the page and /metrics,
instead of matching nothing without a word."""

from __future__ import annotations

import html

import pytest

from console.alerts.models import AlertEvent, AlertRule
from console.alerts.patterns import BrokenPattern, compile_pattern
from console.monitoring.prometheus import render
from tests.alerts.alerttools import at, evaluate, group, make_rule

pytestmark = pytest.mark.django_db


def broken_rule(**patterns) -> AlertRule:
    rule = make_rule(name="orders lag", scope=AlertRule.SCOPE_MATCH, group_pattern="orders")
    AlertRule.objects.filter(pk=rule.pk).update(**patterns)  # past the form's check
    return rule


def test_re2s_own_reason_is_shown():
    with pytest.raises(BrokenPattern) as refused:
        compile_pattern("orders-(eu")
    assert "missing ): orders-(eu" in str(refused.value)
    assert "back-reference" not in str(refused.value)


def test_a_back_reference_is_refused_with_re2s_reason_and_what_rE2_lacks():
    with pytest.raises(BrokenPattern) as refused:
        compile_pattern(r"(a)\1")
    assert r"invalid escape sequence: \1" in str(refused.value)
    assert "no back-references" in str(refused.value)


def test_a_broken_stored_group_pattern_fails_the_rules_evaluation():
    rule = broken_rule(group_pattern="orders-(eu")

    changes = evaluate([group("orders-eu", lag=500)], None, at(0))

    assert changes.rule_failures == 1
    rule.refresh_from_db()
    assert "group pattern" in rule.failure and "missing )" in rule.failure
    assert rule.failed_at == at(0)
    assert not AlertEvent.objects.exists()


def test_a_broken_pattern_fails_the_evaluation_even_with_no_group_to_match():
    rule = broken_rule(topic_pattern="(?=x)")

    changes = evaluate([], None, at(0))

    assert changes.rule_failures == 1
    rule.refresh_from_db()
    assert "invalid perl operator" in rule.failure


def test_a_rule_mended_evaluates_again_and_forgets_its_failure():
    rule = broken_rule(group_pattern="orders-(eu")
    evaluate([group("orders-eu", lag=500)], None, at(0))
    AlertRule.objects.filter(pk=rule.pk).update(group_pattern="orders-.*")

    changes = evaluate([group("orders-eu", lag=500)], None, at(10))

    assert changes.rule_failures == 0
    rule.refresh_from_db()
    assert (rule.failure, rule.failed_at) == ("", None)
    assert AlertEvent.objects.get().state == AlertEvent.FIRING


def test_the_alerts_page_shows_the_failing_rule_and_why(as_viewer):
    broken_rule(group_pattern="orders-(eu")
    evaluate([group("orders-eu", lag=500)], None, at(0))

    text = html.unescape(as_viewer.get("/alerts/").content.decode())

    assert "evaluation failed" in text
    assert "missing ): orders-(eu" in text


def test_metrics_show_the_failing_rule():
    broken_rule(group_pattern="orders-(eu")
    evaluate([group("orders-eu", lag=500)], None, at(0))

    text = render().decode()

    assert 'tidemark_alert_rule_failing{rule="orders lag"} 1.0' in text
