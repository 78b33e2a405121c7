"""Consumer-group changes (offset resets and undos, DLQ redrives, copies, deletion),
each written to the audit log."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from console.audit.log import record
from console.core.store import get_store
from console.monitoring.scale import SampledFigures
from storeadapter.engine import STATUS_DUPLICATE, OffsetChange, StoreError, redrive_dlq
from storeadapter.group_admin import copy_offsets
from storeadapter.offset_reset import ResetPlan, apply_reset
from storeadapter.summaries import group_summary

#: At most this many redriven messages are listed in the audit row.
AUDITED_REDRIVES = 1000
#: At most this many queues of a reset are listed in the audit row (all are counted).
AUDITED_QUEUES = 1000


class GroupNotFoundError(StoreError):
    """No consumer group of that name has committed an offset."""


def undo_url(group: str, topic: str) -> str:
    return f"{reverse('groups:reset_undo', args=[group])}?{urlencode({'topic': topic})}"


def require_group(group: str) -> None:
    if group not in get_store().groups():
        raise GroupNotFoundError(f"there is no consumer group named {group!r}")


def apply_reset_plan(user: Any, plan: ResetPlan) -> list[OffsetChange]:
    """Commit a previewed reset or undo exactly as previewed (ResetConflictError if the
    offsets moved since); nothing is written or audited when the plan changes nothing.
    The audit row lists the first ``AUDITED_QUEUES`` queues moved and counts them all."""
    moving = plan.moving()
    if not moving:
        return []
    written = apply_reset(get_store(), plan, who=user.get_username())
    listed = moving[:AUDITED_QUEUES]
    counts = f"{len(moving)} queues moved"
    if len(moving) > len(listed):
        counts += f" (the first {len(listed)} listed)"
    record(
        user,
        "offset.undo" if plan.mode == "undo" else "offset.reset",
        f"group {plan.group} topic {plan.topic}",
        before={str(queue): committed for queue, committed, _target in listed},
        after={str(queue): target for queue, _committed, target in listed},
        detail=f"mode {plan.mode}, value {plan.value!r}, plan {plan.token}; {counts}",
        link=undo_url(plan.group, plan.topic),
    )
    return written


def redrive(user: Any, group: str, message_ids: list[str] | None) -> list:
    """Send dead letters (the given ids, or all when None) back to their topics."""
    results = redrive_dlq(get_store(), group, message_ids)
    if not results:
        return results
    duplicates = sum(1 for r in results if r.status == STATUS_DUPLICATE)
    record(
        user,
        "dlq.redrive",
        f"group {group}",
        before={"message_ids": message_ids if message_ids is not None else "all"},
        after={
            "sent": [
                {"message_id": r.message_id, "topic": r.topic, "queue": r.queue}
                for r in results[:AUDITED_REDRIVES]
            ],
            "duplicates": duplicates,
        },
        detail=f"redrove {len(results)} dead letter{'' if len(results) == 1 else 's'}",
        link=reverse("groups:dlq", args=[group]),
    )
    return results


def copy_group_offsets(user: Any, source: str, target: str) -> list[OffsetChange]:
    """Give ``target`` the committed offsets of ``source``."""
    store = get_store()
    require_group(source)
    committed = sorted(store.committed_offsets(target).items())
    before = {f"{topic}/{queue}": offset for (topic, queue), offset in committed}
    changes = copy_offsets(store, source, target, who=user.get_username())
    record(
        user,
        "group.copy",
        f"group {target}",
        before={"offsets": before},
        after={"source": source, "changed": [[c.topic, c.queue, c.new] for c in changes]},
    )
    return changes


def delete_group(user: Any, group: str) -> None:
    """Forget a group's offsets and history."""
    store = get_store()
    require_group(group)
    # Totals only, a big topic's lag from the latest sample: not a read of every queue.
    summary = group_summary(store, group, with_queues=False, figures=SampledFigures())
    store.delete_group(group)
    record(
        user,
        "group.delete",
        f"group {group}",
        before={"topics": summary.topics, "lag": summary.lag},
    )
