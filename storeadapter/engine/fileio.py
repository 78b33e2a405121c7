"""The engine's file system calls that matter for durability, in one place.

Every open, read, write, fsync, preallocation, truncation, file creation, rename,
removal and directory creation on the store's files goes through these functions, so
a fault-injection test (tests/faults/faultyfs.py) can replace them to see every change
or to simulate a failing, slow or stopped disk. The engine calls them as
``fileio.name(...)``, never imported by name, so replacing the module attribute is
enough.

Left out on purpose: the lock files (empty, only flocked), the shared ``state`` file
(mapped, never fsynced, rewritten by the first opener), and reads through a mapping
(commit-log segments, key-index files: memory loads, not calls; their files are opened
and their mappings made only through here).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
from pathlib import Path

from .seam import watch_module

#: The calls ``pwrite_all`` and ``fdatasync`` make: ``os``'s until the native data plane
#: hands over its look-alikes (``use_returning_calls``, from ``dataplane`` at import).
#: Through those, a thread that appends natively in this process lets the calling
#: thread have the GIL back as soon as the write or the sync ends, instead of after the
#: interpreter's switch interval (5 ms; native/src/python/returning.rs).
_pwrite = os.pwrite
_fdatasync = os.fdatasync


def use_returning_calls(pwrite, fdatasync) -> None:
    """Make ``pwrite_all``'s writes with ``pwrite`` and ``fdatasync``'s syncs with
    ``fdatasync`` (same arguments, results and errors as ``os``'s)."""
    global _pwrite, _fdatasync
    _pwrite, _fdatasync = pwrite, fdatasync


def fdatasync(fd: int) -> None:
    """Make the file's data durable (size changes excluded)."""
    _fdatasync(fd)


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


def adopt(fd: int, directory: Path | str) -> None:
    """Make a file another process created durable, name and all, before writing into it
    or vouching for what it holds: fsync it, then its directory.

    Its creator may have died between creating it and fsyncing its directory; every
    path that reuses such a file (a segment, a queue file, a journal generation left
    behind) adopts it first, else a power loss takes the file and what was acknowledged
    into it.
    """
    fsync(fd)
    fsync_dir(Path(directory))


#: What posix_fallocate answers where the file system cannot reserve space at all.
_NOT_SUPPORTED = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


def preallocate(fd: int, size: int) -> None:
    """Reserve ``size`` bytes of disk for the file, so later writes cannot hit ENOSPC.

    Only where the file system cannot preallocate does the file become sparse instead; a
    full disk (ENOSPC) or a failing one (EIO) raises OSError, before anything is written.
    """
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as error:
        if error.errno not in _NOT_SUPPORTED:
            raise
        os.ftruncate(fd, size)


FALLOC_FL_ZERO_RANGE = 0x10  # linux/falloc.h
_libc = ctypes.CDLL(None, use_errno=True)
_fallocate = _libc.fallocate
_fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
_fallocate.restype = ctypes.c_int
_ZEROS_CHUNK = 1 << 20


def zero_range(fd: int, offset: int, length: int) -> None:
    """Make ``length`` bytes at ``offset`` read as zeros, their disk space kept reserved
    (``FALLOC_FL_ZERO_RANGE``): one call whatever the length, no truncate below a
    mapping of the file, and no byte written. Where the file system refuses (tmpfs,
    some network file systems), zeros are written instead. Not durable until an fsync.
    """
    if length <= 0:
        return
    if _fallocate(fd, FALLOC_FL_ZERO_RANGE, offset, length) == 0:
        return
    code = ctypes.get_errno()
    if code == errno.EINTR:
        return zero_range(fd, offset, length)
    if code not in _NOT_SUPPORTED:
        raise OSError(code, f"fallocate(FALLOC_FL_ZERO_RANGE): {os.strerror(code)}")
    zeros = bytes(min(length, _ZEROS_CHUNK))
    end = offset + length
    while offset < end:
        written = os.pwrite(fd, memoryview(zeros)[: min(len(zeros), end - offset)], offset)
        offset += written


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync the directory.

    A crash leaves either the old or the new content, never a mix.
    """
    temp = path.with_name(f".{path.name}.tmp")
    fd = create_file(temp, truncate=True)
    try:
        pwrite_all(fd, data, 0)
        fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            unlink(temp, missing_ok=False)
        raise
    os.close(fd)
    rename(temp, path)
    fsync_dir(path.parent)


def create_file(path: Path | str, *, exclusive: bool = False, truncate: bool = False) -> int:
    """Open ``path`` read-write, creating it (mode 0644) if missing; return the descriptor.

    ``exclusive``: fail with FileExistsError if it exists. ``truncate``: empty it.
    """
    flags = os.O_RDWR | os.O_CREAT
    if exclusive:
        flags |= os.O_EXCL
    if truncate:
        flags |= os.O_TRUNC
    return os.open(path, flags, 0o644)


def open_file(path: Path | str) -> int:
    """Open an existing file of the store read-write; return the descriptor."""
    return os.open(path, os.O_RDWR)


def pread(fd: int, size: int, offset: int) -> bytes:
    """Read at most ``size`` bytes at ``offset`` (fewer at the end of the file)."""
    return os.pread(fd, size, offset)


def ftruncate(fd: int, size: int) -> None:
    """Set the open file's size (growing it sparsely, or cutting it)."""
    os.ftruncate(fd, size)


def truncate(path: Path | str, size: int) -> None:
    """Set the file's size (growing it sparsely, or cutting it)."""
    os.truncate(path, size)


def rename(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, replacing ``target`` if it exists."""
    os.replace(source, target)


def unlink(path: Path, missing_ok: bool = True) -> None:
    """Remove a file; a missing one is fine unless ``missing_ok`` is False."""
    Path(path).unlink(missing_ok=missing_ok)


def touch(path: Path) -> None:
    """Create an empty file if it does not exist (its content is left alone)."""
    Path(path).touch()


def make_dir(path: Path | str, parents: bool = False, exist_ok: bool = False) -> None:
    """Create a directory, as ``Path.mkdir``."""
    Path(path).mkdir(parents=parents, exist_ok=exist_ok)


def remove_tree(path: Path) -> None:
    """Delete a directory and everything under it; errors are ignored."""
    shutil.rmtree(path, ignore_errors=True)


def pwrite_all(fd: int, data, offset: int) -> None:
    """Write every byte of ``data`` at ``offset`` (os.pwrite may write fewer)."""
    written = _pwrite(fd, data, offset)
    if written == len(data):
        return
    view = memoryview(data)[written:]
    offset += written
    while view:
        written = _pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def disk_usage(path: Path) -> tuple[int, int]:
    """(used bytes, total bytes) of the file system holding ``path``."""
    usage = shutil.disk_usage(path)
    return usage.total - usage.free, usage.total


watch_module(__name__)  # replacing a function here moves the seam generation (seam.py)
