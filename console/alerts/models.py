"""Alert rules over the monitoring metrics, their events, the silences that mute them, and
the notifications that tell people.

A rule watches a condition (a kind: console/alerts/kinds.py) on each consumer group it
covers (or on the store, or on the monitoring itself). While the condition holds, the rule
and subject have one open event: ``pending`` until the condition has held for the rule's
for-duration, then ``firing``; once the condition has been clear for the rule's
keep-firing duration the event is ``resolved`` (a pending one that clears is deleted: it
never fired). A partial unique constraint keeps at most one open event per rule and
subject, and every transition is a conditional UPDATE, so two evaluations running at once
never fire or resolve twice (console/alerts/evaluate.py).

Deciding is apart from delivering (Healthchecks' flips and notifiers, Alertmanager's
pipeline): the evaluator writes a ``Notification`` row per rule, channel and evaluation
that has news; a Celery task delivers it with retries (console/alerts/notify.py), and only
a delivery that succeeded marks its events notified.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q
from django.utils import timezone

from console.alerts import kinds
from console.alerts.kinds import STORE_SUBJECT, format_seconds  # noqa: F401 - re-exported
from console.alerts.patterns import (
    MAX_PATTERN_LENGTH,
    BrokenPattern,
    compile_pattern,
    pattern_matches,
)

log = logging.getLogger(__name__)

__all__ = ["MAX_PATTERN_LENGTH", "compile_pattern", "pattern_matches", "format_seconds"]

#: Flap damping defaults: a firing rule resolves only after its condition was clear this
#: long (Prometheus' keep_firing_for), and a subject gets at most one state-change
#: notification per group interval (Alertmanager's group_interval, 5 minutes).
DEFAULT_KEEP_FIRING_SECONDS = 120
DEFAULT_GROUP_INTERVAL_SECONDS = 300


class AlertRule(models.Model):
    # Condition kinds (console/alerts/kinds.py has one class per kind).
    LAG_MESSAGES = "lag_messages"
    LAG_SECONDS = "lag_seconds"
    DRAIN_SECONDS = "drain_seconds"
    STATUS_WARN = "status_warn"
    STATUS_ERR = "status_err"
    EXPIRY_HOURS = "expiry_hours"
    LOST_MESSAGES = "lost_messages"
    DISK_RATIO = "disk_ratio"
    MONITORING_STALE = "monitoring_stale"
    KINDS = kinds.choices()
    #: Kinds whose threshold is not used (the kind names the level).
    STATUS_KINDS = tuple(k.key for k in kinds.KINDS.values() if not k.needs_threshold)
    #: Kinds evaluated on the store (or the monitoring) rather than on each group.
    STORE_KINDS = tuple(k.key for k in kinds.KINDS.values() if k.store_wide)

    SCOPE_ALL = "all"
    SCOPE_MATCH = "match"
    SCOPES = [
        (SCOPE_ALL, "All groups"),
        (SCOPE_MATCH, "Groups and topics matching regular expressions"),
    ]

    name = models.CharField(max_length=100, unique=True)
    enabled = models.BooleanField(default=True)
    scope = models.CharField(max_length=10, choices=SCOPES, default=SCOPE_ALL)
    #: RE2 patterns matched against the whole group name and the whole topic name; empty:
    #: any (console/alerts/patterns.py).
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
    #: How long the condition must be clear before a firing event resolves (0: at once).
    keep_firing_seconds = models.PositiveIntegerField(default=DEFAULT_KEEP_FIRING_SECONDS)
    #: A subject gets at most one state-change notification per this many seconds.
    group_interval_seconds = models.PositiveIntegerField(default=DEFAULT_GROUP_INTERVAL_SECONDS)
    #: Where to POST an Alertmanager-style JSON payload per notification (empty: none).
    webhook_url = models.URLField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)
    #: Why its latest evaluation failed (e.g. a broken pattern), and when; empty: it went
    #: well.
    failure = models.TextField(blank=True, editable=False)
    failed_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def kind_class(self) -> kinds.AlertKind:
        return kinds.kind_of(self.kind)

    @property
    def is_store_rule(self) -> bool:
        return self.kind in self.STORE_KINDS

    @property
    def is_built_in(self) -> bool:
        return self.kind in kinds.KINDS and kinds.KINDS[self.kind].built_in

    def check_patterns(self) -> None:
        """Raise BrokenPattern (naming the field) if a pattern the rule uses is broken."""
        if self.is_store_rule:
            return
        for label, pattern in (("group", self.group_pattern), ("topic", self.topic_pattern)):
            if pattern:
                try:
                    compile_pattern(pattern)
                except BrokenPattern as error:
                    raise BrokenPattern(f"{label} pattern /{pattern}/: {error}") from None

    @classmethod
    def note_failure(cls, rule_id: int, error: BaseException, now: datetime) -> None:
        """Keep why the rule's evaluation failed: the page and /metrics show it."""
        text = (
            str(error) if isinstance(error, BrokenPattern) else f"{type(error).__name__}: {error}"
        )
        cls.objects.filter(pk=rule_id).update(failure=text[:1000], failed_at=now)

    def note_success(self) -> None:
        """Its evaluation went well: forget an earlier failure."""
        if self.failure or self.failed_at:
            AlertRule.objects.filter(pk=self.pk).update(failure="", failed_at=None)
            self.failure, self.failed_at = "", None

    def recipient_list(self) -> list[str]:
        return [line.strip() for line in self.recipients.splitlines() if line.strip()]

    def scope_text(self) -> str:
        if self.kind == self.MONITORING_STALE:
            return "the monitoring"
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
        try:
            return self.kind_class.condition_text(self.threshold)
        except ValueError:
            return self.kind

    def damping_text(self) -> str:
        """The flap damping, as the rule's page shows it."""
        return (
            f"keeps firing {format_seconds(self.keep_firing_seconds)} after clearing; "
            f"at most one state change per subject every "
            f"{format_seconds(self.group_interval_seconds)}"
        )

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
            "keep_firing_seconds": self.keep_firing_seconds,
            "group_interval_seconds": self.group_interval_seconds,
            "webhook_url": self.webhook_url,
        }


