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
    """``commitlog_flushed``: the log is durable below it (the durable watermark: raised by
    every full flush, and in sync mode by the fsync that acknowledges appends).
    ``dispatched``: every record below it has its consume-queue (and index) entries
    durable."""

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
        # What was wrong with the file when the store was opened alone (a slot that fails
        # its check is passed over: recovery starts from the other one, or scans the log).
        self.problems: list[str] = []

    def check(self) -> None:
        """Note what is wrong with the file (only while no other process writes it)."""
        self.problems = checkpoint_problems(fileio.pread(self.fd, 4 * SLOT_SIZE, 0))

    def current(self) -> CheckpointState:
        """The checkpoint as the file says now (any process may have moved it); all
        zeros when none was saved."""
        return self._load() or CheckpointState(0, 0, 0, 0, 0)

    def _load(self) -> CheckpointState | None:
        return parse_checkpoint(fileio.pread(self.fd, 2 * SLOT_SIZE, 0))

    def save(self, commitlog_flushed: int, dispatched: int, index_dispatched: int) -> None:
        """Write and fsync a new checkpoint into the older slot.

        Processes sharing the store take turns (a lock on this file), and no field ever
        moves back: each is the highest any process saved (``_raised``). A process whose
        flush chose its target before another's fsync raised the watermark keeps that
        watermark; one behind in every field writes nothing.
        """
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            current = self._load()
            self.state = current
            fields = _raised(current, commitlog_flushed, dispatched, index_dispatched)
            if fields is not None:
                self._write(*fields)
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def save_flushed(self, commitlog_flushed: int) -> None:
        """Raise the durable watermark alone (``commitlog_flushed``), as the fsync that
        acknowledges sync appends does; the other fields stay as they are.

        Written, not fsynced: it outlives the process at once (the page cache keeps it
        through a crash), and a power loss at the next full flush's fsync. A second
        fsync per group commit would halve what sync appends do (measured: 2-4x fewer
        single sync appends a second on this machine's disk).
        """
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            current = self._load()
            self.state = current
            fields = _raised(current, commitlog_flushed, 0, 0)
            if fields is not None:
                self._write(*fields, sync=False)
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def _write(
        self, commitlog_flushed: int, dispatched: int, index_dispatched: int, sync: bool = True
    ) -> None:
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
        if sync:
            fileio.fdatasync(self.fd)
        self.state = CheckpointState(
            sequence, commitlog_flushed, dispatched, index_dispatched, when
        )

    def close(self) -> None:
        os.close(self.fd)


def _raised(
    current: CheckpointState | None, commitlog_flushed: int, dispatched: int, index_dispatched: int
) -> tuple[int, int, int] | None:
    """The field-wise maximum of ``current`` and the given fields, or None if it is
    ``current`` itself (nothing to write)."""
    if current is None:
        return commitlog_flushed, dispatched, index_dispatched
    fields = (
        max(current.commitlog_flushed, commitlog_flushed),
        max(current.dispatched, dispatched),
        max(current.index_dispatched, index_dispatched),
    )
    if fields == (current.commitlog_flushed, current.dispatched, current.index_dispatched):
        return None
    return fields


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


def checkpoint_problems(data: bytes) -> list[str]:
    """Sentences about damage in a checkpoint file's bytes (a never-written slot, all
    zeros, is not damage)."""
    problems = []
    if 0 < len(data) < 2 * SLOT_SIZE and any(data):
        problems.append(f"the file is {len(data)} bytes, shorter than its two slots")
    for slot in range(2):
        raw = data[slot * SLOT_SIZE : (slot + 1) * SLOT_SIZE]
        if len(raw) == SLOT_SIZE and any(raw) and parse_checkpoint(_alone(raw, slot)) is None:
            problems.append(f"slot {slot} fails its check (magic, version or CRC32C)")
    if len(data) >= 2 * SLOT_SIZE and not any(data[: 2 * SLOT_SIZE]):
        problems.append("both slots are zeros (a written file never has two empty slots)")
    if any(data[2 * SLOT_SIZE :]):
        problems.append(f"bytes past the two slots (from byte {2 * SLOT_SIZE})")
    if problems:
        valid = parse_checkpoint(data[: 2 * SLOT_SIZE])
        problems.append(
            "no slot is valid: recovery scanned the whole log"
            if valid is None
            else f"recovery started from the valid slot of sequence {valid.sequence}"
        )
    return problems


def _alone(raw: bytes, slot: int) -> bytes:
    """A checkpoint file's bytes holding only ``raw`` in ``slot``."""
    empty = bytes(SLOT_SIZE)
    return raw + empty if slot == 0 else empty + raw


def read_checkpoint(path: Path) -> CheckpointState | None:
    """Read a checkpoint file without creating or locking it."""
    try:
        return parse_checkpoint(path.read_bytes()[: 2 * SLOT_SIZE])
    except FileNotFoundError:
        return None
