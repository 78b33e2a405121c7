"""Alert rules over the monitoring metrics, their events and the silences that mute them.

A rule watches a condition on each consumer group it covers (or on the store, for disk use).
While the condition holds, the rule and subject have one open event: ``pending`` until the
condition has held for the rule's for-duration, then ``firing``; when the condition clears
the event is ``resolved`` (a pending one that clears is deleted: it never fired). A partial
unique constraint keeps at most one open event per rule and subject, and every transition is
a conditional UPDATE, so two evaluations running at once never fire or resolve twice
(console/alerts/evaluate.py).
"""

from __future__ import annotations

import math
import re
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q
from django.utils import timezone

#: The subject of store-wide rules (disk use).
STORE_SUBJECT = "store"

#: Longest regex accepted for a scope or a silence.
MAX_PATTERN_LENGTH = 200


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The compiled regex, or ValueError with a sentence a person can act on."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(f"At most {MAX_PATTERN_LENGTH} characters, please.")
    try:
        return re.compile(pattern)
    except (re.error, RecursionError, OverflowError, ValueError) as error:
        raise ValueError(f"Not a valid regular expression: {error}.") from None


def pattern_matches(pattern: str, text: str) -> bool:
    """Whether the whole of `text` matches `pattern` (an empty pattern matches anything)."""
    if not pattern:
        return True
    try:
        return compile_pattern(pattern).fullmatch(text) is not None
    except ValueError:
        return False


