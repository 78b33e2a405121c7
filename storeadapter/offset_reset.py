"""Offset resets for operators: previewed, applied only as previewed, undoable.

A reset moves a group's committed offsets on one topic to the earliest or latest
offset, to given offsets, to a point in time, or by a shift of ±N. ``preview_reset``
says per queue what would happen (current → target, how many messages would be
consumed again or skipped, what was clamped to the valid range and why);
``apply_reset`` commits exactly that plan, all queues or none, and refuses if any
offset moved since the preview. Each applied reset is recorded in the group's offset
history under a reason naming the reset, which is what ``preview_undo`` reads back.

The console and the REST API both use this module; neither opens store files.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property

from storeadapter.engine import MessageStore, OffsetConflictError, StoreError
from storeadapter.engine.offsets import HISTORY_PER_GROUP
from storeadapter.reset_moves import Moves

MODES = ("earliest", "latest", "offset", "time", "shift", "undo")
#: An undo reads a reset back from the group's offset history, which keeps this many
#: changes: a reset of as many queues or more cannot be undone.
HISTORY_KEPT = HISTORY_PER_GROUP
#: A plan lists every queue of a topic with at most this many queues; of a bigger topic
#: only the first this many that move (it counts them all, and applies them all).
LISTED_QUEUES = 1000
_REASON_PREFIX = "reset:"


class ResetError(StoreError):
    """A reset cannot be previewed or applied; the sentence says why."""


class ResetConflictError(ResetError):
    """The offsets moved since the preview: preview again."""


class ResetNotUndoableError(ResetError):
    """The latest reset is no longer wholly in the offset history: it cannot be undone."""


@dataclass(frozen=True)
class QueueReset:
    queue: int
    committed: int | None
    current: int
    target: int
    min_offset: int
    max_offset: int
    clamped: str | None = None
    span_from_ms: int | None = None
    span_to_ms: int | None = None

    @property
    def moves(self) -> bool:
        """Whether the plan commits a new offset for this queue: one other than the
        committed one (a queue never committed on is read from its first offset already:
        it moves only to another)."""
        return _moves(self.committed, self.current, self.target)

    @property
    def consumed_again(self) -> int:
        """Messages the group will consume a second time (a move backwards)."""
        return max(0, self.current - self.target)

    @property
    def skipped(self) -> int:
        """Messages the group will never consume (a move forwards)."""
        return max(0, self.target - self.current)


@dataclass(frozen=True)
class ResetPlan:
    """A reset's plan. ``queues`` lists every queue of a topic with at most
    ``LISTED_QUEUES`` queues; of a bigger topic only the first ``LISTED_QUEUES`` queues
    that move, and ``moves`` then holds every queue that moves (``total_queues`` is the
    topic's count, ``clamped_total`` how many moving queues were clamped)."""

    group: str
    topic: str
    mode: str
    value: int | dict[str, int] | None
    queues: list[QueueReset] = field(default_factory=list)
    total_queues: int | None = None
    moves: Moves | None = None
    clamped_total: int = 0

    @cached_property
    def token(self) -> str:
        """Names this exact plan (modes, targets and the offsets it was made from)."""
        data = json.dumps(self.as_dict(with_token=False), sort_keys=True).encode()
        return hashlib.sha256(data).hexdigest()[:16]

    @property
    def listed_all(self) -> bool:
        """Whether ``queues`` lists every queue of the topic."""
        return self.moves is None

    @property
    def queue_count(self) -> int:
        return len(self.queues) if self.moves is None else self.total_queues or 0

    @property
    def changes(self) -> list[QueueReset]:
        """The listed queues that move."""
        return [q for q in self.queues if q.moves]

    def moving(self) -> list[tuple[int, int | None, int]]:
        """(queue, committed offset or None, target) of every queue that moves."""
        if self.moves is not None:
            return list(self.moves.changes())
        return [(q.queue, q.committed, q.target) for q in self.changes]

    @property
    def moved(self) -> int:
        """How many queues move."""
        return len(self.changes) if self.moves is None else len(self.moves)

    @property
    def consumed_again(self) -> int:
        """Messages the group will consume a second time, over every queue."""
        if self.moves is not None:
            return self.moves.consumed_again()
        return sum(q.consumed_again for q in self.queues)

    @property
    def skipped(self) -> int:
        """Messages the group will never consume, over every queue."""
        if self.moves is not None:
            return self.moves.skipped()
        return sum(q.skipped for q in self.queues)

    @property
    def clamped(self) -> int:
        """Queues whose target was moved into their range (of a big topic: those that
        move)."""
        if self.moves is not None:
            return self.clamped_total
        return sum(1 for q in self.queues if q.clamped)

    @property
    def undoable(self) -> bool:
        """Whether the group's offset history, which keeps its latest
        ``HISTORY_KEPT`` changes, can hold every change this plan makes (an undo
        reads them back from there)."""
        return self.moved < HISTORY_KEPT

    @property
    def span_from_ms(self) -> int | None:
        """Store time of the oldest message consumed again or skipped, over the listed
        queues."""
        times = [q.span_from_ms for q in self.queues if q.span_from_ms is not None]
        return min(times, default=None)

    @property
    def span_to_ms(self) -> int | None:
        """Store time of the newest message consumed again or skipped, over the listed
        queues."""
        times = [q.span_to_ms for q in self.queues if q.span_to_ms is not None]
        return max(times, default=None)

    @cached_property
    def _moves_text(self) -> dict[str, str] | None:
        return None if self.moves is None else self.moves.encode()

    def as_dict(self, with_token: bool = True) -> dict:
        data = {
            "group": self.group,
            "topic": self.topic,
            "mode": self.mode,
            "value": self.value,
            "queues": [
                {**asdict(q), "consumed_again": q.consumed_again, "skipped": q.skipped}
                for q in self.queues
            ],
        }
        if self.moves is not None:
            data["total_queues"] = self.total_queues
            data["clamped_total"] = self.clamped_total
            data["moves"] = self._moves_text
        if with_token:
            data["undoable"] = self.undoable
            data["span_from_ms"] = self.span_from_ms
            data["span_to_ms"] = self.span_to_ms
            data["token"] = self.token
        return data

    @classmethod
    def from_dict(cls, data: dict, with_moves: bool = False) -> ResetPlan:
        """Rebuild a plan a client sent back; its token must still match its contents.

        A plan of a big topic (``moves``) is taken only ``with_moves``: from where the
        console or the API kept it, never from a client.
        """
        try:
            queues = [
                QueueReset(
                    int(q["queue"]),
                    None if q["committed"] is None else int(q["committed"]),
                    int(q["current"]),
                    int(q["target"]),
                    int(q["min_offset"]),
                    int(q["max_offset"]),
                    q.get("clamped"),
                    _optional_int(q.get("span_from_ms")),
                    _optional_int(q.get("span_to_ms")),
                )
                for q in data["queues"]
            ]
            moves = None
            if "moves" in data:
                if not with_moves:
                    raise ValueError("a big topic's plan is applied by its token")
                moves = Moves.decode(data["moves"])
            plan = cls(
                str(data["group"]),
                str(data["topic"]),
                str(data["mode"]),
                data["value"],
                queues,
                None if moves is None else int(data["total_queues"]),
                moves,
                0 if moves is None else int(data["clamped_total"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ResetError(f"this is not a reset preview ({error})") from None
        if data.get("token") != plan.token:
            raise ResetError("the reset preview was altered; preview the reset again")
        return plan


def preview_reset(
    store: MessageStore,
    group: str,
    topic: str,
    mode: str,
    value: int | dict[int, int] | None = None,
) -> ResetPlan:
    """Plan a reset of ``group`` on every queue of ``topic``.

    ``mode``: ``earliest``, ``latest``, ``offset`` (``value``: queue → offset),
    ``time`` (``value``: ms since the epoch: the first message stored then or later),
    ``shift`` (``value``: ±N from the current position). Targets outside a queue's
    range are clamped to it, and the plan says so. Every queue's range and committed
    offset are read in one call each; of a topic with more than ``LISTED_QUEUES``
    queues, only the listed queues' time spans are read.
    """
    if mode not in MODES[:-1]:
        raise ResetError(f"a reset mode is one of {', '.join(MODES[:-1])}, not {mode!r}")
    if mode in ("time", "shift") and (not isinstance(value, int) or isinstance(value, bool)):
        raise ResetError(f"a {mode} reset needs a whole number, not {value!r}")
    if mode == "offset":
        value = _queue_offsets(store, topic, value)
    ranges = store.queue_ranges(topic)
    committed_offsets = store.committed_offsets(group, topic)
    planner = _Planner(store, topic, len(ranges))
    for queue, (low, high) in enumerate(ranges):
        committed = committed_offsets.get((topic, queue))
        current = low if committed is None else committed
        if mode == "earliest":
            wanted = low
        elif mode == "latest":
            wanted = high
        elif mode == "time":
            wanted = store.offset_for_time(topic, queue, value)
        elif mode == "shift":
            wanted = current + value
        elif queue in value:
            wanted = value[queue]
        else:  # not named: left as it is, committed or not
            planner.keep(queue, committed, current, low, high)
            continue
        planner.add(queue, committed, current, wanted, low, high)
    plan_value = {str(q): o for q, o in value.items()} if isinstance(value, dict) else value
    return planner.plan(group, mode, plan_value)


def preview_undo(store: MessageStore, group: str, topic: str) -> ResetPlan:
    """Plan the undo of the group's latest reset on ``topic``: back to what it replaced."""
    every = store.offset_history(group, limit=HISTORY_KEPT)  # what is kept
    history = [c for c in every if c.topic == topic]
    latest = next((c for c in history if c.reason.startswith(_REASON_PREFIX)), None)
    if latest is None:
        raise ResetError(f"group {group!r} has no reset on {topic!r} to undo")
    if len(every) >= HISTORY_KEPT and every[-1].reason == latest.reason:
        # The kept history starts inside that reset: its older changes may be gone,
        # and an undo of the rest would leave those queues where the reset put them.
        raise ResetNotUndoableError(
            f"the latest reset of {group!r} on {topic!r} is not wholly in the offset "
            f"history, which keeps the group's last {HISTORY_KEPT} changes: it "
            "cannot be undone from there; reset those queues to the offsets you want"
        )
    replaced = {c.queue: c.old for c in history if c.reason == latest.reason}
    ranges = store.queue_ranges(topic)
    committed_offsets = store.committed_offsets(group, topic)
    planner = _Planner(store, topic, len(ranges))
    for queue, (low, high) in enumerate(ranges):
        committed = committed_offsets.get((topic, queue))
        current = low if committed is None else committed
        if queue in replaced:
            before = replaced[queue]
            target = low if before is None else before
            planner.add(queue, committed, current, target, low, high)
        else:
            planner.keep(queue, committed, current, low, high)
    return planner.plan(group, "undo", latest.reason[len(_REASON_PREFIX) :])


class _Planner:
    """Collects a plan's queues: every one of a small topic; of a big one the first
    ``LISTED_QUEUES`` that move as rows and every one that moves as ``Moves``."""

    def __init__(self, store: MessageStore, topic: str, count: int) -> None:
        self.store = store
        self.topic = topic
        self.count = count
        self.rows: list[QueueReset] = []
        self.moves = None if count <= LISTED_QUEUES else Moves()
        self.clamped = 0

    def add(
        self, queue: int, committed: int | None, current: int, wanted: int, low: int, high: int
    ) -> None:
        moves = self.moves
        if moves is not None:
            target = low if wanted < low else high if wanted > high else wanted
            if not _moves(committed, current, target):
                return
            moves.add(queue, committed, current, target)
            self.clamped += target != wanted
            if len(self.rows) >= LISTED_QUEUES:
                return
        planned = _clamped(queue, committed, current, wanted, low, high)
        self.rows.append(_with_span(self.store, self.topic, planned))

    def keep(self, queue: int, committed: int | None, current: int, low: int, high: int) -> None:
        """A queue the plan leaves where it is (listed only when every queue is)."""
        if self.moves is None:
            self.rows.append(QueueReset(queue, committed, current, current, low, high))

    def plan(self, group: str, mode: str, value: object) -> ResetPlan:
        if self.moves is None:
            return ResetPlan(group, self.topic, mode, value, self.rows)
        return ResetPlan(
            group, self.topic, mode, value, self.rows, self.count, self.moves, self.clamped
        )


def apply_reset(store: MessageStore, plan: ResetPlan, who: str) -> list:
    """Commit the plan's targets, all or none; ResetConflictError if any queue's offset
    moved since the preview. Returns the offset changes written."""
    moving = plan.moving()
    if not moving:
        return []
    try:
        return store.commit_offsets(
            plan.group,
            plan.topic,
            {queue: target for queue, _committed, target in moving},
            expected={queue: committed for queue, committed, _target in moving},
            who=who,
            reason=f"{_REASON_PREFIX}{plan.token}:{plan.mode}",
        )
    except OffsetConflictError as error:
        raise ResetConflictError(
            f"the offsets of {plan.group} moved since this preview ({error}); "
            "preview the reset again"
        ) from None


def _moves(committed: int | None, current: int, target: int) -> bool:
    return target != (current if committed is None else committed)


def _clamped(
    queue: int, committed: int | None, current: int, wanted: int, low: int, high: int
) -> QueueReset:
    if wanted < low:
        note = f"{wanted} is below the queue's first offset {low}: moved up to {low}"
        return QueueReset(queue, committed, current, low, low, high, note)
    if wanted > high:
        note = f"{wanted} is past the queue's end {high}: moved down to {high}"
        return QueueReset(queue, committed, current, high, low, high, note)
    return QueueReset(queue, committed, current, wanted, low, high)


def _with_span(store: MessageStore, topic: str, queue: QueueReset) -> QueueReset:
    """The queue's plan with the store times of the first and last message it would
    consume again or skip (none when it does not move or those messages are gone)."""
    first = max(min(queue.current, queue.target), queue.min_offset)
    end = min(max(queue.current, queue.target), queue.max_offset)
    if first >= end:
        return queue
    return replace(
        queue,
        span_from_ms=store.store_time_at(topic, queue.queue, first),
        span_to_ms=store.store_time_at(topic, queue.queue, end - 1),
    )


def _optional_int(value: object) -> int | None:
    return None if value is None else int(value)


def _queue_offsets(store: MessageStore, topic: str, value: object) -> dict[int, int]:
    if not isinstance(value, dict) or not value:
        raise ResetError("an offset reset needs an offset for at least one queue")
    queues = store.topic(topic).queues
    offsets = {}
    for queue, offset in value.items():
        try:
            queue_id = int(queue)
        except (TypeError, ValueError):
            raise ResetError(f"{queue!r} is not a queue id") from None
        if not 0 <= queue_id < queues:
            raise ResetError(f"topic {topic!r} has queues 0 to {queues - 1}; not {queue_id}")
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise ResetError(f"the offset for queue {queue_id} must be a whole number")
        offsets[queue_id] = offset
    return offsets
