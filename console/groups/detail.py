"""A consumer group's figures, for the group pages and the REST API alike.

The list's rows (lag, topics, queues behind, live members), one group's lag per queue with
the member owning each queue and its last commit time, the live members, and the offset
history with which reset is the latest (the undoable one) per topic. Everything is read
through the store's public API; nothing here renders or changes anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from console.monitoring import current
from console.monitoring.metrics import GroupMetrics
from storeadapter.engine import MessageStore, OffsetChange, StoreError, group_members
from storeadapter.summaries import GroupSummary, group_summary

#: A member whose heartbeat is older than this is dead (the engine's default timeout).
MEMBER_TIMEOUT_S = 10
#: How far back the history is read for last-commit times and the latest reset per topic.
HISTORY_SCAN = 10_000
_RESET_PREFIX = "reset:"


def live_members(store: MessageStore, group: str) -> list[dict]:
    """The group's live members (``group_members``); none when their files cannot be read."""
    try:
        return group_members(store.path, group, MEMBER_TIMEOUT_S)
    except (OSError, StoreError):
        return []


# ---------------------------------------------------------------------------- list


@dataclass(frozen=True)
class GroupRow:
    group: str
    lag: int
    topics: int
    queues_behind: int
    members: int
    topic_names: list[str] = field(default_factory=list)
    #: Burrow-style status from the latest metrics sample (OK, WARN, ERR); None before the
    #: first sample that saw the group.
    status: str | None = None


def filter_groups(
    summaries: list[GroupSummary], q: str = "", topic: str = ""
) -> list[GroupSummary]:
    """The groups whose name contains ``q`` (any case) and, with ``topic``, that have
    committed offsets on that topic; in the order given."""
    if q:
        needle = q.casefold()
        summaries = [s for s in summaries if needle in s.group.casefold()]
    if topic:
        summaries = [s for s in summaries if topic in s.topics]
    return summaries


def group_rows(store: MessageStore, summaries: list[GroupSummary]) -> list[GroupRow]:
    """One row per summary (give it a page: it reads each group's member files)."""
    statuses = {m.group: m.status for m in current.group_metrics()}
    return [
        GroupRow(
            s.group,
            s.lag,
            len(s.topics),
            s.queues_behind,
            len(live_members(store, s.group)),
            list(s.topics),
            statuses.get(s.group),
        )
        for s in summaries
    ]


# -------------------------------------------------------------------------- detail


@dataclass(frozen=True)
class LagRow:
    topic: str
    queue: int
    committed: int | None
    max_offset: int
    lag: int
    owner: str | None
    last_commit_ms: int | None
    #: From the latest metrics sample; None before one saw this queue.
    status: str | None = None
    lag_seconds: float | None = None


@dataclass(frozen=True)
class GroupDetail:
    group: str
    summary: GroupSummary
    #: Per queue of every topic the group committed on, in topic then queue order.
    rows: list[LagRow]
    members: list[dict]
    #: The newest ``HISTORY_SCAN`` offset changes, newest first.
    history: list[OffsetChange]
    #: Status, lag in seconds, drain time and expiry risk from the latest metrics sample.
    metrics: GroupMetrics | None = None

    @property
    def lag(self) -> int:
        return self.summary.lag

    @property
    def latest_resets(self) -> dict[str, str]:
        return latest_resets(self.history)

    def topic_tables(self) -> list[dict]:
        """The rows by topic: ``{"topic", "rows", "lag"}`` each."""
        tables: dict[str, list[LagRow]] = {}
        for row in self.rows:
            tables.setdefault(row.topic, []).append(row)
        return [
            {"topic": topic, "rows": rows, "lag": sum(r.lag for r in rows)}
            for topic, rows in tables.items()
        ]


def group_detail(store: MessageStore, group: str) -> GroupDetail:
    """Lag per queue with its owner member and last commit time, members, recent history."""
    summary = group_summary(store, group)
    members = live_members(store, group)
    owners = {
        (topic, int(queue)): member["consumer_id"]
        for member in members
        for topic, queue in member["queues"]
    }
    history = store.offset_history(group, limit=HISTORY_SCAN)
    last_commit = store.last_commit_times(group)
    metrics = current.group_metrics_for(group)
    sampled = {(q.topic, q.queue): q for q in metrics.queues} if metrics else {}
    rows = []
    for q in summary.queues:
        seen = sampled.get((q.topic, q.queue))
        rows.append(
            LagRow(
                q.topic,
                q.queue,
                q.committed,
                q.max_offset,
                q.lag,
                owners.get((q.topic, q.queue)),
                last_commit.get((q.topic, q.queue)),
                seen.status if seen else None,
                seen.lag_seconds if seen else None,
            )
        )
    return GroupDetail(group, summary, rows, members, history, metrics)


# ------------------------------------------------------------------------- history


def latest_resets(history: list[OffsetChange]) -> dict[str, str]:
    """Topic → the reason of the latest reset (or undo) on it, from a newest-first history:
    the changes with that reason are what an undo would take back."""
    latest: dict[str, str] = {}
    for change in history:
        if change.reason.startswith(_RESET_PREFIX):
            latest.setdefault(change.topic, change.reason)
    return latest


def reason_label(reason: str) -> str:
    """A history reason for people: ``reset to earliest``, ``undo of a reset``, or as is."""
    if not reason.startswith(_RESET_PREFIX):
        return reason
    mode = reason.rsplit(":", 1)[-1]
    return "undo of a reset" if mode == "undo" else f"reset to {mode}"