def format_seconds(seconds: float) -> str:
    seconds = float(seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


class AlertRule(models.Model):
    # Condition kinds.
    LAG_MESSAGES = "lag_messages"
    LAG_SECONDS = "lag_seconds"
    DRAIN_SECONDS = "drain_seconds"
    STATUS_WARN = "status_warn"
    STATUS_ERR = "status_err"
    EXPIRY_HOURS = "expiry_hours"
    DISK_RATIO = "disk_ratio"
    KINDS = [
        (LAG_MESSAGES, "Lag in messages is above N"),
        (LAG_SECONDS, "Lag in seconds is above N"),
        (DRAIN_SECONDS, "Drain time is above N seconds (never draining counts as infinite)"),
        (STATUS_WARN, "Status is WARN or worse"),
        (STATUS_ERR, "Status is ERR"),
        (EXPIRY_HOURS, "Unconsumed messages expire within N hours"),
        (DISK_RATIO, "Disk use is above a ratio (0..1)"),
    ]
    #: Kinds whose threshold is not used (the status names the level).
    STATUS_KINDS = (STATUS_WARN, STATUS_ERR)
    #: Kinds evaluated on the store rather than on each group.
    STORE_KINDS = (DISK_RATIO,)

    SCOPE_ALL = "all"
    SCOPE_MATCH = "match"
    SCOPES = [
        (SCOPE_ALL, "All groups"),
        (SCOPE_MATCH, "Groups and topics matching regular expressions"),
    ]

    name = models.CharField(max_length=100, unique=True)
    enabled = models.BooleanField(default=True)
    scope = models.CharField(max_length=10, choices=SCOPES, default=SCOPE_ALL)
    #: Regexes matched against the whole group name and the whole topic name; empty: any.
    group_pattern = models.CharField(max_length=MAX_PATTERN_LENGTH, blank=True)
    topic_pattern = models.CharField(max_length=MAX_PATTERN_LENGTH, blank=True)
    kind = models.CharField(max_length=20, choices=KINDS)
    #: N of the condition; None for the status kinds.
    threshold = models.FloatField(null=True, blank=True)
    #: How long the condition must hold before the rule fires (0: at once).
    for_seconds = models.PositiveIntegerField(default=0)
    #: Email addresses, one a line.
    recipients = models.TextField(blank=True)
    #: Seconds between reminders while still firing (0: no reminders).
    repeat_seconds = models.PositiveIntegerField(default=3600)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_store_rule(self) -> bool:
        return self.kind in self.STORE_KINDS

    def recipient_list(self) -> list[str]:
        return [line.strip() for line in self.recipients.splitlines() if line.strip()]

    def scope_text(self) -> str:
        if self.is_store_rule:
            return "the store"
        if self.scope == self.SCOPE_ALL or not (self.group_pattern or self.topic_pattern):
            return "all groups"
        parts = []
        if self.group_pattern:
            parts.append(f"groups /{self.group_pattern}/")
        if self.topic_pattern:
            parts.append(f"topics /{self.topic_pattern}/")
        return ", ".join(parts)

    def condition_text(self) -> str:
        kind, n = self.kind, self.threshold
        if kind == self.LAG_MESSAGES:
            return f"lag > {n:g} messages"
        if kind == self.LAG_SECONDS:
            return f"lag > {format_seconds(n or 0)}"
        if kind == self.DRAIN_SECONDS:
            return f"drain time > {format_seconds(n or 0)}"
        if kind == self.STATUS_WARN:
            return "status ≥ WARN"
        if kind == self.STATUS_ERR:
            return "status = ERR"
        if kind == self.EXPIRY_HOURS:
            return f"expiry within {n:g} h"
        if kind == self.DISK_RATIO:
            return f"disk use > {n:.0%}" if n is not None else "disk use"
        return kind

    def state(self) -> dict[str, Any]:
        """What audit rows keep of a rule."""
        return {
            "name": self.name,
            "enabled": self.enabled,
            "scope": self.scope,
            "group_pattern": self.group_pattern,
            "topic_pattern": self.topic_pattern,
            "kind": self.kind,
            "threshold": self.threshold,
            "for_seconds": self.for_seconds,
            "recipients": self.recipient_list(),
            "repeat_seconds": self.repeat_seconds,
        }


def format_value(kind: str, value: float | None) -> str:
    """An event's value as a person reads it."""
    if kind == AlertRule.DRAIN_SECONDS and value is None:
        return "never"
    if value is None:
        return "—"
    if kind == AlertRule.LAG_MESSAGES:
        return f"{value:.0f} messages"
    if kind in (AlertRule.LAG_SECONDS, AlertRule.DRAIN_SECONDS):
        return format_seconds(value)
    if kind in AlertRule.STATUS_KINDS:
        from console.monitoring.metrics import GROUP_STATUSES

        index = int(value)
        return GROUP_STATUSES[index] if 0 <= index < len(GROUP_STATUSES) else str(value)
    if kind == AlertRule.EXPIRY_HOURS:
        return f"{value:.1f} h"
    if kind == AlertRule.DISK_RATIO:
        return f"{value:.1%}"
    return f"{value:g}" if math.isfinite(value) else str(value)


class AlertEvent(models.Model):
    """One episode of a rule's condition on one subject: pending, firing, then resolved."""

    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"
    STATES = [(PENDING, "pending"), (FIRING, "firing"), (RESOLVED, "resolved")]
    OPEN_STATES = (PENDING, FIRING)

    #: None once the rule is deleted; `rule_name` and `kind` keep what it was.
    rule = models.ForeignKey(
        AlertRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    rule_name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=AlertRule.KINDS)
    #: The group's name, or "store" for disk use.
    subject = models.CharField(max_length=300)
    state = models.CharField(max_length=10, choices=STATES)
    #: When the condition was first seen holding (the start of the for-duration).
    since = models.DateTimeField()
    #: When it started firing, and when it resolved.
    started_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    #: The value when it started firing (None: infinite drain time), and the latest one.
    value = models.FloatField(null=True, blank=True)
    current_value = models.FloatField(null=True, blank=True)
    #: The latest details: status, lag, the offending queues…
    details = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)
    #: When a mail last covered this event (None: never, e.g. silenced throughout).
    last_notified_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-since", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "subject"],
                condition=Q(state__in=["pending", "firing"]),
                name="alerts_one_open_event_per_rule_subject",
            )
        ]
        indexes = [
            models.Index(fields=["state", "resolved_at"], name="alerts_event_state_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.rule_name} {self.subject} {self.state}"

    @property
    def value_text(self) -> str:
        return format_value(self.kind, self.value)

    @property
    def current_value_text(self) -> str:
        return format_value(self.kind, self.current_value)


class Silence(models.Model):
    """Mutes the mail of one rule (or all) for subjects matching a regex, until `ends_at`."""

    #: None: every rule.
    rule = models.ForeignKey(
        AlertRule, null=True, blank=True, on_delete=models.CASCADE, related_name="silences"
    )
    #: A regex matched against the whole subject (the group's name, or "store"); empty: any.
    subject_pattern = models.CharField(max_length=MAX_PATTERN_LENGTH, blank=True)
    starts_at = models.DateTimeField(default=timezone.now)
    ends_at = models.DateTimeField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="alert_silences",
    )
    created_by_name = models.CharField(max_length=150, blank=True)
    reason = models.TextField()
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-ends_at", "-id"]

    def __str__(self) -> str:
        return f"silence {self.pk}"

    def is_active(self, now=None) -> bool:
        now = now or timezone.now()
        return self.starts_at <= now < self.ends_at

    def covers(self, rule_id: int | None, subject: str, now) -> bool:
        if not self.is_active(now):
            return False
        if self.rule_id is not None and self.rule_id != rule_id:
            return False
        return pattern_matches(self.subject_pattern, subject)

    def scope_text(self) -> str:
        rule = self.rule.name if self.rule_id else "every rule"
        subjects = f"/{self.subject_pattern}/" if self.subject_pattern else "every subject"
        return f"{rule}, {subjects}"

    def state(self) -> dict[str, Any]:
        return {
            "rule": self.rule.name if self.rule_id else None,
            "subject_pattern": self.subject_pattern,
            "starts_at": self.starts_at,
            "ends_at": self.ends_at,
            "reason": self.reason,
        }
