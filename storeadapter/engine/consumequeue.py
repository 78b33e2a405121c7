"""Consume queues: per topic and queue, fixed 20-byte entries pointing into the commit log.

Entry N lives at byte N×20 of the queue's files (each holds ``entries_per_file``
entries and is named by its first index), so a read by queue offset is one lookup.
Files are sparse: created at full length without writing zeros. Entries are
written with ``pwrite`` (a full disk is an error, not a crash) and read through a
read-only mapping. An entry whose size is zero has not been written.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

from . import fileio
from .segment import is_segment_name, segment_name
from .timeindex import TimeIndex

ENTRY = struct.Struct("<QIQ")
ENTRY_SIZE = ENTRY.size
_HOLE_PROBE_ENTRIES = 256
TIME_INDEX_INTERVAL = 128


class QueueFile:
    __slots__ = ("path", "first_index", "entries", "fd", "map")

    def __init__(self, path: Path, first_index: int, entries: int, fd: int) -> None:
        self.path = path
        self.first_index = first_index
        self.entries = entries
        self.fd = fd
        self.map = mmap.mmap(fd, entries * ENTRY_SIZE, access=mmap.ACCESS_READ)

    @classmethod
    def create(cls, directory: Path, first_index: int, entries: int) -> QueueFile:
        path = directory / segment_name(first_index)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.ftruncate(fd, entries * ENTRY_SIZE)
            fileio.fsync(fd)
            fileio.fsync_dir(directory)
            return cls(path, first_index, entries, fd)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise

    @classmethod
    def open(cls, path: Path, entries: int) -> QueueFile:
        """Open a queue file; one left short by a crash is extended (sparsely) to size."""
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if size < entries * ENTRY_SIZE:
                os.ftruncate(fd, entries * ENTRY_SIZE)
            else:
                entries = size // ENTRY_SIZE
            return cls(path, int(path.name), entries, fd)
        except BaseException:
            os.close(fd)
            raise

    def size_at(self, slot: int) -> int:
        return ENTRY.unpack_from(self.map, slot * ENTRY_SIZE)[1]

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


class ConsumeQueue:
    """The entries of one queue of one topic; ``max_offset`` is the next index to write."""

    def __init__(self, directory: Path, entries_per_file: int) -> None:
        self.directory = directory
        self.entries_per_file = entries_per_file
        self.files: list[QueueFile] = []
        self.min_offset = 0
        self.max_offset = 0
        self.dirty: set[QueueFile] = set()
        self.closed = False
        self.time_index = TimeIndex(directory, TIME_INDEX_INTERVAL)

    def open(self) -> None:
        """Open existing files and find where the written entries end."""
        self.directory.mkdir(parents=True, exist_ok=True)
        names = sorted(p.name for p in self.directory.iterdir() if is_segment_name(p.name))
        self.files = [
            QueueFile.open(self.directory / name, self.entries_per_file) for name in names
        ]
        if self.files:
            self.min_offset = self.files[0].first_index
            self.max_offset = max(self._find_end(self.files[-1]), self.min_offset)

    def _find_end(self, last: QueueFile) -> int:
        low, high = 0, last.entries
        while low < high:
            middle = (low + high) // 2
            if last.size_at(middle):
                low = middle + 1
            else:
                high = middle
        end = low
        while end < last.entries:
            probe_end = min(last.entries, end + _HOLE_PROBE_ENTRIES)
            written = [s for s in range(end, probe_end) if last.size_at(s)]
            if not written:
                break
            end = written[-1] + 1
        return last.first_index + end

    def _file_for(self, index: int, create: bool) -> QueueFile | None:
        if self.files:
            first = self.files[0].first_index
            if index >= first:
                position = (index - first) // self.entries_per_file
                if position < len(self.files):
                    candidate = self.files[position]
                    if candidate.first_index <= index < candidate.first_index + candidate.entries:
                        return candidate
                for queue_file in self.files:
                    if (
                        queue_file.first_index
                        <= index
                        < queue_file.first_index + queue_file.entries
                    ):
                        return queue_file
        first_index = index - index % self.entries_per_file
        path = self.directory / segment_name(first_index)
        if path.exists():  # created by another process since this one looked
            queue_file = QueueFile.open(path, self.entries_per_file)
        elif create:
            queue_file = QueueFile.create(self.directory, first_index, self.entries_per_file)
        else:
            return None
        self.files.append(queue_file)
        self.files.sort(key=lambda f: f.first_index)
        return queue_file

    def write(self, index: int, entries: bytes) -> None:
        """Write packed entries starting at queue offset ``index`` (may span files)."""
        last = self.files[-1] if self.files else None
        if last is not None and 0 <= index - last.first_index <= last.entries - (
            len(entries) // ENTRY_SIZE
        ):
            fileio.pwrite_all(last.fd, entries, (index - last.first_index) * ENTRY_SIZE)
            self.dirty.add(last)
            if index + len(entries) // ENTRY_SIZE > self.max_offset:
                self.max_offset = index + len(entries) // ENTRY_SIZE
            return
        view = memoryview(entries)
        while view:
            queue_file = self._file_for(index, create=True)
            slot = index - queue_file.first_index
            count = min(len(view) // ENTRY_SIZE, queue_file.entries - slot)
            fileio.pwrite_all(queue_file.fd, view[: count * ENTRY_SIZE], slot * ENTRY_SIZE)
            self.dirty.add(queue_file)
            view = view[count * ENTRY_SIZE :]
            index += count
        if index > self.max_offset:
            self.max_offset = index

    def read(self, index: int, count: int) -> bytes:
        """Packed entries from ``index``, at most ``count`` and never past ``max_offset``."""
        count = min(count, self.max_offset - index)
        parts = []
        while count > 0:
            queue_file = self._file_for(index, create=False)
            if queue_file is None:
                break
            slot = index - queue_file.first_index
            n = min(count, queue_file.entries - slot)
            parts.append(queue_file.map[slot * ENTRY_SIZE : (slot + n) * ENTRY_SIZE])
            index += n
            count -= n
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def entry(self, index: int) -> tuple[int, int, int] | None:
        """(commit offset, size, tag hash) of entry ``index``, or None if unwritten."""
        if not self.min_offset <= index < self.max_offset:
            return None
        queue_file = self._file_for(index, create=False)
        if queue_file is None:
            return None
        value = ENTRY.unpack_from(queue_file.map, (index - queue_file.first_index) * ENTRY_SIZE)
        return value if value[1] else None

    def truncate(self, index: int) -> None:
        """Erase every entry from ``index`` on (they point past the commit log's tail)."""
        if index >= self.max_offset:
            return
        self.write(index, bytes((self.max_offset - index) * ENTRY_SIZE))
        self.max_offset = index
        self.time_index.truncate_from(index)
        for queue_file in list(self.files):
            if queue_file.first_index > index or (
                queue_file.first_index == index and index > self.min_offset
            ):
                self.files.remove(queue_file)
                self.dirty.discard(queue_file)
                queue_file.close()
                queue_file.path.unlink(missing_ok=True)

    def advance_min(self, log_min: int) -> int:
        """Move the minimum offset past entries whose records are below ``log_min``
        (retention deleted them); delete files wholly below it. Return the new minimum."""
        low, high = self.min_offset, self.max_offset
        while low < high:
            middle = (low + high) // 2
            entry = self.entry(middle)
            if entry is None or entry[0] < log_min:
                low = middle + 1
            else:
                high = middle
        if low <= self.min_offset:
            return self.min_offset
        self.min_offset = low
        for queue_file in list(self.files):
            if queue_file.first_index + queue_file.entries <= low:
                self.files.remove(queue_file)
                self.dirty.discard(queue_file)
                queue_file.close()
                queue_file.path.unlink(missing_ok=True)
        return low

    def mark_dirty(self, start: int, end: int) -> None:
        """Have the next flush fsync the files holding entries ``start`` to ``end - 1``
        (written by another process)."""
        for index in (start, end - 1):
            self._file_for(index, create=False)
        for queue_file in self.files:
            if queue_file.first_index < end and start < queue_file.first_index + queue_file.entries:
                self.dirty.add(queue_file)

    def take_dirty(self) -> list[QueueFile]:
        """Files written since the last call: those to fsync."""
        pending, self.dirty = list(self.dirty), set()
        return pending

    def ensure_file(self) -> None:
        """Create the first file of an empty queue, so its absence later means loss."""
        if not self.files:
            self._file_for(self.max_offset, create=True)

    def close(self) -> None:
        self.closed = True
        self.time_index.close()
        for queue_file in self.files:
            queue_file.close()
        self.files.clear()
        self.dirty.clear()
