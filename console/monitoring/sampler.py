"""One sample of the store: read it once, write one row per topic, per (group, topic) and
for the store (see models.py for the layout).

``take_sample(now_ms)`` reads the store through its public API (topics and their queue
ranges, groups and their committed offsets, a changed group's offset history for the time
of its last commits, the expiry forecast once a minute, disk use), then, with the previous
sample's rows and the two state tables, works out per queue the lag in seconds (lag.py)
and the Burrow-style status (status.py), and writes it all in one transaction. It never
reads history beyond the previous sample.

Two samples at the same time cannot both be written (the store row's time is unique), and
a sample not newer than the newest one is refused; the Celery task also holds a Redis lock,
so a sample that takes longer than the interval makes the next ones skip, never overlap.

A big topic (scale.py: more than ``TIDEMARK_BIG_TOPIC_QUEUES`` queues) is not read whole:
its queues are read in chunks (``QueueChunk`` rows: totals only), at most
``TIDEMARK_SAMPLE_QUEUE_BUDGET`` queues of big topics per sample, stalest chunk first, so
every queue is read again within ``queues / budget`` samples. Its totals (messages, each
group's lag and queues behind) are the sum of its chunks' latest readings, and the rest of
the sample sees it as one virtual queue whose max offset is the sum of its queues' max
offsets and whose committed offset per group is that sum less the group's lag: the commit
window and the Burrow status are then those of the topic as a whole. What a sum would hide
is kept per chunk and group: the store time of the oldest unconsumed message (the virtual
queue's lag in seconds is its age) and the queues stuck with lag across the status window
(they make the group STOP or STALL, see ``status.stuck_verdict``), from each lagging
queue's committed offset as the chunk's previous reading saw it (``QueueChunk.lagging``):
the store is read once per new offset of a lagging queue, never for a queue without lag.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from console.core.store import get_store
from console.monitoring import lag as lagmath
from console.monitoring import scale
from console.monitoring.metrics import worst_queue_status
from console.monitoring.models import (
    CommitWindow,
    GroupSample,
    OffsetTimeline,
    QueueChunk,
    StoreSample,
    TopicSample,
)
from console.monitoring.sizes import SizeTally, counting_due
from console.monitoring.status import (
    judge,
    min_stop_span_ms,
    record_commit,
    record_reset,
    status_reason,
    stuck_verdict,
    window_size,
    worst_verdict,
)
from storeadapter.engine import (
    InvalidNameError,
    MessageStore,
    QueueNotFoundError,
    TopicInfo,
    TopicNotFoundError,
    group_position,
)
from storeadapter.engine import clock as engine_clock
from storeadapter.lagrule import lost_to_retention, queue_lag
from storeadapter.reset_history import ResetMove, reset_moves

#: The expiry forecast reads a consume-queue entry per group and queue, and more where
#: messages are in sealed segments: it is read once a minute and carried in between.
FORECAST_EVERY_MS = 60_000
#: Rows per INSERT statement.
BATCH = 500
#: Groups with a reset applied within this many seconds have their offset history read
#: for the moves resets made (at least three sample intervals).
RESETS_LATELY_S = 600


@dataclass
class SampleReport:
    """What one ``take_sample`` did."""

    ts_ms: int
    written: bool = False
    topics: int = 0
    queues: int = 0
    groups: int = 0
    rows: int = 0
    #: Offset timelines and commit windows created or changed.
    state_rows: int = 0
    duration_ms: float = 0.0
    skipped: str = ""
    #: Queues read this time (fewer than ``queues`` when big topics were read in part).
    sampled_queues: int = 0
    #: Big topics and their queues, and the oldest chunk reading their totals include.
    big_topics: int = 0
    big_queues: int = 0
    big_sampled: int = 0
    oldest_chunk_ms: int | None = None

    @property
    def degraded(self) -> bool:
        """Whether big topics were read in part (a rotating subset of their queues)."""
        return self.big_sampled < self.big_queues

    def message(self) -> str:
        if not self.written:
            return f"no sample written: {self.skipped}"
        text = (
            f"sampled {self.topics} topic(s) ({self.queues} queues) and {self.groups} "
            f"group(s) in {self.duration_ms:.0f} ms: {self.rows} rows, "
            f"{self.state_rows} state rows"
        )
        if self.degraded:
            age = (
                "some chunks not read yet"
                if self.oldest_chunk_ms is None
                else f"the oldest read {max(0, self.ts_ms - self.oldest_chunk_ms) / 1000:.0f} s ago"
            )
            text += (
                f"; sampled {self.big_sampled:,} of {self.big_queues:,} queues of "
                f"{self.big_topics} big topic(s) this round (a rotating subset, at most "
                f"{scale.queue_budget():,} a sample): their totals add up each chunk's "
                f"latest reading ({age})"
            )
        interval_ms = settings.TIDEMARK_SAMPLE_INTERVAL_S * 1000
        if self.duration_ms > interval_ms:
            text += (
                f"; this took longer than the {settings.TIDEMARK_SAMPLE_INTERVAL_S} s "
                "interval, so the next scheduled samples are skipped until it is done"
            )
        return text


@dataclass
class _Reading:
    """What the sample read from the store."""

    disk_bytes: int
    disk_ratio: float
    #: Queue (min, max) offsets by topic, by queue id.
    ranges: dict[str, list[tuple[int, int]]]
    #: Committed offsets by group, then (topic, queue).
    committed: dict[str, dict[tuple[str, int], int]]
    #: Earliest expiry per (group, topic); None when not read this time.
    expiry: dict[tuple[str, str], int] | None
    #: Each topic's queue count, and its records' bytes counted so far (sizes.py).
    queue_counts: dict[str, int]
    sizes: SizeTally


@dataclass
class _Queues:
    """A group row being made, with what the later steps need."""

    row: GroupSample
    positions: list[int]
    #: Queues with a commit not seen before (their last commit time changed).
    new_commits: list[int]
    #: Queues moved by an operator's reset since the previous sample, oldest move first.
    resets: dict[int, list[ResetMove]]


def _read_store(
    store: MessageStore, now: int, forecast: bool, count_sizes: bool
) -> tuple[_Reading, _BigTopics]:
    stats = store.stats(topics=False)
    sizes = SizeTally(store, [segment.base for segment in stats.segments])
    ranges = {}
    big: dict[str, TopicInfo] = {}
    queue_counts = {}
    small: list[tuple[TopicInfo, list[tuple[int, int]]]] = []
    for info in store.topics():
        queue_counts[info.name] = info.queues
        if scale.is_big(info):
            big[info.name] = info
            continue
        try:
            ranges[info.name] = store.queue_ranges(info.name)
        except TopicNotFoundError:  # deleted since topics() was read
            continue
        small.append((info, ranges[info.name]))
    if count_sizes:
        sizes.count_stalest_first(small, now)
    committed = {}
    for group in store.groups():
        try:
            offsets = store.committed_offsets(group)
        except InvalidNameError:
            continue
        if offsets:
            committed[group] = offsets
    # Big topics are left out: the forecast reads an entry per committed queue.
    expiry = (
        lagmath.earliest_expiry(store.expiry_forecast(now, topics=ranges.keys()))
        if forecast
        else None
    )
    reading = _Reading(
        int(stats.disk_bytes),
        float(stats.disk_ratio),
        ranges,
        committed,
        expiry,
        queue_counts,
        sizes,
    )
    big_topics = _BigTopics(store, now, big, committed, sizes)
    big_topics.read()
    big_topics.as_virtual_queues(reading)
    sizes.forget_deleted_segments(now)
    return reading, big_topics


@dataclass(frozen=True)
class DeadQueues:
    """A group's figures on a big topic that a sum would hide: the store time of its oldest
    unconsumed message (None: unknown) and its queues stuck with lag across the status
    window, with no commit (STOP) or committing the same offset (STALL)."""

    oldest_ms: int | None
    stopped: int
    stalled: int

    @property
    def stuck(self) -> int:
        return self.stopped + self.stalled


class _BigTopics:
    """Big topics read in chunks: the chunks this sample reads, and each topic's totals
    over all its chunks (see the module's docstring)."""

    def __init__(
        self,
        store: MessageStore,
        now: int,
        infos: dict[str, TopicInfo],
        committed: dict[str, dict[tuple[str, int], int]],
        sizes: SizeTally,
    ) -> None:
        self.store = store
        self.now = now
        self.infos = infos
        self.sizes = sizes
        self.queues = {name: info.queues for name, info in infos.items()}
        queues = self.queues
        #: topic → group → queue → committed offset, for the big topics only.
        self.committed: dict[str, dict[str, dict[int, int]]] = {name: {} for name in queues}
        for group, offsets in committed.items():
            for (topic, queue), offset in offsets.items():
                if topic in self.committed:
                    self.committed[topic].setdefault(group, {})[queue] = offset
        self.chunks: dict[str, dict[int, QueueChunk]] = {name: {} for name in queues}
        self.new: list[QueueChunk] = []
        self.changed: list[QueueChunk] = []
        self.gone: list[int] = []
        self.sampled: dict[str, int] = dict.fromkeys(queues, 0)
        #: topic → group → (lag, queues behind) over every chunk.
        self.lags: dict[str, dict[str, tuple[int, int]]] = {}
        #: topic → group → its oldest unconsumed message and stuck queues over every chunk.
        self.dead: dict[str, dict[str, DeadQueues]] = {}
        #: group → (topic, queue) → last commit time, read once per group when needed.
        self.commit_times: dict[str, dict[tuple[str, int], int]] = {}

    def read(self) -> None:
        """Read the stalest chunks, up to the budget (at least one chunk)."""
        if not self.queues:
            QueueChunk.objects.all().delete()
            return
        size = scale.chunk_queues()
        wanted: list[tuple[int, str, int, int]] = []
        for row in QueueChunk.objects.filter(topic__in=list(self.queues)):
            total = self.queues[row.topic]
            if row.first_queue % size or row.first_queue >= total:
                self.gone.append(row.pk)
            else:
                self.chunks[row.topic][row.first_queue] = row
        for topic, total in self.queues.items():
            for first in range(0, total, size):
                count = min(size, total - first)
                row = self.chunks[topic].get(first)
                stale = row.sampled_ms if row is not None and row.queues == count else -1
                wanted.append((stale, topic, first, count))
        wanted.sort()
        budget = scale.queue_budget()
        for _stale, topic, first, count in wanted:
            if budget <= 0:
                break
            try:
                self._read_chunk(topic, first, count)
            except TopicNotFoundError:  # deleted meanwhile
                continue
            budget -= count
            self.sampled[topic] += count

    def _read_chunk(self, topic: str, first: int, count: int) -> None:
        ranges = self.store.queue_ranges(topic, first, count)
        self.sizes.count(self.infos[topic], first, ranges, self.now)
        row = self.chunks[topic].get(first)
        before = row.lagging if row is not None else {}
        span = min_stop_span_ms()
        groups = {}
        lagging = {}
        for group, offsets in self.committed[topic].items():
            lag = behind = consumed = stop = stall = 0
            oldest: int | None = None
            previous = before.get(group, [])  # by queue, as ``entries``
            at = 0
            entries = []
            for queue, (low, high) in enumerate(ranges, start=first):
                offset = offsets.get(queue)
                behind_by = queue_lag(offset, low, high)
                consumed += group_position(offset, low)
                if not behind_by:
                    continue
                lag += behind_by
                behind += 1
                while at < len(previous) and previous[at][0] < queue:
                    at += 1
                entry = previous[at] if at < len(previous) and previous[at][0] == queue else None
                if entry is None or entry[1] != offset or entry[3] is None:
                    entry = self._lagging_queue(topic, queue, offset, low, entry)
                entries.append(entry)
                stored_ms = entry[3]
                if stored_ms is not None and (oldest is None or stored_ms < oldest):
                    oldest = stored_ms
                if offset is not None and self.now - entry[2] > span:
                    last = self._commit_times(group).get((topic, queue))
                    if last is not None and self.now - last <= span:
                        stall += 1  # commits go on at the same offset
                    else:
                        stop += 1
            groups[group] = [lag, behind, consumed, oldest, stop, stall]
            if entries:
                lagging[group] = entries
        values = {
            "queues": len(ranges),
            "messages": sum(high - low for low, high in ranges),
            "max_sum": sum(high for _low, high in ranges),
            "nonempty": sum(1 for low, high in ranges if high > low),
            "groups": groups,
            "lagging": lagging,
            "sampled_ms": self.now,
        }
        if row is None:
            row = QueueChunk(topic=topic, first_queue=first, **values)
            self.new.append(row)
        else:
            for name, value in values.items():
                setattr(row, name, value)
            self.changed.append(row)
        self.chunks[topic][first] = row

    def _lagging_queue(
        self, topic: str, queue: int, offset: int | None, low: int, before: list | None
    ) -> list:
        """[queue, committed offset, first reading at it, store time there] of a queue
        with lag whose offset is new to its chunk (or whose store time is not known yet):
        the one store read of the queue in this sample. Once known, the entry is kept as
        it is while the offset does not move (so the time stays once retention deleted
        that message, as for a small topic)."""
        try:
            stored_ms = self.store.store_time_at(
                topic, queue, max(group_position(offset, low), low)
            )
        except (TopicNotFoundError, QueueNotFoundError):
            stored_ms = None
        since = before[2] if before is not None and before[1] == offset else self.now
        return [queue, offset, since, stored_ms]

    def _commit_times(self, group: str) -> dict[tuple[str, int], int]:
        if group not in self.commit_times:
            self.commit_times[group] = self.store.last_commit_times(group)
        return self.commit_times[group]

    def as_virtual_queues(self, reading: _Reading) -> None:
        """Each big topic as one queue in ``reading``: its range is (sum of min offsets,
        sum of max offsets) and each group's committed offset the max sum less its lag."""
        for topic, chunks in self.chunks.items():
            messages = sum(c.messages for c in chunks.values())
            max_sum = sum(c.max_sum for c in chunks.values())
            reading.ranges[topic] = [(max_sum - messages, max_sum)]
            self.lags[topic] = {}
            self.dead[topic] = {}
            for group in self.committed[topic]:
                lag = behind = stop = stall = 0
                oldest: list[int] = []
                for chunk in chunks.values():
                    figures = chunk.groups.get(group)
                    lag += figures[0] if figures else chunk.messages
                    behind += figures[1] if figures else chunk.nonempty
                    if figures and len(figures) > 3:
                        if figures[3] is not None:
                            oldest.append(figures[3])
                        stop += figures[4]
                        stall += figures[5]
                self.lags[topic][group] = (lag, behind)
                self.dead[topic][group] = DeadQueues(min(oldest, default=None), stop, stall)
                offsets = {k: v for k, v in reading.committed[group].items() if k[0] != topic}
                offsets[(topic, 0)] = max_sum - lag
                reading.committed[group] = offsets

    def covered(self, topic: str) -> tuple[int, int | None]:
        """Queues of the topic whose chunk was ever read, and the oldest such reading
        (None while some chunk was never read)."""
        chunks = self.chunks.get(topic, {})
        covered = sum(c.queues for c in chunks.values())
        if covered < self.queues.get(topic, 0):
            return covered, None
        return covered, min((c.sampled_ms for c in chunks.values()), default=None)

    def last_commit(self, times: dict[tuple[str, int], int], topic: str) -> int | None:
        """The group's last commit on any queue of the topic."""
        return max((when for (name, _q), when in times.items() if name == topic), default=None)

    def write(self) -> int:
        QueueChunk.objects.filter(pk__in=self.gone).delete()
        QueueChunk.objects.exclude(topic__in=list(self.queues)).delete()
        QueueChunk.objects.bulk_create(self.new, batch_size=BATCH)
        QueueChunk.objects.bulk_update(
            self.changed,
            ["queues", "messages", "max_sum", "nonempty", "groups", "lagging", "sampled_ms"],
            batch_size=BATCH,
        )
        return len(self.new) + len(self.changed)


def _previous_point(prev: TopicSample | None, queue: int) -> list[int] | None:
    if prev is None or queue >= len(prev.max_offsets):
        return None
    return [prev.max_offsets[queue], prev.ts_ms]


def _known_oldest_ms(prev: GroupSample | None, queue: int, committed: int | None) -> int | None:
    """When the oldest unconsumed message of a queue was stored, as the previous sample
    knew it, if the group has not moved since: no read of the store for a queue whose
    consumer is stuck, and once retention deleted that message its time is still known
    (the lag in seconds counts from the committed offset, lost messages included, as the
    lag in messages does)."""
    if prev is None or committed is None or queue >= len(prev.committed):
        return None
    if prev.committed[queue] != committed or queue >= len(prev.lag_seconds):
        return None
    seconds = prev.lag_seconds[queue]
    if seconds is None or prev.lags[queue] <= 0:
        return None
    return round(prev.ts_ms - seconds * 1000)


def _fit(lists: list, size: int) -> list:
    """Per-queue lists cut or padded (with empty lists) to ``size`` queues."""
    return ([list(item) for item in lists] + [[] for _ in range(size)])[:size]


class _Sample:
    """The steps of one sample; ``take_sample`` runs them in order."""

    def __init__(self, store: MessageStore, now: int, previous: StoreSample | None) -> None:
        self.store = store
        self.now = now
        self.previous = previous
        forecast = previous is None or (
            now // FORECAST_EVERY_MS != previous.ts_ms // FORECAST_EVERY_MS
        )
        self.reading, self.big = _read_store(
            store, now, forecast, counting_due(now, previous.ts_ms if previous else None)
        )
        self.prev_topics: dict[str, TopicSample] = {}
        self.prev_groups: dict[tuple[str, str], GroupSample] = {}
        if previous is not None:
            at = previous.ts_ms
            self.prev_topics = {r.topic: r for r in TopicSample.objects.filter(ts_ms=at)}
            self.prev_groups = {(r.group, r.topic): r for r in GroupSample.objects.filter(ts_ms=at)}
        self.commit_times = self.big.commit_times
        self.resets = self._read_resets()
        self.topic_rows: dict[str, TopicSample] = {}
        self.groups: list[_Queues] = []
        self.corners: dict[str, list[list[list[int]]]] = {}
        self.timelines_new: list[OffsetTimeline] = []
        self.timelines_changed: list[OffsetTimeline] = []
        self.windows_new: list[CommitWindow] = []
        self.windows_changed: list[CommitWindow] = []

    def _read_resets(self) -> dict[str, dict[tuple[str, int], list[ResetMove]]]:
        """The queues resets moved since the previous sample, per group: the offset
        history is read only for groups with a reset applied lately (the console's Resets
        list says which: usually none)."""
        if self.previous is None:
            return {}
        from console.groups.models import AppliedReset

        lately = timezone.now() - timedelta(
            seconds=max(RESETS_LATELY_S, 3 * settings.TIDEMARK_SAMPLE_INTERVAL_S)
        )
        groups = set(
            AppliedReset.objects.filter(applied_at__gte=lately).values_list("group", flat=True)
        )
        moves = {}
        for group in sorted(groups & set(self.reading.committed)):
            found = reset_moves(self.store, group, self.previous.ts_ms, self.now)
            if found:
                moves[group] = found
        return moves

    # ------------------------------------------------------------------------ topics

    def make_topic_rows(self) -> None:
        sizes = self.reading.sizes.sizes(
            {name: self.reading.queue_counts.get(name, 0) for name in self.reading.ranges}
        )
        for name, ranges in self.reading.ranges.items():
            maxes = [high for _low, high in ranges]
            prev = self.prev_topics.get(name)
            appended = (
                prev.appended + lagmath.counter_advance(prev.max_offsets, maxes)
                if prev is not None
                else sum(maxes)
            )
            row = TopicSample(
                ts_ms=self.now,
                topic=name,
                max_offsets=maxes,
                messages=sum(high - low for low, high in ranges),
                appended=appended,
                queue_count=len(ranges),
                sampled_queues=len(ranges),
                oldest_ms=self.now,
                size_bytes=sizes[name],
            )
            if name in self.big.queues:
                row.aggregated = True
                row.queue_count = self.big.queues[name]
                row.sampled_queues = self.big.sampled[name]
                row.oldest_ms = self.big.covered(name)[1]
                grew = prev is not None and prev.aggregated and maxes[0] > prev.max_offsets[0]
                row.last_write_ms = self.now if grew else (prev.last_write_ms if prev else None)
            self.topic_rows[name] = row

    # ------------------------------------------------------------------------ groups

    def make_group_rows(self) -> None:
        for group, offsets in sorted(self.reading.committed.items()):
            for topic in sorted({name for name, _ in offsets}):
                ranges = self.reading.ranges.get(topic)
                if ranges is not None:
                    self.groups.append(self._group_row(group, topic, offsets, ranges))

    def _group_row(
        self,
        group: str,
        topic: str,
        offsets: dict[tuple[str, int], int],
        ranges: list[tuple[int, int]],
    ) -> _Queues:
        committed = [offsets.get((topic, queue)) for queue in range(len(ranges))]
        positions = [
            group_position(offset, low)
            for offset, (low, _high) in zip(committed, ranges, strict=True)
        ]
        lags = [
            queue_lag(offset, low, high)
            for offset, (low, high) in zip(committed, ranges, strict=True)
        ]
        lost = [
            lost_to_retention(offset, low)
            for offset, (low, _high) in zip(committed, ranges, strict=True)
        ]
        prev = self.prev_groups.get((group, topic))
        last_commits, new_commits = self._last_commits(group, topic, committed, prev)
        moved = self.resets.get(group, {})
        resets = {
            queue: moved[(topic, queue)]
            for queue in range(len(ranges))
            if (topic, queue) in moved and topic not in self.big.queues
        }
        row = GroupSample(
            ts_ms=self.now,
            group=group,
            topic=topic,
            committed=committed,
            lags=lags,
            last_commits=last_commits,
            lag=sum(lags),
            lag_min=sum(lags),
            lag_max=sum(lags),
            lost=sum(lost),
            lost_per_queue=lost,
            consumed=(
                prev.consumed
                + lagmath.consumed_advance(
                    prev.committed,
                    committed,
                    {
                        queue: sum(m.shift(ranges[queue][0]) for m in moves)
                        for queue, moves in resets.items()
                    },
                )
                if prev is not None
                else 0
            ),
            expires_at_ms=self._expiry(group, topic, prev, sum(lags)),
            queues_behind=sum(1 for lag in lags if lag > 0),
        )
        if topic in self.big.queues:
            row.aggregated = True
            row.queues_behind = self.big.lags[topic][group][1]
        return _Queues(row, positions, new_commits, resets)

    def _last_commits(
        self, group: str, topic: str, committed: list[int | None], prev: GroupSample | None
    ) -> tuple[list[int | None], list[int]]:
        """Each queue's last commit time (the engine's: a commit that did not move the
        offset counts too), and the queues committed since the previous sample."""
        if group not in self.commit_times:
            self.commit_times[group] = self.store.last_commit_times(group)
        engine_times = self.commit_times[group]
        if topic in self.big.queues:  # its one virtual queue: the latest commit on any
            engine_times = {(topic, 0): self.big.last_commit(engine_times, topic)}
        known_times = prev.last_commits if prev is not None else []
        times: list[int | None] = []
        new = []
        for queue, offset in enumerate(committed):
            if offset is None:
                times.append(None)
                continue
            known = known_times[queue] if queue < len(known_times) else None
            when = engine_times.get((topic, queue)) or known
            times.append(when)
            if when != known:
                new.append(queue)
        return times, new

    def _expiry(self, group: str, topic: str, prev: GroupSample | None, lag: int) -> int | None:
        """From this sample's forecast, or carried from the previous row in between."""
        if self.reading.expiry is not None:
            return self.reading.expiry.get((group, topic))
        if lag <= 0 or prev is None:
            return None
        return prev.expires_at_ms

    # ------------------------------------------------------------- offset timelines

    def update_timelines(self) -> None:
        """Add the corners of topics that moved, and load those of topics with lag."""
        lagging = {item.row.topic for item in self.groups if item.row.lag > 0}
        timelines = {row.topic: row for row in OffsetTimeline.objects.all()}
        for name, row in self.topic_rows.items():
            if not row.aggregated:
                continue  # lag in seconds comes from store times
            prev = self.prev_topics.get(name)
            timeline = timelines.get(name)
            moved = prev is None or prev.max_offsets != row.max_offsets
            if not (moved or name in lagging or timeline is None):
                continue
            queues = len(row.max_offsets)
            corners = _fit(timeline.points if timeline is not None else [], queues)
            changed = timeline is None or len(timeline.points) != queues
            for queue, high in enumerate(row.max_offsets):
                changed |= lagmath.add_corner(
                    corners[queue], _previous_point(prev, queue), [high, self.now]
                )
            self.corners[name] = corners
            if timeline is None:
                self.timelines_new.append(
                    OffsetTimeline(topic=name, points=corners, updated_ms=self.now)
                )
            elif changed:
                timeline.points, timeline.updated_ms = corners, self.now
                self.timelines_changed.append(timeline)

    # ------------------------------------------------- lag seconds, windows, status

    def judge_queues(self) -> None:
        windows = {(row.group, row.topic): row for row in CommitWindow.objects.all()}
        size = window_size()
        min_span = min_stop_span_ms()
        for item in self.groups:
            row = item.row
            row.lag_seconds = self._lag_seconds(item)
            known = [s for s in row.lag_seconds if s is not None]
            row.lag_seconds_max = max(known) if known else None
            window = windows.get((row.group, row.topic))
            queues = len(row.committed)
            commits = _fit(window.commits if window is not None else [], queues)
            for queue in item.new_commits:
                last_reset = item.resets[queue][-1] if queue in item.resets else None
                if last_reset is not None:
                    record_reset(
                        commits[queue],
                        last_reset.new,
                        last_reset.time_ms,
                        row.lags[queue],
                        last_reset.reset_id,
                        item.resets[queue][0].old,
                    )
                    if (row.last_commits[queue] or 0) <= last_reset.time_ms:
                        continue  # no commit of the consumer since the reset
                record_commit(
                    commits[queue],
                    row.committed[queue],
                    row.last_commits[queue],
                    row.lags[queue],
                    size,
                )
            if window is None:
                if item.new_commits:
                    self.windows_new.append(
                        CommitWindow(
                            group=row.group, topic=row.topic, commits=commits, updated_ms=self.now
                        )
                    )
            elif item.new_commits or len(window.commits) != queues:
                window.commits, window.updated_ms = commits, self.now
                self.windows_changed.append(window)
            verdicts = [
                None
                if row.committed[queue] is None  # never committed: left out, as Burrow does
                else judge(
                    commits[queue],
                    row.lags[queue],
                    self.now,
                    row.lag_seconds[queue],
                    min_span_ms=min_span,
                )
                for queue in range(queues)
            ]
            if row.aggregated and verdicts[0] is not None:
                dead = self.big.dead[row.topic][row.group]
                verdicts[0] = worst_verdict(
                    stuck_verdict(dead.stopped, dead.stalled, self.big.queues[row.topic]),
                    verdicts[0],
                )
            row.statuses = [None if v is None else v.status for v in verdicts]
            row.status = worst_queue_status(row.statuses)
            row.worst_status = row.status
            row.status_reason = status_reason(row, verdicts)

    def _lag_seconds(self, item: _Queues) -> list[float | None]:
        """Per queue the age of the oldest unconsumed message, from its store time; 0 at
        lag 0. A big topic's virtual queue: the age of the oldest over its chunks, else
        interpolated on its sampled offsets."""
        row = item.row
        if row.aggregated:
            oldest_ms = self.big.dead[row.topic][row.group].oldest_ms
            if row.lags[0] > 0 and oldest_ms is not None:
                return [round(max(0, self.now - oldest_ms) / 1000, 1)]
            return self._interpolated_lag_seconds(item)
        ranges = self.reading.ranges[row.topic]
        prev = self.prev_groups.get((row.group, row.topic))
        seconds: list[float | None] = []
        for queue, position in enumerate(item.positions):
            if row.lags[queue] <= 0:
                seconds.append(0.0)
                continue
            # The group has not moved: its oldest unconsumed message is the one the
            # previous sample saw (no read; and kept once retention deleted it).
            stored_ms = _known_oldest_ms(prev, queue, row.committed[queue])
            if stored_ms is None:
                try:
                    stored_ms = self.store.store_time_at(
                        row.topic, queue, max(position, ranges[queue][0])
                    )
                except (TopicNotFoundError, QueueNotFoundError):
                    stored_ms = None
            seconds.append(
                None if stored_ms is None else round(max(0, self.now - stored_ms) / 1000, 1)
            )
        return seconds

    def _interpolated_lag_seconds(self, item: _Queues) -> list[float | None]:
        row = item.row
        topic = self.topic_rows[row.topic]
        prev = self.prev_topics.get(row.topic)
        corners = self.corners.get(row.topic)
        seconds: list[float | None] = []
        for queue, position in enumerate(item.positions):
            if row.lags[queue] <= 0:
                seconds.append(0.0)
                continue
            if corners is None:
                seconds.append(None)
                continue
            high = topic.max_offsets[queue]
            before = _previous_point(prev, queue)
            points = lagmath.timeline(corners[queue], before, [high, self.now])
            estimate = lagmath.lag_seconds(points, position, high, self.now)
            seconds.append(None if estimate is None else round(estimate, 1))
        return seconds

    # -------------------------------------------------------------------- the store

    def store_row(self) -> StoreSample:
        topic_rows = list(self.topic_rows.values())
        group_rows = [item.row for item in self.groups]
        previous = self.previous
        if previous is None:
            appended = sum(r.appended for r in topic_rows)
            consumed = sum(r.consumed for r in group_rows)
        else:
            appended = previous.appended + sum(
                r.appended - (p.appended if (p := self.prev_topics.get(r.topic)) else 0)
                for r in topic_rows
            )
            consumed = previous.consumed + sum(
                r.consumed - p.consumed
                for r in group_rows
                if (p := self.prev_groups.get((r.group, r.topic))) is not None
            )
            appended, consumed = max(appended, previous.appended), max(consumed, previous.consumed)
        return StoreSample(
            ts_ms=self.now,
            token=secrets.token_hex(16),
            disk_bytes=self.reading.disk_bytes,
            disk_ratio=self.reading.disk_ratio,
            topics=len(topic_rows),
            queues=sum(r.queue_count for r in topic_rows),
            groups=len(self.reading.committed),
            messages=sum(r.messages for r in topic_rows),
            backlog=sum(r.lag for r in group_rows),
            backlog_min=sum(r.lag for r in group_rows),
            backlog_max=sum(r.lag for r in group_rows),
            appended=appended,
            consumed=consumed,
        )

    def write(self, store_row: StoreSample, started: float) -> float:
        """Write everything in one transaction; the sample's duration (ms)."""
        with transaction.atomic():
            store_row.save(force_insert=True)
            TopicSample.objects.bulk_create(self.topic_rows.values(), batch_size=BATCH)
            GroupSample.objects.bulk_create([g.row for g in self.groups], batch_size=BATCH)
            OffsetTimeline.objects.bulk_create(self.timelines_new, batch_size=BATCH)
            _update_json(OffsetTimeline, "points", self.timelines_changed)
            CommitWindow.objects.bulk_create(self.windows_new, batch_size=BATCH)
            _update_json(CommitWindow, "commits", self.windows_changed)
            self.chunk_rows = self.big.write()
            self.chunk_rows += self.reading.sizes.write(
                {(name, 0) for name in self.reading.ranges if name not in self.big.queues},
                self.big.queues,
                scale.chunk_queues(),
                _update_json,
            )
            duration_ms = (time.monotonic() - started) * 1000
            StoreSample.objects.filter(pk=store_row.pk).update(duration_ms=duration_ms)
        return duration_ms


def take_sample(now_ms: int | None = None) -> SampleReport:
    """Read the store once and write one sample at ``now_ms`` (default: now)."""
    started = time.monotonic()
    now = engine_clock.now_ms() if now_ms is None else int(now_ms)
    report = SampleReport(now)
    previous = StoreSample.objects.order_by("-ts_ms").first()
    if previous is not None and previous.ts_ms >= now:
        report.skipped = f"the sample at {previous.ts_ms} ms is not older than this one"
        return report
    sample = _Sample(get_store(), now, previous)
    sample.make_topic_rows()
    sample.make_group_rows()
    sample.update_timelines()
    sample.judge_queues()
    store_row = sample.store_row()
    try:
        report.duration_ms = sample.write(store_row, started)
    except IntegrityError:
        report.skipped = f"another sample at {now} ms was written meanwhile"
        return report
    report.written = True
    report.topics = len(sample.topic_rows)
    report.queues = store_row.queues
    report.groups = len({item.row.group for item in sample.groups})
    report.rows = 1 + len(sample.topic_rows) + len(sample.groups)
    report.sampled_queues = sum(r.sampled_queues for r in sample.topic_rows.values())
    big = sample.big
    report.big_topics = len(big.queues)
    report.big_queues = sum(big.queues.values())
    report.big_sampled = sum(big.sampled.values())
    oldest = [big.covered(name)[1] for name in big.queues]
    report.oldest_chunk_ms = None if None in oldest else min(oldest, default=None)
    report.state_rows = (
        sum(
            map(
                len,
                (
                    sample.timelines_new,
                    sample.timelines_changed,
                    sample.windows_new,
                    sample.windows_changed,
                ),
            )
        )
        + sample.chunk_rows
    )
    return report


def _update_json(model, field_name: str, rows: list) -> None:
    """Save ``field_name`` and ``updated_ms`` of many rows with one prepared statement
    (``bulk_update`` builds a CASE per row: many times slower at a thousand rows)."""
    if not rows:
        return
    field = model._meta.get_field(field_name)
    quote = connection.ops.quote_name
    sql = (
        f"UPDATE {quote(model._meta.db_table)} SET {quote(field.column)} = %s, "
        f"{quote('updated_ms')} = %s WHERE {quote('id')} = %s"
    )
    params = [
        (field.get_db_prep_save(getattr(row, field_name), connection), row.updated_ms, row.pk)
        for row in rows
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)
