"""Plain results about a store, for the console's pages and the REST API.

Everything here reads through the engine's public API and returns dataclasses of
plain values, so a view or serializer never touches store objects or files.

Pages show stores of thousands of topics and queues and hundreds of groups: each
function reads only what its result holds (a page of topics, one topic's groups, lag
totals without per-queue rows), and the result classes have slots (fewer objects for
the garbage collector per request).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from storeadapter.engine import (
    InvalidNameError,
    MessageStore,
    StoreStats,
    TopicInfo,
    TopicNotFoundError,
)
from storeadapter.lagrule import lag_and_lost, lost_to_retention, queue_lag


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
    """``sampled_ms`` is None when the figures were read from the store just now, else
    the time of the sample they come from (a topic too big to read every queue of)."""

    name: str
    queues: int
    frozen_queues: int
    messages: int
    last_write_ms: int | None
    created_ms: int
    sampled_ms: int | None = None


@dataclass(frozen=True, slots=True)
class SampledTopic:
    """A big topic's totals as a sampler last summed them (see ``Figures``)."""

    messages: int
    last_write_ms: int | None
    sampled_ms: int
    #: Queues read in that sample, of ``queues``: fewer when the sampler rotates.
    sampled_queues: int
    queues: int


@dataclass(frozen=True, slots=True)
class SampledLag:
    """A group's lag on a big topic as a sampler last summed it."""

    lag: int
    queues_behind: int
    sampled_ms: int


class Figures(Protocol):
    """Where totals of topics too big to read every queue of come from (the console's
    sampler). ``is_big`` says which topics those are; for them the summaries below read
    no queue and take the totals from ``topic`` and ``group_lag`` (None: not sampled
    yet, counted as zero)."""

    def is_big(self, info: TopicInfo) -> bool: ...

    def topic(self, name: str) -> SampledTopic | None: ...

    def group_lag(self, group: str, topic: str) -> SampledLag | None: ...


class LiveFigures:
    """Every topic read live, whatever its size: the exact figures (and their cost)."""

    def is_big(self, info: TopicInfo) -> bool:
        return False

    def topic(self, name: str) -> SampledTopic | None:
        return None

    def group_lag(self, group: str, topic: str) -> SampledLag | None:
        return None


LIVE = LiveFigures()


@dataclass(frozen=True, slots=True)
class GroupQueueLag:
    topic: str
    queue: int
    committed: int | None
    max_offset: int
    lag: int
    #: Of ``lag``, the messages retention deleted before the group consumed them.
    lost: int = 0


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
    #: Big topics whose lag comes from the sampler (no rows in ``queues``), to the time
    #: of that sample (None: not sampled yet).
    sampled: dict[str, int | None] = field(default_factory=dict)
    #: Of ``lag``, the messages retention deleted before the group consumed them (over the
    #: queues read: big topics' are in the sampler's figures).
    lost: int = 0


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


