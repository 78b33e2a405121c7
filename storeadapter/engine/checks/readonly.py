"""Reading a store's files without changing them: read-only descriptors and mappings,
and reads of a sparse file's written part only."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from ..segment import is_segment_name


class ReadOnlySegment:
    """A commit-log segment mapped read-only: what ``scan.scan_segment`` reads of a
    ``Segment`` (``base``, ``size``, ``end``, ``map``, ``view``, ``path``)."""

    __slots__ = ("path", "base", "size", "end", "map", "view")

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.base = int(path.name)
        self.size = size
        self.end = self.base + size
        fd = os.open(path, os.O_RDONLY)
        try:
            self.map = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        self.view = memoryview(self.map)

    def close(self) -> None:
        self.view.release()
        self.map.close()


def numbered_files(directory: Path) -> list[Path]:
    """The files of ``directory`` named by 20 digits, in order (none if it is missing)."""
    try:
        names = sorted(name for name in os.listdir(directory) if is_segment_name(name))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [directory / name for name in names]


def written_bytes(path: Path, limit: int | None = None) -> bytes:
    """The file's bytes up to the end of its last written stretch (a sparse file's
    trailing hole is not read), at most ``limit``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        end = _data_end(fd)
        if limit is not None:
            end = min(end, limit)
        return os.pread(fd, end, 0) if end else b""
    finally:
        os.close(fd)


def _data_end(fd: int) -> int:
    """Where the file's last written stretch ends (its size where holes are not known)."""
    size = os.fstat(fd).st_size
    try:
        end = position = os.lseek(fd, 0, os.SEEK_HOLE)
    except OSError:
        return size
    while position < size:
        try:
            start = os.lseek(fd, position, os.SEEK_DATA)
        except OSError:  # ENXIO: nothing written past ``position``
            break
        end = position = os.lseek(fd, start, os.SEEK_HOLE)
    return end


def relative(store: Path, path: Path) -> str:
    """``path`` as the store's reports name it: relative, with forward slashes."""
    try:
        return path.relative_to(store).as_posix()
    except ValueError:
        return path.as_posix()
