import json

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone


def _json_text(value) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False, sort_keys=True)


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
                        "before": _json_text(before[key]) if key in before else "",
                        "after": _json_text(after[key]) if key in after else "",
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
