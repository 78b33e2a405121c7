"""One commit-log segment: a preallocated file mapped into memory.

Writes are copies into the shared mapping; the space is reserved on disk up front
(``fileio.preallocate``), so a full disk fails when a segment is created, never in
the middle of a write.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from . import fileio

SEGMENT_NAME_DIGITS = 20


def segment_name(base: int) -> str:
    return f"{base:0{SEGMENT_NAME_DIGITS}d}"


def is_segment_name(name: str) -> bool:
    return len(name) == SEGMENT_NAME_DIGITS and name.isdigit()


class Segment:
    """A segment file named by the commit-log offset of its first byte."""

    __slots__ = ("path", "base", "size", "fd", "map", "view", "end")

    def __init__(self, path: Path, base: int, fd: int, size: int) -> None:
        self.path = path
        self.base = base
        self.size = size
        self.end = base + size
        self.fd = fd
        self.map = mmap.mmap(fd, size)
        self.view = memoryview(self.map)

    @classmethod
    def create(cls, directory: Path, base: int, size: int) -> Segment:
        """Create, preallocate and fsync a new empty segment (and its directory entry)."""
        path = directory / segment_name(base)
        fd = fileio.create_file(path, exclusive=True)
        try:
            fileio.preallocate(fd, size)
            fileio.fsync(fd)
            fileio.fsync_dir(directory)
            return cls(path, base, fd, size)
        except BaseException:
            os.close(fd)
            fileio.unlink(path)
            raise

    @classmethod
    def reset(cls, path: Path, size: int) -> Segment:
        """Empty an existing segment file that holds nothing published (a writer died
        while creating or filling it) and reserve ``size`` bytes for it again."""
        fd = fileio.open_file(path)
        try:
            fileio.ftruncate(fd, 0)
            fileio.preallocate(fd, size)
            fileio.fsync(fd)
            return cls(path, int(path.name), fd, size)
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def open(cls, path: Path) -> Segment:
        fd = fileio.open_file(path)
        try:
            size = os.fstat(fd).st_size
            return cls(path, int(path.name), fd, size)
        except BaseException:
            os.close(fd)
            raise

    def sync(self) -> None:
        fileio.fdatasync(self.fd)

    def zero_from(self, pos: int) -> None:
        """Discard every byte from ``pos`` to the end of the file, durably: they read as
        zeros after, their space still reserved, the mapping left in place."""
        fileio.zero_range(self.fd, pos, self.size - pos)
        fileio.fsync(self.fd)

    def retire(self) -> None:
        """Delete the file (retention). The mapping stays valid for whoever still reads
        it, and goes when the last reference does; only the descriptor is closed now."""
        fileio.unlink(self.path)
        os.close(self.fd)
        self.fd = -1

    def close(self) -> None:
        if self.fd < 0:
            return
        self.view.release()
        self.map.close()
        os.close(self.fd)
