"""A consumer group's figures, for the group pages and the REST API alike.

The list's rows (lag, topics, queues behind, live members), one group's lag per queue with
the member owning each queue and its last commit time, the live members, and the offset
history. Everything is read
through the store's public API; nothing here renders or changes anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from django.core.paginator import Page, Paginator

from console.groups.dlq import dlq_exists
from console.monitoring import current, scale
from console.monitoring.metrics import GROUP_STATUSES, GroupMetrics
from console.topics.listing import search_and_sort
from storeadapter.engine import MessageStore, OffsetChange, StoreError, group_members
from storeadapter.summaries import (
    GroupQueueLag,
    GroupSummary,
    SampledLag,
    group_queue_lags,
    group_summary,
)

#: Per-queue rows per page of a big topic's table (its other queues are not read).
BIG_TOPIC_PAGE_SIZE = 200

#: A member whose heartbeat is older than this is dead (the engine's default timeout).
MEMBER_TIMEOUT_S = 10
#: How far back the offset history is read.
HISTORY_SCAN = 10_000


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
    #: When the lag includes big topics' sampled lag: the oldest such sample's time (0: a
    #: big topic not sampled yet); None when every figure was read live.
    sampled_ms: int | None = None
    #: From the latest metrics sample: the age of the oldest unconsumed message (None: not
    #: sampled, or nothing to measure) and messages consumed per second (None: not sampled).
    lag_seconds: float | None = None
    consume_rate: float | None = None


@dataclass(frozen=True)
class ListedGroup:
    """A group's summary with its sampled metrics (None before a sample saw it): what the
    list's sorts read (``GROUP_SORTS``)."""

    summary: GroupSummary
    metrics: GroupMetrics | None

    @property
    def name(self) -> str:
        return self.summary.group

    @property
    def lag_seconds(self) -> float | None:
        return None if self.metrics is None else self.metrics.lag_seconds

    @property
    def consume_rate(self) -> float | None:
        return None if self.metrics is None else self.metrics.consume_rate

    @property
    def status_rank(self) -> int:
        """Worst first: ERR, WARN, OK, then groups no sample saw."""
        if self.metrics is None or self.metrics.status not in GROUP_STATUSES:
            return -1
        return GROUP_STATUSES.index(self.metrics.status)


def _biggest_first(value: float | None) -> tuple:
    return (value is None, -(value or 0))


#: The list's ``sort`` values, in topics/listing.py's shape: label, key, reversed.
GROUP_SORTS: dict[str, tuple[str, Callable[[ListedGroup], tuple], bool]] = {
    "lag": ("Most behind", lambda g: (-g.summary.lag, g.name), False),
    "name": ("Name, A to Z", lambda g: (g.name,), False),
    "-name": ("Name, Z to A", lambda g: (g.name,), True),
    "status": ("Worst status", lambda g: (-g.status_rank, g.name), False),
    "lag_seconds": ("Oldest unconsumed", lambda g: (*_biggest_first(g.lag_seconds), g.name), False),
    "consume_rate": (
        "Highest consume rate",
        lambda g: (*_biggest_first(g.consume_rate), g.name),
        False,
    ),
    "queues_behind": ("Most queues behind", lambda g: (-g.summary.queues_behind, g.name), False),
    "topics": ("Most topics", lambda g: (-len(g.summary.topics), g.name), False),
}
DEFAULT_GROUP_SORT = "lag"


def sort_groups(summaries: list[GroupSummary], sort: str) -> list[GroupSummary]:
    """The groups in ``sort`` order (``GROUP_SORTS``; unknown: most behind first), sorted
    with the topics list's mechanism on the latest sample's metrics."""
    metrics = {m.group: m for m in current.group_metrics()}
    listed = [ListedGroup(s, metrics.get(s.group)) for s in summaries]
    if sort not in GROUP_SORTS:
        sort = DEFAULT_GROUP_SORT
    return [g.summary for g in search_and_sort(listed, "", sort, GROUP_SORTS)]


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
    metrics = {m.group: m for m in current.group_metrics()}
    return [_row(store, s, metrics.get(s.group)) for s in summaries]


def _row(store: MessageStore, s: GroupSummary, metrics: GroupMetrics | None) -> GroupRow:
    return GroupRow(
        s.group,
        s.lag,
        len(s.topics),
        s.queues_behind,
        len(live_members(store, s.group)),
        list(s.topics),
        None if metrics is None else metrics.status,
        min((ms or 0 for ms in s.sampled.values()), default=None),
        None if metrics is None else metrics.lag_seconds,
        None if metrics is None else metrics.consume_rate,
    )


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
    #: Of ``lag``, the messages retention deleted before the group consumed them.
    lost: int = 0


class GroupLagList:
    """A group's lag per queue of a big topic, read only for the slice taken (a page)."""

    def __init__(self, store: MessageStore, group: str, topic: str, queues: int) -> None:
        self.store, self.group, self.topic, self.queues = store, group, topic, queues

    def __len__(self) -> int:
        return self.queues

    def __getitem__(self, wanted: slice) -> list[GroupQueueLag]:
        start, stop, _ = wanted.indices(self.queues)
        return group_queue_lags(self.store, self.group, self.topic, start, max(0, stop - start))


@dataclass(frozen=True)
class BigTopic:
    """A big topic the group consumes: its lag from the sampler, a page of its queues."""

    topic: str
    sampled: SampledLag | None
    page: Page


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
    #: Big topics (their rows in ``rows`` are the page shown), by name.
    big_topics: dict[str, BigTopic] = field(default_factory=dict)
    #: Whether the group's DLQ topic exists.
    has_dlq: bool = False

    @property
    def lag(self) -> int:
        return self.summary.lag

    @property
    def big_topic_list(self) -> list[BigTopic]:
        return list(self.big_topics.values())

    def topic_tables(self) -> list[dict]:
        """The rows by topic: ``{"topic", "rows", "lag"}`` each."""
        tables: dict[str, list[LagRow]] = {topic: [] for topic in self.summary.topics}
        for row in self.rows:
            tables.setdefault(row.topic, []).append(row)
        result = []
        for topic, rows in tables.items():
            big = self.big_topics.get(topic)
            table = {"topic": topic, "rows": rows, "lag": sum(r.lag for r in rows), "big": big}
            if big is not None:
                table["lag"] = big.sampled.lag if big.sampled else None
            result.append(table)
        return result


def group_detail(
    store: MessageStore, group: str, pages: dict[str, int | str] | None = None
) -> GroupDetail:
    """Lag per queue with its owner member and last commit time, members, recent history.

    A big topic's lag is the sampler's, and its rows are one page of its queues: page
    ``pages[topic]`` (default the first) of ``BIG_TOPIC_PAGE_SIZE``.
    """
    figures = scale.SampledFigures()
    summary = group_summary(store, group, figures=figures)
    big_topics = {}
    for topic in summary.sampled:
        info = store.topic(topic)
        paginator = Paginator(GroupLagList(store, group, topic, info.queues), BIG_TOPIC_PAGE_SIZE)
        page = paginator.get_page((pages or {}).get(topic))
        big_topics[topic] = BigTopic(topic, figures.group_lag(group, topic), page)
    queues = list(summary.queues)
    for big in big_topics.values():
        queues.extend(big.page.object_list)
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
    for q in queues:
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
                q.lost,
            )
        )
    return GroupDetail(
        group, summary, rows, members, history, metrics, big_topics, dlq_exists(store, group)
    )
