"""Decide: evaluate the alert rules on the current metrics, write the events' state changes
and the notifications that are due. Delivering them is console/alerts/notify.py's job.

``evaluate(groups, store, now, monitoring)`` takes the metrics as arguments
(console/monitoring/metrics.py is the contract), so it runs as well on hand-made metrics as
on the sampler's. For each enabled rule and each subject its kind reports (a group, "store"
or "monitoring"):

1. the condition starts holding: a ``pending`` event (``firing`` at once when the rule's
   for-duration is 0); held for the for-duration: ``pending`` → ``firing``;
2. it clears: a pending event is deleted (it never fired); a firing one notes when it was
   first seen clear, and resolves once it has been clear for the keep-firing duration
   (flap damping: a condition back within that time keeps the same event firing); a
   subject no longer reported resolves at once;
3. the notifications: per subject, what its recipients were last told (an event announced
   firing, not yet announced resolved) against what holds now. A new firing, or a
   resolution, is announced unless the subject had a state change announced within the
   rule's group interval (then it waits for a later evaluation; a firing and resolution
   that cancel out meanwhile are never sent); a firing the recipients heard of while it
   was silenced is announced again at the first evaluation after the silence; a reminder
   goes once the repeat interval has passed since the last one was queued. Silenced
   subjects are left out (their events are still recorded). One notification per rule,
   channel and evaluation lists them all, with the subjects still firing.

Safe when two evaluations run at once (the task also holds a Redis lock, this does not rely
on it): each rule is evaluated in one transaction that first locks the rule's row
(``select_for_update``; SQLite's immediate transactions serialize writers anyway); a partial
unique constraint allows one open event per rule and subject; and every transition and
every announcement is a conditional UPDATE whose row count says whether this evaluation
made it. Evaluating twice at the same ``now`` changes nothing the second time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from console.alerts import outbox
from console.alerts.channels import CHANNELS
from console.alerts.kinds import Inputs, Monitoring, Reading
from console.alerts.models import AlertEvent, AlertRule, Notification, Silence
from console.monitoring.metrics import GroupMetrics, StoreMetrics
from console.monitoring.models import RuleTiming

log = logging.getLogger(__name__)

PENDING, FIRING, RESOLVED = AlertEvent.PENDING, AlertEvent.FIRING, AlertEvent.RESOLVED
BUILT_IN_STALE_NAME = "Monitoring is stale"


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
    """The changes of one evaluation (a list of `Change`), with the notifications queued."""

    rule_failures: int = 0

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.notifications: list[int] = []


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


def _resolve(event: AlertEvent, now: datetime, reading: Reading | None) -> bool:
    details = dict(reading.details) if reading is not None else dict(event.details or {})
    if reading is None:
        details["reason"] = "no longer reported"
    value = reading.value if reading is not None else event.current_value
    return _claim(
        event,
        FIRING,
        state=RESOLVED,
        resolved_at=now,
        current_value=value,
        details=details,
    )


def _delete_pending(event: AlertEvent) -> bool:
    deleted, _ = AlertEvent.objects.filter(pk=event.pk, state=PENDING).delete()
    return bool(deleted)


def _clear(rule: AlertRule, event: AlertEvent, now: datetime, reading: Reading) -> str | None:
    """The condition is clear: the state the event left (None: it stays, or another
    evaluation got there first)."""
    if event.state == PENDING:
        return PENDING if _delete_pending(event) else None
    keep = timedelta(seconds=rule.keep_firing_seconds)
    if event.clear_since is None and keep:
        _claim(event, FIRING, clear_since=now, current_value=reading.value)
        return None
    if event.clear_since is not None and now - event.clear_since < keep:
        return None
    return FIRING if _resolve(event, now, reading) else None


def _refresh_firing(events: list[AlertEvent]) -> None:
    """Save the latest value and details of events still firing (and clear their
    keep-firing mark), with one prepared statement for all: an UPDATE per event made an
    evaluation of a thousand firing groups take seconds. Only rows still firing change."""
    if not events:
        return
    meta = AlertEvent._meta
    quote = connection.ops.quote_name
    column = {
        name: quote(meta.get_field(name).column)
        for name in ("clear_since", "current_value", "details", "state")
    }
    sql = (
        f"UPDATE {quote(meta.db_table)} SET {column['clear_since']} = NULL, "
        f"{column['current_value']} = %s, {column['details']} = %s "
        f"WHERE {quote('id')} = %s AND {column['state']} = %s"
    )
    details = meta.get_field("details")
    params = [
        (event.current_value, details.get_db_prep_save(event.details, connection), event.pk, FIRING)
        for event in events
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def _transitions(rule: AlertRule, subjects: dict[str, Reading], now: datetime) -> list[Change]:
    changes: list[Change] = []

    def change(subject: str, before: str | None, after: str | None, value: float | None):
        changes.append(Change(rule.pk, rule.name, subject, before, after, value))

    open_events = _open_events(rule)
    refreshed: list[AlertEvent] = []
    for subject, reading in subjects.items():
        event = open_events.pop(subject, None)
        if not reading.holds:
            if event is not None:
                left = _clear(rule, event, now, reading)
                if left is not None:
                    change(subject, left, RESOLVED if left == FIRING else None, reading.value)
            continue
        if event is None:
            event = _open(rule, reading, now)
            if event is not None:
                change(subject, None, event.state, reading.value)
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
                change(subject, PENDING, FIRING, reading.value)
            continue
        # Still firing (or firing again within the keep-firing time): its latest value.
        if (
            event.clear_since is not None
            or event.current_value != reading.value
            or event.details != reading.details
        ):
            event.clear_since = None
            event.current_value, event.details = reading.value, reading.details
            refreshed.append(event)
    _refresh_firing(refreshed)
    for subject, event in open_events.items():  # no longer reported, or out of scope now
        if event.state == PENDING:
            if _delete_pending(event):
                change(subject, PENDING, None, None)
        elif _resolve(event, now, None):
            change(subject, FIRING, RESOLVED, None)
    return changes


# -------------------------------------------------------------------------- notifications


@dataclass
class Notice:
    """What one rule's notification of one evaluation says."""

    rule: AlertRule
    now: datetime
    fired: list[AlertEvent] = field(default_factory=list)
    resolved: list[AlertEvent] = field(default_factory=list)
    still: list[AlertEvent] = field(default_factory=list)
    #: Of ``still``: those notified again because a silence ended, or a reminder was due.
    unsilenced: list[AlertEvent] = field(default_factory=list)
    reminded: list[AlertEvent] = field(default_factory=list)

    @property
    def reminder(self) -> bool:
        return not self.fired and not self.resolved


