"""Consume queues: per topic and queue, fixed 20-byte entries pointing into the commit log.

Entry N lives at byte N×20 of the queue's files (each holds ``entries_per_file``
entries and is named by its first index), so a read by queue offset is one lookup.
Files are sparse: created at full length without writing zeros. Entries are written
with ``pwrite`` (a full disk is an error, not a crash) and read with ``pread``. An
entry of 20 zero bytes has not been written; every other entry carries a check
(``queuebase.CHECKED_ENTRY``), given by ``write`` to whatever it writes.

A queue is loaded lazily, the first time it is used, and its files' descriptors come
from a bounded ``HandleCache``: a store with 100,000 queues opens without touching
them and keeps a bounded number of files open.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from . import fileio
from .handles import HandleCache
from .queuebase import ENTRY, ENTRY_SIZE, QueueBase, seal_entries, unpack_entry
from .seam import Watched, WatchedABC
from .segment import is_segment_name, segment_name
from .timeindex import TimeIndex

_TAIL_READ_ENTRIES = 4096
#: Listings of a queue's directory made while its files are deleted under them.
_LIST_TRIES = 8
TIME_INDEX_INTERVAL = 128


class QueueFile(metaclass=Watched):
    """One file of a queue; its descriptor is opened on use through the handle cache.

    Its path is kept as a string (a ``Path`` is two objects for the garbage collector to
    walk, times every queue file of a store with many queues).
    """

    __slots__ = ("_path", "first_index", "entries", "handles", "named")

    def __init__(self, path: Path, first_index: int, entries: int, handles: HandleCache) -> None:
        self._path = os.fspath(path)
        self.first_index = first_index
        self.entries = entries
        self.handles = handles
        # Whether its name is known durable (this process created it and fsynced its
        # directory); else the flush adopts it before a checkpoint vouches for it.
        self.named = False

    @property
    def path(self) -> Path:
        return Path(self._path)

    @classmethod
    def create(
        cls,
        directory: Path,
        first_index: int,
        entries: int,
        handles: HandleCache,
        durable: bool = True,
    ) -> QueueFile:
        """Create an empty (sparse) queue file; ``durable`` fsyncs it and its directory."""
        fileio.make_dir(directory, parents=True, exist_ok=True)
        path = directory / segment_name(first_index)
        fd = fileio.create_file(path, exclusive=True)
        try:
            fileio.ftruncate(fd, entries * ENTRY_SIZE)
            if durable:
                fileio.fsync(fd)
                fileio.fsync_dir(directory)
        except BaseException:
            os.close(fd)
            fileio.unlink(path)
            raise
        os.close(fd)
        created = cls(path, first_index, entries, handles)
        created.named = durable
        return created

    @classmethod
    def existing(cls, path: Path, entries: int, handles: HandleCache) -> QueueFile:
        """A queue file on disk; one left short by a crash is extended (sparsely) to size."""
        size = path.stat().st_size
        if size < entries * ENTRY_SIZE:
            fileio.truncate(path, entries * ENTRY_SIZE)
        else:
            entries = size // ENTRY_SIZE
        return cls(path, int(path.name), entries, handles)

    def _open_fd(self) -> int:
        return fileio.open_file(self._path)

    def pread(self, slot: int, count: int) -> bytes:
        """Entries from ``slot``; none when another process's retention deleted the file."""
        try:
            fd = self.handles.acquire(self, self._open_fd)
        except FileNotFoundError:
            return b""
        try:
            return fileio.pread(fd, count * ENTRY_SIZE, slot * ENTRY_SIZE)
        finally:
            self.handles.release(self)

    def pwrite(self, slot: int, data) -> None:
        fd = self.handles.acquire(self, self._open_fd)
        try:
            fileio.pwrite_all(fd, data, slot * ENTRY_SIZE)
        finally:
            self.handles.release(self)

    def written_bound(self) -> int:
        """An entry count past every written entry, asked of the file system: a sparse
        file has no data after its last written page."""
        with self.handles.use(self, self._open_fd) as fd:
            try:
                end = os.lseek(fd, 0, os.SEEK_END)
                last_data = end
                hole = os.lseek(fd, 0, os.SEEK_HOLE)
                if hole < end:
                    try:
                        os.lseek(fd, hole, os.SEEK_DATA)  # data after the first hole?
                    except OSError:
                        last_data = hole  # none: everything written is before it
            except OSError:
                return self.entries
        return min(self.entries, -(-last_data // ENTRY_SIZE))

    def size_at(self, slot: int) -> int:
        data = self.pread(slot, 1)
        return ENTRY.unpack(data)[1] if len(data) == ENTRY_SIZE else 0

    def sync(self) -> None:
        """fdatasync the file. None when it is gone: another process's retention deleted
        it (it deletes only files wholly below the queue's new minimum, whose entries
        point at records it deleted first), so it holds nothing to make durable."""
        try:
            fd = self.handles.acquire(self, self._open_fd)
        except FileNotFoundError:
            return
        try:
            fileio.fdatasync(fd)
        finally:
            self.handles.release(self)

    def close(self) -> None:
        self.handles.forget(self)


class ConsumeQueue(QueueBase, metaclass=WatchedABC):
    """The entries of one queue of one topic; ``max_offset`` is the next index to write.

    ``on_load`` is called once the queue's files have been looked at, before any other
    use: the store uses it to check the queue's end against the commit log.

    A store may hold 100,000 of these, all alive for as long as it is open: they have
    slots and keep their directory as a string, so that the garbage collector has few
    objects to walk per queue (each full collection walks them all).
    """

    __slots__ = (
        "_directory",
        "entries_per_file",
        "handles",
        "dirty",
        "time_index",
        "_files",
        "_vanished_end",
    )

    def __init__(
        self,
        directory: Path,
        entries_per_file: int,
        handles: HandleCache,
        on_load: Callable[[ConsumeQueue], None] | None = None,
    ) -> None:
        super().__init__(on_load)
        self._directory = os.fspath(directory)
        self.entries_per_file = entries_per_file
        self.handles = handles
        self.dirty: set[QueueFile] = set()
        self.time_index = TimeIndex(directory, TIME_INDEX_INTERVAL, handles)
        self._files: list[QueueFile] = []
        # The end of the newest file a read found gone (another process's retention
        # deleted it), 0 for none: every entry below it is below the log's minimum.
        self._vanished_end = 0

    @property
    def directory(self) -> Path:
        return Path(self._directory)

    @property
    def flush_target(self) -> ConsumeQueue:
        """What the flush must fsync for this queue: the queue itself (its dirty files)."""
        return self

    # -- lazy loading ------------------------------------------------------------------

    def _load(self) -> None:
        for _ in range(_LIST_TRIES - 1):
            try:
                self._list_files()
                break
            except FileNotFoundError:  # its last file listed went meanwhile: list again
                for queue_file in self._files:
                    queue_file.close()
        else:
            self._list_files()
        if self.on_load is not None:
            self.on_load(self)

    def _list_files(self) -> None:
        """The queue's files as its directory lists them, and its ends from them."""
        try:
            names = sorted(p.name for p in self.directory.iterdir() if is_segment_name(p.name))
        except FileNotFoundError:
            names = []
        self._files = []
        for name in names:
            try:
                queue_file = QueueFile.existing(
                    self.directory / name, self.entries_per_file, self.handles
                )
            except FileNotFoundError:  # another process's retention deleted it just now
                continue
            self._files.append(queue_file)
        if self._files:
            self._min_offset = self._files[0].first_index
            self._max_offset = max(self._find_end(self._files[-1]), self._min_offset)

    @property
    def files(self) -> list[QueueFile]:
        if not self._loaded:
            self._ensure_loaded()
        return self._files

    def _find_end(self, last: QueueFile) -> int:
        """The queue offset after the last written entry of the queue's last file."""
        bound = last.written_bound()
        start = max(0, bound - _TAIL_READ_ENTRIES)
        written = last.pread(start, bound - start).rstrip(b"\0")
        if written or not start:
            return last.first_index + start + -(-len(written) // ENTRY_SIZE)
        low, high = 0, start  # entries written only early in a big file: search them
        while low < high:
            middle = (low + high) // 2
            if last.size_at(middle):
                low = middle + 1
            else:
                high = middle
        return last.first_index + low

    # -- entries -----------------------------------------------------------------------

    def _file_for(self, index: int, create: bool) -> QueueFile | None:
        files = self.files
        if files:
            first = files[0].first_index
            if index >= first:
                position = (index - first) // self.entries_per_file
                if position < len(files):
                    candidate = files[position]
                    if 0 <= index - candidate.first_index < candidate.entries:
                        return candidate
                for queue_file in files:
                    if 0 <= index - queue_file.first_index < queue_file.entries:
                        return queue_file
        first_index = index - index % self.entries_per_file
        path = self.directory / segment_name(first_index)
        if path.exists():  # created by another process since this one looked
            try:
                queue_file = QueueFile.existing(path, self.entries_per_file, self.handles)
            except FileNotFoundError:
                # Deleted just now by another process's retention: its entries are all
                # below the queue's minimum, and no write goes there (see ``_put``).
                if create:
                    raise
                return None
        elif create:
            queue_file = QueueFile.create(
                self.directory, first_index, self.entries_per_file, self.handles
            )
        else:
            return None
        files.append(queue_file)
        files.sort(key=lambda f: f.first_index)
        return queue_file

    def write(self, index: int, entries: bytes) -> None:
        """Write packed entries starting at queue offset ``index`` (may span files)."""
        self._put(index, seal_entries(entries))

    def rewrite(self, index: int, entries: bytes) -> None:
        """Write back entries read from the queue (some given their checks) as they are."""
        self._put(index, entries)

    def _put(self, index: int, entries: bytes) -> None:
        """Write ``entries`` from ``index``. Appends, and the erasing of a dead writer's
        entries, write at or past the queue's published end (under the write lock);
        queue files are deleted (by retention, and by processes following its new
        minimum) only when wholly below the queue's minimum, which is never past its
        end, and a process's last file stays. So such a write never meets a deleted
        file (one that did would fail the write, as any other file error)."""
        count = len(entries) // ENTRY_SIZE
        files = self.files
        last = files[-1] if files else None
        if last is not None and 0 <= index - last.first_index <= last.entries - count:
            last.pwrite(index - last.first_index, entries)
            self.dirty.add(last)
        else:
            view = memoryview(entries)
            position = index
            while view:
                queue_file = self._file_for(position, create=True)
                slot = position - queue_file.first_index
                n = min(len(view) // ENTRY_SIZE, queue_file.entries - slot)
                queue_file.pwrite(slot, view[: n * ENTRY_SIZE])
                self.dirty.add(queue_file)
                view = view[n * ENTRY_SIZE :]
                position += n
        if index + count > self._max_offset:
            self._max_offset = index + count
        self.changes += 1

    def read(self, index: int, count: int) -> bytes:
        """Packed entries from ``index``, at most ``count`` and never past ``max_offset``;
        fewer when a file holding them is gone (retention deleted it)."""
        count = min(count, self.max_offset - index)
        parts = []
        while count > 0:
            queue_file = self._file_for(index, create=False)
            if queue_file is None:
                self._vanished(index)
                break
            slot = index - queue_file.first_index
            n = min(count, queue_file.entries - slot)
            data = queue_file.pread(slot, n)
            parts.append(data)
            if len(data) < n * ENTRY_SIZE:  # the file was deleted meanwhile
                self._vanished(index)
                break
            index += n
            count -= n
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def entry(self, index: int) -> tuple[int, int, int] | None:
        """(commit offset, size, tag hash) of entry ``index``, or None if unwritten."""
        if not self.min_offset <= index < self.max_offset:
            return None
        queue_file = self._file_for(index, create=False)
        if queue_file is None:
            self._vanished(index)
            return None
        data = queue_file.pread(index - queue_file.first_index, 1)
        if len(data) != ENTRY_SIZE:
            self._vanished(index)
            return None
        value = unpack_entry(data)
        return value if value[1] else None

    def erase_unpublished(self, index: int, commit_offset: int) -> bool:
        """Erase entry ``index`` if it points at ``commit_offset``: a write that was
        never published (its writer died, or its batch failed) left it past the queue's
        published end, and its record is about to be cleared. Left there, it would
        point at whatever record is written at that offset next. Whether it was erased."""
        queue_file = self._file_for(index, create=False)
        if queue_file is None:
            return False
        slot = index - queue_file.first_index
        data = queue_file.pread(slot, 1)
        if len(data) != ENTRY_SIZE:
            return False
        pointed, size, _ = ENTRY.unpack(data)
        if pointed != commit_offset or not size:
            return False
        queue_file.pwrite(slot, bytes(ENTRY_SIZE))
        self.dirty.add(queue_file)
        if index >= self.max_offset:
            self.time_index.truncate_from(self.max_offset)
        return True

    # -- upkeep ------------------------------------------------------------------------

    def truncate(self, index: int) -> None:
        """Erase every entry from ``index`` on (they point past the commit log's tail)."""
        if index >= self.max_offset:
            return
        self.write(index, bytes((self.max_offset - index) * ENTRY_SIZE))
        self._max_offset = index
        self.changes += 1
        self.time_index.truncate_from(index)
        for queue_file in list(self._files):
            if queue_file.first_index > index or (
                queue_file.first_index == index and index > self._min_offset
            ):
                self._remove_file(queue_file)

    def _vanished(self, index: int) -> None:
        """A read found the file holding entry ``index`` gone: retention deleted it, so
        every entry up to that file's end is below the log's minimum. (Below the
        queue's minimum, no file is expected: nothing to note.)"""
        if index < self._min_offset:
            return
        end = index - index % self.entries_per_file + self.entries_per_file
        if end > self._vanished_end:
            self._vanished_end = end

    def _before_advance(self) -> None:
        self._forget_deleted_files()
        self._vanished_end = 0

    def _lost_files(self) -> bool:
        return self._vanished_end > 0

    def _dropped_below(self, index: int) -> None:
        for queue_file in list(self._files[:-1]):  # the last file stays: it marks the end
            if queue_file.first_index + queue_file.entries <= index:
                self._remove_file(queue_file)

    def _forget_deleted_files(self) -> None:
        """Let go of the oldest files that are gone: another process's retention deleted
        them, every entry they held being below its new minimum."""
        files = self.files
        vanished_end = self._vanished_end
        while len(files) > 1 and (
            files[0].first_index + files[0].entries <= vanished_end
            or not os.path.exists(files[0].path)
        ):
            gone = files.pop(0)
            self.dirty.discard(gone)
            gone.close()
        if files and files[0].first_index > self._min_offset:
            self._min_offset = files[0].first_index

    def _remove_file(self, queue_file: QueueFile) -> None:
        self._files.remove(queue_file)
        self.dirty.discard(queue_file)
        queue_file.close()
        fileio.unlink(queue_file.path)
        self.files_removed = True

    def sync_directory(self) -> None:
        """Make the deletion of its files durable (an fsync of its directory)."""
        if self.files_removed:
            fileio.fsync_dir(self.directory)
            self.files_removed = False

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

    def create_first_file(self) -> None:
        """Give a new queue its first (empty) file, so that a queue directory without
        files later means files were lost. Not fsynced: if a crash loses it, the queue
        is rebuilt from the log, which is just as right."""
        try:
            first = QueueFile.create(self.directory, 0, self.entries_per_file, self.handles, False)
        except FileExistsError:  # left by an earlier try: load what is there when used
            return
        self._files = [first]
        self._loaded = True

    def close(self) -> None:
        self.closed = True
        self.time_index.close()
        for queue_file in self._files:
            queue_file.close()
        self._files.clear()
        self.dirty.clear()
