"""Evaluate the alert rules on the current metrics: event state changes and their mail.

``evaluate(groups, store, now)`` takes the metrics as arguments (console/monitoring/metrics.py
is the contract), so it runs as well on hand-made metrics as on the sampler's. For each
enabled rule and each subject it covers (a group, or "store" for disk use):

- the condition starts holding: a ``pending`` event (or ``firing`` at once when the rule's
  for-duration is 0);
- it has held for the for-duration: ``pending`` → ``firing``;
- it clears (or the subject is no longer reported): ``firing`` → ``resolved``; a pending
  event that clears is deleted, it never fired.

Mail is grouped per rule: one email per rule and evaluation lists every subject that started
firing, every one that resolved, and every one still firing; while a rule keeps firing, a
reminder goes out once its repeat interval has passed since the last mail. A subject covered
by an active silence is left out of every mail (its events are still recorded); when the
silence ends, mail resumes with the next reminder. A resolution is mailed only when its
firing was.

Safe when two evaluations run at once (the task also holds a Redis lock, this does not rely
on it): each rule is evaluated in one transaction that first locks the rule's row
(``select_for_update``; SQLite's immediate transactions serialize writers anyway); a partial
unique constraint allows one open event per rule and subject, so a second insert fails and
is skipped; and every transition and every reminder claim is a conditional UPDATE
(``WHERE state = 'pending'`` …) whose row count says whether this evaluation made it. Only
the evaluation that made a transition mails it. Evaluating twice at the same ``now``
changes nothing the second time.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from console.alerts.models import (
    STORE_SUBJECT,
    AlertEvent,
    AlertRule,
    Silence,
    format_seconds,
    format_value,
    pattern_matches,
)
from console.monitoring.metrics import (
    GROUP_STATUSES,
    OK,
    QUEUE_STATUSES,
    GroupMetrics,
    QueueMetrics,
    StoreMetrics,
    group_status,
)

log = logging.getLogger(__name__)

#: At most this many queues are kept in an event's details (and listed in its mail).
MAX_DETAIL_QUEUES = 20

PENDING, FIRING, RESOLVED = AlertEvent.PENDING, AlertEvent.FIRING, AlertEvent.RESOLVED


@dataclass(frozen=True)
class Change:
    """One state change: ``before`` and ``after`` are None (no open event), "pending",
    "firing" or "resolved"."""

    rule_id: int | None
    rule: str
    subject: str
    before: str | None
    after: str | None
    value: float | None = None


class Changes(list):
    """The changes of one evaluation (a list of `Change`), with how many emails it sent."""

    emails: int = 0
    email_failures: int = 0
    rule_failures: int = 0


@dataclass(frozen=True)
class Reading:
    """A rule's condition on one subject: the value it compared and whether it holds."""

    subject: str
    value: float | None
    holds: bool
    details: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------- readings


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _topic_matches(rule: AlertRule, topic: str) -> bool:
    return pattern_matches(rule.topic_pattern, topic)


def _matching(rule: AlertRule) -> bool:
    return rule.scope == AlertRule.SCOPE_MATCH


def _in_scope(rule: AlertRule, group: GroupMetrics) -> bool:
    if not _matching(rule):
        return True
    if rule.group_pattern and not pattern_matches(rule.group_pattern, group.group):
        return False
    if rule.topic_pattern:
        topics = set(group.topics) | {queue.topic for queue in group.queues}
        return any(_topic_matches(rule, topic) for topic in topics)
    return True


def _queue_row(queue: QueueMetrics) -> dict[str, Any]:
    return {
        "topic": queue.topic,
        "queue": queue.queue,
        "lag": queue.lag,
        "lag_seconds": _finite(queue.lag_seconds),
        "status": queue.status,
    }


def _status_rank(status: str) -> int:
    return GROUP_STATUSES.index(status) if status in GROUP_STATUSES else 0


def _queue_severity(queue: QueueMetrics) -> int:
    return QUEUE_STATUSES.index(queue.status) if queue.status in QUEUE_STATUSES else 0


