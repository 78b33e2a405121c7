"""Each topic's size: the bytes of the records it holds, counted by the sampler.

The store keeps no byte count per topic, and reading the records to count them would cost
as much as reading the topic. But every consume-queue entry carries its record's size
(20 bytes per message: commit-log offset, size, tag), so the sampler counts from the
entries (``MessageStore.queues_bytes``), incrementally:

1. A ``TopicBytes`` row per topic (a big topic: one per chunk of queues) keeps, per queue,
   the offset its entries were counted up to, and the bytes counted per commit-log
   segment (the segment holding each record).
2. Once every ``TIDEMARK_SIZE_EVERY_S`` (default 60 s: a size moves slowly, and reading
   ten thousand queue files is the cost) a sample reads the entries appended since: from
   each queue's counted offset to its max offset, stalest topic first, within
   ``TIDEMARK_SIZE_ENTRY_BUDGET`` (default 1,000,000; an entry costs 1, a queue read at
   least ``QUEUE_READ_COST``). What the budget did not reach is counted first next time;
   a topic not counted up to its queues' ends says "counting" meanwhile. A big topic's
   chunk is counted when the sampler reads it (its rotation is the cadence).
3. Retention deletes whole segments: every sample drops the bytes counted in segments no
   longer in the store, so the size falls with retention without reading anything.
4. A topic deleted and created again (another creation time), or with a queue removed
   (its bytes cannot be told apart from the others'), is counted again from its queues'
   first offsets; a queue added is counted from its start.

A topic's size is the sum over its rows of the bytes in segments still held: exact for
what was counted, as of each row's latest count.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings

from console.monitoring.models import TopicBytes
from storeadapter.engine import (
    MAX_QUEUE_BYTES_ENTRIES,
    MessageStore,
    QueueNotFoundError,
    TopicInfo,
    TopicNotFoundError,
)

DEFAULT_ENTRY_BUDGET = 1_000_000
DEFAULT_EVERY_S = 60
#: What reading a queue's new entries costs of the budget at least (an open and a read of
#: its file: about as long as summing this many entries).
QUEUE_READ_COST = 64


def entry_budget() -> int:
    """The budget of one counting sample, in entries (see the module's docstring)."""
    return max(1, int(getattr(settings, "TIDEMARK_SIZE_ENTRY_BUDGET", DEFAULT_ENTRY_BUDGET)))


def counting_due(now_ms: int, previous_ms: int | None) -> bool:
    """Whether the sample at ``now_ms`` counts appends (the previous sample was at
    ``previous_ms``): the first sample, then the first of every ``TIDEMARK_SIZE_EVERY_S``."""
    every = max(1, int(getattr(settings, "TIDEMARK_SIZE_EVERY_S", DEFAULT_EVERY_S))) * 1000
    return previous_ms is None or now_ms // every != previous_ms // every


def _shape(info: TopicInfo, first: int, count: int) -> tuple[int, int]:
    """What must stay the same for a row's count to go on: the topic's creation time and
    how many times its queues ``first`` to ``first + count - 1`` were removed."""
    generations = info.queue_generation[first : first + count]
    return info.created_ms, sum(generations)


class _Row:
    """A ``TopicBytes`` row as the tally works on it (no model instance per row)."""

    __slots__ = ("pk", "topic", "first_queue", "state", "updated_ms")

    def __init__(self, pk, topic: str, first_queue: int, state: dict, updated_ms: int) -> None:
        self.pk = pk
        self.topic = topic
        self.first_queue = first_queue
        self.state = state
        self.updated_ms = updated_ms


class SizeTally:
    """One sample's counting: ``count`` topics (or chunks), ``forget_deleted_segments``,
    then ``sizes`` and ``write``."""

    def __init__(self, store: MessageStore, segment_bases: list[int]) -> None:
        self.store = store
        self.live = {str(base) for base in segment_bases}
        self.budget = entry_budget()
        self.rows: dict[tuple[str, int], _Row] = {
            (topic, first): _Row(pk, topic, first, state, updated_ms)
            for pk, topic, first, state, updated_ms in TopicBytes.objects.values_list(
                "pk", "topic", "first_queue", "state", "updated_ms"
            )
        }
        self.new: list[_Row] = []
        self.changed: dict[tuple[str, int], _Row] = {}
        #: Entries and queues read this sample.
        self.entries_read = 0
        self.queues_read = 0

    def count_stalest_first(
        self, topics: list[tuple[TopicInfo, list[tuple[int, int]]]], now: int
    ) -> None:
        """``count`` each (topic, its queues' ranges), those counted longest ago first."""

        def last_count(item: tuple[TopicInfo, list]) -> int:
            row = self.rows.get((item[0].name, 0))
            return -1 if row is None else row.state.get("counted_ms", 0)

        for info, ranges in sorted(topics, key=last_count):
            self.count(info, 0, ranges, now)

    def count(self, info: TopicInfo, first: int, ranges: list[tuple[int, int]], now: int) -> None:
        """Count the entries appended to queues ``first``… (``ranges``: their (min, max)
        offsets as this sample read them) since the row's last count, within the budget."""
        key = (info.name, first)
        row = self.rows.get(key)
        created_ms, generations = _shape(info, first, len(ranges))
        state = row.state if row is not None else {}
        counted: list[int] = state.get("counted", [])
        if (
            row is not None
            and state.get("caught_up")
            and state.get("created_ms") == created_ms
            and state.get("generations") == generations
            and len(counted) == len(ranges)
            and all(done == high for done, (_low, high) in zip(counted, ranges, strict=True))
        ):
            return  # nothing appended since: the common case of a quiet topic
        segments: dict[str, int] = dict(state.get("segments", {}))
        if (
            row is None
            or state.get("created_ms") != created_ms
            or state.get("generations") != generations
            or len(counted) > len(ranges)
            or any(done > high for done, (_low, high) in zip(counted, ranges, strict=False))
        ):
            counted, segments = [], {}  # another topic, or a queue removed: count again
        counted = counted + [0] * (len(ranges) - len(counted))
        # The queues the budget reaches: those with entries to read cost QUEUE_READ_COST
        # at least; the rest wait for the next counting sample.
        # The sample's first queue read is always made, so that a budget below the cost
        # still moves on.
        reach = reads = 0
        allowance = self.budget
        for done, (low, high) in zip(counted, ranges, strict=True):
            if max(done, low) < high:
                if allowance <= 0 or (allowance < QUEUE_READ_COST and (self.queues_read or reads)):
                    break
                allowance -= QUEUE_READ_COST
                reads += 1
            reach += 1
        if reach:
            try:
                answers = self.store.queues_bytes(
                    info.name,
                    counted[:reach],
                    first,
                    max(1, min(self.budget, MAX_QUEUE_BYTES_ENTRIES)),
                )
            except (TopicNotFoundError, QueueNotFoundError):  # deleted or shrunk meanwhile
                return
            for index, answer in enumerate(answers):
                for base, size in answer.by_segment.items():
                    name = str(base)
                    segments[name] = segments.get(name, 0) + size
                done = max(0, answer.next_offset - max(counted[index], answer.min_offset))
                if done:
                    self.budget -= max(done, QUEUE_READ_COST)
                    self.entries_read += done
                    self.queues_read += 1
                counted[index] = answer.next_offset
        state = {
            "created_ms": created_ms,
            "generations": generations,
            "counted": counted,
            "segments": {base: size for base, size in segments.items() if base in self.live},
            "caught_up": all(
                done >= high for done, (_low, high) in zip(counted, ranges, strict=True)
            ),
            # When the count last read this row (a row the budget did not reach keeps
            # its time, so it is read first next time).
            "counted_ms": now if reads else state.get("counted_ms", 0),
        }
        if row is None:
            row = _Row(None, info.name, first, state, now)
            self.rows[key] = row
            self.new.append(row)
        else:
            row.state = state
            row.updated_ms = now
            self.changed[key] = row

    def forget_deleted_segments(self, now: int) -> None:
        """Drop the bytes of segments retention deleted from every row."""
        for key, row in self.rows.items():
            segments = row.state.get("segments", {})
            if any(base not in self.live for base in segments):
                row.state = {
                    **row.state,
                    "segments": {b: s for b, s in segments.items() if b in self.live},
                }
                row.updated_ms = now
                if row.pk is not None:
                    self.changed[key] = row

    def sizes(self, topics: dict[str, int]) -> dict[str, int | None]:
        """Each topic's bytes (name → its queue count) over its rows; None until every
        one of its queues has been counted up to the max offset its latest count saw."""
        rows_of: dict[str, list[_Row]] = {}
        for (name, _first), row in self.rows.items():
            rows_of.setdefault(name, []).append(row)
        result: dict[str, int | None] = {}
        for name, queues in topics.items():
            rows = rows_of.get(name, [])
            covered = sum(len(row.state.get("counted", [])) for row in rows)
            if covered < queues or not all(row.state.get("caught_up") for row in rows):
                result[name] = None
            else:
                result[name] = sum(sum(row.state.get("segments", {}).values()) for row in rows)
        return result

    def write(
        self,
        keep: set[tuple[str, int]],
        big: dict[str, int],
        chunk: int,
        update_json: Callable[[type, str, list], None],
    ) -> int:
        """Save the rows (``update_json``: the sampler's one-statement update); delete
        those of topics gone and of chunks that no longer are (``keep``: the small
        topics' rows; ``big``: big topics' queue counts)."""

        def kept(topic: str, first: int) -> bool:
            return (topic, first) in keep or (
                topic in big and first % chunk == 0 and first < big[topic]
            )

        gone = [
            row.pk
            for (name, first), row in self.rows.items()
            if row.pk is not None and not kept(name, first)
        ]
        TopicBytes.objects.filter(pk__in=gone).delete()
        TopicBytes.objects.bulk_create(
            [
                TopicBytes(
                    topic=r.topic, first_queue=r.first_queue, state=r.state, updated_ms=r.updated_ms
                )
                for r in self.new
                if kept(r.topic, r.first_queue)
            ],
            batch_size=500,
        )
        update_json(TopicBytes, "state", [r for r in self.changed.values() if r.pk is not None])
        return len(self.new) + len(self.changed) + len(gone)
