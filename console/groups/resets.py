"""Reset previews kept for a later apply, and the applied resets a group's undo reads.

Pages and API alike keep every preview here and apply it only by its token
(console.operations.groups.apply_kept_preview); a refused or expired preview is planned
again from what it asked for (``preview_again``). Nothing here changes offsets.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, fields
from itertools import islice

from django.db.models import QuerySet
from django.utils import timezone

from console.groups.models import (
    PREVIEW_KEPT,
    PREVIEW_LIFETIME,
    RESETS_KEPT,
    RESETS_KEPT_FOR,
    AppliedReset,
    ResetPreview,
)
from storeadapter.engine import MessageStore
from storeadapter.offset_reset import (
    LISTED_QUEUES,
    PlanView,
    ResetError,
    ResetPlan,
    preview_reset,
    preview_undo,
)
from storeadapter.reset_modes import UNDO
from storeadapter.reset_moves import NEVER, Moves


class PreviewNotFoundError(ResetError):
    """No preview is kept under that token for that group (never made, or applied)."""


class PreviewExpiredError(ResetError):
    """The preview is older than PREVIEW_LIFETIME: preview again."""


class WrongPreviewError(ResetError):
    """The token names another kind of preview than the one being applied here."""


class ResetNotFoundError(ResetError):
    """The group has no applied reset of that id (never, or no longer kept)."""


def preview_minutes() -> int:
    return int(PREVIEW_LIFETIME.total_seconds() // 60)


def keep_preview(plan: ResetPlan) -> ResetPreview:
    """Keep ``plan`` under a new token (dropping long-expired previews)."""
    now = timezone.now()
    ResetPreview.objects.filter(created_at__lt=now - PREVIEW_LIFETIME - PREVIEW_KEPT).delete()
    return ResetPreview.objects.create(
        token=secrets.token_hex(8), group=plan.group, plan=plan.as_dict(), created_at=now
    )


@dataclass(frozen=True)
class KeptPlanView(PlanView):
    """A kept preview as the API answers it: the plan's view, the token that applies it
    and until when, and the group's live members (they continue from the new offsets)."""

    token: str
    live_members: int
    expires_ms: int


def kept_view(plan: ResetPlan, kept: ResetPreview, live_members: int) -> KeptPlanView:
    """``plan``'s view with the token and expiry of ``kept``, where it is kept."""
    view = plan.view()
    return KeptPlanView(
        **{f.name: getattr(view, f.name) for f in fields(view)},
        token=kept.token,
        live_members=live_members,
        expires_ms=int(kept.expires_at.timestamp() * 1000),
    )


def kept_preview(token: str, group: str) -> ResetPreview:
    """The preview kept under ``token`` for ``group``, expired or not."""
    kept = ResetPreview.objects.filter(token=token, group=group).first()
    if kept is None:
        raise PreviewNotFoundError(
            f"there is no reset preview {token!r} for group {group!r} (never made, or "
            "applied already)"
        )
    return kept


def kept_plan(kept: ResetPreview) -> ResetPlan:
    """The plan of a kept preview, refused when it expired."""
    if kept.expired:
        raise PreviewExpiredError(
            f"the preview {kept.token!r} is more than {preview_minutes()} minutes old"
        )
    return ResetPlan.from_dict(kept.plan)


def preview_again(store: MessageStore, kept: ResetPreview) -> ResetPlan:
    """A new plan of what the kept preview asked for, from the offsets as they are now."""
    plan = ResetPlan.from_dict(kept.plan)
    if plan.mode == UNDO:
        return preview_undo_of(store, applied_reset(plan.group, int(plan.value)))
    return preview_reset(store, plan.group, plan.topic, plan.mode, plan.value)


# ------------------------------------------------------------------- applied resets


def applied_resets(group: str) -> QuerySet[AppliedReset]:
    """The group's applied resets, newest first."""
    return AppliedReset.objects.filter(group=group).order_by("-applied_at", "-id")


def applied_reset(group: str, reset_id: int) -> AppliedReset:
    reset = AppliedReset.objects.filter(group=group, pk=reset_id).first()
    if reset is None:
        raise ResetNotFoundError(
            f"group {group!r} has no reset #{reset_id} (resets are kept while among its "
            f"latest {RESETS_KEPT} or younger than {RESETS_KEPT_FOR.days} days)"
        )
    return reset


def replaced_offsets(reset: AppliedReset) -> Iterator[tuple[int, int | None]]:
    """(queue, offset before the reset; None: never committed) of every queue it moved."""
    moves = Moves.decode(reset.changes)
    for queue, before in zip(moves.queue, moves.committed, strict=True):
        yield queue, None if before == NEVER else before


def moved_queues(reset: AppliedReset) -> Iterator[tuple[int, int | None, int]]:
    """(queue, before, after) of every queue the reset moved."""
    return Moves.decode(reset.changes).changes()


@dataclass(frozen=True)
class MovedQueue:
    """A queue an applied reset moved: its offset before (None: never committed) and
    after."""

    queue: int
    before: int | None
    after: int


@dataclass(frozen=True)
class ResetEntry:
    """An applied reset as the group's Resets list says it."""

    id: int
    group: str
    topic: str
    mode: str
    value: int | str | dict[str, int] | None
    undoes: int | None
    undone_by: list[int]
    who: str
    applied_ms: int
    moved: int
    consumed_again: int
    skipped: int

    @classmethod
    def of(cls, reset: AppliedReset) -> ResetEntry:
        """``reset``'s entry (its ``undone_by`` prefetched or read here)."""
        return cls(
            id=reset.pk,
            group=reset.group,
            topic=reset.topic,
            mode=reset.mode,
            value=reset.value,
            undoes=reset.undoes_id,
            undone_by=sorted(undo.pk for undo in reset.undone_by.all()),
            who=reset.who,
            applied_ms=int(reset.applied_at.timestamp() * 1000),
            moved=reset.moved,
            consumed_again=reset.consumed_again,
            skipped=reset.skipped,
        )


@dataclass(frozen=True)
class ResetDetail(ResetEntry):
    """An applied reset with the first ``LISTED_QUEUES`` queues it moved."""

    queues: list[MovedQueue]
    listed_all: bool

    @classmethod
    def of(cls, reset: AppliedReset) -> ResetDetail:
        entry = ResetEntry.of(reset)
        queues = [MovedQueue(*moved) for moved in islice(moved_queues(reset), LISTED_QUEUES)]
        return cls(
            **{f.name: getattr(entry, f.name) for f in fields(entry)},
            queues=queues,
            listed_all=reset.moved <= len(queues),
        )


def preview_undo_of(store: MessageStore, reset: AppliedReset) -> ResetPlan:
    """The plan that puts back what ``reset`` replaced."""
    return preview_undo(store, reset.group, reset.topic, replaced_offsets(reset), reset.pk)


def forget_old_resets(group: str) -> int:
    """Delete the group's resets that are neither among its latest ``RESETS_KEPT`` nor
    younger than ``RESETS_KEPT_FOR``; returns how many."""
    kept_ids = list(applied_resets(group).values_list("pk", flat=True)[:RESETS_KEPT])
    old = applied_resets(group).exclude(pk__in=kept_ids)
    deleted, _ = old.filter(applied_at__lt=timezone.now() - RESETS_KEPT_FOR).delete()
    return deleted
