"""Which records a read wants, and how the log is cut into ranges for Spark's tasks.

A read is split by commit-log segment; a segment holding more than ``split_bytes``
(64 MiB by default) is cut further, at record boundaries found by walking the record
headers (each header holds its record's length, so the walk reads 8 bytes a record and
never a body). Ranges are pruned before any task runs: a segment, or a piece of one,
whose store times lie wholly outside the ``[since, until)`` window is not read at all.
That relies on store times never going back along the log (the engine stamps each
record with ``max(clock, last store time)``), so a range's first record bounds its
times from below and the next range's first record bounds them from above. The times
used for pruning are read only from records whose CRC checks out, so a damaged header
cannot hide data.

Inside a range the topic and time filters are applied to each record's header before
its body is touched (``scanning.py``).
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from storeadapter.engine.errors import CorruptRecordError
from storeadapter.engine.record import (
    HEADER_SIZE,
    MARKER,
    RECORD_MAGIC,
    RECORD_OVERHEAD,
    TRAILER,
    check_record,
    frame_intact,
)
from storeadapter.engine.scan import find_next_record

from .logview import LogSnapshot, ReadOnlySegment, SegmentFile, TopicView, is_group_topic

DEFAULT_SPLIT_BYTES = 64 << 20
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_OFFSET = struct.Struct("<Q")  # a record's commit offset, 8 bytes into its header


@dataclass(frozen=True)
class RecordFilter:
    """The records a read wants: topics (name → queue count and per-queue start offsets,
    so a deleted topic's records, or a deleted namesake's, never match) and a store-time
    window ``since <= store_ms < until`` (either bound may be None)."""

    topics: dict[bytes, tuple[int, tuple[int, ...]]]
    since_ms: int | None = None
    until_ms: int | None = None

    def matches_time(self, store_ms: int) -> bool:
        return (self.since_ms is None or store_ms >= self.since_ms) and (
            self.until_ms is None or store_ms < self.until_ms
        )

    def window_overlaps(self, low: int | None, high: int | None) -> bool:
        """Whether records with store times in ``[low, high]`` may match (None: unknown)."""
        if self.until_ms is not None and low is not None and low >= self.until_ms:
            return False
        return not (self.since_ms is not None and high is not None and high < self.since_ms)

    @property
    def empty(self) -> bool:
        if not self.topics:
            return True
        return (
            self.since_ms is not None
            and self.until_ms is not None
            and self.since_ms >= self.until_ms
        )


@dataclass(frozen=True)
class LogRange:
    """Records of one segment starting in ``[start, stop)`` (in-segment positions).

    ``limit`` is where readable bytes end in the segment: its size when sealed, else
    the read's end. Bad bytes are searched past up to ``limit``; what is found at or
    past ``stop`` belongs to the next range.
    """

    store: str
    segment: str  # file name (20 digits: the base)
    size: int  # the file's size when planned
    start: int
    stop: int
    limit: int
    sealed: bool

    @property
    def base(self) -> int:
        return int(self.segment)

    @property
    def first_offset(self) -> int:
        return self.base + self.start


@dataclass
class Selection:
    """What the caller asked for, before it is resolved against a store's topics."""

    topics: set[str] | None = None  # None: every topic that is not a retry/DLQ topic
    since_ms: int | None = None
    until_ms: int | None = None
    notes: list[str] = field(default_factory=list)

    def narrow_topics(self, names: Iterable[str]) -> None:
        names = set(names)
        self.topics = names if self.topics is None else self.topics & names

    def narrow_since(self, since_ms: int) -> None:
        if self.since_ms is None or since_ms > self.since_ms:
            self.since_ms = since_ms

    def narrow_until(self, until_ms: int) -> None:
        if self.until_ms is None or until_ms < self.until_ms:
            self.until_ms = until_ms

    def resolve(self, topics: dict[str, TopicView]) -> RecordFilter:
        """The filter over ``topics`` (the store's table): asked-for names that exist,
        or, when none were asked for, every topic but the retry and dead-letter ones."""
        if self.topics is None:
            chosen = [t for name, t in topics.items() if not is_group_topic(name)]
        else:
            chosen = [topics[name] for name in sorted(self.topics) if name in topics]
        return RecordFilter(
            {t.name.encode(): (t.queues, t.since) for t in chosen},
            self.since_ms,
            self.until_ms,
        )


