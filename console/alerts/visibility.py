"""What of the alerts a user in scoped roles sees (console/accounts/permissions.py).

A user who may view every topic and group (the built-in roles) sees everything. Any other
user sees:

- the events about the groups they may view, and those about the store itself (a
  store-wide kind: disk use, the monitoring), as they see the store's disk use;
- the rules of a store-wide kind or of every group, and the rules matching regexes whose
  group regex matches a group they may view and whose topic regex matches a topic they may
  view (an empty regex: any);
- the notifications whose events they all see;
- the silences of every rule or of a rule they see, whose group regex matches a group
  they may view (or "store"/"monitoring") and whose topic regex a topic they may view.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from console.accounts.permissions import GROUP, TOPIC, viewable
from console.alerts.kinds import MONITORING_SUBJECT, STORE_SUBJECT
from console.alerts.models import AlertEvent, AlertRule
from console.alerts.patterns import BrokenPattern, pattern_matches
from console.core.store import get_store


def visible_events(user: Any, events: QuerySet) -> QuerySet:
    groups = viewable(user, GROUP)
    if groups is None:
        return events
    about_groups = events.exclude(kind__in=AlertRule.STORE_KINDS).order_by()
    subjects = [s for s in about_groups.values_list("subject", flat=True).distinct() if groups(s)]
    return events.filter(Q(kind__in=AlertRule.STORE_KINDS) | Q(subject__in=subjects))


def _matches_one(pattern: str, names: list[str]) -> bool:
    try:
        return not pattern or any(pattern_matches(pattern, name) for name in names)
    except BrokenPattern:
        return False


def _names(user: Any) -> tuple[list[str], list[str]] | None:
    """(the groups, the topics) the user may view; None: every one."""
    topics, groups = viewable(user, TOPIC), viewable(user, GROUP)
    if topics is None and groups is None:
        return None
    store = get_store()
    group_names = [name for name in store.groups() if groups is None or groups(name)]
    topic_names = [i.name for i in store.topics() if topics is None or topics(i.name)]
    return group_names, topic_names


def visible_rules(user: Any, rules: QuerySet) -> QuerySet:
    names = _names(user)
    if names is None:
        return rules
    group_names, topic_names = names
    matching = rules.filter(scope=AlertRule.SCOPE_MATCH).exclude(kind__in=AlertRule.STORE_KINDS)
    hidden = [
        rule.pk
        for rule in matching
        if not (
            _matches_one(rule.group_pattern, group_names)
            and _matches_one(rule.topic_pattern, topic_names)
        )
    ]
    return rules.exclude(pk__in=hidden)


def visible_notifications(user: Any, notifications: QuerySet) -> QuerySet:
    if viewable(user, GROUP) is None:
        return notifications
    events = AlertEvent.objects.all()
    hidden = events.exclude(pk__in=visible_events(user, events).values("pk"))
    return notifications.exclude(events__in=hidden)


def visible_silences(user: Any, silences: QuerySet) -> QuerySet:
    names = _names(user)
    if names is None:
        return silences
    group_names, topic_names = names
    subjects = [*group_names, STORE_SUBJECT, MONITORING_SUBJECT]
    rules = visible_rules(user, AlertRule.objects.all()).values_list("pk", flat=True)
    shown = set(rules)
    hidden = [
        silence.pk
        for silence in silences
        if (silence.rule_id is not None and silence.rule_id not in shown)
        or not _matches_one(silence.subject_pattern, subjects)
        or not _matches_one(silence.topic_pattern, topic_names)
    ]
    return silences.exclude(pk__in=hidden)
