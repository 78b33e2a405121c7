"""State shared by every process that has a store open: the ``state`` file, mapped.

It holds what a process must learn from the others before it reads or writes: the
published commit-log tail, the commit log's minimum offset, and version counters that
change when topics or committed offsets change. Only a writer holding the store's
write lock changes it; anyone may read it at any time.

Updates use a sequence lock: the writer makes the sequence odd, writes the fields,
then makes it even again; a reader retries while the sequence is odd or moved under
it, so it never sees half an update. The file is not fsynced: after a crash of every
process, recovery rebuilds it from the log.

Only the holder of the store's write lock (the pen, writesession.py) updates the
header, so an odd sequence means one of two things, and time never tells which (a
live writer may be descheduled for long on a loaded machine): to a reader without the
pen, a writer mid-update, alive or dead; to the pen's holder, a writer that died
mid-update. A reader without the pen therefore waits for the pen (``wait_for_writer``,
the store's): a live writer lets go of it once its update is whole; a dead one's half
update is made safe (``mend``) by whoever takes the pen next.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from . import dataplane
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
# Reads of an odd sequence before a reader without the pen waits for it: a writer's
# update takes tens of nanoseconds (native) to microseconds (Python).
SPINS = 64
_HEADER_SIZE = 4096
# The ring of queue-end notes: sequence, topic id, queue, new queue end, store time.
# A note is written sequence first, then the rest (``_NOTE``), and read whole, then its
# sequence again: a reader without the pen may read a slot while the writer overwrites it
# (its own notes not published yet: the ring sequence has not moved), and must not take
# the old sequence with some of the new note's fields (``notes``).
RING_ENTRY = struct.Struct("<QIIQq")
_NOTE = struct.Struct("<IIQq")
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


# The write mutex's marker and the mutex (native/src/pen.rs, docs/FORMAT.md "Shared
# state"): a glibc robust mutex begins with its futex word, whose low 30 bits are the
# owner's thread id (the kernel's robust-futex ABI: it clears them and sets
# OWNER_DIED when the owner dies).
_PEN_MARKER = struct.Struct("<4sII")
_PEN_MARKER_AT = 3968
_PEN_AT = 4032
_PEN_SIZES = frozenset({40, 48})  # glibc's pthread_mutex_t on x86-64 and aarch64
_FUTEX_TID_MASK = 0x3FFFFFFF


def pen_owner_alive(header: bytes) -> bool | None:
    """For a reader that must not take the pen (it opens ``state`` read-only): whether
    a live thread holds the write mutex, from the header's first 4096 bytes; None
    when that cannot be told (no mutex in the header: the flock path; another C
    library's layout)."""
    if len(header) < _PEN_AT + 4:
        return None
    magic, version, size = _PEN_MARKER.unpack_from(header, _PEN_MARKER_AT)
    if magic != b"TDMX" or version != 1 or size not in _PEN_SIZES:
        return None
    owner = struct.unpack_from("<I", header, _PEN_AT)[0] & _FUTEX_TID_MASK
    return owner != 0 and os.path.exists(f"/proc/{owner}")


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
        # The store's: wait until no writer is mid-update (it holds the pen meanwhile),
        # making a dead one's half update safe; True when this thread holds the write
        # lock (then no other writer can be mid-update). None: no store beside it.
        self.wait_for_writer: Callable[[], bool] | None = None

    def read(self) -> SharedSnapshot:
        """A consistent copy of the shared fields, for a caller without the pen.

        One that finds the sequence odd waits for the writer (``wait_for_writer``),
        however long it takes. With no ``wait_for_writer`` (a tool beside no store),
        or when it answers that this thread holds the write lock (a caller that should
        have called ``read_held``), the fields as they are come back with ``ring_seq``
        -1 (readers walk the records).
        """
        unpack = STATE_HEADER.unpack_from
        data = self.map
        spins = 0
        while True:
            first = unpack(data, 0)
            if header_updating(first):
                spins += 1
                if spins < SPINS:
                    continue
                spins = 0
                wait = self.wait_for_writer
                if wait is None or wait():
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

    def ring_sequence(self) -> int:
        """The notes ring's sequence as it is now (the last note published), read alone:
        how far the ring has moved past a snapshot's ``ring_seq``."""
        return _SEQUENCE.unpack_from(self.map, _RING_SEQ_AT)[0]

    def read_held(self) -> SharedSnapshot:
        """``read`` for the pen's holder: an odd sequence was left by a writer that died
        mid-update, and is mended first (``mend``)."""
        if _SEQUENCE.unpack_from(self.map, _SEQUENCE_AT)[0] & 1:
            self.mend()
        return self.read()

    def write(self, **fields: int) -> SharedSnapshot:
        """Change some fields (the caller holds the store's write lock)."""
        return self.store(self.read_held()._replace(**fields))

    def mend(self) -> bool:
        """Make safe what a writer that died mid-update left (the caller holds the pen):
        when the sequence is odd, make it even with the ring sequence moved past the
        ring. Its fields stay as they are, each whole (an aligned word); but the notes
        it wrote were never published, and the next writer's would take their place,
        so a process that followed up to before it must walk the records instead of
        reading notes (``notes`` answers None for a span longer than the ring).
        Whether there was anything to mend."""
        data = self.map
        sequence = _SEQUENCE.unpack_from(data, _SEQUENCE_AT)[0]
        if not sequence & 1:
            return False
        ring_seq = _SEQUENCE.unpack_from(data, _RING_SEQ_AT)[0] + RING_ENTRIES + 1
        _SEQUENCE.pack_into(data, _RING_SEQ_AT, ring_seq)
        _SEQUENCE.pack_into(data, _SEQUENCE_AT, sequence + 1)
        return True

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
        pack_sequence = _SEQUENCE.pack_into
        pack = _NOTE.pack_into
        for topic_id, queue, end, store_ms in notes:
            ring_seq += 1
            at = _HEADER_SIZE + (ring_seq % RING_ENTRIES) * RING_ENTRY.size
            # The sequence first (two stores, in this order: see RING_ENTRY's comment).
            pack_sequence(data, at, ring_seq)
            pack(data, at + _SEQUENCE.size, topic_id, queue, end, store_ms)
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
        overwritten meanwhile or cannot be trusted (the reader must walk the records).

        A slot is read whole, then its sequence again: a writer overwriting it (a
        process ``RING_ENTRIES`` notes ahead, whose notes are not published yet) writes
        the new sequence before the new fields, so a note read while it was being
        overwritten shows a sequence moved on the second read. (That takes reads seen in
        the order made and writes likewise, as the header's sequence lock does: x86-64's
        ordering for these Python calls; the native writer, append_core.rs, puts a
        release fence after the sequence.)"""
        if after < 0 or upto < 0 or upto - after > RING_ENTRIES:
            return None
        found = []
        data = self.map
        unpack = RING_ENTRY.unpack_from
        sequence_at = _SEQUENCE.unpack_from
        for ring_seq in range(after + 1, upto + 1):
            at = _HEADER_SIZE + (ring_seq % RING_ENTRIES) * RING_ENTRY.size
            entry = unpack(data, at)
            if entry[0] != ring_seq or sequence_at(data, at)[0] != ring_seq:
                return None
            found.append(entry[1:])
        if _SEQUENCE.unpack_from(self.map, _RING_SEQ_AT)[0] - after > RING_ENTRIES:
            return None  # the ring wrapped while it was being read
        return found

    def noted_ends(
        self, after: int, upto: int
    ) -> tuple[list[tuple[int, int, int]], int | None] | None:
        """``notes(after, upto)`` taken in per queue, natively (``dataplane.noted_ends``):
        (topic id, queue, its highest end noted) in the order the queues were first
        noted, and the latest store time noted (None: no note); None where ``notes``
        answers None."""
        return dataplane.noted_ends(self.map, after, upto)

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
        self.wait_for_writer = None
        self.map.close()
        os.close(self.fd)


__all__ = [
    "SPINS",
    "STATE_HEADER",
    "SharedSnapshot",
    "SharedState",
    "header_snapshot",
    "header_updating",
    "header_written",
    "pen_owner_alive",
]
