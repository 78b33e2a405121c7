"""State shared by every process that has a store open: the ``state`` file, mapped.

It holds what a process must learn from the others before it reads or writes: the
published commit-log tail, the commit log's minimum offset, and version counters that
change when topics or committed offsets change. Only a writer holding the store's
write lock changes it; anyone may read it at any time.

Updates use a sequence lock: the writer makes the sequence odd, writes the fields,
then makes it even again; a reader retries while the sequence is odd or moved under
it, so it never sees half an update. The file is not fsynced: after a crash of every
process, recovery rebuilds it from the log.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import time
from pathlib import Path
from typing import NamedTuple

from .seam import Watched

STATE_MAGIC = b"TDMS"
_VERSION = 1
# The file's header, the one place its layout is written (docs/FORMAT.md, "state"):
# magic, version, sequence, the 5 shared fields (SharedSnapshot's first five), the
# writing flag, the ring sequence; then the writer's extent, read and written on its own.
STATE_HEADER = struct.Struct("<4sIQ7Q")
_SEQUENCE = struct.Struct("<Q")
# An unpacked header's items, and where the fields read or written alone sit.
_MAGIC_ITEM, _SEQUENCE_ITEM, _SHARED_ITEMS, _RING_SEQ_ITEM = 0, 2, slice(3, 8), 9
_SEQUENCE_AT = struct.calcsize("<4sI")
_TAIL_AT = _SEQUENCE_AT + _SEQUENCE.size
_WRITING_AT = _TAIL_AT + 5 * _SEQUENCE.size
_RING_SEQ_AT = _WRITING_AT + _SEQUENCE.size
_EXTENT_AT = STATE_HEADER.size
STUCK_AFTER_S = 0.05  # a sequence odd for longer: its writer died mid-update
_HEADER_SIZE = 4096
# The ring of queue-end notes: sequence, topic id, queue, new queue end, store time.
RING_ENTRY = struct.Struct("<QIIQq")
RING_ENTRIES = 8192
_SIZE = _HEADER_SIZE + RING_ENTRIES * RING_ENTRY.size
# What posix_fallocate answers where the file system cannot reserve space at all.
_NOT_RESERVABLE = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


class SharedSnapshot(NamedTuple):
    tail: int
    min_offset: int
    topics_version: int
    offsets_version: int
    index_version: int
    ring_seq: int = 0


def header_written(fields: tuple) -> bool:
    """Whether an unpacked state header (``STATE_HEADER``) was ever written."""
    return fields[_MAGIC_ITEM] == STATE_MAGIC


def header_updating(fields: tuple) -> bool:
    """Whether a writer was in the middle of an update when the header was read."""
    return bool(fields[_SEQUENCE_ITEM] & 1)


def header_snapshot(fields: tuple, notes_trusted: bool = True) -> SharedSnapshot:
    """The shared fields of an unpacked header; ``ring_seq`` -1 unless ``notes_trusted``
    (a writer died mid-update: readers walk the records instead of reading notes)."""
    return SharedSnapshot(*fields[_SHARED_ITEMS], fields[_RING_SEQ_ITEM] if notes_trusted else -1)


class SharedState(metaclass=Watched):
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self.fd).st_size < _SIZE:
            os.ftruncate(self.fd, _SIZE)
        # Every page reserved (again, for a file an older engine left sparse): a store
        # into a hole of the mapping on a full disk would be a SIGBUS, not an error.
        # A no-op once reserved; refused where the file system cannot reserve at all.
        try:
            os.posix_fallocate(self.fd, 0, _SIZE)
        except OSError as error:
            if error.errno not in _NOT_RESERVABLE:
                os.close(self.fd)
                raise
        self.map = mmap.mmap(self.fd, _SIZE)

    def read(self) -> SharedSnapshot:
        """A consistent copy of the shared fields.

        A writer takes microseconds; a sequence left odd for longer means it died in
        the middle. Then the fields as they are come back with ``ring_seq`` -1: the
        notes cannot be trusted, and readers walk the records instead. The next write
        makes the sequence even again.
        """
        unpack = STATE_HEADER.unpack_from
        data = self.map
        deadline = None
        while True:
            first = unpack(data, 0)
            if header_updating(first):
                if deadline is None:
                    deadline = time.monotonic() + STUCK_AFTER_S
                elif time.monotonic() > deadline:
                    return header_snapshot(first, notes_trusted=False)
                continue
            second = unpack(data, 0)
            if first == second:
                if not header_written(first):
                    return SharedSnapshot(0, 0, 0, 0, 0, 0)
                return header_snapshot(first)

    def sequence(self) -> int:
        """The fields' sequence number: it changes with every write (odd while one is
        under way), so an unchanged even value means nothing changed since it was read."""
        return _SEQUENCE.unpack_from(self.map, _SEQUENCE_AT)[0]

    def write(self, **fields: int) -> SharedSnapshot:
        """Change some fields (the caller holds the store's write lock)."""
        return self.store(self.read()._replace(**fields))

    def store(self, snapshot: SharedSnapshot) -> SharedSnapshot:
        """Write every field (the caller holds the store's write lock)."""
        data = self.map
        sequence = _SEQUENCE.unpack_from(data, _SEQUENCE_AT)[0] | 1
        _SEQUENCE.pack_into(data, _SEQUENCE_AT, sequence)
        writing = _SEQUENCE.unpack_from(data, _WRITING_AT)[0]
        ring_seq = max(snapshot.ring_seq, _SEQUENCE.unpack_from(data, _RING_SEQ_AT)[0])
        STATE_HEADER.pack_into(
            data, 0, STATE_MAGIC, _VERSION, sequence, *snapshot[:5], writing, ring_seq
        )
        _SEQUENCE.pack_into(data, _SEQUENCE_AT, sequence + 1)
        return snapshot._replace(ring_seq=ring_seq)

    def publish_tail(
        self, tail: int, notes: list[tuple[int, int, int, int]], finished: bool = True
    ) -> int:
        """Publish a new tail with notes of the queue ends it moved, and (``finished``)
        clear the writing flag and extent (the caller holds the lock). Return the new ring
        sequence. A write that failed part-way publishes what was whole before it with
        ``finished`` False: its extent stays marked for the next writer to clear.

        A note is (topic id, queue, new queue end, store time). Other processes read
        the notes instead of walking the records; the ring keeps the last
        ``RING_ENTRIES`` of them, and a process further behind walks the records.
        """
        data = self.map
        ring_seq = _SEQUENCE.unpack_from(data, _RING_SEQ_AT)[0]
        pack = RING_ENTRY.pack_into
        for topic_id, queue, end, store_ms in notes:
            ring_seq += 1
            at = _HEADER_SIZE + (ring_seq % RING_ENTRIES) * RING_ENTRY.size
            pack(data, at, ring_seq, topic_id, queue, end, store_ms)
        sequence = _SEQUENCE.unpack_from(data, _SEQUENCE_AT)[0] | 1
        _SEQUENCE.pack_into(data, _SEQUENCE_AT, sequence)
        _SEQUENCE.pack_into(data, _TAIL_AT, tail)
        if finished:
            _SEQUENCE.pack_into(data, _WRITING_AT, 0)
            _SEQUENCE.pack_into(data, _EXTENT_AT, 0)
        _SEQUENCE.pack_into(data, _RING_SEQ_AT, ring_seq)
        _SEQUENCE.pack_into(data, _SEQUENCE_AT, sequence + 1)
        return ring_seq

    def notes(self, after: int, upto: int) -> list[tuple[int, int, int, int]] | None:
        """The notes with ring sequence in (after, upto], or None if some were
        overwritten meanwhile or cannot be trusted (the reader must walk the records)."""
        if after < 0 or upto < 0 or upto - after > RING_ENTRIES:
            return None
        found = []
        unpack = RING_ENTRY.unpack_from
        for ring_seq in range(after + 1, upto + 1):
            entry = unpack(self.map, _HEADER_SIZE + (ring_seq % RING_ENTRIES) * RING_ENTRY.size)
            if entry[0] != ring_seq:
                return None
            found.append(entry[1:])
        if _SEQUENCE.unpack_from(self.map, _RING_SEQ_AT)[0] - after > RING_ENTRIES:
            return None  # the ring wrapped while it was being read
        return found

    def begin_write(self, tail: int) -> int | None:
        """Note that a writer (an append, a topic or offset change) begins at ``tail``.

        Returns None when the last writer finished; else the end of the extent it had
        marked (``raise_extent``): it died, or failed, before publishing, and whatever it
        wrote from the published tail up to there must be cleared. Only writers holding
        the lock read or change these fields.
        """
        data = self.map
        unfinished = _SEQUENCE.unpack_from(data, _WRITING_AT)[0] != 0
        left = _SEQUENCE.unpack_from(data, _EXTENT_AT)[0]
        _SEQUENCE.pack_into(data, _EXTENT_AT, tail)
        _SEQUENCE.pack_into(data, _WRITING_AT, 1)
        return left if unfinished else None

    def extent(self) -> int:
        """The end the writer under way has marked (see ``raise_extent``)."""
        return _SEQUENCE.unpack_from(self.map, _EXTENT_AT)[0]

    def write_pending(self) -> bool:
        """Whether a writer began and never finished (died, or failed part-way)."""
        return _SEQUENCE.unpack_from(self.map, _WRITING_AT)[0] != 0

    def raise_extent(self, end: int) -> None:
        """Mark the commit log written up to ``end`` by the writer under way, before it
        writes there."""
        if end > _SEQUENCE.unpack_from(self.map, _EXTENT_AT)[0]:
            _SEQUENCE.pack_into(self.map, _EXTENT_AT, end)

    def finish_write(self) -> None:
        """The writer under way ends without publishing a tail (it changed no log bytes)."""
        _SEQUENCE.pack_into(self.map, _WRITING_AT, 0)
        _SEQUENCE.pack_into(self.map, _EXTENT_AT, 0)

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


__all__ = [
    "STATE_HEADER",
    "STUCK_AFTER_S",
    "SharedSnapshot",
    "SharedState",
    "header_snapshot",
    "header_updating",
    "header_written",
]