def topic_summaries(
    store: MessageStore, names: Iterable[str] | None = None, figures: Figures = LIVE
) -> list[TopicSummary]:
    """Every topic with its message count and last write, sorted by name.

    With ``names``, only those topics, in that order (a page of a list sorted by name
    or queue count needs no other topic's figures); a name that is not a topic (any
    more) is left out. A big topic (``figures.is_big``) has its sampled totals.
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
        if figures.is_big(info):
            summaries.append(_sampled_summary(info, figures.topic(info.name)))
            continue
        try:
            messages, last_write_ms = store.topic_totals(info.name)
        except TopicNotFoundError:  # deleted since topics() was read
            continue
        summaries.append(
            TopicSummary(
                info.name, info.queues, len(info.frozen), messages, last_write_ms, info.created_ms
            )
        )
    return summaries


def _sampled_summary(info: TopicInfo, sampled: SampledTopic | None) -> TopicSummary:
    return TopicSummary(
        info.name,
        info.queues,
        len(info.frozen),
        sampled.messages if sampled else 0,
        sampled.last_write_ms if sampled else None,
        info.created_ms,
        sampled.sampled_ms if sampled else 0,
    )


class TopicSummaryList:
    """``topic_summaries`` of ``names`` in that order, computed only for the slice taken:
    give it to a Paginator and only the page shown is summarized."""

    def __init__(self, store: MessageStore, names: list[str], figures: Figures = LIVE) -> None:
        self.store = store
        self.names = names
        self.figures = figures

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, wanted: int | slice) -> TopicSummary | list[TopicSummary]:
        if isinstance(wanted, slice):
            return topic_summaries(self.store, self.names[wanted], self.figures)
        found = topic_summaries(self.store, [self.names[wanted]], self.figures)
        if not found:
            raise IndexError(f"topic {self.names[wanted]!r} was deleted")
        return found[0]


@dataclass(frozen=True, slots=True)
class StoreTotals:
    topics: int
    queues: int
    messages: int


def store_totals(
    store: MessageStore, figures: Figures = LIVE, only: Callable[[str], bool] | None = None
) -> StoreTotals:
    """How many topics, queues and messages the store holds (no per-queue detail); a big
    topic's messages as last sampled. With ``only``, of the topics it takes alone."""
    topics = queues = messages = 0
    for info in store.topics():
        if only is not None and not only(info.name):
            continue
        if figures.is_big(info):
            sampled = figures.topic(info.name)
            topics += 1
            queues += info.queues
            messages += sampled.messages if sampled else 0
            continue
        try:
            ranges = store.queue_ranges(info.name)
        except TopicNotFoundError:  # deleted since topics() was read
            continue
        topics += 1
        queues += len(ranges)
        messages += sum(high - low for low, high in ranges)
    return StoreTotals(topics, queues, messages)


def queue_rows(
    store: MessageStore, topic: str, first: int = 0, count: int | None = None
) -> list[QueueRow]:
    """The queues of ``topic``: range, message count, frozen or not, last write; only
    queues ``first`` to ``first + count - 1`` with ``count``."""
    info = store.topic(topic)
    queues = store.topic_stats(topic, first, count).queues
    return [
        QueueRow(
            queue,
            row.min_offset,
            row.max_offset,
            row.messages,
            queue in info.frozen,
            row.last_store_time_ms,
        )
        for queue, row in sorted(queues.items())
    ]


class QueueRowList:
    """``queue_rows`` of a topic read only for the slice taken: give it to a Paginator
    and only the page shown is read (a topic may have a million queues)."""

    def __init__(self, store: MessageStore, info: TopicInfo) -> None:
        self.store = store
        self.info = info

    def __len__(self) -> int:
        return self.info.queues

    def __getitem__(self, wanted: int | slice) -> QueueRow | list[QueueRow]:
        if isinstance(wanted, slice):
            start, stop, step = wanted.indices(self.info.queues)
            if step != 1:
                raise ValueError("QueueRowList slices must be contiguous")
            return queue_rows(self.store, self.info.name, start, max(0, stop - start))
        if wanted < 0:
            wanted += self.info.queues
        rows = queue_rows(self.store, self.info.name, wanted, 1)
        if not rows:
            raise IndexError(wanted)
        return rows[0]


def group_queue_lags(
    store: MessageStore, group: str, topic: str, first: int, count: int
) -> list[GroupQueueLag]:
    """The group's lag on queues ``first`` to ``first + count - 1`` of ``topic`` only."""
    ranges = store.queue_ranges(topic, first, count)
    committed = store.committed_offsets(group, topic)
    rows = []
    for queue, (low, high) in enumerate(ranges, start=first):
        offset = committed.get((topic, queue))
        rows.append(
            GroupQueueLag(
                topic,
                queue,
                offset,
                high,
                queue_lag(offset, low, high),
                lost_to_retention(offset, low),
            )
        )
    return rows


