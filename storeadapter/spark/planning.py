"""Which records a read wants, and how the log is cut into ranges for Spark's tasks.

A read is cut into byte ranges: each segment between the read's start and end positions
into pieces of about ``split_bytes`` (64 MiB by default), at byte positions, never by
walking records, so planning costs the same for a segment of a thousand records as for
one of a million. A range holds the records that *start* in it: its reader resyncs to
the first record at or after its start (``scanning.py``) and reads the last one past its
stop. Ranges are pruned before any task runs: a piece of the log whose store times lie
wholly outside the ``[since, until)`` window is not read at all. That relies on store
times never going back along the log (the engine stamps each record with ``max(clock,
last store time)``), so the first record at or after a cut bounds a range's times from
below and the next cut's first record bounds them from above. Those times are read only
from records whose CRC checks out, so a damaged header cannot hide data.

Each range carries what the store's consume queues say it holds (``expected``): how many
records of the read's topics and queues start in it, found by binary searches in the
queues (``queueindex.py``; a few hundred ``pread`` calls per cut, not one per record). The
reader checks it read exactly that many. When the read's queues times its cuts would
cost more than ``COUNT_BUDGET`` searches, or a topic keeps its queues in shared block
files, ``expected`` is None and the reader checks what it can without it (that the
segment is there, as large as planned, and read from start to stop).

Inside a range the topic, queue and time filters are applied to each record's header
before its body is touched (``scanning.py``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field

from storeadapter.engine.errors import CorruptRecordError
from storeadapter.engine.record import (
    RECORD_OVERHEAD,
    STORE_MS,
    check_record,
    trailing_length,
)
from storeadapter.engine.scan import find_next_record

from .logview import LogSnapshot, ReadOnlySegment, SegmentFile, TopicView, is_group_topic
from .queueindex import QueueIndex

DEFAULT_SPLIT_BYTES = 64 << 20
#: Consume-queue searches (queues × cut positions) a plan may make to count its ranges.
COUNT_BUDGET = 50_000
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class RecordFilter:
    """The records a read wants.

    *Members* are the records counted against a range's ``expected``: those of
    ``topics`` (name → queue count and per-queue start offsets, so a deleted topic's
    records, or a deleted namesake's, never match), of a queue in ``queues`` when given.
    Of the members, a read keeps those with ``since_ms <= store time < until_ms``, a queue
    offset in ``[min_queue_offset, max_queue_offset)`` and, per queue, in
    ``[queue_starts, queue_ends)`` (any bound may be None or absent).
    ``messages_only`` drops the rows of damaged stretches (a pushed-down filter on a
    column those rows leave null would drop them too).
    """

    topics: dict[bytes, tuple[int, tuple[int, ...]]]
    since_ms: int | None = None
    until_ms: int | None = None
    queues: frozenset[int] | None = None
    min_queue_offset: int | None = None
    max_queue_offset: int | None = None
    queue_starts: dict[tuple[bytes, int], int] = field(default_factory=dict)
    queue_ends: dict[tuple[bytes, int], int] = field(default_factory=dict)
    messages_only: bool = False
    #: A filter expression (storeadapter.engine.filters) the messages kept must match,
    #: evaluated on the executors by the engine's crate; damaged stretches' rows (which
    #: have no fields to match) are left out when it is given.
    expression: str | None = None

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
    def by_offset(self) -> bool:
        """Whether records are also kept or dropped by their queue offsets."""
        return bool(
            self.min_queue_offset is not None
            or self.max_queue_offset is not None
            or self.queue_starts
            or self.queue_ends
        )

    def member_count(self) -> int:
        """How many (topic, queue) pairs ``member_queues`` lists, without listing them."""
        if self.queues is None:
            return sum(count for count, _since in self.topics.values())
        return sum(
            sum(1 for queue in self.queues if queue < count)
            for count, _since in self.topics.values()
        )

    def member_queues(self, topics: dict[str, TopicView]) -> list[tuple[TopicView, int]]:
        """The (topic, queue) pairs whose records are members."""
        return [
            (topics[name.decode()], queue)
            for name, (count, _since) in sorted(self.topics.items())
            for queue in range(count)
            if self.queues is None or queue in self.queues
        ]

    @property
    def empty(self) -> bool:
        if not self.topics or self.queues == frozenset():
            return True
        if (
            self.min_queue_offset is not None
            and self.max_queue_offset is not None
            and self.min_queue_offset >= self.max_queue_offset
        ):
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
    the read's end. Bad bytes are searched past up to ``limit``. ``expected`` is how
    many member records (see ``RecordFilter``) start in the range, from the consume
    queues when the read was planned (None when not counted).
    """

    store: str
    segment: str  # file name (20 digits: the base)
    size: int  # the file's size when planned
    start: int
    stop: int
    limit: int
    sealed: bool
    expected: int | None = None

    @property
    def base(self) -> int:
        return int(self.segment)

    @property
    def first_offset(self) -> int:
        return self.base + self.start

    @property
    def stop_offset(self) -> int:
        return self.base + self.stop


@dataclass
class Selection:
    """What the caller asked for, before it is resolved against a store's topics.

    ``start`` and ``end`` bound the commit-log positions of the records read (records
    starting in ``[start, end)``); ``queue_starts`` and ``queue_ends`` map topic names to
    ``{queue: offset}``.
    """

    topics: set[str] | None = None  # None: every topic that is not a retry/DLQ topic
    since_ms: int | None = None
    until_ms: int | None = None
    queues: set[int] | None = None
    queue_low: int | None = None  # queue ids in [queue_low, queue_high)
    queue_high: int | None = None
    min_queue_offset: int | None = None
    max_queue_offset: int | None = None
    start: int | None = None
    end: int | None = None
    queue_starts: dict[str, dict[int, int]] = field(default_factory=dict)
    queue_ends: dict[str, dict[int, int]] = field(default_factory=dict)
    messages_only: bool = False
    expression: str | None = None

    def narrow_topics(self, names: Iterable[str]) -> None:
        names = set(names)
        self.topics = names if self.topics is None else self.topics & names

    def narrow_since(self, since_ms: int) -> None:
        if self.since_ms is None or since_ms > self.since_ms:
            self.since_ms = since_ms

    def narrow_until(self, until_ms: int) -> None:
        if self.until_ms is None or until_ms < self.until_ms:
            self.until_ms = until_ms

    def narrow_queues(self, queues: Iterable[int]) -> None:
        queues = set(queues)
        self.queues = queues if self.queues is None else self.queues & queues

    def narrow_queue_ids(self, low: int | None = None, high: int | None = None) -> None:
        """Keep queue ids in ``[low, high)``."""
        if low is not None and (self.queue_low is None or low > self.queue_low):
            self.queue_low = low
        if high is not None and (self.queue_high is None or high < self.queue_high):
            self.queue_high = high

    def narrow_queue_offsets(self, low: int | None = None, high: int | None = None) -> None:
        """Keep queue offsets in ``[low, high)``."""
        if low is not None and (self.min_queue_offset is None or low > self.min_queue_offset):
            self.min_queue_offset = low
        if high is not None and (self.max_queue_offset is None or high < self.max_queue_offset):
            self.max_queue_offset = high

    def narrow_positions(self, start: int | None = None, end: int | None = None) -> None:
        """Keep records starting in ``[start, end)`` of the log."""
        if start is not None and (self.start is None or start > self.start):
            self.start = start
        if end is not None and (self.end is None or end < self.end):
            self.end = end

    def chosen(self, topics: dict[str, TopicView]) -> dict[str, TopicView]:
        """The topics read, of ``topics`` (the store's table): asked-for names that exist,
        or, when none were asked for, every topic but the retry and dead-letter ones."""
        if self.topics is None:
            return {name: t for name, t in topics.items() if not is_group_topic(name)}
        return {name: topics[name] for name in sorted(self.topics) if name in topics}

    def resolve(self, topics: dict[str, TopicView]) -> RecordFilter:
        """The filter over ``topics`` (the store's table), see ``chosen``."""
        chosen = list(self.chosen(topics).values())
        queues = self.queues
        if self.queue_low is not None or self.queue_high is not None:
            top = max((t.queues for t in chosen), default=0)
            high = top if self.queue_high is None else min(top, self.queue_high)
            span = set(range(max(0, self.queue_low or 0), high))
            queues = span if queues is None else queues & span

        def per_queue(bounds: dict[str, dict[int, int]]) -> dict[tuple[bytes, int], int]:
            return {
                (name.encode(), queue): offset
                for name, offsets in bounds.items()
                for queue, offset in offsets.items()
            }

        return RecordFilter(
            {t.name.encode(): (t.queues, t.since) for t in chosen},
            self.since_ms,
            self.until_ms,
            None if queues is None else frozenset(queues),
            self.min_queue_offset,
            self.max_queue_offset,
            per_queue(self.queue_starts),
            per_queue(self.queue_ends),
            self.messages_only,
            self.expression,
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
    min_partitions: int = 1,
    index: QueueIndex | None = None,
) -> list[LogRange]:
    """The ranges of the log between ``start`` and ``end`` (default: all of the
    snapshot) worth reading for ``wanted``, pruned by store time, in log order, at least
    ``min_partitions`` of them when the log has that many bytes, each with its expected
    member count when ``index`` is given and the count is affordable.

    ``start`` and ``end`` may be any byte positions: a range reads the records that
    start in it.
    """
    if wanted.empty:
        return []
    low = snap.min_offset if start is None else max(start, snap.min_offset)
    high = snap.end if end is None else min(end, snap.end)
    segments = [s for s in snap.segments if s.end > low and s.base < high]
    total = sum(min(high, s.end) - max(low, s.base) for s in segments)
    if total <= 0:
        return []
    split = max(1, min(split_bytes, -(-total // max(1, min_partitions))))
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
            pieces = -(-(stop - begin) // split)
            cuts = [begin + (stop - begin) * i // pieces for i in range(pieces)] + [stop]
            bounds = list(zip(cuts, cuts[1:], strict=False))
            if timed:
                segment = opened.get(listed)
                times = [_first_time_from(segment, cut, limit) for cut in cuts[:-1]]
                times.append(
                    _first_time_from(segment, stop, limit)
                    if stop < limit
                    else _segment_upper_time(snap, listed, segment, opened)
                )
                bounds = [
                    (a, b)
                    for i, (a, b) in enumerate(bounds)
                    if wanted.window_overlaps(times[i], times[i + 1])
                ]
            ranges.extend(
                LogRange(snap.path, listed.name, listed.size, a, b, limit, sealed)
                for a, b in bounds
            )
    finally:
        opened.close()
    if index is not None:
        ranges = count_ranges(snap, wanted, ranges, index)
    return ranges


def count_ranges(
    snap: LogSnapshot, wanted: RecordFilter, ranges: list[LogRange], index: QueueIndex
) -> list[LogRange]:
    """``ranges`` with ``expected`` set from the consume queues, when affordable."""
    positions = sorted({r.first_offset for r in ranges} | {r.stop_offset for r in ranges})
    if not ranges or wanted.member_count() * len(positions) > COUNT_BUDGET:
        return ranges
    if not all(index.supported(snap.topics[name.decode()]) for name in wanted.topics):
        return ranges
    queues = wanted.member_queues(snap.topics)
    below = dict.fromkeys(positions, 0)
    for topic, queue in queues:
        for position in positions:
            below[position] += index.offset_at(topic, queue, position)
    return [
        LogRange(
            r.store,
            r.segment,
            r.size,
            r.start,
            r.stop,
            r.limit,
            r.sealed,
            below[r.stop_offset] - below[r.first_offset],
        )
        for r in ranges
    ]


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


def store_time_at(segment: ReadOnlySegment, pos: int) -> int | None:
    """The store time of the intact record at ``pos``, or None (no record there, or one
    that fails its check: its header cannot be trusted to prune with)."""
    try:
        return check_record(segment.view, pos, segment.size, segment.base + pos)[STORE_MS]
    except CorruptRecordError:
        return None


def _first_time_from(segment: ReadOnlySegment, pos: int, limit: int) -> int | None:
    """The store time of the first intact record at or after ``pos`` (None if unknown)."""
    found = pos if pos == 0 else find_next_record(segment, pos, limit)
    return None if found is None else store_time_at(segment, found)


def _segment_upper_time(
    snap: LogSnapshot, listed: SegmentFile, segment: ReadOnlySegment, opened: _Opened
) -> int | None:
    """A store time no record of the segment exceeds, or None if none can be proved:
    the first record of the next segment, or for the last one the record just before
    the snapshot's end (found backwards through its trailing length)."""
    following = opened.following(listed)
    if following is not None:
        return store_time_at(following, 0)
    end = snap.end - segment.base
    if not RECORD_OVERHEAD <= end <= segment.size:
        return None
    length = trailing_length(segment.view, end)
    if not RECORD_OVERHEAD <= length <= end:
        return None
    return store_time_at(segment, end - length)


__all__ = [
    "COUNT_BUDGET",
    "DEFAULT_SPLIT_BYTES",
    "LogRange",
    "RecordFilter",
    "Selection",
    "count_ranges",
    "parse_time",
    "plan_ranges",
    "store_time_at",
    "timestamp_bound_us",
]
