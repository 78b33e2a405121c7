"""Offset resets for operators: previewed, then applied to a group that may be running.

A reset moves a group's committed offsets on one topic in one of the modes of
``storeadapter.reset_modes``. ``preview_reset`` says per queue what would happen
(current → target, how many messages would be consumed again or skipped, what was
clamped to the valid range and why). ``apply_reset`` commits the plan, all queues or
none, while the group's consumers go on committing:

- an absolute mode (every mode but shift, and an undo) commits the previewed targets,
  whatever the consumers committed since the preview;
- a shift is taken from the offsets at the moment of applying;
- either is refused (``ResetOutdatedError``: preview again) only when the preview no
  longer means what it said: the topic gained or lost queues, or a target fell below a
  queue's first offset (retention deleted those messages) or past its end.

It returns the offset changes written, whose ``old`` is each queue's real offset before.
``preview_undo`` plans putting back what an applied reset replaced; the console keeps
the replaced offsets of every applied reset (``Moves``) for that.

The console and the REST API both use this module; neither opens store files.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property

from storeadapter.engine import MessageStore, OffsetChange, OffsetConflictError, group_position
from storeadapter.reset_modes import UNDO, ResetError, is_relative, mode_named
from storeadapter.reset_moves import Moves

#: A plan lists every queue of a topic with at most this many queues; of a bigger topic
#: only the first this many that move (it counts them all, and applies them all).
LISTED_QUEUES = 1000
#: How often a shift is read again and retried when a consumer commits between the
#: read and the commit (each try takes milliseconds; consumers commit every second).
APPLY_ATTEMPTS = 20
REASON_PREFIX = "reset:"


class ResetOutdatedError(ResetError):
    """The preview no longer means what it said (queues added or removed, a target
    outside a queue's range now): preview again."""


class ResetConflictError(ResetError):
    """The group's consumers committed between every read and commit of a shift."""


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
    #: Whether the reset sets this queue (False: an offset reset leaves it as it is).
    planned: bool = True

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
    that move, and ``moves`` then holds every queue the reset sets. ``total_queues`` is
    the topic's count of queues when previewed, ``clamped_total`` how many moving queues
    were clamped, ``past_newest`` how many queues a time is after the newest message of.
    An undo's ``value`` is the id of the reset it undoes."""

    group: str
    topic: str
    mode: str
    value: int | str | dict[str, int] | None
    queues: list[QueueReset] = field(default_factory=list)
    total_queues: int = 0
    moves: Moves | None = None
    clamped_total: int = 0
    past_newest: int = 0

    @property
    def listed_all(self) -> bool:
        """Whether ``queues`` lists every queue of the topic."""
        return self.moves is None

    @property
    def queue_count(self) -> int:
        return self.total_queues

    @property
    def relative(self) -> bool:
        """Whether its targets are taken from the offsets when it is applied (a shift)."""
        return is_relative(self.mode)

    @property
    def changes(self) -> list[QueueReset]:
        """The listed queues that move."""
        return [q for q in self.queues if q.moves]

    def targets(self) -> Iterable[tuple[int, int]]:
        """(queue, target) of every queue the reset sets, moving or not."""
        if self.moves is not None:
            return zip(self.moves.queue, self.moves.target, strict=True)
        return ((q.queue, q.target) for q in self.queues if q.planned)

    @cached_property
    def moved(self) -> int:
        """How many queues move."""
        return len(self.changes) if self.moves is None else self.moves.moved()

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

    def view(self) -> PlanView:
        """The plan as an operator reads it (``PlanView``)."""
        return PlanView(
            group=self.group,
            topic=self.topic,
            mode=self.mode,
            value=self.value,
            queues=list(self.queues),
            past_newest=self.past_newest,
            span_from_ms=self.span_from_ms,
            span_to_ms=self.span_to_ms,
            queue_count=self.queue_count,
            listed_all=self.listed_all,
            changes=self.moved,
            consumed_again=self.consumed_again,
            skipped=self.skipped,
            clamped=self.clamped,
            relative=self.relative,
        )

    def as_dict(self) -> dict:
        """The plan as JSON (``from_dict`` reads it back); a big topic's moves as text."""
        data = {
            "group": self.group,
            "topic": self.topic,
            "mode": self.mode,
            "value": self.value,
            "queues": [
                {**asdict(q), "consumed_again": q.consumed_again, "skipped": q.skipped}
                for q in self.queues
            ],
            "total_queues": self.total_queues,
            "clamped_total": self.clamped_total,
            "past_newest": self.past_newest,
            "span_from_ms": self.span_from_ms,
            "span_to_ms": self.span_to_ms,
        }
        if self.moves is not None:
            data["moves"] = self.moves.encode()
        return data

    @classmethod
    def from_dict(cls, data: dict) -> ResetPlan:
        """The plan ``as_dict`` wrote (where the console keeps previews); ResetError if
        ``data`` is not one."""
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
                    bool(q.get("planned", True)),
                )
                for q in data["queues"]
            ]
            moves = Moves.decode(data["moves"]) if "moves" in data else None
            return cls(
                str(data["group"]),
                str(data["topic"]),
                str(data["mode"]),
                data["value"],
                queues,
                int(data["total_queues"]),
                moves,
                int(data["clamped_total"]),
                int(data.get("past_newest", 0)),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ResetError(f"this is not a reset preview ({error})") from None


@dataclass(frozen=True)
class PlanView:
    """A plan as an operator reads it (the API's preview, ``tidemark reset-offsets
    --json``): its listed queues and its counts over every queue, without what the plan
    keeps only to be applied (a big topic's ``moves``, ``total_queues``,
    ``clamped_total``). ``changes`` counts the queues that would move now."""

    group: str
    topic: str
    mode: str
    value: int | str | dict[str, int] | None
    queues: list[QueueReset]
    past_newest: int
    span_from_ms: int | None
    span_to_ms: int | None
    queue_count: int
    listed_all: bool
    changes: int
    consumed_again: int
    skipped: int
    clamped: int
    relative: bool


def preview_reset(
    store: MessageStore,
    group: str,
    topic: str,
    mode: str,
    value: int | str | dict[int, int] | None = None,
) -> ResetPlan:
    """Plan a reset of ``group`` on every queue of ``topic``.

    ``mode`` is one of ``storeadapter.reset_modes.MODE_NAMES``: ``earliest``,
    ``latest``, ``offset`` (``value``: queue → offset), ``time`` (``value``: ms since the
    epoch: the first message stored then or later), ``shift`` (``value``: ±N from the
    current position), ``group`` (``value``: another group, whose committed offsets to
    take); each mode's ``targets`` in that table says where it puts each queue. Targets
    outside a queue's range are clamped to it, and the plan says so.
    Every queue's range and committed offset are read in one call each; of a topic with
    more than ``LISTED_QUEUES`` queues, only the listed queues' time spans are read.
    """
    spec = mode_named(mode)
    targets = spec.targets(store, group, topic, value)
    ranges = store.queue_ranges(topic)
    committed_offsets = store.committed_offsets(group, topic)
    planner = _Planner(store, topic, len(ranges))
    for queue, (low, high) in enumerate(ranges):
        committed = committed_offsets.get((topic, queue))
        current = group_position(committed, low)
        wanted = targets.at(queue, low, high, current)
        if wanted is None:  # left as it is, committed or not
            planner.keep(queue, committed, current, low, high)
            continue
        planner.past_newest += spec.counts_past_newest and wanted >= high
        planner.add(queue, committed, current, wanted, low, high)
    return planner.plan(group, mode, targets.value)


def preview_undo(
    store: MessageStore,
    group: str,
    topic: str,
    replaced: Iterable[tuple[int, int | None]],
    reset_id: int,
) -> ResetPlan:
    """Plan putting back what an applied reset (``reset_id``) replaced on ``topic``:
    ``replaced`` gives each queue it moved and its offset before (None: never committed,
    put back to the queue's first offset). Clamped into each queue's range like any
    reset."""
    before = dict(replaced)
    ranges = store.queue_ranges(topic)
    committed_offsets = store.committed_offsets(group, topic)
    planner = _Planner(store, topic, len(ranges))
    for queue, (low, high) in enumerate(ranges):
        committed = committed_offsets.get((topic, queue))
        current = group_position(committed, low)
        if queue in before:
            planner.add(queue, committed, current, group_position(before[queue], low), low, high)
        else:
            planner.keep(queue, committed, current, low, high)
    return planner.plan(group, UNDO, reset_id)


def apply_reset(store: MessageStore, plan: ResetPlan, who: str, reason: str) -> list[OffsetChange]:
    """Commit the plan, all queues or none, on a group whose consumers may be running.

    An absolute plan commits its targets as previewed; a shift is taken from the offsets
    read just before committing (read again and retried if a consumer commits in
    between). ResetOutdatedError when the preview no longer means what it said,
    ResetConflictError when the consumers committed between every read and commit.
    Returns the offset changes written: ``old`` is each queue's offset just before.
    """
    for _attempt in range(APPLY_ATTEMPTS):
        ranges = store.queue_ranges(plan.topic)
        if len(ranges) != plan.total_queues:
            raise ResetOutdatedError(
                f"topic {plan.topic} has {len(ranges)} queues now, {plan.total_queues} when "
                "this was previewed; preview the reset again"
            )
        committed = store.committed_offsets(plan.group, plan.topic)
        if plan.relative:
            targets, expected = _shifted(plan, ranges, committed)
        else:
            targets, expected = _as_previewed(plan, ranges, committed), None
        if not targets:
            return []
        try:
            return store.commit_offsets(
                plan.group, plan.topic, targets, expected=expected, who=who, reason=reason
            )
        except OffsetConflictError:
            continue
    raise ResetConflictError(
        f"the consumers of {plan.group} committed on {plan.topic} between each of "
        f"{APPLY_ATTEMPTS} reads and commits of this shift; nothing was changed, apply it again"
    )


def _as_previewed(
    plan: ResetPlan, ranges: list[tuple[int, int]], committed: dict[tuple[str, int], int]
) -> dict[int, int]:
    """The plan's targets that move now; ResetOutdatedError for one outside its queue."""
    targets = {}
    outside = []
    for queue, target in plan.targets():
        low, high = ranges[queue]
        if not low <= target <= high:
            outside.append(f"{queue} ({target} is outside {low}–{high})")
            continue
        offset = committed.get((plan.topic, queue))
        if _moves(offset, group_position(offset, low), target):
            targets[queue] = target
    if outside:
        shown = ", ".join(outside[:5]) + (
            f" and {len(outside) - 5} more" if len(outside) > 5 else ""
        )
        raise ResetOutdatedError(
            f"the targets of queue{'s' if len(outside) > 1 else ''} {shown} are no longer "
            "stored offsets (retention deleted messages since the preview); preview the "
            "reset again"
        )
    return targets


def _shifted(
    plan: ResetPlan, ranges: list[tuple[int, int]], committed: dict[tuple[str, int], int]
) -> tuple[dict[int, int], dict[int, int | None]]:
    """A shift's targets from the offsets now, and those offsets (the commit's
    ``expected``)."""
    shift = int(plan.value)
    targets: dict[int, int] = {}
    expected: dict[int, int | None] = {}
    for queue, (low, high) in enumerate(ranges):
        offset = committed.get((plan.topic, queue))
        current = group_position(offset, low)
        target = min(max(current + shift, low), high)
        if _moves(offset, current, target):
            targets[queue] = target
            expected[queue] = offset
    return targets, expected


def reset_reason(reset_id: int, mode: str) -> str:
    """The offset history's reason for the changes of applied reset ``reset_id``."""
    return f"{REASON_PREFIX}{reset_id}:{mode}"


def describe_reason(reason: str) -> tuple[str, int | None]:
    """A history reason for people (``reset to earliest``, ``undo of a reset``, or the
    reason as is) and the id of the applied reset it names, if any."""
    if not reason.startswith(REASON_PREFIX):
        return reason, None
    name, _, mode = reason[len(REASON_PREFIX) :].rpartition(":")
    label = "undo of a reset" if mode == UNDO else f"reset to {mode}"
    return label, int(name) if name.isdigit() else None


class _Planner:
    """Collects a plan's queues: every one of a small topic; of a big one the first
    ``LISTED_QUEUES`` that move as rows and every one it sets as ``Moves``."""

    def __init__(self, store: MessageStore, topic: str, count: int) -> None:
        self.store = store
        self.topic = topic
        self.count = count
        self.rows: list[QueueReset] = []
        self.moves = None if count <= LISTED_QUEUES else Moves()
        self.clamped = 0
        self.past_newest = 0

    def add(
        self, queue: int, committed: int | None, current: int, wanted: int, low: int, high: int
    ) -> None:
        moves = self.moves
        if moves is not None:
            target = low if wanted < low else high if wanted > high else wanted
            moves.add(queue, committed, current, target)
            if not _moves(committed, current, target):
                return
            self.clamped += target != wanted
            if len(self.rows) >= LISTED_QUEUES:
                return
        planned = _clamped(queue, committed, current, wanted, low, high)
        self.rows.append(_with_span(self.store, self.topic, planned))

    def keep(self, queue: int, committed: int | None, current: int, low: int, high: int) -> None:
        """A queue the plan leaves where it is (listed only when every queue is)."""
        if self.moves is None:
            self.rows.append(
                QueueReset(queue, committed, current, current, low, high, planned=False)
            )

    def plan(self, group: str, mode: str, value: object) -> ResetPlan:
        return ResetPlan(
            group,
            self.topic,
            mode,
            value,
            self.rows,
            self.count,
            self.moves,
            self.clamped if self.moves is not None else 0,
            self.past_newest,
        )


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
