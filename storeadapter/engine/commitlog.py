"""The commit log: every message of every topic, in arrival order, across segments."""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Callable
from pathlib import Path

from . import dataplane, fileio
from .errors import CorruptRecordError, StoreFormatError
from .record import (
    END_OF_SEGMENT_MAGIC,
    MARKER,
    MARKER_SIZE,
    RECORD_MAGIC,
    RECORD_OVERHEAD,
    record_magic,
    record_store_time,
    trailing_length,
)
from .seam import Watched
from .segment import Segment, is_segment_name, segment_name


class CommitLog(metaclass=Watched):
    """The ordered segments of a store and the position the next record goes to.

    ``tail`` is the published end: every byte before it belongs to a complete record
    (or an end-of-segment marker). ``flushed`` is the offset up to which an fsync has
    completed.
    """

    @property
    def last_store_ms(self) -> int:
        """The newest record's store time, as far as this process saw."""
        return self.last_store.value

    @last_store_ms.setter
    def last_store_ms(self, ms: int) -> None:
        self.last_store.value = ms

    def __init__(self, directory: Path, segment_bytes: int) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.segments: list[Segment] = []
        # What locate() reads: the segments' bases and the segments, one tuple replaced
        # whole at each change, so that a thread locating never sees the two out of step
        # while another adds or retires a segment (``segments`` itself is changed in place:
        # the native core holds that list).
        self._located: tuple[list[int], list[Segment]] = ([], [])
        self.tail = 0
        self.flushed = 0
        # The newest record's store time, as far as this process saw (``last_store_ms``),
        # in a native word the native append reads and moves without a look-up.
        self.last_store = dataplane.Word(0)
        self.unsynced: list[Segment] = []
        # Called with the end of every write before it is made (the writer's extent).
        self.before_write: Callable[[int], None] = _nothing
        # Held while the flush thread maps in a segment's pages (warming.Warmer), which
        # holds the segment's mapping exported meanwhile: segments are closed only under it.
        self.closing = threading.Lock()

    def open(self, limit: int | None = None, repair: bool = True) -> None:
        """Open the segment files in the directory; they must follow one another.

        With ``limit`` (the tail other processes published), later segments are left
        alone: they hold nothing published, or are being created right now. Without
        ``repair`` nothing is written: an empty last segment is skipped, not mended.
        """
        fileio.make_dir(self.directory, parents=True, exist_ok=True)
        names = sorted(p.name for p in self.directory.iterdir() if is_segment_name(p.name))
        if limit is not None:
            names = [name for name in names if int(name) <= limit]
        for position, name in enumerate(names):
            path = self.directory / name
            last = repair and position == len(names) - 1
            if last and path.stat().st_size == 0:
                # A crash between creating the last segment and reserving its space.
                with open(path, "r+b") as handle:
                    fileio.preallocate(handle.fileno(), self.segment_bytes)
            if path.stat().st_size == 0:  # only when not repairing: nothing to read
                continue
            segment = Segment.open(path)
            if last:  # appends go on into it: its name may not be durable (a killed creator)
                fileio.adopt(segment.fd, self.directory)
            if self.segments and self.segments[-1].end != segment.base:
                previous = self.segments[-1]
                segment.close()
                raise StoreFormatError(
                    f"commit-log segment {name} does not follow {previous.path.name} "
                    f"(which ends at {previous.end}); the log has a gap"
                )
            self._add(segment)
        if self.segments:
            self.tail = self.segments[0].base

    def refresh(self, limit: int) -> None:
        """Open the segments other processes created, up to the one holding ``limit``
        (the published tail): later files hold nothing published."""
        while True:
            base = self.segments[-1].end if self.segments else 0
            if base > limit:
                return
            path = self.directory / segment_name(base)
            if not path.exists():
                return
            self._add(Segment.open(path))

    def clear_after_tail(self, segment: Segment, extent_end: int) -> None:
        """Clear what a writer that died or failed before publishing left after the tail.

        ``extent_end`` is the end of the extent it marked before writing: every byte
        from the tail up to there is zeroed, however many zeros are already among them
        (a body of zeros must not stop the clearing short of the records after it).
        Segment files after ``segment`` (the writer rolled) go first, durably: once its
        end marker is cleared, recovery would take their records for the log's
        continuation, and a process killed between the two steps must not leave the
        marker zeroed with the next segment still there.
        """
        stale = [
            path
            for path in self.directory.iterdir()
            if is_segment_name(path.name) and int(path.name) >= segment.end
        ]
        for path in stale:
            fileio.unlink(path)
        if stale:
            fileio.fsync_dir(self.directory)
        pos = self.tail - segment.base
        end = min(segment.size, extent_end - segment.base)
        chunk = 1 << 20
        while pos < end:
            step = min(chunk, end - pos)
            fileio.pwrite_all(segment.fd, bytes(step), pos)
            pos += step
        self.mark_unsynced(segment)

    def abandon_past(self, tail: int) -> None:
        """Forget what a failed write did past the published ``tail`` in this process
        (its bytes and files stay for the next writer to clear)."""
        self.tail = tail
        while len(self.segments) > 1 and self.segments[-1].base > tail:
            segment = self.segments.pop()
            self._relocate()
            if segment in self.unsynced:
                self.unsynced.remove(segment)
            with self.closing:
                segment.close()

    def mark_unsynced(self, segment: Segment) -> None:
        """Have this process's next flush fsync ``segment`` (another process wrote it)."""
        if segment not in self.unsynced:
            self.unsynced.append(segment)

    def _add(self, segment: Segment) -> None:
        self.segments.append(segment)
        self._relocate()

    def _relocate(self) -> None:
        segments = list(self.segments)
        self._located = ([s.base for s in segments], segments)

    @property
    def min_offset(self) -> int:
        return self.segments[0].base if self.segments else self.tail

    @property
    def active(self) -> Segment | None:
        return self.segments[-1] if self.segments else None

    def capacity(self) -> int:
        """The largest record a new segment can hold."""
        return self.segment_bytes - MARKER_SIZE

    def writable_segment(self) -> Segment:
        """The segment the next record goes to, created if the log has none yet."""
        segment = self.active
        if segment is None or self.tail >= segment.end:
            segment = self._roll(self.tail if segment is None else segment.end)
        return segment

    def close_segment(self, segment: Segment, pos: int) -> Segment:
        """Write the end-of-segment marker at in-segment ``pos`` and roll to a new segment."""
        marker = MARKER.pack(segment.size - pos, END_OF_SEGMENT_MAGIC)
        self.before_write(segment.end)
        fileio.pwrite_all(segment.fd, marker, pos)
        self.tail = segment.end
        if segment not in self.unsynced:
            self.unsynced.append(segment)  # its last records and marker still need an fsync
        return self._roll(segment.end)

    def write(self, segment: Segment, pos: int, data) -> None:
        """Write bytes at in-segment ``pos`` (the caller then advances ``tail``)."""
        self.before_write(segment.base + pos + len(data))
        fileio.pwrite_all(segment.fd, data, pos)

    def _roll(self, base: int) -> Segment:
        if self.segments and self.segments[-1].base == base:
            segment = self.segments[-1]  # opened by refresh(); a dead writer's leftover
            segment.zero_from(0)
            fileio.adopt(segment.fd, self.directory)
        else:
            try:
                segment = Segment.create(self.directory, base, self.segment_bytes)
            except FileExistsError:  # a writer that died before publishing created it
                segment = Segment.reset(self.directory / segment_name(base), self.segment_bytes)
                fileio.adopt(segment.fd, self.directory)
            self._add(segment)
        self.mark_unsynced(segment)
        return segment

    def locate(self, offset: int) -> tuple[Segment, int] | None:
        """The segment holding commit-log ``offset`` and the position in it, if any."""
        bases, segments = self._located
        index = bisect.bisect_right(bases, offset) - 1
        if index < 0:
            return None
        segment = segments[index]
        if offset >= segment.end:
            return None
        return segment, offset - segment.base

    def take_unsynced(self) -> list[Segment]:
        """Segments with writes not yet fsynced: those closed or created since the last
        call, and the active one."""
        pending, self.unsynced = self.unsynced, []
        active = self.active
        if active is not None and active not in pending:
            pending.append(active)
        return pending

    def first_store_time(self, segment: Segment) -> int | None:
        """The store time of the first record in ``segment``, or None if it has none
        (or the file ends inside its header)."""
        if segment.base >= self.tail:
            return None
        try:
            if record_magic(segment.map, 0, segment.base) != RECORD_MAGIC:
                return None
            return record_store_time(segment.map, 0, segment.base)
        except CorruptRecordError:
            return None

    def drop_below(self, offset: int) -> list[Segment]:
        """Retire the segments that end at or before ``offset`` (never the last one)."""
        dropped = []
        while len(self.segments) > 1 and self.segments[0].end <= offset:
            segment = self.segments.pop(0)
            self._relocate()
            if segment in self.unsynced:
                self.unsynced.remove(segment)
            segment.retire()
            dropped.append(segment)
        if dropped:
            fileio.fsync_dir(self.directory)
        return dropped

    def store_time_before_tail(self) -> int:
        """The store time of the record just before the tail (0 if none is found there).

        Records end with their length, so the last one is found by reading backwards.
        """
        found = self.locate(self.tail - 1) if self.tail else None
        if found is None:
            return 0
        segment, pos = found
        end = pos + 1
        if end < RECORD_OVERHEAD:
            return 0
        try:
            length = trailing_length(segment.map, end, segment.base)
            start = end - length
            if (
                length < RECORD_OVERHEAD
                or start < 0
                or record_magic(segment.map, start, segment.base) != RECORD_MAGIC
            ):
                return 0
            return record_store_time(segment.map, start, segment.base)
        except CorruptRecordError:
            return 0  # the file ends inside that record

    def disk_bytes(self) -> int:
        return sum(os.fstat(s.fd).st_blocks * 512 for s in self.segments if s.fd >= 0)

    def close(self) -> None:
        with self.closing:
            for segment in self.segments:
                segment.close()
        self.segments.clear()
        self._relocate()


def _nothing(_end: int) -> None:
    return None


__all__ = ["CommitLog", "segment_name"]