def format_value(kind: str, value: float | None) -> str:
    """An event's value as a person reads it (its kind says how)."""
    try:
        return kinds.kind_of(kind).format_value(value)
    except ValueError:
        return "—" if value is None else f"{value:g}"


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
    #: When a notification listing this event was last delivered (None: never, e.g.
    #: silenced throughout, or every delivery failed so far).
    last_notified_at = models.DateTimeField(null=True, blank=True)
    #: Keep-firing: when the condition was first seen clear while firing (None: holding).
    clear_since = models.DateTimeField(null=True, blank=True)
    #: When a notification of its firing, and of its resolution, was queued (the subject's
    #: group interval counts from these); a resolution superseded by a new firing of the
    #: same subject is marked queued without one.
    announced_at = models.DateTimeField(null=True, blank=True)
    resolve_announced_at = models.DateTimeField(null=True, blank=True)
    #: When a notification listing it as firing was last queued (reminders count from it).
    last_queued_at = models.DateTimeField(null=True, blank=True)
    #: Silenced at an evaluation since it was last notified: notified again as soon as no
    #: silence covers it.
    muted = models.BooleanField(default=False)

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

    def latest_notification(self) -> Notification | None:
        """The newest notification that tells of it (a superseded one handed it on)."""
        return self.notifications.exclude(state=Notification.SUPERSEDED).order_by("-id").first()


