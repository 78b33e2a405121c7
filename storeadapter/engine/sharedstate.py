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

import mmap
import os
import struct
from pathlib import Path
from typing import NamedTuple

_MAGIC = b"TDMS"
_VERSION = 1
# magic, version, sequence, the 5 shared fields, the writing flag, 1 spare
_LAYOUT = struct.Struct("<4sIQ7Q")
_SEQUENCE = struct.Struct("<Q")
_TAIL_AT = 16
_WRITING_AT = 56
_SIZE = 4096


class SharedSnapshot(NamedTuple):
    tail: int
    min_offset: int
    topics_version: int
    offsets_version: int
    index_version: int


class SharedState:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self.fd).st_size < _SIZE:
            os.ftruncate(self.fd, _SIZE)
        self.map = mmap.mmap(self.fd, _SIZE)

    def read(self) -> SharedSnapshot:
        """A consistent copy of the shared fields."""
        unpack = _LAYOUT.unpack_from
        data = self.map
        while True:
            first = unpack(data, 0)
            if first[2] & 1:
                continue
            second = unpack(data, 0)
            if first == second:
                if first[0] != _MAGIC:
                    return SharedSnapshot(0, 0, 0, 0, 0)
                return SharedSnapshot(*first[3:8])

    def write(self, **fields: int) -> SharedSnapshot:
        """Change some fields (the caller holds the store's write lock)."""
        return self.store(self.read()._replace(**fields))

    def store(self, snapshot: SharedSnapshot) -> SharedSnapshot:
        """Write every field (the caller holds the store's write lock)."""
        data = self.map
        sequence = _SEQUENCE.unpack_from(data, 8)[0] | 1
        _SEQUENCE.pack_into(data, 8, sequence)
        writing = _SEQUENCE.unpack_from(data, _WRITING_AT)[0]
        _LAYOUT.pack_into(data, 0, _MAGIC, _VERSION, sequence, *snapshot, writing, 0)
        _SEQUENCE.pack_into(data, 8, sequence + 1)
        return snapshot

    def publish_tail(self, tail: int) -> None:
        """Publish a new tail and clear the writing flag (the caller holds the lock)."""
        data = self.map
        sequence = _SEQUENCE.unpack_from(data, 8)[0] | 1
        _SEQUENCE.pack_into(data, 8, sequence)
        _SEQUENCE.pack_into(data, _TAIL_AT, tail)
        _SEQUENCE.pack_into(data, _WRITING_AT, 0)
        _SEQUENCE.pack_into(data, 8, sequence + 1)

    def mark_writing(self) -> bool:
        """Note that a write past the tail begins; return whether the last writer's
        write never finished (it died before publishing, leaving bytes to clear).

        Only writers holding the lock read or change this flag.
        """
        unfinished = _SEQUENCE.unpack_from(self.map, _WRITING_AT)[0] != 0
        _SEQUENCE.pack_into(self.map, _WRITING_AT, 1)
        return unfinished

    def bump(self, field: str) -> int:
        """Add one to a version counter and return the new value."""
        value = getattr(self.read(), field) + 1
        self.write(**{field: value})
        return value

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


__all__ = ["SharedState", "SharedSnapshot"]