def _covered(silences: list[Silence], rule: AlertRule, event: AlertEvent, now: datetime) -> bool:
    topics = (event.details or {}).get("topics") or ()
    return any(s.covers(rule.pk, event.subject, now, topics) for s in silences)


def _hot_subjects(rule: AlertRule, subjects: Iterable[str], now: datetime) -> set[str]:
    """Subjects with a state change announced within the rule's group interval."""
    if rule.group_interval_seconds <= 0:
        return set()
    since = now - timedelta(seconds=rule.group_interval_seconds)
    recent = AlertEvent.objects.filter(rule=rule, subject__in=list(subjects)).filter(
        Q(announced_at__gt=since) | Q(resolve_announced_at__gt=since)
    )
    return set(recent.values_list("subject", flat=True))


def _announce(event: AlertEvent, now: datetime) -> bool:
    rows = AlertEvent.objects.filter(pk=event.pk, state=FIRING, announced_at__isnull=True)
    if rows.update(announced_at=now, last_queued_at=now, muted=False):
        event.announced_at = event.last_queued_at = now
        return True
    return False


def _announce_resolution(event: AlertEvent, now: datetime) -> bool:
    rows = AlertEvent.objects.filter(pk=event.pk, resolve_announced_at__isnull=True)
    if rows.update(resolve_announced_at=now):
        event.resolve_announced_at = now
        return True
    return False


def _requeue(event: AlertEvent, now: datetime) -> bool:
    """Claim a reminder (or a repeat after a silence) of a firing event."""
    rows = AlertEvent.objects.filter(pk=event.pk, state=FIRING)
    if event.last_queued_at is None:
        rows = rows.filter(last_queued_at__isnull=True)
    else:
        rows = rows.filter(last_queued_at=event.last_queued_at)
    if rows.update(last_queued_at=now, muted=False):
        event.last_queued_at = now
        return True
    return False


