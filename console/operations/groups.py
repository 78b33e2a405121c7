"""Consumer-group changes (offset resets and their undos, DLQ redrives, deletion), each
written to the audit log."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.urls import reverse

from console.audit.log import record
from console.core.store import get_store
from console.groups.models import AppliedReset
from console.groups.resets import (
    WrongPreviewError,
    applied_reset,
    forget_old_resets,
    kept_plan,
    kept_preview,
)
from console.monitoring.scale import SampledFigures
from storeadapter.engine import (
    STATUS_DUPLICATE,
    AppendResult,
    OffsetChange,
    StoreError,
    TopicNotFoundError,
    dlq_topic,
    group_position,
    redrive_dlq,
)
from storeadapter.offset_reset import LISTED_QUEUES, ResetPlan, apply_reset, reset_reason
from storeadapter.reset_modes import UNDO
from storeadapter.reset_moves import Moves
from storeadapter.summaries import group_summary

#: At most this many redriven messages are listed in the audit row.
AUDITED_REDRIVES = 1000
#: At most this many queues of a reset are listed in the audit row (all are counted).
AUDITED_QUEUES = 1000


class GroupNotFoundError(StoreError):
    """No consumer group of that name has committed an offset."""


def reset_undo_url(group: str, reset_id: int) -> str:
    """The console page that previews the undo of applied reset ``reset_id``."""
    return reverse("groups:reset_undo", args=[group, reset_id])


def require_group(group: str) -> None:
    if group not in get_store().groups():
        raise GroupNotFoundError(f"there is no consumer group named {group!r}")


@dataclass(frozen=True)
class AppliedResult:
    """What applying a preview did: its entry in the Resets list (None when nothing
    moved) and the offset changes written, each with the real offset before."""

    plan: ResetPlan
    reset: AppliedReset | None
    changes: list[OffsetChange]

    def view(self) -> ResetApplied:
        """What was applied as the API and ``tidemark reset-offsets --json`` say it."""
        reset, plan = self.reset, self.plan
        return ResetApplied(
            reset_id=None if reset is None else reset.pk,
            group=plan.group,
            topic=plan.topic,
            mode=plan.mode,
            changed=len(self.changes),
            changes=self.changes[:LISTED_QUEUES],
            consumed_again=0 if reset is None else reset.consumed_again,
            skipped=0 if reset is None else reset.skipped,
        )


@dataclass(frozen=True)
class ResetApplied:
    """An applied preview as its answer says it: the reset's id (None: no queue moved),
    how many queues moved and the first ``LISTED_QUEUES`` of their offset changes."""

    reset_id: int | None
    group: str
    topic: str
    mode: str
    changed: int
    changes: list[OffsetChange]
    consumed_again: int
    skipped: int


def apply_kept_preview(
    user: Any, group: str, token: str, undoing: int | None | bool = None
) -> AppliedResult:
    """Apply the preview kept under ``token`` to ``group``'s offsets, as its mode says
    (console.groups.resets and storeadapter.offset_reset), record it in the group's
    Resets list and the audit log, and forget the preview.

    ``undoing``: None takes any preview; False only a reset's; a reset id only the
    preview of that reset's undo (WrongPreviewError otherwise). Raises the errors of
    ``kept_preview``, ``kept_plan`` and ``apply_reset``; then nothing was changed and
    the preview is still kept (to be previewed again).
    """
    kept = kept_preview(token, group)
    plan = kept_plan(kept)
    _check_kind(plan, undoing)
    store = get_store()
    who = user.get_username()
    # The reset's row first, for the id its offset changes name; not in a transaction that
    # would hold the database's write lock while the engine commits (a million queues:
    # seconds).
    reset = AppliedReset.objects.create(
        group=group,
        topic=plan.topic,
        mode=plan.mode,
        value=None if plan.mode == UNDO else plan.value,
        undoes=applied_reset(group, int(plan.value)) if plan.mode == UNDO else None,
        who=who,
    )
    try:
        changes = apply_reset(store, plan, who=who, reason=reset_reason(reset.pk, plan.mode))
    except BaseException:
        reset.delete()
        raise
    with transaction.atomic():
        kept.delete()
        if not changes:
            reset.delete()
            return AppliedResult(plan, None, [])
        moves = _moves_of(store, plan.topic, changes)
        reset.moved = len(moves)
        reset.consumed_again = moves.consumed_again()
        reset.skipped = moves.skipped()
        reset.changes = moves.encode()
        reset.save()
        _audit(user, plan, reset, changes)
    forget_old_resets(group)
    return AppliedResult(plan, reset, changes)


def _check_kind(plan: ResetPlan, undoing: int | None | bool) -> None:
    if undoing is None:
        return
    if undoing is False and plan.mode == UNDO:
        raise WrongPreviewError(
            f"that preview undoes reset #{plan.value}: apply it at its resets/{plan.value}/undo/"
        )
    if undoing is not False and (plan.mode != UNDO or int(plan.value) != undoing):
        raise WrongPreviewError(f"that preview is not the undo of reset #{undoing}")


def _moves_of(store: Any, topic: str, changes: list[OffsetChange]) -> Moves:
    """The changes as compact columns: before (never committed: -1, read from the
    queue's first offset), after."""
    firsts = store.queue_ranges(topic) if any(c.old is None for c in changes) else None
    moves = Moves()
    for change in sorted(changes, key=lambda c: c.queue):
        low = 0 if firsts is None else firsts[change.queue][0]  # read when never committed
        moves.add(change.queue, change.old, group_position(change.old, low), change.new)
    return moves


def _audit(user: Any, plan: ResetPlan, reset: AppliedReset, changes: list[OffsetChange]) -> None:
    listed = changes[:AUDITED_QUEUES]
    counts = f"{len(changes)} queue{'' if len(changes) == 1 else 's'} moved"
    if len(changes) > len(listed):
        counts += f" (the first {len(listed)} listed)"
    if plan.mode == UNDO:
        what = f"undo of reset #{plan.value}"
    else:
        what = f"to {plan.mode}" + ("" if plan.value is None else f" {_value_text(plan)}")
    record(
        user,
        "offset.undo" if plan.mode == UNDO else "offset.reset",
        f"group {plan.group} topic {plan.topic}",
        before={str(c.queue): c.old for c in listed},
        after={str(c.queue): c.new for c in listed},
        detail=f"reset #{reset.pk}: {what}; {counts}",
        link=reset_undo_url(plan.group, reset.pk),
    )


def _value_text(plan: ResetPlan) -> str:
    """A plan's value as the Resets list shows it: a time in UTC, a signed shift, a
    group's name, offsets per queue as queue=offset."""
    if plan.mode == "time":
        when = datetime.fromtimestamp(int(plan.value) / 1000, tz=UTC)
        return when.strftime("%Y-%m-%d %H:%M:%S UTC")
    if plan.mode == "shift":
        return f"{int(plan.value):+d}"
    if isinstance(plan.value, dict):
        return ", ".join(f"{queue}={offset}" for queue, offset in plan.value.items())
    return str(plan.value)


# ----------------------------------------------------------------------------- DLQ


@dataclass(frozen=True)
class Redriven:
    """What a redrive did: every dead letter handled, and how many of them were sent now
    (the others had been redriven within the store's dedup window: not sent again)."""

    results: list[AppendResult]

    @property
    def handled(self) -> int:
        """Dead letters handled: sent + duplicates."""
        return len(self.results)

    @property
    def sent(self) -> int:
        return sum(1 for r in self.results if r.status != STATUS_DUPLICATE)

    @property
    def duplicates(self) -> int:
        return len(self.results) - self.sent


def redrive(user: Any, group: str, message_ids: list[str] | None) -> Redriven:
    """Send dead letters (the given ids, or all when None) back to their topics."""
    outcome = Redriven(redrive_dlq(get_store(), group, message_ids))
    results = outcome.results
    if not results:
        return outcome
    record(
        user,
        "dlq.redrive",
        f"group {group}",
        before={"message_ids": message_ids if message_ids is not None else "all"},
        after={
            "sent": [
                {"message_id": r.message_id, "topic": r.topic, "queue": r.queue}
                for r in results[:AUDITED_REDRIVES]
                if r.status != STATUS_DUPLICATE
            ],
            "duplicates": outcome.duplicates,
        },
        detail=redrive_sentence(outcome),
        link=reverse("groups:dlq", args=[group]),
    )
    return outcome


def redrive_sentence(outcome: Redriven) -> str:
    """What a redrive did, in the words the DLQ page and the audit row both use."""
    sent, duplicates = outcome.sent, outcome.duplicates
    if sent == 1:
        text = "Sent 1 dead letter back to its topic."
    else:
        text = f"Sent {sent:,} dead letters back to their topics."
    if duplicates:
        verb = "was" if duplicates == 1 else "were"
        text += f" {duplicates:,} had been redriven before and {verb} not sent again."
    return text


# -------------------------------------------------------------------------- delete


def delete_group(user: Any, group: str) -> None:
    """Forget a group's offsets and history, and delete its DLQ topic (its dead letters
    belong to no one once the group is gone)."""
    store = get_store()
    require_group(group)
    # Totals only, a big topic's lag from the latest sample: not a read of every queue.
    summary = group_summary(store, group, with_queues=False, figures=SampledFigures())
    store.delete_group(group)
    try:
        store.delete_topic(dlq_topic(group))
        dlq_deleted = True
    except TopicNotFoundError:
        dlq_deleted = False
    record(
        user,
        "group.delete",
        f"group {group}",
        before={"topics": summary.topics, "lag": summary.lag, "dlq_deleted": dlq_deleted},
    )
