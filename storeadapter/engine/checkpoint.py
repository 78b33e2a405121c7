"""The checkpoint: how far the commit log and the consume queues are known durable.

The file holds two 64-byte slots written in turn, each with a sequence number and a
CRC32C; the valid slot with the higher sequence wins. A torn write spoils at most
the slot being written, so the previous checkpoint survives it.
"""

from __future__ import annotations

import fcntl
import os
import struct
import time
from pathlib import Path
from typing import NamedTuple

from crc32c import crc32c

from . import fileio

_SLOT = struct.Struct("<4sHHQQQQq")  # magic, version, reserved, seq, 3 offsets, time
_CRC = struct.Struct("<I")
SLOT_SIZE = 64
_MAGIC = b"TDMC"
_VERSION = 1


class CheckpointState(NamedTuple):
    """``commitlog_flushed``: the log is durable below it. ``dispatched``: every record
    below it has its consume-queue (and index) entries durable."""

    sequence: int
    commitlog_flushed: int
    dispatched: int
    index_dispatched: int
    time_ms: int


class Checkpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = fileio.create_file(path)
        self.state = self._load()

    def _load(self) -> CheckpointState | None:
        return parse_checkpoint(os.pread(self.fd, 2 * SLOT_SIZE, 0))

    def save(self, commitlog_flushed: int, dispatched: int, index_dispatched: int) -> None:
        """Write and fsync a new checkpoint into the older slot.

        Processes sharing the store take turns (a lock on this file) and never move the
        checkpoint back: a process behind another one's checkpoint writes nothing.
        """
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            current = self._load()
            if current is not None and (
                current.dispatched >= dispatched and current.commitlog_flushed >= commitlog_flushed
            ):
                self.state = current
                return
            self.state = current
            self._write(commitlog_flushed, dispatched, index_dispatched)
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def _write(self, commitlog_flushed: int, dispatched: int, index_dispatched: int) -> None:
        sequence = (self.state.sequence + 1) if self.state else 1
        when = time.time_ns() // 1_000_000
        raw = bytearray(SLOT_SIZE)
        _SLOT.pack_into(
            raw,
            0,
            _MAGIC,
            _VERSION,
            0,
            sequence,
            commitlog_flushed,
            dispatched,
            index_dispatched,
            when,
        )
        _CRC.pack_into(raw, _SLOT.size, crc32c(bytes(raw[: _SLOT.size])))
        fileio.pwrite_all(self.fd, raw, (sequence % 2) * SLOT_SIZE)
        fileio.fdatasync(self.fd)
        self.state = CheckpointState(
            sequence, commitlog_flushed, dispatched, index_dispatched, when
        )

    def close(self) -> None:
        os.close(self.fd)


def parse_checkpoint(data: bytes) -> CheckpointState | None:
    """The newest valid slot of a checkpoint file's bytes, or None."""
    best = None
    for slot in range(2):
        raw = data[slot * SLOT_SIZE : (slot + 1) * SLOT_SIZE]
        if len(raw) < SLOT_SIZE:
            continue
        end = _SLOT.size
        (crc,) = _CRC.unpack_from(raw, end)
        if crc32c(raw[:end]) != crc:
            continue
        magic, version, _reserved, seq, flushed, dispatched, index, when = _SLOT.unpack_from(raw)
        if magic != _MAGIC or version != _VERSION:
            continue
        state = CheckpointState(seq, flushed, dispatched, index, when)
        if best is None or state.sequence > best.sequence:
            best = state
    return best


def read_checkpoint(path: Path) -> CheckpointState | None:
    """Read a checkpoint file without creating or locking it."""
    try:
        return parse_checkpoint(path.read_bytes()[: 2 * SLOT_SIZE])
    except FileNotFoundError:
        return None
