"""Offset resets the console keeps: previews awaiting apply, and every applied reset.

A preview is applied only from here (by its token), so what is applied is what the
server planned, never a plan a client sent back. An applied reset keeps the offsets it
replaced (compactly, ``storeadapter.reset_moves.Moves``), so it can be undone however
many commits the group's consumers made since and however many queues it moved.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import models
from django.utils import timezone

#: A reset preview can be applied for this long.
PREVIEW_LIFETIME = timedelta(minutes=30)
#: Previews this much older than their lifetime are deleted when a new one is kept
#: (until then, applying one says it expired rather than that it is unknown).
PREVIEW_KEPT = timedelta(days=1)
#: Applied resets are kept while they are among a group's latest this many, or younger
#: than ``RESETS_KEPT_FOR``.
RESETS_KEPT = 100
RESETS_KEPT_FOR = timedelta(days=90)


class ResetPreview(models.Model):
    """A reset or undo preview, applied later by its token."""

    token = models.CharField(max_length=16, unique=True)
    group = models.CharField(max_length=255)
    plan = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    @property
    def expired(self) -> bool:
        return timezone.now() - self.created_at > PREVIEW_LIFETIME

    @property
    def expires_at(self):
        return self.created_at + PREVIEW_LIFETIME


class AppliedReset(models.Model):
    """One applied reset or undo of a group's offsets on a topic: its entry in the
    group's Resets list, and what its undo puts back."""

    group = models.CharField(max_length=255)
    topic = models.CharField(max_length=255)
    mode = models.CharField(max_length=16)
    #: The mode's value: a time, a shift, offsets per queue, a group; an undo's: null.
    value = models.JSONField(null=True, blank=True)
    undoes = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="undone_by"
    )
    who = models.CharField(max_length=150, blank=True)
    applied_at = models.DateTimeField(default=timezone.now)
    moved = models.IntegerField(default=0, help_text="Queues whose offset moved.")
    consumed_again = models.BigIntegerField(default=0)
    skipped = models.BigIntegerField(default=0)
    #: Every queue moved as ``Moves.encode()`` columns: committed is the offset before
    #: (-1: never committed), current the position before, target the offset after.
    changes = models.JSONField(default=dict)

    class Meta:
        ordering = ["-applied_at", "-id"]
        indexes = [models.Index(fields=["group", "-applied_at"], name="reset_group_applied_idx")]

    def __str__(self) -> str:
        return f"reset {self.pk} of {self.group} on {self.topic} ({self.mode})"

    @property
    def is_undo(self) -> bool:
        return self.mode == "undo"
