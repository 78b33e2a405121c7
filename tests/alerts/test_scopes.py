"""Rule scopes: all groups, or regexes over group names and the topics they consume."""

import pytest

from console.alerts.models import AlertEvent, AlertRule
from console.monitoring.metrics import ERR, OK, STALL
from tests.alerts.alerttools import at, evaluate, group, make_rule, queue

pytestmark = pytest.mark.django_db


def firing_subjects() -> set[str]:
    return set(AlertEvent.objects.filter(state=AlertEvent.FIRING).values_list("subject", flat=True))


def matching_rule(kind=AlertRule.LAG_MESSAGES, threshold=100, **patterns):
    return make_rule(kind, threshold, scope=AlertRule.SCOPE_MATCH, **patterns)


def test_all_groups_scope_covers_every_group():
    make_rule(AlertRule.LAG_MESSAGES, 100)
    evaluate([group("a", lag=500), group("b", lag=500)], None, at(0))
    assert firing_subjects() == {"a", "b"}


def test_group_regex_selects_matching_groups():
    matching_rule(group_pattern=r"billing-.*")
    groups = [group("billing-eu", lag=500), group("billing-us", lag=500), group("ship", lag=500)]
    evaluate(groups, None, at(0))
    assert firing_subjects() == {"billing-eu", "billing-us"}


def test_group_regex_matches_the_whole_name():
    matching_rule(group_pattern="billing")
    evaluate([group("billing", lag=500), group("billing-old", lag=500)], None, at(0))
    assert firing_subjects() == {"billing"}


def test_topic_regex_selects_groups_consuming_a_matching_topic():
    matching_rule(topic_pattern=r"orders\..*")
    groups = [
        group("a", queues=[queue("a", "orders.eu", 0, lag=500)], lag=500),
        group("b", queues=[queue("b", "payments", 0, lag=500)], lag=500),
    ]
    evaluate(groups, None, at(0))
    assert firing_subjects() == {"a"}


def test_topic_regex_counts_only_the_matching_topics_lag():
    matching_rule(topic_pattern="orders")
    queues = [queue("a", "orders", 0, lag=50), queue("a", "audit", 0, lag=5000)]
    evaluate([group("a", lag=5050, queues=queues)], None, at(0))
    assert firing_subjects() == set()


def test_topic_regex_takes_the_matching_topics_status():
    matching_rule(AlertRule.STATUS_ERR, None, topic_pattern="orders")
    queues = [queue("a", "orders", 0, status=OK), queue("a", "audit", 0, lag=5, status=STALL)]
    evaluate([group("a", lag=5, status=ERR, queues=queues)], None, at(0))
    assert firing_subjects() == set()


def test_group_and_topic_regexes_both_apply():
    matching_rule(group_pattern="a|b", topic_pattern="orders")
    groups = [
        group("a", queues=[queue("a", "orders", 0, lag=500)], lag=500),
        group("b", queues=[queue("b", "audit", 0, lag=500)], lag=500),
        group("c", queues=[queue("c", "orders", 0, lag=500)], lag=500),
    ]
    evaluate(groups, None, at(0))
    assert firing_subjects() == {"a"}


def test_narrowing_the_scope_resolves_events_outside_it():
    rule = make_rule(AlertRule.LAG_MESSAGES, 100)
    groups = [group("a", lag=500), group("b", lag=500)]
    evaluate(groups, None, at(0))
    AlertRule.objects.filter(pk=rule.pk).update(scope=AlertRule.SCOPE_MATCH, group_pattern="a")
    evaluate(groups, None, at(10))
    assert firing_subjects() == {"a"}
    assert AlertEvent.objects.get(subject="b").state == AlertEvent.RESOLVED


def test_offending_queues_are_kept_in_the_details():
    make_rule(AlertRule.LAG_MESSAGES, 100)
    queues = [queue("a", "orders", 0, lag=0), queue("a", "orders", 1, lag=300)]
    evaluate([group("a", lag=300, queues=queues)], None, at(0))
    details = AlertEvent.objects.get().details
    assert [(q["topic"], q["queue"], q["lag"]) for q in details["queues"]] == [("orders", 1, 300)]
