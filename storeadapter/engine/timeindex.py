"""A sparse time index per queue: the store time of every ``interval``-th queue offset.

``consumequeue/<topic>/<queue>/timeindex`` holds 16-byte marks, mark ``n`` at byte
``16 × n``: the queue offset ``n × interval`` plus one (0 = not written) and that
message's store time in ms. ``offset_for_time`` binary-searches the marks to a range of
about ``interval`` offsets, then the consume queue and log inside it: a handful of
record reads instead of a binary search through the whole queue's records. Marks are
written where their offset puts them, so writing one again changes nothing; recovery
rewrites those of the records it scans.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from . import fileio
from .handles import HandleCache
from .seam import Watched

MARK = struct.Struct("<Qq")
MARK_SIZE = MARK.size
FILE_NAME = "timeindex"


class TimeIndex(metaclass=Watched):
    # One per queue, alive while the store is open: slots and a string path keep the
    # objects the garbage collector walks few (see ConsumeQueue).
    __slots__ = ("_path", "interval", "handles", "dirty")

    def __init__(self, directory: Path, interval: int, handles: HandleCache) -> None:
        self._path = os.path.join(directory, FILE_NAME)
        self.interval = interval
        self.handles = handles
        self.dirty = False

    @property
    def path(self) -> Path:
        return Path(self._path)

    def _open_fd(self) -> int:
        fileio.make_dir(os.path.dirname(self._path), parents=True, exist_ok=True)
        return fileio.create_file(self._path)

    def write(self, marks: list[tuple[int, int]]) -> None:
        """Write (queue offset, store ms) marks; offsets must be multiples of interval."""
        with self.handles.use(self, self._open_fd) as fd:
            # Marks of consecutive slots (a run of a queue's offsets) go in one pwrite.
            start = end = -1
            run: list[bytes] = []
            for queue_offset, store_ms in marks:
                position = queue_offset // self.interval * MARK_SIZE
                if position != end:
                    if run:
                        fileio.pwrite_all(fd, b"".join(run), start)
                    start, run = position, []
                run.append(MARK.pack(queue_offset + 1, store_ms))
                end = position + MARK_SIZE
            if run:
                fileio.pwrite_all(fd, b"".join(run), start)
        self.dirty = True

    def write_run(self, queue_offset: int, packed: bytes) -> None:
        """Write marks packed as in the file (MARK after MARK) from the mark of
        ``queue_offset`` (a multiple of interval) on, in one pwrite, unless the file holds
        them already (recovery's case: a pwrite of the same bytes still costs the file
        system an inode update). Either way the next sync fsyncs the file: marks found in
        place may be in the page cache only."""
        position = queue_offset // self.interval * MARK_SIZE
        with self.handles.use(self, self._open_fd) as fd:
            if fileio.pread(fd, len(packed), position) != packed:
                fileio.pwrite_all(fd, packed, position)
        self.dirty = True

    def bracket(self, timestamp_ms: int, low: int, high: int) -> tuple[int, int]:
        """Narrow [low, high] so it still holds the first offset stored at or after
        ``timestamp_ms``: a binary search over the marks, one read per probe."""
        first = -(-low // self.interval)
        last = (high - 1) // self.interval
        if first > last or not os.path.exists(self._path):
            return low, high
        while first <= last:
            middle = (first + last) // 2
            with self.handles.use(self, self._open_fd) as fd:
                data = fileio.pread(fd, MARK_SIZE, middle * MARK_SIZE)
            stored, store_ms = MARK.unpack(data) if len(data) == MARK_SIZE else (0, 0)
            if not stored or not low <= stored - 1 < high:
                # An unwritten mark says nothing: give up narrowing past it.
                break
            if store_ms < timestamp_ms:
                low = stored  # the offset after the mark
                first = middle + 1
            else:
                high = stored - 1
                last = middle - 1
        return low, high

    def truncate_from(self, queue_offset: int) -> None:
        """Forget the marks of queue offsets at or past ``queue_offset``."""
        first = -(-queue_offset // self.interval)
        try:
            if self.path.stat().st_size > first * MARK_SIZE:
                fileio.truncate(self.path, first * MARK_SIZE)
                self.dirty = True
        except FileNotFoundError:
            pass

    def sync(self) -> None:
        if self.dirty:
            self.dirty = False
            with self.handles.use(self, self._open_fd) as fd:
                fileio.fdatasync(fd)

    def close(self) -> None:
        self.handles.forget(self)
