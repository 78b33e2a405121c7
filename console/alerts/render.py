"""What a notification says: the email's subject and body, and the webhook's JSON body in
the shape of Alertmanager's webhook (version 4), so receivers written for Alertmanager
(PagerDuty and Slack bridges, incident tools) take it as it is."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from django.conf import settings
from django.utils import timezone

from console.alerts.kinds import MONITORING_SUBJECT, STORE_SUBJECT, format_seconds
from console.alerts.models import AlertEvent, format_value
from console.monitoring.metrics import WHOLE_TOPIC

if TYPE_CHECKING:
    from console.alerts.evaluate import Notice

#: Alertmanager's "not ended yet".
NOT_ENDED = "0001-01-01T00:00:00Z"


def console_url(path: str = "/alerts/") -> str:
    return settings.TIDEMARK_CONSOLE_URL.rstrip("/") + path


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "—"
    return timezone.localtime(moment, timezone.get_current_timezone()).strftime(
        "%Y-%m-%d %H:%M:%S %Z"
    )


def _subjects(count: int) -> str:
    return f"{count} subject{'s' if count != 1 else ''}"


def _label(subject: str) -> str:
    if subject in (STORE_SUBJECT, MONITORING_SUBJECT):
        return subject
    return f"group {subject}"


def queue_text(queue: dict[str, Any]) -> str:
    """One offending queue of an event's details, as the mail and the page say it."""
    seconds = queue.get("lag_seconds")
    behind = f", {format_seconds(seconds)} behind" if seconds else ""
    status = queue.get("status") or "not committed on yet"
    where = "all" if queue.get("queue") in (None, WHOLE_TOPIC, "all") else queue["queue"]
    return f"{queue['topic']}/{where}: lag {queue.get('lag', 0)}{behind}, {status}"


def _event_lines(event: AlertEvent, resolved: bool = False) -> list[str]:
    label = _label(event.subject)
    details = event.details or {}
    if resolved:
        duration = ""
        if event.started_at and event.resolved_at:
            seconds = (event.resolved_at - event.started_at).total_seconds()
            duration = f", after {format_seconds(seconds)}"
        lines = [
            f"  - {label}: resolved at {_when(event.resolved_at)}{duration} "
            f"(fired at {format_value(event.kind, event.value)})"
        ]
        if details.get("reason"):
            lines.append(f"      {details['reason']}")
        return lines
    lines = [
        f"  - {label}: {format_value(event.kind, event.current_value)} "
        f"(firing since {_when(event.started_at)})"
    ]
    if details.get("status"):
        lost = f", {details['lost']} lost to retention" if details.get("lost") else ""
        lines.append(
            f"      status {details['status']}, lag {details.get('lag', 0)} messages{lost}"
        )
    if details.get("status_reason") and details.get("status") != "OK":
        lines.append(f"      why: {details['status_reason']}")
    if details.get("reason") and event.subject == MONITORING_SUBJECT:
        lines.append(f"      {details['reason']}")
    for queue in details.get("queues", []):
        lines.append(f"      {queue_text(queue)}")
    more = details.get("queues_total", 0) - len(details.get("queues", []))
    if more > 0:
        lines.append(f"      … and {more} more queues")
    return lines


def headline(notice: Notice) -> str:
    name = notice.rule.name
    if notice.fired and notice.resolved:
        return f"{name}: {len(notice.fired)} firing, {len(notice.resolved)} resolved"
    if notice.fired:
        return f"FIRING: {name} ({_subjects(len(notice.fired))})"
    if notice.resolved:
        return f"RESOLVED: {name} ({_subjects(len(notice.resolved))})"
    return f"STILL FIRING: {name} ({_subjects(len(notice.still))})"


def subject(notice: Notice) -> str:
    """The mail's subject line, which also heads a notification's row on every channel."""
    return f"[Tidemark] {headline(notice)}"


def email(notice: Notice) -> tuple[str, str]:
    """The mail's subject line and body."""
    rule = notice.rule
    lines = [
        f"Alert rule: {rule.name}",
        f"Condition: {rule.condition_text()} on {rule.scope_text()}",
        f"Evaluated at {_when(notice.now)}",
        "",
    ]
    if notice.unsilenced:
        lines += [f"A silence ended for {_subjects(len(notice.unsilenced))} still firing.", ""]
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
    lines.append(f"Events, rules and silences: {console_url()}")
    return subject(notice), "\n".join(lines) + "\n"


def iso(moment: datetime | None) -> str:
    if moment is None:
        return NOT_ENDED
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _fingerprint(rule_id: int | None, subject: str) -> str:
    return hashlib.sha256(f"{rule_id}\x00{subject}".encode()).hexdigest()[:16]


def _alert(notice: Notice, event: AlertEvent, resolved: bool) -> dict[str, Any]:
    rule = notice.rule
    details = event.details or {}
    labels = {"alertname": rule.name, "kind": rule.kind, "subject": event.subject}
    if event.subject not in (STORE_SUBJECT, MONITORING_SUBJECT):
        labels["group"] = event.subject
    value = event.value if resolved else event.current_value
    annotations = {
        "summary": f"{rule.condition_text()} on {_label(event.subject)}",
        "value": format_value(event.kind, value),
    }
    if details.get("status_reason"):
        annotations["description"] = details["status_reason"]
    elif details.get("reason"):
        annotations["description"] = details["reason"]
    link = console_url()
    if "group" in labels:
        link = console_url(f"/groups/{quote(event.subject, safe='')}/")
    return {
        "status": "resolved" if resolved else "firing",
        "labels": labels,
        "annotations": annotations,
        "startsAt": iso(event.started_at or event.since),
        "endsAt": iso(event.resolved_at) if resolved else NOT_ENDED,
        "generatorURL": link,
        "fingerprint": _fingerprint(rule.pk, event.subject),
    }


def webhook(notice: Notice) -> dict[str, Any]:
    """Alertmanager's webhook payload (version 4) for one notification."""
    rule = notice.rule
    alerts = [_alert(notice, e, False) for e in notice.fired + notice.still]
    alerts += [_alert(notice, e, True) for e in notice.resolved]
    firing = notice.fired or notice.still
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{rule.name}"}}',
        "truncatedAlerts": 0,
        "status": "firing" if firing else "resolved",
        "receiver": rule.name,
        "groupLabels": {"alertname": rule.name},
        "commonLabels": {"alertname": rule.name, "kind": rule.kind},
        "commonAnnotations": {"condition": f"{rule.condition_text()} on {rule.scope_text()}"},
        "externalURL": console_url("/"),
        "alerts": alerts,
    }
