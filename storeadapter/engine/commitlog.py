"""The commit log: every message of every topic, in arrival order, across segments."""

from __future__ import annotations

import bisect
import os
from pathlib import Path

from .errors import MessageTooLargeError, StoreFormatError
from .record import END_OF_SEGMENT_MAGIC, MARKER, MARKER_SIZE
from .segment import Segment, is_segment_name, segment_name


class CommitLog:
    """The ordered segments of a store and the position the next record goes to.

    ``tail`` is the published end: every byte before it belongs to a complete record
    (or an end-of-segment marker). ``flushed`` is the offset up to which an fsync has
    completed.
    """

    def __init__(self, directory: Path, segment_bytes: int) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self.tail = 0
        self.flushed = 0
        self.unsynced: list[Segment] = []

    def open(self) -> None:
        """Open every segment file in the directory; they must follow one another."""
        self.directory.mkdir(parents=True, exist_ok=True)
        names = sorted(p.name for p in self.directory.iterdir() if is_segment_name(p.name))
        for name in names:
            segment = Segment.open(self.directory / name)
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

    def _add(self, segment: Segment) -> None:
        self.segments.append(segment)
        self._bases.append(segment.base)

    @property
    def min_offset(self) -> int:
        return self.segments[0].base if self.segments else self.tail

    @property
    def active(self) -> Segment | None:
        return self.segments[-1] if self.segments else None

    def capacity(self) -> int:
        """The largest record a new segment can hold."""
        return self.segment_bytes - MARKER_SIZE

    def reserve(self, length: int) -> tuple[Segment, int]:
        """Return the segment and in-segment position where a record of ``length`` goes.

        Closes the active segment with an end-of-segment marker and rolls to a new one
        when the record does not fit in what is left (a record never straddles two).
        The caller writes the record and then advances ``tail``.
        """
        segment = self.active
        if segment is None:
            segment = self._roll(self.tail)
        pos = self.tail - segment.base
        if pos + length > segment.size - MARKER_SIZE:
            if length > self.capacity():
                raise MessageTooLargeError(
                    f"a record of {length} bytes does not fit in a commit-log segment of "
                    f"{self.segment_bytes} bytes; raise segment_bytes or send less"
                )
            MARKER.pack_into(segment.map, pos, segment.size - pos, END_OF_SEGMENT_MAGIC)
            self.tail = segment.end
            segment = self._roll(segment.end)
            pos = 0
        return segment, pos

    def _roll(self, base: int) -> Segment:
        segment = Segment.create(self.directory, base, self.segment_bytes)
        self._add(segment)
        self.unsynced.append(segment)
        return segment

    def locate(self, offset: int) -> tuple[Segment, int] | None:
        """The segment holding commit-log ``offset`` and the position in it, if any."""
        index = bisect.bisect_right(self._bases, offset) - 1
        if index < 0:
            return None
        segment = self.segments[index]
        if offset >= segment.end:
            return None
        return segment, offset - segment.base

    def take_unsynced(self) -> list[Segment]:
        """Segments written since the last call (the active one always): those to fsync."""
        pending, self.unsynced = self.unsynced, []
        active = self.active
        if active is not None and active not in pending:
            pending.append(active)
        return pending

    def disk_bytes(self) -> int:
        return sum(os.fstat(s.fd).st_blocks * 512 for s in self.segments)

    def close(self) -> None:
        for segment in self.segments:
            segment.close()
        self.segments.clear()
        self._bases.clear()


__all__ = ["CommitLog", "segment_name"]
