"""How far each queue of a topic was known durable at the last flush: a witness against
entries lost below the checkpoint.

A consume-queue entry has no checksum, and everything below the checkpoint is trusted,
so a queue file cut short or zeroed at its end would make the queue look shorter than
it is: its last messages unread, their offsets given out again. Each flush therefore
writes, after fsyncing the queue files, every dirty queue's end into the topic's
``queue-ends`` file; when a queue is first loaded its end is compared with the witness,
and a shortfall is restored from the commit log.

The file holds two slots written in turn (magic, sequence, the topic's creation
offset, the commit-log tail the flush covered, a count, one u64 end per queue, CRC32C);
the valid slot with the higher sequence wins, so a torn write loses only the newer
slot. A value is written only once the entries below it are durable, and fsynced at
once (its name too, the first time a process writes it): the witness is there for
after a power loss. A lost write leaves an older, lower value — a weaker witness,
never a false one. Processes sharing the store merge under a lock on the file (each end is the
highest any of them wrote, the tail the highest any flushed to); a process that has
not followed the log that far yet does not judge its queues by the witness.
"""

from __future__ import annotations

import fcntl
import os
import struct
from pathlib import Path

from crc32c import crc32c

from . import fileio

FILE_NAME = "queue-ends"
CAPACITY = 1024  # queues witnessed per topic (a topic with files per queue has at most 1024)
_HEAD = struct.Struct("<4sIQQQI")  # magic, version, sequence, created offset, tail, count
_CRC = struct.Struct("<I")
_MAGIC = b"TDME"
_VERSION = 1
_STRIDE = _HEAD.size + CAPACITY * 8 + _CRC.size


class QueueEnds:
    """The witness file of one topic with files per queue."""

    def __init__(self, directory: Path, created_offset: int) -> None:
        self.path = Path(directory) / FILE_NAME
        self.created_offset = created_offset
        self._read: tuple[int, list[int]] | None = None  # (tail, ends) as read (lower bounds)
        self._read_at = -1  # the caller's tail when the file was last read
        self._adopted = False  # whether this process made the file's name durable

    def _open(self, create: bool) -> int | None:
        """A descriptor on the file (opened per use: a store may have many topics), or
        None when it does not exist (yet, or any more: the topic was deleted)."""
        try:
            if create:
                return fileio.create_file(self.path)
            return fileio.open_file(self.path)
        except FileNotFoundError:
            return None

    def newest(self, fd: int) -> tuple[int, int, list[int]]:
        """(sequence, tail, ends) of the newest valid slot of this topic; (0, 0, []) if none."""
        data = fileio.pread(fd, 2 * _STRIDE, 0)
        best = (0, 0, [])
        for at in (0, _STRIDE):
            if len(data) < at + _HEAD.size:
                break
            magic, version, seq, created, tail, count = _HEAD.unpack_from(data, at)
            end = at + _HEAD.size + count * 8
            if (
                magic != _MAGIC
                or version != _VERSION
                or created != self.created_offset
                or count > CAPACITY
                or len(data) < end + _CRC.size
                or _CRC.unpack_from(data, end)[0] != crc32c(data[at:end])
            ):
                continue
            if seq > best[0]:
                ends = list(struct.unpack_from(f"<{count}Q", data, at + _HEAD.size))
                best = (seq, tail, ends)
        return best

    def get(self, queue_id: int, tail: int) -> int:
        """The queue's witnessed end, for a process that has followed the log to
        ``tail`` (0 when none is known, or the witness is from further on)."""
        # Read again only when the caller has followed further since: the witness it
        # could not judge by is then perhaps one it can.
        if self._read is None or (self._read[0] > tail and tail > self._read_at):
            self._read_at = tail
            fd = self._open(create=False)
            if fd is None:
                self._read = (0, [])
            else:
                try:
                    self._read = self.newest(fd)[1:]
                finally:
                    os.close(fd)
        witnessed_tail, ends = self._read
        if witnessed_tail > tail or queue_id >= len(ends):
            return 0
        return ends[queue_id]

    def raise_to(self, ends: dict[int, int], queues: int, tail: int) -> None:
        """Record ``ends`` (queue id → end), durable with the log up to ``tail``, where
        they are higher, for a topic of ``queues`` queues (those past it are dropped)."""
        self._update(ends, queues, tail, lower=False)

    def lower_to(self, queue_id: int, end: int, queues: int) -> None:
        """Set a queue's witness to ``end`` even if lower (what it said was not found)."""
        self._update({queue_id: end}, queues, 0, lower=True)

    def forget_past(self, tail: int, queues: int) -> None:
        """Drop every end if the witness is from past ``tail``: the log lost durable
        bytes, and the ends of the queues whose records went with them are no more."""
        fd = self._open(create=False)
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            seq, witnessed_tail, _ = self.newest(fd)
            if witnessed_tail > tail:
                self._write(fd, seq + 1, tail, [0] * min(queues, CAPACITY))
        finally:
            os.close(fd)

    def _write(self, fd: int, seq: int, tail: int, ends: list[int]) -> None:
        body = _HEAD.pack(_MAGIC, _VERSION, seq, self.created_offset, tail, len(ends))
        body += struct.pack(f"<{len(ends)}Q", *ends)
        fileio.pwrite_all(fd, body + _CRC.pack(crc32c(body)), (seq % 2) * _STRIDE)
        if self._adopted:
            fileio.fdatasync(fd)
        else:
            fileio.adopt(fd, self.path.parent)
            self._adopted = True
        self._read = (tail, ends)

    def _update(self, changes: dict[int, int], queues: int, tail: int, lower: bool) -> None:
        fd = self._open(create=True)
        if fd is None:
            return
        count = min(queues, CAPACITY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            seq, old_tail, old = self.newest(fd)
            ends = (old + [0] * count)[:count]
            changed = False
            for queue_id, end in changes.items():
                if queue_id < count and (end > ends[queue_id] or (lower and end != ends[queue_id])):
                    ends[queue_id] = end
                    changed = True
            if not changed and len(old) == count:
                return
            self._write(fd, seq + 1, max(tail, old_tail), ends)
        finally:
            os.close(fd)  # and with it the lock