def _group_reading(rule: AlertRule, group: GroupMetrics) -> Reading:
    queues = list(group.queues)
    if _matching(rule) and rule.topic_pattern:
        queues = [queue for queue in queues if _topic_matches(rule, queue.topic)]
    # With a topic scope the queue-level figures are over the matching topics' queues only;
    # drain time and expiry risk exist for the whole group only.
    restricted = len(queues) != len(group.queues)
    if restricted:
        lag = sum(queue.lag for queue in queues)
        known = [s for s in (_finite(q.lag_seconds) for q in queues) if s is not None]
        lag_seconds = max(known) if known else None
        status = group_status([queue.status for queue in queues])
    else:
        lag = group.lag
        lag_seconds = _finite(group.lag_seconds)
        status = group.status
    threshold = rule.threshold if rule.threshold is not None else 0.0
    kind = rule.kind
    offending: list[QueueMetrics]
    if kind == AlertRule.LAG_MESSAGES:
        value: float | None = float(lag)
        holds = lag > threshold
        offending = sorted((q for q in queues if q.lag > 0), key=lambda q: -q.lag)
    elif kind == AlertRule.LAG_SECONDS:
        value = lag_seconds
        holds = value is not None and value > threshold
        offending = sorted(
            (q for q in queues if (_finite(q.lag_seconds) or 0.0) > threshold),
            key=lambda q: -(_finite(q.lag_seconds) or 0.0),
        )
    elif kind == AlertRule.DRAIN_SECONDS:
        if lag <= 0:
            value, holds = 0.0, False  # nothing to drain
        else:
            value = _finite(group.drain_seconds)  # None: never drains, i.e. infinite
            holds = value is None or value > threshold
        offending = sorted((q for q in queues if q.lag > 0), key=lambda q: -q.lag)
    elif kind in AlertRule.STATUS_KINDS:
        value = float(_status_rank(status))
        needed = 1 if kind == AlertRule.STATUS_WARN else 2
        holds = value >= needed
        offending = sorted((q for q in queues if q.status != OK), key=lambda q: -_queue_severity(q))
    elif kind == AlertRule.EXPIRY_HOURS:
        value = _finite(group.expiry_risk_hours)
        holds = value is not None and value < threshold
        offending = sorted((q for q in queues if q.lag > 0), key=lambda q: -q.lag)
    else:
        raise ValueError(f"rule {rule.name!r} has an unknown condition kind {kind!r}")
    details: dict[str, Any] = {
        "status": status,
        "lag": lag,
        "lag_seconds": lag_seconds,
        "topics": sorted(set(group.topics) | {q.topic for q in queues}),
        "consume_rate": _finite(group.consume_rate),
        "produce_rate": _finite(group.produce_rate),
        "drain_seconds": _finite(group.drain_seconds),
        "expiry_risk_hours": _finite(group.expiry_risk_hours),
        "queues": [_queue_row(q) for q in offending[:MAX_DETAIL_QUEUES]],
        "queues_total": len(offending),
    }
    return Reading(group.group, value, holds, details)


def readings(
    rule: AlertRule, groups: Iterable[GroupMetrics], store: StoreMetrics | None
) -> dict[str, Reading] | None:
    """Each subject the rule covers, with its reading; None when there is no data to judge
    (a disk rule without store metrics): open events are then left as they are."""
    if rule.is_store_rule:
        if store is None:
            return None
        value = _finite(store.disk_ratio)
        threshold = rule.threshold if rule.threshold is not None else 1.0
        details = {"disk_bytes": store.disk_bytes, "disk_ratio": value}
        holds = value is not None and value > threshold
        return {STORE_SUBJECT: Reading(STORE_SUBJECT, value, holds, details)}
    result = {}
    for group in groups:
        if _in_scope(rule, group):
            result[group.group] = _group_reading(rule, group)
    return result


# ---------------------------------------------------------------------------- transitions


def _open_events(rule: AlertRule) -> dict[str, AlertEvent]:
    """The rule's pending and firing events by subject."""
    events = AlertEvent.objects.filter(rule=rule, state__in=AlertEvent.OPEN_STATES)
    return {event.subject: event for event in events}


