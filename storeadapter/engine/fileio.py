"""The engine's file system calls that matter for durability, in one place.

Every fsync, preallocation and atomic replace goes through these functions, so
a fault-injection test can replace one of them to simulate a failing or slow disk.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path


def fdatasync(fd: int) -> None:
    """Make the file's data durable (size changes excluded)."""
    os.fdatasync(fd)


def fsync(fd: int) -> None:
    """Make the file's data and metadata durable."""
    os.fsync(fd)


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (creations, renames, removals) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def preallocate(fd: int, size: int) -> None:
    """Reserve ``size`` bytes of disk for the file, so later writes cannot hit ENOSPC.

    Falls back to a sparse file where the file system cannot preallocate.
    """
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError:
        os.ftruncate(fd, size)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync the directory.

    A crash leaves either the old or the new content, never a mix.
    """
    temp = path.with_name(f".{path.name}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    os.close(fd)
    os.replace(temp, path)
    fsync_dir(path.parent)


def pwrite_all(fd: int, data, offset: int) -> None:
    """Write every byte of ``data`` at ``offset`` (os.pwrite may write fewer)."""
    written = os.pwrite(fd, data, offset)
    if written == len(data):
        return
    view = memoryview(data)[written:]
    offset += written
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def disk_usage(path: Path) -> tuple[int, int]:
    """(used bytes, total bytes) of the file system holding ``path``."""
    usage = shutil.disk_usage(path)
    return usage.total - usage.free, usage.total