class Silence(models.Model):
    """Mutes the notifications of one rule (or all) for subjects matching RE2 patterns,
    from ``starts_at`` (now, or later) until ``ends_at``."""

    #: None: every rule.
    rule = models.ForeignKey(
        AlertRule, null=True, blank=True, on_delete=models.CASCADE, related_name="silences"
    )
    #: Matched against the whole subject (the group's name, "store" or "monitoring");
    #: empty: any.
    subject_pattern = models.CharField(max_length=MAX_PATTERN_LENGTH, blank=True)
    #: Matched against the topics of the event (the group must consume a matching one);
    #: empty: any.
    topic_pattern = models.CharField(max_length=MAX_PATTERN_LENGTH, blank=True)
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

    def is_future(self, now=None) -> bool:
        return (now or timezone.now()) < self.starts_at

    def covers(self, rule_id: int | None, subject: str, now, topics=()) -> bool:
        if not self.is_active(now):
            return False
        if self.rule_id is not None and self.rule_id != rule_id:
            return False
        try:
            if not pattern_matches(self.subject_pattern, subject):
                return False
            if self.topic_pattern:
                return any(pattern_matches(self.topic_pattern, topic) for topic in topics)
        except BrokenPattern:
            # Fails open: a silence with a broken pattern mutes nothing, and pages go out.
            log.warning("silence %s has a broken pattern and mutes nothing", self.pk)
            return False
        return True

    def scope_text(self) -> str:
        rule = self.rule.name if self.rule_id else "every rule"
        subjects = f"/{self.subject_pattern}/" if self.subject_pattern else "every subject"
        topics = f", topics /{self.topic_pattern}/" if self.topic_pattern else ""
        return f"{rule}, {subjects}{topics}"

    def state(self) -> dict[str, Any]:
        return {
            "rule": self.rule.name if self.rule_id else None,
            "subject_pattern": self.subject_pattern,
            "topic_pattern": self.topic_pattern,
            "starts_at": self.starts_at,
            "ends_at": self.ends_at,
            "reason": self.reason,
        }


class Notification(models.Model):
    """One message to one channel of a rule: what an evaluation decided to say, and how
    its delivery went (attempts, the last error). Written by the evaluator, delivered by
    the ``send_notification`` task (console/alerts/notify.py)."""

    EMAIL = "email"
    WEBHOOK = "webhook"
    CHANNELS = [(EMAIL, "email"), (WEBHOOK, "webhook")]

    PENDING = "pending"
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"
    SUPERSEDED = "superseded"
    STATES = [
        (PENDING, "pending"),
        (SENDING, "sending"),
        (SENT, "sent"),
        (FAILED, "failed (gave up)"),
        (SUPERSEDED, "not sent (superseded, or nothing new to say)"),
    ]
    #: States a notification never leaves.
    FINAL_STATES = (SENT, FAILED, SUPERSEDED)

    rule = models.ForeignKey(
        AlertRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="notifications"
    )
    rule_name = models.CharField(max_length=100)
    channel = models.CharField(max_length=10, choices=CHANNELS)
    #: The addresses (one a line) or the webhook's URL.
    target = models.TextField()
    #: The mail's subject line, which also heads the page's row.
    headline = models.CharField(max_length=300)
    #: Email: {"subject", "body", "to"}; webhook: the JSON body to POST.
    payload = models.JSONField(encoder=DjangoJSONEncoder)
    #: Event ids by what the notification says of them: "fired", "resolved", "still".
    sections = models.JSONField(default=dict)
    events = models.ManyToManyField(AlertEvent, related_name="notifications", blank=True)
    state = models.CharField(max_length=10, choices=STATES, default=PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    #: The newer notification of the same rule and channel that took this one's events.
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state", "next_attempt_at"], name="alerts_notif_state_idx")]

    def __str__(self) -> str:
        return f"{self.channel} notification {self.pk} ({self.state})"


class ChannelLog(models.Model):
    """What one channel of a rule was last told of one subject, written only once a
    delivery succeeded (Alertmanager's notification log): a delivery says "started firing"
    to a channel never told the subject fires, and "resolved" only to one told it fired.

    A channel is the rule's mail (whoever is on its list) or one webhook URL
    (``channel_key``)."""

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="channel_log")
    subject = models.CharField(max_length=300)
    channel = models.CharField(max_length=10, choices=Notification.CHANNELS)
    channel_key = models.CharField(max_length=64)
    #: True: last told it fires; False: last told it resolved.
    firing = models.BooleanField()
    event = models.ForeignKey(
        AlertEvent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    told_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "subject", "channel_key"], name="alerts_one_log_per_channel"
            )
        ]

    def __str__(self) -> str:
        said = "firing" if self.firing else "resolved"
        return f"{self.rule_id} {self.subject} {self.channel}: {said}"


class Heartbeat(models.Model):
    """When a periodic piece of the monitoring last succeeded (the alert evaluation):
    what the "monitoring is stale" alert and the dashboard read."""

    name = models.CharField(max_length=100, unique=True)
    first_at = models.DateTimeField(default=timezone.now)
    ok_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.name} ok at {self.ok_at}"
