import json

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone


def _json_text(value) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False, sort_keys=True)


def _shown(value) -> str:
    """A changed field's value for people: none for null, numbers with separators."""
    if value is None:
        return "none"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return _json_text(value)


class AuditEntry(models.Model):
    """One change made in the console or through the API. Written by `console.audit.log.record`."""

    created_at = models.DateTimeField(default=timezone.now, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_entries",
    )
    # Kept when the user is deleted; empty for changes made by the system itself.
    username = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=64, help_text='A short slug such as "topic.create".')
    target = models.TextField(help_text='What was changed, such as "topic orders".')
    before = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    after = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    detail = models.TextField(blank=True)
    link = models.CharField(
        max_length=500, blank=True, help_text="A related page, such as an offset reset's undo."
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "audit entry"
        verbose_name_plural = "audit entries"
        indexes = [
            models.Index(fields=["created_at"], name="audit_created_at_idx"),
            models.Index(fields=["action"], name="audit_action_idx"),
            models.Index(fields=["username"], name="audit_username_idx"),
        ]

    def __str__(self) -> str:
        who = self.username or "system"
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {who} {self.action} {self.target}"

    def changes(self) -> list[dict[str, str]]:
        """Before → after for display, as JSON text.

        When both sides are objects, one row per key whose value differs (a missing key
        shows as empty); otherwise a single row with the whole values.
        """
        before, after = self.before, self.after
        if isinstance(before, dict) and isinstance(after, dict):
            rows = []
            for key in sorted(before.keys() | after.keys()):
                if key in before and key in after and before[key] == after[key]:
                    continue
                rows.append(
                    {
                        "field": str(key),
                        "before": _shown(before[key]) if key in before else "",
                        "after": _shown(after[key]) if key in after else "",
                    }
                )
            return rows
        if before is None and after is None:
            return []
        return [
            {
                "field": "",
                "before": "" if before is None else _json_text(before),
                "after": "" if after is None else _json_text(after),
            }
        ]


class RedrivenLetter(models.Model):
    """One dead-letter copy sent back to its topic: which copy, by whom, when, and where the
    new message landed. A later copy whose origin is that place is the same message failing
    again (console.groups.dlq groups copies by it). Written by the DLQ redrive."""

    group = models.CharField(max_length=255)
    #: The copy in ``%DLQ%<group>`` that was sent.
    dlq_message_id = models.CharField(max_length=64)
    #: Where that copy came from (its ORIGIN_* properties).
    origin_topic = models.CharField(max_length=255)
    origin_queue = models.IntegerField()
    origin_offset = models.BigIntegerField()
    #: The message the redrive appended.
    sent_message_id = models.CharField(max_length=64)
    sent_topic = models.CharField(max_length=255)
    sent_queue = models.IntegerField()
    sent_offset = models.BigIntegerField()
    who = models.CharField(max_length=150, blank=True)
    redriven_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["redriven_at", "id"]
        indexes = [models.Index(fields=["group", "dlq_message_id"], name="redriven_group_copy_idx")]

    def __str__(self) -> str:
        sent = f"{self.sent_topic}/{self.sent_queue}/{self.sent_offset}"
        return f"{self.dlq_message_id} of {self.group} sent as {sent}"
