"""What ``MessageStore.stats()`` and ``topic_stats()`` answer: typed, frozen figures.

A figure is read by attribute (``stats.commit_log.tail``,
``stats.topics["orders"].queues[0].max_offset``). Where a dict is needed (the CLI's
``stat --json``, an API answer), ``StoreStats.as_dict()`` gives the shape the store has
always written: the keys in this order, ``"topics"`` only when asked for, a corruption
as ``{commit_offset, length, reason}``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .recovery import RecoveryReport
from .results import Corruption


@dataclass(frozen=True)
class SegmentStats:
    """One commit-log segment: its file name, first offset, size, disk blocks, bytes used."""

    name: str
    base: int
    size: int
    disk_bytes: int
    used_bytes: int


@dataclass(frozen=True)
class CommitLogStats:
    """The commit log's first kept offset, its end, how far it is fsynced, and how many
    fdatasyncs of it this process issued since it opened the store (sync mode's group
    commit's included: appends per fdatasync is the group commit's yield)."""

    min_offset: int
    tail: int
    flushed: int
    syncs: int = 0


@dataclass(frozen=True)
class QueueStats:
    """One queue: its offset range, the messages in it, its last message's store time
    (None when empty, or when that record is cut short)."""

    min_offset: int
    max_offset: int
    messages: int
    last_store_time_ms: int | None


@dataclass(frozen=True)
class TopicStats:
    """One topic: its queues by id (a page of them for ``topic_stats(first, count)``), the
    messages in those queues, and when the topic was created."""

    queues: dict[int, QueueStats]
    messages: int
    created_ms: int


@dataclass(frozen=True)
class StreamStats:
    """The event-stream cache's use, and each stream topic's indexed events (None when its
    event index cannot be read)."""

    cached_streams: int
    cache_capacity: int
    indexed_events: dict[str, int | None]


@dataclass(frozen=True)
class IndexFileProblem:
    """A key-index file skipped, repaired or removed: its file name and why."""

    file: str
    reason: str


@dataclass(frozen=True)
class StoreStats:
    """The store at a glance: segments, disk use, offsets, flush state, last recovery and
    retention, damage found. ``topics`` is None for ``stats(topics=False)``."""

    path: str
    store_id: str
    flush_mode: str
    segment_bytes: int
    segments: list[SegmentStats]
    segment_count: int
    disk_bytes: int
    commit_log: CommitLogStats
    last_flush_ms: int | None
    topics: dict[str, TopicStats] | None
    groups: list[str]
    last_recovery: RecoveryReport
    #: The last retention run as ``retention.json`` holds it (``RetentionReport.as_dict()``).
    last_retention: dict[str, Any] | None
    disk_ratio: float
    retention_hours: float
    corruptions: list[Corruption]
    index_problems: list[IndexFileProblem]
    offsets_dropped_bytes: int
    checkpoint_problems: list[str]
    streams: StreamStats
    failed: str | None

    def as_dict(self) -> dict[str, Any]:
        """The figures as plain dicts and lists, in the shape ``stat --json`` prints."""
        data = asdict(self)
        if self.topics is None:
            del data["topics"]
        data["last_recovery"] = self.last_recovery.as_dict()
        data["corruptions"] = [c._asdict() for c in self.corruptions]
        return data