def _claim(event: AlertEvent, expected_state: str, **changes: Any) -> bool:
    """Change the event if it is still in `expected_state`; whether this call changed it."""
    updated = AlertEvent.objects.filter(pk=event.pk, state=expected_state).update(**changes)
    if updated:
        for name, value in changes.items():
            setattr(event, name, value)
    return bool(updated)


def _open(rule: AlertRule, reading: Reading, now: datetime) -> AlertEvent | None:
    """A new pending (or, with no for-duration, firing) event; None if another evaluation
    opened one first."""
    firing = rule.for_seconds == 0
    try:
        with transaction.atomic():
            return AlertEvent.objects.create(
                rule=rule,
                rule_name=rule.name,
                kind=rule.kind,
                subject=reading.subject,
                state=FIRING if firing else PENDING,
                since=now,
                started_at=now if firing else None,
                value=reading.value,
                current_value=reading.value,
                details=reading.details,
            )
    except IntegrityError:
        return None


def _close(event: AlertEvent, now: datetime, reading: Reading | None) -> str | None:
    """Clear an open event: delete it if pending, resolve it if firing. The state it left,
    or None if another evaluation got there first."""
    if event.state == PENDING:
        deleted, _ = AlertEvent.objects.filter(pk=event.pk, state=PENDING).delete()
        return PENDING if deleted else None
    details = dict(reading.details) if reading is not None else dict(event.details or {})
    if reading is None:
        details["reason"] = "no longer reported"
    value = reading.value if reading is not None else event.current_value
    if _claim(
        event,
        FIRING,
        state=RESOLVED,
        resolved_at=now,
        current_value=value,
        details=details,
    ):
        return FIRING
    return None


@dataclass
class Notice:
    """What one rule's mail of one evaluation says."""

    rule: AlertRule
    now: datetime
    fired: list[AlertEvent] = field(default_factory=list)
    resolved: list[AlertEvent] = field(default_factory=list)
    still: list[AlertEvent] = field(default_factory=list)

    @property
    def reminder(self) -> bool:
        return not self.fired and not self.resolved


def _covered(silences: list[Silence], rule_id: int, subject: str, now: datetime) -> bool:
    return any(silence.covers(rule_id, subject, now) for silence in silences)


def _reminder_due(rule: AlertRule, event: AlertEvent, now: datetime) -> bool:
    if rule.repeat_seconds <= 0:
        return False
    base = event.last_notified_at or event.started_at or event.since
    return base + timedelta(seconds=rule.repeat_seconds) <= now


def _claim_reminder(event: AlertEvent, now: datetime) -> bool:
    rows = AlertEvent.objects.filter(pk=event.pk, state=FIRING)
    if event.last_notified_at is None:
        rows = rows.filter(last_notified_at__isnull=True)
    else:
        rows = rows.filter(last_notified_at=event.last_notified_at)
    if rows.update(last_notified_at=now):
        event.last_notified_at = now
        return True
    return False


