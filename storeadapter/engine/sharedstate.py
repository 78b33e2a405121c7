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
_LAYOUT = struct.Struct("<4sIQ7Q")  # magic, version, sequence, 5 fields, 2 spare
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
        current = self.read()._replace(**fields)
        sequence = _LAYOUT.unpack_from(self.map, 0)[2]
        struct.pack_into("<Q", self.map, 8, sequence | 1)
        _LAYOUT.pack_into(self.map, 0, _MAGIC, _VERSION, sequence | 1, *current, 0, 0)
        struct.pack_into("<Q", self.map, 8, (sequence | 1) + 1)
        return current

    def bump(self, field: str) -> int:
        """Add one to a version counter and return the new value."""
        value = getattr(self.read(), field) + 1
        self.write(**{field: value})
        return value

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


__all__ = ["SharedState", "SharedSnapshot"]
