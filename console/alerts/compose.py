"""Compose: what a notification says at the moment it is sent.

The evaluation queued the notification for some events (its ``sections``); by the time a
delivery attempt runs (a retry minutes later) they may have resolved, or fired again. Each
attempt therefore reads each subject's state now and what this channel was last told of it
(``ChannelLog``, written only after a delivery succeeded):

- firing now, and the channel was not told so: "started firing";
- firing now, and the channel was told: "still firing";
- resolved now, and the channel was told it fires: "resolved"; never told: left out (nobody
  hears of the end of an alert they never heard of);

and the notification is sent only if that says something new (a start, an end, or a
reminder or silence's end the evaluation asked for). A stale state is never sent.
"""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction

from console.alerts.channels import channel_of
from console.alerts.evaluate import Notice
from console.alerts.models import AlertEvent, ChannelLog, Notification

FIRING, RESOLVED = AlertEvent.FIRING, AlertEvent.RESOLVED


def _heard(row: Notification, subjects: set[str]) -> dict[str, bool]:
    """What the row's channel was last told of each subject: True firing, False resolved."""
    logs = ChannelLog.objects.filter(
        rule_id=row.rule_id,
        channel_key=channel_of(row).key(row.target),
        subject__in=subjects,
    )
    return {log.subject: log.firing for log in logs}


def _current(row: Notification, listed: list[AlertEvent]) -> dict[str, AlertEvent]:
    """Per subject the row lists: its firing event now, else the latest it lists."""
    latest: dict[str, AlertEvent] = {}
    for event in sorted(listed, key=lambda e: e.pk):
        latest[event.subject] = event
    firing = AlertEvent.objects.filter(rule_id=row.rule_id, state=FIRING, subject__in=latest)
    for event in firing:
        latest[event.subject] = event
    return latest


def notice(row: Notification, now: datetime) -> Notice | None:
    """What ``row`` says if sent at ``now``; None when it has nothing new to say (or its
    rule was deleted)."""
    if row.rule is None:
        return None
    sections = row.sections or {}
    ids = {pk for name in ("fired", "resolved", "still") for pk in sections.get(name, [])}
    listed = list(AlertEvent.objects.filter(pk__in=ids))
    current = _current(row, listed)
    heard = _heard(row, set(current))
    said = Notice(row.rule, now)
    for subject, event in sorted(current.items()):
        told_firing = heard.get(subject) is True
        if event.state == FIRING:
            (said.still if told_firing else said.fired).append(event)
        elif event.state == RESOLVED and told_firing:
            said.resolved.append(event)
    asked = {name: set(sections.get(name, [])) for name in ("unsilenced", "reminded")}
    said.unsilenced = [e for e in said.still if e.pk in asked["unsilenced"]]
    said.reminded = [e for e in said.still if e.pk in asked["reminded"]]
    if said.fired or said.resolved or said.unsilenced or said.reminded:
        return said
    return None


def record_told(row: Notification, said: Notice, now: datetime) -> None:
    """After a delivery succeeded: what its channel now knows of each subject."""
    key = channel_of(row).key(row.target)
    told = [(e, True) for e in said.fired + said.still] + [(e, False) for e in said.resolved]
    for event, firing in told:
        values = {"firing": firing, "event": event, "told_at": now, "channel": row.channel}
        try:
            with transaction.atomic():
                ChannelLog.objects.update_or_create(
                    rule_id=row.rule_id, subject=event.subject, channel_key=key, defaults=values
                )
        except IntegrityError:  # written meanwhile by another delivery: ours is as new
            ChannelLog.objects.filter(
                rule_id=row.rule_id, subject=event.subject, channel_key=key
            ).update(**values)
