"""Retention: which commit-log segments go, and what an operator needs to know about it.

A segment goes when it is older than ``retention_hours`` (its newest record, bounded by
the first record of the next segment, since store times never go back), oldest first.
Past ``disk_force_ratio`` the oldest go even unexpired, until disk use is back under
``disk_warn_ratio``. The active segment never goes.

A topic's own ``retention_hours`` (topicsettings.py): longer than the store's, the
segments holding its records not yet past its hours stay (``keep_from``); shorter, its
queues start past the segments older than its hours (``expired_below``, kept as the
topic's ``retained_from``) although other topics' records in them stay.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .commitlog import CommitLog
from .segment import Segment


@dataclass
class QueueDrop:
    topic: str
    queue: int
    old_min_offset: int
    new_min_offset: int
    unconsumed_by_group: dict[str, int] = field(default_factory=dict)

    @property
    def dropped(self) -> int:
        return self.new_min_offset - self.old_min_offset


@dataclass
class RetentionReport:
    now_ms: int
    retention_ms: int
    disk_ratio_before: float
    disk_ratio_after: float = 0.0
    deleted_segments: list[dict] = field(default_factory=list)
    #: Chosen for deletion but kept, because ``may_delete`` refused the first of them.
    held_segments: list[dict] = field(default_factory=list)
    freed_bytes: int = 0
    queues: list[QueueDrop] = field(default_factory=list)
    index_files_deleted: int = 0

    def as_dict(self) -> dict:
        data = asdict(self)
        for queue, item in zip(self.queues, data["queues"], strict=True):
            item["dropped"] = queue.dropped
        return data


def segment_newest_time(log: CommitLog, position: int) -> int | None:
    """An upper bound of the store times in segment ``position`` (not the last one)."""
    following = log.segments[position + 1]
    first = log.first_store_time(following)
    return first if first is not None else (log.last_store_ms or None)


def choose_segments(
    log: CommitLog,
    now_ms: int,
    retention_ms: int,
    disk_ratio: float,
    force_ratio: float,
    warn_ratio: float,
    bytes_to_ratio: float,
    keep_from: int | None = None,
) -> list[tuple[Segment, str]]:
    """The segments to delete, oldest first, each with its reason (expired or disk).

    ``bytes_to_ratio`` converts freed bytes into a drop of the disk-use ratio, so the
    plan can stop forcing once deletions would bring use under ``warn_ratio``. A segment
    ending past ``keep_from`` holds records a topic's longer retention keeps: it goes
    only when the disk forces it.
    """
    cutoff = now_ms - retention_ms
    chosen: list[tuple[Segment, str]] = []
    forcing = disk_ratio >= force_ratio
    for position in range(len(log.segments) - 1):
        segment = log.segments[position]
        newest = segment_newest_time(log, position)
        if (
            newest is not None
            and newest < cutoff
            and (keep_from is None or segment.end <= keep_from)
        ):
            chosen.append((segment, "expired"))
        elif forcing:
            chosen.append((segment, "disk"))
        else:
            break
        disk_ratio -= segment.size * bytes_to_ratio
        if forcing and disk_ratio < warn_ratio:
            forcing = False
    return chosen


def expired_below(log: CommitLog, cutoff_ms: int) -> int:
    """The end of the last sealed segment, from the oldest on, whose records are all
    older than ``cutoff_ms`` (0 when none is): what a topic retained until ``cutoff_ms``
    no longer has."""
    below = 0
    for position in range(len(log.segments) - 1):
        newest = segment_newest_time(log, position)
        if newest is None or newest >= cutoff_ms:
            break
        below = log.segments[position].end
    return below


def first_segment_from(log: CommitLog, cutoff_ms: int) -> int:
    """The base of the oldest segment holding a record at or after ``cutoff_ms`` (the
    active segment's when no sealed one does)."""
    below = expired_below(log, cutoff_ms)
    for segment in log.segments:
        if segment.end > below:
            return segment.base
    return log.tail