def _evaluate_rule(
    rule: AlertRule,
    subjects: dict[str, Reading],
    now: datetime,
    silences: list[Silence],
) -> tuple[list[Change], Notice | None]:
    """The rule's transitions, and its mail if one is due. Runs inside a transaction."""
    changes: list[Change] = []
    fired: list[AlertEvent] = []
    resolved: list[AlertEvent] = []
    still: list[AlertEvent] = []

    def change(subject: str, before: str | None, after: str | None, value: float | None):
        changes.append(Change(rule.pk, rule.name, subject, before, after, value))

    open_events = _open_events(rule)
    for subject, reading in subjects.items():
        event = open_events.pop(subject, None)
        if not reading.holds:
            if event is not None:
                left = _close(event, now, reading)
                if left == FIRING:
                    resolved.append(event)
                    change(subject, FIRING, RESOLVED, reading.value)
                elif left == PENDING:
                    change(subject, PENDING, None, reading.value)
            continue
        if event is None:
            event = _open(rule, reading, now)
            if event is not None:
                change(subject, None, event.state, reading.value)
                if event.state == FIRING:
                    fired.append(event)
            continue
        if event.state == PENDING:
            held_long_enough = now - event.since >= timedelta(seconds=rule.for_seconds)
            if held_long_enough and _claim(
                event,
                PENDING,
                state=FIRING,
                started_at=now,
                value=reading.value,
                current_value=reading.value,
                details=reading.details,
            ):
                fired.append(event)
                change(subject, PENDING, FIRING, reading.value)
            continue
        # Still firing: keep its latest value and details.
        if event.current_value != reading.value or event.details != reading.details:
            _claim(event, FIRING, current_value=reading.value, details=reading.details)
        still.append(event)
    for subject, event in open_events.items():  # no longer reported, or out of scope now
        left = _close(event, now, None)
        if left == FIRING:
            resolved.append(event)
            change(subject, FIRING, RESOLVED, None)
        elif left == PENDING:
            change(subject, PENDING, None, None)

    if not rule.recipient_list():
        return changes, None

    def audible(event: AlertEvent) -> bool:
        return not _covered(silences, rule.pk, event.subject, now)

    notice = Notice(
        rule,
        now,
        fired=[e for e in fired if audible(e)],
        # A resolution is news only to those who heard of the firing.
        resolved=[e for e in resolved if e.last_notified_at is not None and audible(e)],
        still=[e for e in still if audible(e)],
    )
    if notice.reminder:
        due = [event for event in notice.still if _reminder_due(rule, event, now)]
        if not any([_claim_reminder(event, now) for event in due]):
            return changes, None
    # Everything this mail lists has now been notified (reminders count from here).
    listed = [event.pk for event in notice.fired + notice.still]
    if listed:
        AlertEvent.objects.filter(pk__in=listed, state=FIRING).update(last_notified_at=now)
    if not (notice.fired or notice.resolved or notice.still):
        return changes, None
    return changes, notice


def _close_orphans(now: datetime) -> list[Change]:
    """Open events of deleted or disabled rules: resolved (or, if pending, deleted) quietly."""
    changes = []
    orphans = AlertEvent.objects.filter(state__in=AlertEvent.OPEN_STATES).filter(
        Q(rule__isnull=True) | Q(rule__enabled=False)
    )
    for event in orphans:
        details = {**(event.details or {}), "reason": "rule deleted or disabled"}
        if event.state == PENDING:
            deleted, _ = AlertEvent.objects.filter(pk=event.pk, state=PENDING).delete()
            if deleted:
                changes.append(Change(event.rule_id, event.rule_name, event.subject, PENDING, None))
        elif _claim(event, FIRING, state=RESOLVED, resolved_at=now, details=details):
            changes.append(Change(event.rule_id, event.rule_name, event.subject, FIRING, RESOLVED))
    return changes


def active_silences(now: datetime) -> list[Silence]:
    return list(Silence.objects.filter(starts_at__lte=now, ends_at__gt=now))


def evaluate(
    groups: Iterable[GroupMetrics],
    store: StoreMetrics | None,
    now: datetime | None = None,
) -> Changes:
    """Evaluate every enabled rule on these metrics at `now`; the state changes made.

    Mail goes out after each rule's changes are committed. A rule that fails (a broken
    pattern put in the database by hand, a mail server that refuses) is logged and counted
    on the result; the other rules are still evaluated.
    """
    now = now or timezone.now()
    groups = list(groups)
    result = Changes()
    result.extend(_close_orphans(now))
    silences = active_silences(now)
    for rule_id in (
        AlertRule.objects.filter(enabled=True).order_by("pk").values_list("pk", flat=True)
    ):
        try:
            with transaction.atomic():
                # Lock the rule: evaluations of one rule take turns (PostgreSQL; on SQLite
                # the immediate transaction already serializes writers).
                rule = AlertRule.objects.select_for_update().filter(pk=rule_id).first()
                if rule is None or not rule.enabled:
                    continue
                subjects = readings(rule, groups, store)
                if subjects is None:
                    continue
                changes, notice = _evaluate_rule(rule, subjects, now, silences)
        except Exception:
            log.exception("alert rule %s could not be evaluated", rule_id)
            result.rule_failures += 1
            continue
        result.extend(changes)
        if notice is not None:
            try:
                send_notice(notice)
                result.emails += 1
            except Exception:
                log.exception("the mail of alert rule %s could not be sent", rule.name)
                result.email_failures += 1
    return result


