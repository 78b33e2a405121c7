"""Plain results about a store, for the console's pages and the REST API.

Everything here reads through the engine's public API and returns dataclasses of
plain values, so a view or serializer never touches store objects or files.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from storeadapter.engine import MessageStore


@dataclass(frozen=True)
class QueueRow:
    queue: int
    min_offset: int
    max_offset: int
    messages: int
    frozen: bool
    last_write_ms: int | None


@dataclass(frozen=True)
class TopicSummary:
    name: str
    queues: int
    frozen_queues: int
    messages: int
    last_write_ms: int | None
    created_ms: int


@dataclass(frozen=True)
class GroupQueueLag:
    topic: str
    queue: int
    committed: int | None
    max_offset: int
    lag: int


@dataclass(frozen=True)
class GroupSummary:
    group: str
    topics: list[str]
    lag: int
    queues: list[GroupQueueLag] = field(default_factory=list)


@dataclass(frozen=True)
class SegmentRow:
    name: str
    base: int
    size: int
    disk_bytes: int
    used_bytes: int
    first_store_ms: int | None
    last_store_ms: int | None
    expires_at_ms: int | None


def topic_summaries(store: MessageStore) -> list[TopicSummary]:
    """Every topic with its message count and last write, sorted by name."""
    stats = store.stats()["topics"]
    summaries = []
    for info in store.topics():
        queues = stats.get(info.name, {"queues": {}, "messages": 0})["queues"]
        writes = [q["last_store_time_ms"] for q in queues.values() if q["last_store_time_ms"]]
        summaries.append(
            TopicSummary(
                info.name,
                info.queues,
                len(info.frozen),
                sum(q["messages"] for q in queues.values()),
                max(writes) if writes else None,
                info.created_ms,
            )
        )
    return summaries


def queue_rows(store: MessageStore, topic: str) -> list[QueueRow]:
    """The queues of ``topic``: range, message count, frozen or not, last write."""
    info = store.topic(topic)
    queues = store.topic_stats(topic)["queues"]
    return [
        QueueRow(
            queue,
            row["min_offset"],
            row["max_offset"],
            row["messages"],
            queue in info.frozen,
            row["last_store_time_ms"],
        )
        for queue, row in sorted(queues.items())
    ]


def group_summary(store: MessageStore, group: str) -> GroupSummary:
    """A group's lag in messages per queue of every topic it has committed on.

    A queue of such a topic where the group never committed counts from the queue's
    first offset: those messages are all still to be consumed.
    """
    existing = {info.name for info in store.topics()}
    topics = sorted({c.topic for c in store.offset_history(group, limit=1000)} & existing)
    rows = []
    for topic in topics:
        for queue in range(store.topic(topic).queues):
            low, high = store.queue_range(topic, queue)
            committed = store.committed_offset(group, topic, queue)
            position = low if committed is None else max(committed, low)
            rows.append(GroupQueueLag(topic, queue, committed, high, max(0, high - position)))
    return GroupSummary(group, topics, sum(r.lag for r in rows), rows)


def group_summaries(store: MessageStore) -> list[GroupSummary]:
    """Every group that has committed an offset, most behind first."""
    summaries = [group_summary(store, group) for group in store.groups()]
    return sorted(summaries, key=lambda s: (-s.lag, s.group))


def segment_rows(store: MessageStore) -> list[SegmentRow]:
    """The commit-log segments with their time span and when retention will take them."""
    stats = store.stats()
    retention_ms = int(stats["retention_hours"] * 3_600_000)
    segments = stats["segments"]
    firsts = [store.segment_first_store_time(s["base"]) for s in segments]
    rows = []
    for position, segment in enumerate(segments):
        last = firsts[position + 1] if position + 1 < len(segments) else None
        sealed = position + 1 < len(segments)
        rows.append(
            SegmentRow(
                segment["name"],
                segment["base"],
                segment["size"],
                segment["disk_bytes"],
                segment["used_bytes"],
                firsts[position],
                last,
                last + retention_ms if sealed and last is not None else None,
            )
        )
    return rows
