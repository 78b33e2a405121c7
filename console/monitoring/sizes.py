"""Each topic's size: the bytes of the records it holds, counted by the sampler.

The store keeps no byte count per topic, and reading the records to count them would cost
as much as reading the topic. But every consume-queue entry carries its record's size
(20 bytes per message: commit-log offset, size, tag), so the sampler counts from the
entries (``MessageStore.queue_bytes``), incrementally:

1. A ``TopicBytes`` row per topic (a big topic: one per chunk of queues, read when its
   chunk is) keeps, per queue, the offset its entries were counted up to, and the bytes
   counted per commit-log segment (the segment holding each record).
2. Each sample reads only the entries appended since: from each queue's counted offset to
   its max offset, at most ``TIDEMARK_SIZE_ENTRY_BUDGET`` entries in all per sample (the
   first samples over a large store catch up over several rounds; the size says
   "counting" meanwhile).
3. Retention deletes whole segments: the bytes counted in a segment that is no longer in
   the store are dropped, so the size falls with retention without reading anything.
4. A topic deleted and created again (another creation time), or with a queue removed
   (its bytes cannot be told apart from the others'), is counted again from its queues'
   minimum offsets; a queue added is counted from its start.

A topic's size is the sum over its rows of the bytes in segments still held: exact for
what was counted, as of each row's latest reading.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings

from console.monitoring.models import TopicBytes
from storeadapter.engine import MessageStore, QueueNotFoundError, TopicInfo, TopicNotFoundError
from storeadapter.engine.reading import MAX_QUEUE_BYTES_ENTRIES

DEFAULT_ENTRY_BUDGET = 2_000_000


def entry_budget() -> int:
    """The most consume-queue entries one sample reads to count sizes."""
    return max(1, int(getattr(settings, "TIDEMARK_SIZE_ENTRY_BUDGET", DEFAULT_ENTRY_BUDGET)))


def _shape(info: TopicInfo, first: int, count: int) -> tuple[int, int]:
    """What must stay the same for a row's count to go on: the topic's creation time and
    how many times its queues ``first`` to ``first + count - 1`` were removed."""
    generations = info.queue_generation[first : first + count]
    return info.created_ms, sum(generations)


class SizeTally:
    """The sample's counting: ``count`` each topic (or chunk) as it is read, then
    ``size`` per topic and ``write``."""

    def __init__(self, store: MessageStore, segment_bases: list[int]) -> None:
        self.store = store
        self.live = {str(base) for base in segment_bases}
        self.budget = entry_budget()
        self.rows: dict[tuple[str, int], TopicBytes] = {
            (row.topic, row.first_queue): row for row in TopicBytes.objects.all()
        }
        self.new: list[TopicBytes] = []
        self.changed: dict[tuple[str, int], TopicBytes] = {}
        #: Entries read this sample.
        self.entries_read = 0

    def count(self, info: TopicInfo, first: int, ranges: list[tuple[int, int]], now: int) -> None:
        """Count the entries appended to queues ``first``… (``ranges``: their (min, max)
        offsets as this sample read them) since the row's last count, within the budget."""
        key = (info.name, first)
        row = self.rows.get(key)
        created_ms, generations = _shape(info, first, len(ranges))
        state = row.state if row is not None else {}
        counted: list[int] = list(state.get("counted", []))
        segments: dict[str, int] = dict(state.get("segments", {}))
        if (
            row is None
            or state.get("created_ms") != created_ms
            or state.get("generations") != generations
            or len(counted) > len(ranges)
            or any(done > high for done, (_low, high) in zip(counted, ranges, strict=False))
        ):
            counted, segments = [], {}  # another topic, or a queue removed: count again
        counted += [0] * (len(ranges) - len(counted))
        before = (list(counted), dict(segments))
        for index, (low, high) in enumerate(ranges):
            start = max(counted[index], low)
            if start >= high:
                counted[index] = max(counted[index], high)
                continue
            if self.budget <= 0:
                continue
            try:
                read = self.store.queue_bytes(
                    info.name, first + index, start, min(self.budget, MAX_QUEUE_BYTES_ENTRIES)
                )
            except (TopicNotFoundError, QueueNotFoundError):  # deleted meanwhile
                return
            for base, size in read.by_segment.items():
                name = str(base)
                segments[name] = segments.get(name, 0) + size
            done = max(0, read.next_offset - max(start, read.min_offset))
            self.budget -= done
            self.entries_read += done
            counted[index] = read.next_offset
        segments = {base: size for base, size in segments.items() if base in self.live}
        state = {
            "created_ms": created_ms,
            "generations": generations,
            "counted": counted,
            "segments": segments,
            "caught_up": all(
                done >= high for done, (_low, high) in zip(counted, ranges, strict=True)
            ),
        }
        if row is None:
            row = TopicBytes(topic=info.name, first_queue=first, state=state, updated_ms=now)
            self.rows[key] = row
            self.new.append(row)
        elif (counted, segments) != before or row.state != state:
            row.state = state
            row.updated_ms = now
            self.changed[key] = row

    def forget_deleted_segments(self, now: int) -> None:
        """Drop, from rows not read this sample, the bytes of segments retention deleted."""
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
        """``size`` of each topic (name → queue count), in one pass over the rows."""
        rows_of: dict[str, list[TopicBytes]] = {}
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
        gone = [
            row.pk
            for (name, first), row in self.rows.items()
            if row.pk is not None
            and (name, first) not in keep
            and not (name in big and first % chunk == 0 and first < big[name])
        ]
        TopicBytes.objects.filter(pk__in=gone).delete()
        TopicBytes.objects.bulk_create(self.new, batch_size=500)
        update_json(TopicBytes, "state", [r for r in self.changed.values() if r.pk is not None])
        return len(self.new) + len(self.changed) + len(gone)
