"""Queue: write the notifications an evaluation decided on, one per rule and channel, and
let a newer one supersede the older ones of its rule and channel still waiting.

A notification names the events it is about (``sections``); what it says is composed when
it is sent (console/alerts/compose.py), from their state then. So a notification waiting
for a retry never sends a stale state: a newer one of the same rule and channel takes its
events and it is marked ``superseded`` (Alertmanager sends a group's current state on each
flush, never an old one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction

from console.alerts.channels import CHANNELS, channel_of
from console.alerts.models import Notification

if TYPE_CHECKING:
    from console.alerts.evaluate import Notice

#: What a notification's ``sections`` hold: event ids by what the evaluation decided.
SECTIONS = ("fired", "resolved", "still", "unsilenced", "reminded")


def same_channel(row: Notification):
    """The notifications of ``row``'s rule and channel (by its key)."""
    rows = Notification.objects.filter(rule_id=row.rule_id, channel=row.channel)
    if channel_of(row).per_target:
        rows = rows.filter(target=row.target)
    return rows


def merge_sections(older: dict, newer: dict) -> dict:
    """``newer``'s sections with ``older``'s events added (each id once per section)."""
    merged = {}
    for name in SECTIONS:
        ids = list(newer.get(name, []))
        ids += [pk for pk in older.get(name, []) if pk not in ids]
        merged[name] = ids
    return merged


def supersede(older: Notification) -> Notification | None:
    """Hand ``older`` (pending, or claimed for an attempt) to the newest pending notification
    of its rule and channel: its events join that one's, and it is ``superseded``. The
    newer one, or None when there is none (``older`` is then left as it was)."""
    with transaction.atomic():
        newer = (
            same_channel(older)
            .select_for_update()
            .filter(pk__gt=older.pk, state=Notification.PENDING)
            .order_by("-pk")
            .first()
        )
        if newer is None:
            return None
        newer.sections = merge_sections(older.sections, newer.sections)
        newer.save(update_fields=["sections"])
        newer.events.add(*older.events.all())
        Notification.objects.filter(pk=older.pk).exclude(
            state__in=Notification.FINAL_STATES
        ).update(
            state=Notification.SUPERSEDED,
            superseded_by=newer,
            next_attempt_at=None,
            last_error=f"superseded by notification {newer.pk}",
        )
    return newer


def queue(notice: Notice, channels: list[tuple[str, str]]) -> list[Notification]:
    """One pending notification per channel, listing the notice's events; older pending
    ones of the same rule and channel are superseded by it."""
    sections = {
        "fired": [e.pk for e in notice.fired],
        "resolved": [e.pk for e in notice.resolved],
        "still": [e.pk for e in notice.still],
        "unsilenced": [e.pk for e in notice.unsilenced],
        "reminded": [e.pk for e in notice.reminded],
    }
    events = notice.fired + notice.resolved + notice.still
    made = []
    for channel, target in channels:
        headline, payload = CHANNELS[channel].render(notice, target)
        row = Notification.objects.create(
            rule=notice.rule,
            rule_name=notice.rule.name,
            channel=channel,
            target=target,
            headline=headline,
            payload=payload,
            sections=sections,
            created_at=notice.now,
            next_attempt_at=notice.now,
        )
        row.events.set(events)
        for older in same_channel(row).filter(pk__lt=row.pk, state=Notification.PENDING):
            supersede(older)
        row.refresh_from_db()
        made.append(row)
    return made