def parse_time(value: object, what: str) -> int:
    """Milliseconds since the epoch from an int, a string of digits, an ISO 8601 string
    (no zone means UTC) or a datetime."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be ms since the epoch or ISO 8601, not {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, dt.datetime):
        return _datetime_us(value) // 1000
    text = str(value).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{what} must be ms since the epoch or an ISO 8601 time, not {text!r}"
        ) from None
    return _datetime_us(moment) // 1000


def _datetime_us(moment: dt.datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return (moment - _EPOCH) // dt.timedelta(microseconds=1)


def timestamp_bound_us(value: object) -> int | None:
    """Microseconds since the epoch of a pushed-down timestamp literal, or None."""
    if isinstance(value, dt.datetime):
        return _datetime_us(value)
    if isinstance(value, dt.date):
        return _datetime_us(dt.datetime(value.year, value.month, value.day))
    return None


def plan_ranges(
    snap: LogSnapshot,
    wanted: RecordFilter,
    start: int | None = None,
    end: int | None = None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
) -> list[LogRange]:
    """The ranges of the log between ``start`` and ``end`` (default: all of the
    snapshot) worth reading for ``wanted``, pruned by store time, in log order.

    ``start`` must be a record boundary (a segment base, or an offset a stream reached).
    """
    if wanted.empty:
        return []
    low = snap.min_offset if start is None else max(start, snap.min_offset)
    high = snap.end if end is None else min(end, snap.end)
    segments = [s for s in snap.segments if s.end > low and s.base < high]
    timed = wanted.since_ms is not None or wanted.until_ms is not None
    ranges: list[LogRange] = []
    opened = _Opened(snap)
    try:
        for listed in segments:
            sealed = snap.is_sealed(listed)
            limit = listed.size if sealed else snap.end - listed.base
            begin = max(low, listed.base) - listed.base
            stop = min(high, listed.end) - listed.base
            if begin >= stop:
                continue
            make = _range_maker(snap, listed, limit, sealed)
            needs_split = stop - begin > split_bytes
            if not timed and not needs_split:
                ranges.append(make(begin, stop))
                continue
            segment = opened.get(listed)
            cuts = _cuts(segment, begin, stop, limit, split_bytes) if needs_split else [begin, stop]
            if not timed:
                ranges.extend(make(a, b) for a, b in zip(cuts, cuts[1:], strict=False))
                continue
            upper = _segment_upper_time(snap, listed, segment, opened)
            times = [_store_time_at(segment, cut) for cut in cuts[:-1]] + [upper]
            for i in range(len(cuts) - 1):
                if wanted.window_overlaps(times[i], times[i + 1]):
                    ranges.append(make(cuts[i], cuts[i + 1]))
    finally:
        opened.close()
    return ranges


class _Opened:
    """The segments planning has mapped, by base; all closed at the end."""

    def __init__(self, snap: LogSnapshot) -> None:
        self.snap = snap
        self.by_base = {s.base: s for s in snap.segments}
        self.segments: dict[int, ReadOnlySegment] = {}

    def get(self, listed: SegmentFile) -> ReadOnlySegment:
        segment = self.segments.get(listed.base)
        if segment is None:
            segment = ReadOnlySegment(self.snap.segment_path(listed), listed.size)
            self.segments[listed.base] = segment
        return segment

    def following(self, listed: SegmentFile) -> ReadOnlySegment | None:
        nxt = self.by_base.get(listed.end)
        return None if nxt is None else self.get(nxt)

    def close(self) -> None:
        for segment in self.segments.values():
            segment.close()


def _range_maker(snap: LogSnapshot, listed: SegmentFile, limit: int, sealed: bool):
    def make(begin: int, stop: int) -> LogRange:
        return LogRange(snap.path, listed.name, listed.size, begin, stop, limit, sealed)

    return make


def _store_time_at(segment: ReadOnlySegment, pos: int) -> int | None:
    """The store time of the intact record at ``pos``, or None (no record there, or one
    that fails its check: its header cannot be trusted to prune with)."""
    try:
        return check_record(segment.view, pos, segment.size, segment.base + pos)[5]
    except CorruptRecordError:
        return None


def _segment_upper_time(
    snap: LogSnapshot, listed: SegmentFile, segment: ReadOnlySegment, opened: _Opened
) -> int | None:
    """A store time no record of the segment exceeds, or None if none can be proved:
    the first record of the next segment, or for the last one the record just before
    the snapshot's end (found backwards through its trailing length)."""
    following = opened.following(listed)
    if following is not None:
        return _store_time_at(following, 0)
    end = snap.end - segment.base
    if not RECORD_OVERHEAD <= end <= segment.size:
        return None
    length = TRAILER.unpack_from(segment.view, end - TRAILER.size)[1]
    if not RECORD_OVERHEAD <= length <= end:
        return None
    return _store_time_at(segment, end - length)


def _cuts(segment: ReadOnlySegment, begin: int, stop: int, limit: int, split: int) -> list[int]:
    """Record boundaries ``begin = c0 < c1 < … < cn = stop``, about ``split`` bytes apart,
    found by hopping from header to header (bad bytes are searched past with the engine's
    ``find_next_record``; if nothing is found the rest stays in one piece)."""
    cuts = [begin]
    view = segment.view
    size = segment.size
    base = segment.base
    target = begin + split
    pos = begin
    while pos < stop:
        if pos >= target:
            cuts.append(pos)
            target = pos + split
        if pos + HEADER_SIZE <= size:
            length, magic = MARKER.unpack_from(view, pos)
            if magic == RECORD_MAGIC and _frame_at(view, pos, size, base + pos):
                pos += length
                continue
        found = find_next_record(segment, pos + 1, limit)
        if found is None or found <= pos:
            break
        pos = found
    cuts.append(stop)
    return cuts


def _frame_at(view, pos: int, size: int, offset: int) -> bool:
    """Whether a record frame naming ``offset`` starts at ``pos`` (no CRC check)."""
    return frame_intact(view, pos, size) and _OFFSET.unpack_from(view, pos + 8)[0] == offset


__all__ = [
    "DEFAULT_SPLIT_BYTES",
    "LogRange",
    "RecordFilter",
    "Selection",
    "parse_time",
    "plan_ranges",
    "timestamp_bound_us",
]