def _inherit(firing: AlertEvent, told: AlertEvent, now: datetime) -> None:
    """``firing`` of a subject whose recipients were told of ``told`` firing and never of
    its resolution: nothing changed for them, so the new event carries the old one's
    notification times and the old resolution is never sent."""
    AlertEvent.objects.filter(pk=told.pk, resolve_announced_at__isnull=True).update(
        resolve_announced_at=now
    )
    AlertEvent.objects.filter(pk=firing.pk, announced_at__isnull=True).update(
        announced_at=told.announced_at,
        last_queued_at=told.last_queued_at,
        last_notified_at=told.last_notified_at,
    )
    firing.announced_at = told.announced_at
    firing.last_queued_at = told.last_queued_at
    firing.last_notified_at = told.last_notified_at


def _reminder_due(rule: AlertRule, event: AlertEvent, now: datetime) -> bool:
    if rule.repeat_seconds <= 0 or event.last_queued_at is None:
        return False
    return event.last_queued_at + timedelta(seconds=rule.repeat_seconds) <= now


def _plan(rule: AlertRule, now: datetime, silences: list[Silence]) -> Notice | None:
    """What the rule's recipients must be told now (see the module, step 3)."""
    firing = list(AlertEvent.objects.filter(rule=rule, state=FIRING))
    untold = list(
        AlertEvent.objects.filter(
            rule=rule,
            state=RESOLVED,
            announced_at__isnull=False,
            resolve_announced_at__isnull=True,
        ).order_by("resolved_at")
    )
    if not firing and not untold:
        return None
    by_subject: dict[str, dict[str, Any]] = {}
    for event in firing:
        by_subject.setdefault(event.subject, {"firing": None, "untold": []})["firing"] = event
    for event in untold:
        by_subject.setdefault(event.subject, {"firing": None, "untold": []})["untold"].append(event)
    hot = _hot_subjects(rule, by_subject, now)
    pending = Notification.objects.filter(
        rule=rule, state__in=(Notification.PENDING, Notification.SENDING)
    ).exists()
    notice = Notice(rule, now)
    for subject, found in sorted(by_subject.items()):
        event, told = found["firing"], found["untold"]
        probe = event or told[-1]
        if _covered(silences, rule, probe, now):
            if event is not None and event.announced_at is not None and not event.muted:
                AlertEvent.objects.filter(pk=event.pk).update(muted=True)
            continue
        if event is not None and event.announced_at is None and told:
            _inherit(event, told[-1], now)
            told = told[:-1]
        for old in told:  # told firing, now clear
            if subject not in hot and _announce_resolution(old, now):
                notice.resolved.append(old)
        if event is None:
            continue
        if event.announced_at is None:
            if subject not in hot and _announce(event, now):
                notice.fired.append(event)
        elif event.muted:
            if _requeue(event, now):
                notice.still.append(event)
                notice.unsilenced.append(event)
        elif not pending and _reminder_due(rule, event, now) and _requeue(event, now):
            notice.still.append(event)
            notice.reminded.append(event)
        else:
            notice.still.append(event)  # listed, if a notification goes anyway
    if not (notice.fired or notice.resolved or notice.unsilenced or notice.reminded):
        return None
    # A notification about this rule lists those still firing: their reminders count anew.
    claimed = {e.pk for e in notice.unsilenced + notice.reminded}
    listed = [event for event in notice.still if event.pk not in claimed]
    if listed:  # the rule is locked: one UPDATE for all of them
        AlertEvent.objects.filter(pk__in=[e.pk for e in listed], state=FIRING).update(
            last_queued_at=now, muted=False
        )
        for event in listed:
            event.last_queued_at = now
    return notice


def _channels(rule: AlertRule) -> list[tuple[str, str]]:
    """(channel, target) pairs: the rule's targets on each channel. The built-in staleness
    rule without its own falls back to every other enabled rule's."""
    pairs = _targets([rule])
    if pairs or rule.kind != AlertRule.MONITORING_STALE:
        return pairs
    return _targets(list(AlertRule.objects.filter(enabled=True).exclude(pk=rule.pk)))


def _targets(rules: list[AlertRule]) -> list[tuple[str, str]]:
    return [
        (kind, target) for kind, channel in CHANNELS.items() for target in channel.targets(rules)
    ]


# ------------------------------------------------------------------------------ the whole


