"""``fileio.zero_range``: how recovery clears a segment past its recovered tail (issue 29).

One ``fallocate(FALLOC_FL_ZERO_RANGE)``: the bytes read as zeros, through a mapping
made before too, the file keeps its size and its reserved space. Where the file system
refuses the call, zeros are written instead; any other error is raised.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
from pathlib import Path

import pytest

from storeadapter.engine import fileio

SIZE = 1 << 20


def _filled(path: Path) -> int:
    fd = fileio.create_file(path)
    fileio.preallocate(fd, SIZE)
    fileio.pwrite_all(fd, b"\xab" * SIZE, 0)
    return fd


def test_zero_range_clears_bytes_under_a_mapping_and_keeps_the_space(tmp_path: Path) -> None:
    fd = _filled(tmp_path / "segment")
    mapping = mmap.mmap(fd, SIZE)
    try:
        fileio.zero_range(fd, 1000, SIZE - 1000)
        assert mapping[:1000] == b"\xab" * 1000
        assert mapping[1000:] == bytes(SIZE - 1000)
        assert os.fstat(fd).st_size == SIZE
        assert os.fstat(fd).st_blocks * 512 >= SIZE
    finally:
        mapping.close()
        os.close(fd)


def test_zero_range_writes_zeros_where_the_file_system_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(_fd: int, _mode: int, _offset: int, _length: int) -> int:
        ctypes.set_errno(errno.EOPNOTSUPP)
        return -1

    monkeypatch.setattr(fileio, "_fallocate", refused)
    monkeypatch.setattr(fileio, "_ZEROS_CHUNK", 4096)  # several chunks
    fd = _filled(tmp_path / "segment")
    try:
        fileio.zero_range(fd, 123, SIZE - 200)
        data = os.pread(fd, SIZE, 0)
        assert data[:123] == b"\xab" * 123
        assert data[123 : SIZE - 77] == bytes(SIZE - 200)
        assert data[SIZE - 77 :] == b"\xab" * 77
        assert os.fstat(fd).st_size == SIZE
    finally:
        os.close(fd)


def test_zero_range_raises_other_errors(tmp_path: Path) -> None:
    path = tmp_path / "segment"
    os.close(_filled(path))
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as raised:
            fileio.zero_range(fd, 0, 4096)
        assert raised.value.errno == errno.EBADF
    finally:
        os.close(fd)
