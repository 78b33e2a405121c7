"""Where a queue's records lie in the commit log, read from its consume-queue files.

The planner needs, without walking the log: how many records of a queue start below a
commit-log position (to know how many records each task must read, and what a stream's
offset covers), and where the record at a queue offset starts (to turn per-queue
offsets into log positions). Within a queue, entries are 20 bytes at ``index × 20``
and their commit offsets increase with the index (docs/FORMAT.md, "Consume queues"), so
each answer is a binary search: about log2(entries) ``pread`` calls of 20 bytes,
whatever the log holds.

Everything is opened ``O_RDONLY``; nothing is created or repaired. Topics whose queues
share block files (``shared``, more than 1,024 queues by default) are not looked up
here: reading where their blocks are means reading every block header, which grows
with the log; ``supported`` says which topics can be.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

from storeadapter.engine.queuebase import ENTRY, ENTRY_SIZE
from storeadapter.engine.segment import is_segment_name

from .logview import LogSnapshot, TopicView

#: Entries read at once when a probe lands on an unwritten entry inside the queue.
_LOOKAHEAD = 4096
_MAX_OPEN_FILES = 256
_UNPACK = ENTRY.unpack_from


class _Queue:
    """One queue's files: their first indexes, and the index range its entries fill."""

    __slots__ = ("directory", "firsts", "lo", "hi")

    def __init__(self, directory: Path, firsts: list[int]) -> None:
        self.directory = directory
        self.firsts = firsts
        self.lo = 0
        self.hi = 0


class QueueIndex:
    """Read-only lookups in the consume queues of the store a snapshot was taken of.

    Positions are commit-log offsets; only entries of records starting below the
    snapshot's end count (entries past it belong to appends not published then).
    """

    def __init__(self, snap: LogSnapshot) -> None:
        self.root = Path(snap.path) / "consumequeue"
        self.per_file = snap.queue_file_entries
        self.end = snap.end
        self.lookups = 0  # binary searches made (the planner's cost)
        self._queues: dict[tuple[str, int], _Queue | None] = {}
        self._fds: OrderedDict[str, int] = OrderedDict()

    @staticmethod
    def supported(topic: TopicView) -> bool:
        return not topic.shared

    # -- the questions ------------------------------------------------------------------

    def offset_at(self, topic: TopicView, queue: int, position: int) -> int:
        """The queue offset of the queue's first record that starts at or after
        ``position`` (its end offset when none does): so ``offset_at(b) - offset_at(a)``
        records of the queue start in ``[a, b)``."""
        found = self._queue(topic, queue)
        if found is None:
            return 0
        self.lookups += 1
        low, high = found.lo, found.hi
        while low < high:
            middle = (low + high) // 2
            if self._key(found, middle) < position:
                low = middle + 1
            else:
                high = middle
        return low

    def position_of(self, topic: TopicView, queue: int, queue_offset: int) -> int | None:
        """Where the record at ``queue_offset`` starts in the log; None when the queue
        has no such record below the snapshot's end."""
        found = self._queue(topic, queue)
        if found is None or not found.lo <= queue_offset < found.hi:
            return None
        entry = self._entry(found, queue_offset)
        return None if entry is None else entry[0]

    def range_of(self, topic: TopicView, queue: int) -> tuple[int, int]:
        """The queue's first offset on file and its end below the snapshot's end."""
        found = self._queue(topic, queue)
        return (0, 0) if found is None else (found.lo, found.hi)

    def count(self, queues: Iterable[tuple[TopicView, int]], start: int, stop: int) -> int:
        """How many records of ``queues`` start in ``[start, stop)``."""
        return sum(
            self.offset_at(topic, queue, stop) - self.offset_at(topic, queue, start)
            for topic, queue in queues
        )

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def __enter__(self) -> QueueIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- entries ------------------------------------------------------------------------

    def _queue(self, topic: TopicView, queue: int) -> _Queue | None:
        key = (topic.name, queue)
        if key in self._queues:
            return self._queues[key]
        found = None
        if not topic.shared and 0 <= queue < topic.queues:
            directory = self.root / topic.name / str(queue)
            try:
                firsts = sorted(int(n) for n in os.listdir(directory) if is_segment_name(n))
            except FileNotFoundError:
                firsts = []
            if firsts:
                found = _Queue(directory, firsts)
                found.lo = self._first_written(found)
                found.hi = self._written_end(found)
        self._queues[key] = found
        return found

    def _read(self, queue: _Queue, index: int, count: int) -> bytes:
        """Entries from ``index`` (not past its file's end); b"" when the file is gone."""
        first = index - index % self.per_file
        count = min(count, first + self.per_file - index)
        path = os.path.join(queue.directory, f"{first:020d}")
        fd = self._fds.get(path)
        if fd is None:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:  # below the queue's files, or retention took it
                return b""
            self._fds[path] = fd
            if len(self._fds) > _MAX_OPEN_FILES:
                os.close(self._fds.popitem(last=False)[1])
        else:
            self._fds.move_to_end(path)
        return os.pread(fd, count * ENTRY_SIZE, (index - first) * ENTRY_SIZE)

    def _entry(self, queue: _Queue, index: int) -> tuple[int, int, int] | None:
        data = self._read(queue, index, 1)
        if len(data) < ENTRY_SIZE:
            return None
        entry = _UNPACK(data)
        return entry if entry[1] else None

    def _first_written(self, queue: _Queue) -> int:
        """The first written entry (unwritten ones at the start are passed over, as the
        engine does once retention has moved the log's start)."""
        if self._entry(queue, queue.firsts[0]) is not None:
            return queue.firsts[0]  # the usual case: one read
        for first in queue.firsts:
            for index in range(first, first + self.per_file, _LOOKAHEAD):
                data = self._read(queue, index, _LOOKAHEAD)
                for slot in range(len(data) // ENTRY_SIZE):
                    if _UNPACK(data, slot * ENTRY_SIZE)[1]:
                        return index + slot
        return queue.firsts[0]

    def _written_end(self, queue: _Queue) -> int:
        """One past the last entry of a record below the snapshot's end: a binary search
        over the last file that holds one (entries are written in order)."""
        for first in reversed(queue.firsts):
            low = max(first, queue.lo)
            high = first + self.per_file
            if low >= high:
                continue
            while low < high:
                middle = (low + high) // 2
                entry = self._entry(queue, middle)
                if entry is not None and entry[0] < self.end:
                    low = middle + 1
                else:
                    high = middle
            if low > max(first, queue.lo) or first <= queue.lo:
                return low
        return queue.lo

    def _key(self, queue: _Queue, index: int) -> int:
        """The commit offset of entry ``index``, or of the next written entry when it is
        unwritten (a hole a crash left), so the keys never go down along the queue."""
        entry = self._entry(queue, index)
        if entry is not None:
            return entry[0]
        if not self._read(queue, index, 1):
            return -1  # its file is gone: retention deleted these records
        data = self._read(queue, index, min(_LOOKAHEAD, queue.hi - index))
        for slot in range(len(data) // ENTRY_SIZE):
            offset, size, _tag = _UNPACK(data, slot * ENTRY_SIZE)
            if size:
                return offset
        return self.end


__all__ = ["QueueIndex"]
