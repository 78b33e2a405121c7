"""Plain results about a store, for the console's pages and the REST API.

Everything here reads through the engine's public API and returns dataclasses of
plain values, so a view or serializer never touches store objects or files.

Pages show stores of thousands of topics and queues and hundreds of groups: each
function reads only what its result holds (a page of topics, one topic's groups, lag
totals without per-queue rows), and the result classes have slots (fewer objects for
the garbage collector per request).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from storeadapter.engine import InvalidNameError, MessageStore, TopicNotFoundError


@dataclass(frozen=True, slots=True)
class QueueRow:
    queue: int
    min_offset: int
    max_offset: int
    messages: int
    frozen: bool
    last_write_ms: int | None


@dataclass(frozen=True, slots=True)
class TopicSummary:
    name: str
    queues: int
    frozen_queues: int
    messages: int
    last_write_ms: int | None
    created_ms: int


@dataclass(frozen=True, slots=True)
class GroupQueueLag:
    topic: str
    queue: int
    committed: int | None
    max_offset: int
    lag: int


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """A group's lag. ``queues`` has a row per queue of its topics, unless the summary
    was asked for without them (``with_queues=False``); ``queue_count`` and
    ``queues_behind`` (queues with lag) are there either way."""

    group: str
    topics: list[str]
    lag: int
    queues: list[GroupQueueLag] = field(default_factory=list)
    queue_count: int = 0
    queues_behind: int = 0


@dataclass(frozen=True, slots=True)
class SegmentRow:
    name: str
    base: int
    size: int
    disk_bytes: int
    used_bytes: int
    first_store_ms: int | None
    last_store_ms: int | None
    expires_at_ms: int | None


def topic_summaries(store: MessageStore, names: Iterable[str] | None = None) -> list[TopicSummary]:
    """Every topic with its message count and last write, sorted by name.

    With ``names``, only those topics, in that order (a page of a list sorted by name
    or queue count needs no other topic's figures); a name that is not a topic (any
    more) is left out.
    """
    if names is None:
        infos = store.topics()
    else:
        infos = []
        for name in names:
            try:
                infos.append(store.topic(name))
            except (TopicNotFoundError, InvalidNameError):
                continue
    summaries = []
    for info in infos:
        try:
            queues = store.topic_stats(info.name)["queues"]
        except TopicNotFoundError:  # deleted since topics() was read
            continue
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


class TopicSummaryList:
    """``topic_summaries`` of ``names`` in that order, computed only for the slice taken:
    give it to a Paginator and only the page shown is summarized."""

    def __init__(self, store: MessageStore, names: list[str]) -> None:
        self.store = store
        self.names = names

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, wanted: int | slice) -> TopicSummary | list[TopicSummary]:
        if isinstance(wanted, slice):
            return topic_summaries(self.store, self.names[wanted])
        found = topic_summaries(self.store, [self.names[wanted]])
        if not found:
            raise IndexError(f"topic {self.names[wanted]!r} was deleted")
        return found[0]


@dataclass(frozen=True, slots=True)
class StoreTotals:
    topics: int
    queues: int
    messages: int


def store_totals(store: MessageStore) -> StoreTotals:
    """How many topics, queues and messages the store holds (no per-queue detail)."""
    topics = queues = messages = 0
    for info in store.topics():
        try:
            ranges = store.queue_ranges(info.name)
        except TopicNotFoundError:  # deleted since topics() was read
            continue
        topics += 1
        queues += len(ranges)
        messages += sum(high - low for low, high in ranges)
    return StoreTotals(topics, queues, messages)


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


class _Ranges:
    """Queue ranges per topic, each topic's read once: for summaries of many groups,
    which share topics. A topic deleted meanwhile has none."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self._ranges: dict[str, list[tuple[int, int]] | None] = {}

    def __call__(self, topic: str) -> list[tuple[int, int]] | None:
        if topic not in self._ranges:
            try:
                self._ranges[topic] = self.store.queue_ranges(topic)
            except TopicNotFoundError:
                self._ranges[topic] = None
        return self._ranges[topic]


def _group_summary(
    store: MessageStore,
    group: str,
    ranges: _Ranges,
    topic: str | None = None,
    with_queues: bool = True,
) -> GroupSummary:
    committed = store.committed_offsets(group, topic)
    topics = []
    rows = []
    lag = count = behind_count = 0
    for name in sorted({name for name, _ in committed}):
        queues = ranges(name)
        if queues is None:
            continue
        topics.append(name)
        count += len(queues)
        for queue, (low, high) in enumerate(queues):
            offset = committed.get((name, queue))
            position = low if offset is None or offset < low else offset
            behind = high - position if high > position else 0
            if behind:
                lag += behind
                behind_count += 1
            if with_queues:
                rows.append(GroupQueueLag(name, queue, offset, high, behind))
    return GroupSummary(group, topics, lag, rows, count, behind_count)


def group_summary(store: MessageStore, group: str, *, with_queues: bool = True) -> GroupSummary:
    """A group's lag in messages per queue of every topic it has committed offsets on.

    A queue of such a topic where the group never committed counts from the queue's
    first offset: those messages are all still to be consumed. (A deleted topic's
    offsets are deleted with it, so a topic re-created under its name starts with no
    consumers.)
    """
    return _group_summary(store, group, _Ranges(store), with_queues=with_queues)


def group_summaries(store: MessageStore, *, with_queues: bool = True) -> list[GroupSummary]:
    """Every group that has committed an offset, most behind first.

    A page that shows only each group's totals passes ``with_queues=False``: a row per
    group and queue (200 groups on 50 queues each: 10,000 rows) is then not built.
    """
    ranges = _Ranges(store)
    summaries = [
        _group_summary(store, group, ranges, with_queues=with_queues) for group in store.groups()
    ]
    return sorted(summaries, key=lambda s: (-s.lag, s.group))


def topic_group_summaries(
    store: MessageStore, topic: str, *, with_queues: bool = True
) -> list[GroupSummary]:
    """``group_summaries`` cut to one topic: each group with committed offsets on
    ``topic``, with its lag and queues there only; most behind first."""
    ranges = _Ranges(store)
    summaries = []
    for group in store.groups():
        summary = _group_summary(store, group, ranges, topic, with_queues)
        if summary.topics:
            summaries.append(summary)
    return sorted(summaries, key=lambda s: (-s.lag, s.group))


def segment_rows(store: MessageStore) -> list[SegmentRow]:
    """The commit-log segments with their time span and when retention will take them."""
    stats = store.stats(topics=False)
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