def _close_orphans(now: datetime) -> list[Change]:
    """Open events of deleted or disabled rules: resolved (or, if pending, deleted) quietly."""
    changes = []
    orphans = AlertEvent.objects.filter(state__in=AlertEvent.OPEN_STATES).filter(
        Q(rule__isnull=True) | Q(rule__enabled=False)
    )
    for event in orphans:
        details = {**(event.details or {}), "reason": "rule deleted or disabled"}
        if event.state == PENDING:
            if _delete_pending(event):
                changes.append(Change(event.rule_id, event.rule_name, event.subject, PENDING, None))
        elif _claim(
            event,
            FIRING,
            state=RESOLVED,
            resolved_at=now,
            details=details,
            resolve_announced_at=now,  # quietly: no resolution is sent
        ):
            changes.append(Change(event.rule_id, event.rule_name, event.subject, FIRING, RESOLVED))
    return changes


def active_silences(now: datetime) -> list[Silence]:
    return list(Silence.objects.filter(starts_at__lte=now, ends_at__gt=now))


def ensure_built_in_rules() -> None:
    """The built-in "monitoring is stale" rule, made on first use (admins may add its
    recipients, change its intervals or disable it)."""
    if AlertRule.objects.filter(kind=AlertRule.MONITORING_STALE).exists():
        return
    name = BUILT_IN_STALE_NAME
    if AlertRule.objects.filter(name=name).exists():
        name = f"{BUILT_IN_STALE_NAME} (built in)"
    try:
        with transaction.atomic():
            AlertRule.objects.create(
                name=name,
                kind=AlertRule.MONITORING_STALE,
                keep_firing_seconds=0,
                group_interval_seconds=0,
            )
    except IntegrityError:
        pass  # made meanwhile by another evaluation


def evaluate(
    groups: Iterable[GroupMetrics],
    store: StoreMetrics | None,
    now: datetime | None = None,
    monitoring: Monitoring | None = None,
) -> Changes:
    """Evaluate every enabled rule on these metrics at `now`: the state changes made, and
    (``.notifications``) the ids of the notifications queued for delivery.

    A rule that fails (a broken pattern put in the database by hand) is logged, counted on
    the result and noted on the rule (``AlertRule.failure``: the page and /metrics show
    it); the other rules are still evaluated. Nothing is sent from here.
    """
    now = now or timezone.now()
    if monitoring is not None:
        ensure_built_in_rules()
    inputs = Inputs(list(groups), store, monitoring, now)
    result = Changes()
    result.extend(_close_orphans(now))
    silences = active_silences(now)
    timings: list[RuleTiming] = []
    for rule_id in (
        AlertRule.objects.filter(enabled=True).order_by("pk").values_list("pk", flat=True)
    ):
        started = time.perf_counter()
        try:
            with transaction.atomic():
                # Lock the rule: evaluations of one rule take turns (PostgreSQL; on SQLite
                # the immediate transaction already serializes writers).
                rule = AlertRule.objects.select_for_update().filter(pk=rule_id).first()
                if rule is None or not rule.enabled:
                    continue
                rule.check_patterns()
                subjects = rule.kind_class.readings(rule, inputs)
                if subjects is None:
                    continue
                changes = _transitions(rule, subjects, now)
                channels = _channels(rule)
                notice = _plan(rule, now, silences) if channels else None
                queued = outbox.queue(notice, channels) if notice is not None else []
                rule.note_success()
        except Exception as error:
            log.exception("alert rule %s could not be evaluated", rule_id)
            result.rule_failures += 1
            AlertRule.note_failure(rule_id, error, now)
            continue
        result.extend(changes)
        result.notifications.extend(row.pk for row in queued)
        timings.append(
            RuleTiming(
                rule_id=rule.pk,
                rule_name=rule.name,
                kind=rule.kind,
                seconds=time.perf_counter() - started,
                evaluated_at=now,
            )
        )
    _save_timings(timings)
    return result


def _save_timings(timings: list[RuleTiming]) -> None:
    """Replace each rule's latest evaluation time (one statement), and forget rules gone."""
    RuleTiming.objects.bulk_create(
        timings,
        update_conflicts=True,
        unique_fields=["rule_id"],
        update_fields=["rule_name", "kind", "seconds", "evaluated_at"],
    )
    RuleTiming.objects.exclude(rule_id__in=[t.rule_id for t in timings]).delete()


def rule_timings() -> list[RuleTiming]:
    """Each enabled rule's latest evaluation time (seconds), by rule name: for /metrics
    (``tidemark_alert_rule_evaluation_seconds{rule,kind}``)."""
    return list(RuleTiming.objects.order_by("rule_name"))