# ------------------------------------------------------------------------------------ mail


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "—"
    return timezone.localtime(moment, timezone.get_current_timezone()).strftime(
        "%Y-%m-%d %H:%M:%S %Z"
    )


def _subjects(count: int) -> str:
    return f"{count} subject{'s' if count != 1 else ''}"


def _event_lines(event: AlertEvent, resolved: bool = False) -> list[str]:
    label = "store" if event.subject == STORE_SUBJECT else f"group {event.subject}"
    if resolved:
        duration = ""
        if event.started_at and event.resolved_at:
            seconds = (event.resolved_at - event.started_at).total_seconds()
            duration = f", after {format_seconds(seconds)}"
        lines = [
            f"  - {label}: resolved at {_when(event.resolved_at)}{duration} "
            f"(fired at {format_value(event.kind, event.value)})"
        ]
        if (event.details or {}).get("reason"):
            lines.append(f"      {event.details['reason']}")
        return lines
    details = event.details or {}
    lines = [
        f"  - {label}: {format_value(event.kind, event.current_value)} "
        f"(firing since {_when(event.started_at)})"
    ]
    if details.get("status"):
        lines.append(f"      status {details['status']}, lag {details.get('lag', 0)} messages")
    for queue in details.get("queues", []):
        seconds = queue.get("lag_seconds")
        shown = f", {format_seconds(seconds)} behind" if seconds is not None else ""
        lines.append(
            f"      {queue['topic']}/{queue['queue']}: lag {queue['lag']}{shown}, {queue['status']}"
        )
    more = details.get("queues_total", 0) - len(details.get("queues", []))
    if more > 0:
        lines.append(f"      … and {more} more queues")
    return lines


def render_notice(notice: Notice) -> tuple[str, str]:
    """The mail's subject line and body."""
    rule = notice.rule
    if notice.fired and notice.resolved:
        headline = f"{rule.name}: {len(notice.fired)} firing, {len(notice.resolved)} resolved"
    elif notice.fired:
        headline = f"FIRING: {rule.name} ({_subjects(len(notice.fired))})"
    elif notice.resolved:
        headline = f"RESOLVED: {rule.name} ({_subjects(len(notice.resolved))})"
    else:
        headline = f"STILL FIRING: {rule.name} ({_subjects(len(notice.still))})"
    lines = [
        f"Alert rule: {rule.name}",
        f"Condition: {rule.condition_text()} on {rule.scope_text()}",
        f"Evaluated at {_when(notice.now)}",
        "",
    ]
    sections = [
        ("Started firing", notice.fired, False),
        ("Resolved", notice.resolved, True),
        ("Still firing", notice.still, False),
    ]
    for title, events, resolved in sections:
        if not events:
            continue
        lines.append(f"{title} ({len(events)}):")
        for event in sorted(events, key=lambda e: e.subject):
            lines.extend(_event_lines(event, resolved))
        lines.append("")
    if rule.repeat_seconds and (notice.fired or notice.still):
        lines.append(
            f"A reminder follows every {format_seconds(rule.repeat_seconds)} while it fires."
        )
    lines.append("Silenced subjects are left out of this mail.")
    base = settings.TIDEMARK_CONSOLE_URL.rstrip("/")
    lines.append(f"Events, rules and silences: {base}/alerts/")
    return f"[Tidemark] {headline}", "\n".join(lines) + "\n"


def send_notice(notice: Notice) -> None:
    subject, body = render_notice(notice)
    EmailMessage(subject, body, to=notice.rule.recipient_list()).send(fail_silently=False)