class _Ranges:
    """Queue ranges per topic, each topic's read once: for summaries of many groups,
    which share topics. A topic deleted meanwhile has none."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self._ranges: dict[str, list[tuple[int, int]] | None] = {}

    def big(self, topic: str, figures: Figures) -> TopicInfo | None:
        """The topic's info when ``figures`` takes it as big (its queues are not read)."""
        if figures is LIVE:
            return None
        try:
            info = self.store.topic(topic)
        except TopicNotFoundError:
            return None
        return info if figures.is_big(info) else None

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
    figures: Figures = LIVE,
) -> GroupSummary:
    committed = store.committed_offsets(group, topic)
    topics = []
    rows = []
    sampled: dict[str, int | None] = {}
    lag = count = behind_count = lost = 0
    for name in sorted({name for name, _ in committed}):
        big = ranges.big(name, figures)
        if big is not None:
            topics.append(name)
            count += big.queues
            figure = figures.group_lag(group, name)
            sampled[name] = figure.sampled_ms if figure else None
            if figure is not None:
                lag += figure.lag
                behind_count += figure.queues_behind
            continue
        queues = ranges(name)
        if queues is None:
            continue
        topics.append(name)
        count += len(queues)
        for queue, (low, high) in enumerate(queues):
            offset = committed.get((name, queue))
            behind, lost_here = lag_and_lost(offset, low, high)
            if behind:
                lag += behind
                behind_count += 1
            lost += lost_here
            if with_queues:
                rows.append(GroupQueueLag(name, queue, offset, high, behind, lost_here))
    return GroupSummary(group, topics, lag, rows, count, behind_count, sampled, lost)


def group_summary(
    store: MessageStore, group: str, *, with_queues: bool = True, figures: Figures = LIVE
) -> GroupSummary:
    """A group's lag in messages per queue of every topic it has committed offsets on.

    A queue of such a topic where the group never committed counts from the queue's
    first offset: those messages are all still to be consumed. (A deleted topic's
    offsets are deleted with it, so a topic re-created under its name starts with no
    consumers.) A big topic (``figures.is_big``) has its sampled lag and no rows.
    """
    return _group_summary(store, group, _Ranges(store), with_queues=with_queues, figures=figures)


def group_summaries(
    store: MessageStore, *, with_queues: bool = True, figures: Figures = LIVE
) -> list[GroupSummary]:
    """Every group that has committed an offset, most behind first.

    A page that shows only each group's totals passes ``with_queues=False``: a row per
    group and queue (200 groups on 50 queues each: 10,000 rows) is then not built.
    """
    ranges = _Ranges(store)
    summaries = [
        _group_summary(store, group, ranges, with_queues=with_queues, figures=figures)
        for group in store.groups()
    ]
    return sorted(summaries, key=lambda s: (-s.lag, s.group))


def topic_group_summaries(
    store: MessageStore, topic: str, *, with_queues: bool = True, figures: Figures = LIVE
) -> list[GroupSummary]:
    """``group_summaries`` cut to one topic: each group with committed offsets on
    ``topic``, with its lag and queues there only; most behind first."""
    ranges = _Ranges(store)
    summaries = []
    for group in store.groups():
        summary = _group_summary(store, group, ranges, topic, with_queues, figures)
        if summary.topics:
            summaries.append(summary)
    return sorted(summaries, key=lambda s: (-s.lag, s.group))


def segment_rows(store: MessageStore, stats: StoreStats | None = None) -> list[SegmentRow]:
    """The commit-log segments with their time span and when retention will take them;
    ``stats``: the store's ``stats(topics=False)`` when the caller has it already."""
    if stats is None:
        stats = store.stats(topics=False)
    retention_ms = int(stats.retention_hours * 3_600_000)
    segments = stats.segments
    firsts = [store.segment_first_store_time(s.base) for s in segments]
    rows = []
    for position, segment in enumerate(segments):
        last = firsts[position + 1] if position + 1 < len(segments) else None
        sealed = position + 1 < len(segments)
        rows.append(
            SegmentRow(
                segment.name,
                segment.base,
                segment.size,
                segment.disk_bytes,
                segment.used_bytes,
                firsts[position],
                last,
                last + retention_ms if sealed and last is not None else None,
            )
        )
    return rows
