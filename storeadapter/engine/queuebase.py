"""What a queue's entries look like to the rest of the store, whatever holds them.

``QueueBase`` is the part ``ConsumeQueue`` (files of its own) and ``BlockQueue`` (blocks of
a shared topic) have in common: lazy loading of the queue's ends, and moving its minimum
past what retention deleted. A subclass supplies ``_load``, ``read`` and ``entry``, and may
act before (``_before_advance``) and after (``_dropped_below``) a move of the minimum.

Loading is one step for every thread of the process (``_ensure_loaded``): ``_loaded``
turns true only once the ends are found and ``on_load`` has checked them, and a thread
that needs a queue another thread is loading waits for it. Finding the ends takes file
calls, each of which lets other threads run (the flush thread loads queues too, as it
follows other processes); a queue shown loaded before its ends were found read as
(0, 0), empty: a check beside a long-lived member found every message of one queue
"lost" from offset 0, and the native core, which takes a queue's ``_loaded`` as the
sign that its ends can be used, would have planned on them.
"""

from __future__ import annotations

import os
import struct
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable

from crc32c import crc32c

from . import dataplane

#: A consume-queue entry: commit-log offset, record size (0 = not written), and 8 bytes
#: that are the tag hash and the check (``CHECKED_ENTRY``), or in an entry written before
#: entries had checks, the record's whole 64-bit tag hash. Entries of 20 zero bytes are
#: not written.
ENTRY = struct.Struct("<QIQ")
ENTRY_SIZE = ENTRY.size
#: The same 20 bytes split as written since: ..., tag hash (u32), check (u32: CRC32C of
#: the 16 bytes before it). See docs/FORMAT.md, "Consume queues".
CHECKED_ENTRY = struct.Struct("<QIII")
_CHECKED_BYTES = 16
_NOT_WRITTEN = bytes(ENTRY_SIZE)

#: ``entries`` with every written entry given its check (the object itself if all have
#: one): what every write of entries goes through, so no entry is written unchecked.
seal_entries = dataplane.seal_entries


def entry_tag(tag_hash: int) -> int:
    """The tag hash an entry stores for a record whose 64-bit tag hash is ``tag_hash``."""
    low = tag_hash & 0xFFFFFFFF
    return 1 if low == 0 and tag_hash else low


def pack_entry(commit_offset: int, size: int, tag_hash: int) -> bytes:
    """The entry of a record at ``commit_offset`` of ``size`` bytes whose 64-bit tag hash
    is ``tag_hash``, with its check (the format's reference; writers use the crate)."""
    head = CHECKED_ENTRY.pack(commit_offset, size, entry_tag(tag_hash), 0)[:_CHECKED_BYTES]
    return head + struct.pack("<I", crc32c(head))


def unpack_entry(data, at: int = 0) -> tuple[int, int, int]:
    """(commit offset, size, tag hash as stored) of the entry at ``at``."""
    return CHECKED_ENTRY.unpack_from(data, at)[:3]


def entry_checked(data, at: int = 0) -> bool:
    """Whether the entry at ``at`` of ``data`` passes its check."""
    return CHECKED_ENTRY.unpack_from(data, at)[3] == crc32c(data[at : at + _CHECKED_BYTES])


def entry_not_written(data, at: int = 0) -> bool:
    return data[at : at + ENTRY_SIZE] == _NOT_WRITTEN


#: Held while a queue is loaded (``QueueBase._ensure_loaded``). One for the process:
#: loads are rare (once per queue), and a load's ``on_load`` may load another queue.
_LOADING = threading.RLock()


def _new_loading_lock() -> None:
    """In a forked child: a lock held by another thread of the parent at the fork would
    stay held for ever (the stores from before the fork are not used; new ones are)."""
    global _LOADING
    _LOADING = threading.RLock()


os.register_at_fork(after_in_child=_new_loading_lock)

#: Entries read at a time when looking for the first written one.
SCAN_ENTRIES = 4096
#: Looks at a queue's entries ``advance_min`` makes while files vanish under it.
_ADVANCE_TRIES = 8


class QueueBase(ABC):
    __slots__ = (
        "on_load",
        "closed",
        "owner",
        "changes",
        "last_store_cache",
        "_loaded",
        "_loading",
        "_min_offset",
        "_max_offset",
        "files_removed",
    )

    def __init__(self, on_load: Callable | None = None) -> None:
        self.on_load = on_load
        self.closed = False
        self.owner: tuple[bytes, int] = (b"", 0)  # (topic, queue id), set by the registry
        self.last_store_cache: tuple[int, int, int, int | None] | None = None
        self._loading = False  # being loaded by the thread holding ``_LOADING``
        # Set when a file of the queue was deleted: its directory needs an fsync.
        self.files_removed = False
        self._start_ends()

    def _start_ends(self) -> None:
        """A new queue's ends: not loaded, (0, 0). A subclass that keeps its ends
        elsewhere (``BlockQueue``: its topic's block index) leaves them there."""
        # Bumped by every write, truncation and setting of max_offset: with the min and
        # max offsets, it tells whether a value derived from the queue's entries (the
        # store's cached last store time) is still right.
        self.changes = 0
        self._loaded = False
        self._min_offset = 0
        self._max_offset = 0

    @abstractmethod
    def _load(self) -> None:
        """Find the queue's ends (then call ``on_load``); called by ``_ensure_loaded``
        only. What it calls may use the queue (its ends as found so far)."""

    def _ensure_loaded(self) -> None:
        """Load the queue if no thread has: under ``_LOADING``, so that a thread that
        comes meanwhile waits for the ends instead of taking the (0, 0) the queue starts
        from; ``_loaded`` set once they are found and checked. Within the load (the
        thread holding the lock), a use of the queue takes the ends as found so far."""
        with _LOADING:
            if self._loaded or self._loading:
                return
            self._loading = True
            try:
                self._load()
                self._loaded = True
            finally:
                self._loading = False

    @abstractmethod
    def read(self, index: int, count: int) -> bytes:
        """Packed entries from ``index``, at most ``count``."""

    @abstractmethod
    def entry(self, index: int) -> tuple[int, int, int] | None:
        """(commit offset, size, tag hash as stored) of entry ``index``, or None if
        unwritten."""

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def min_offset(self) -> int:
        if not self._loaded:
            self._ensure_loaded()
        return self._min_offset

    @min_offset.setter
    def min_offset(self, value: int) -> None:
        if not self._loaded:
            self._ensure_loaded()
        self._min_offset = value

    @property
    def max_offset(self) -> int:
        if not self._loaded:
            self._ensure_loaded()
        return self._max_offset

    @max_offset.setter
    def max_offset(self, value: int) -> None:
        if not self._loaded:
            self._ensure_loaded()
        self._max_offset = value
        self.changes += 1

    def advance_min(self, log_min: int) -> int:
        """Move the minimum offset past entries whose records are below ``log_min``
        (retention deleted them). Return the new minimum.

        Another process's retention may delete the queue's oldest files while this runs
        (it holds the write lock; this process need not): an entry read from a file that
        vanished is not "unwritten", so a look that met one (``_lost_files``) is
        started again, once the vanished files are let go of. A look that keeps meeting
        them leaves the minimum where it was: never past an entry still in the queue."""
        for _ in range(_ADVANCE_TRIES):
            self._before_advance()
            low = self._new_min(log_min)
            if not self._lost_files():
                break
        else:
            return self._min_offset
        if low <= self._min_offset:
            return self._min_offset
        self._min_offset = low
        self._dropped_below(low)
        return low

    def _new_min(self, log_min: int) -> int:
        """The first index whose entry is not below ``log_min`` (``advance_min``)."""
        low, high = self.min_offset, self.max_offset
        if log_min and low < high and self.entry(low) is None:
            # Unwritten entries at the start: a power loss took their writes after
            # retention took their records (records above the log's start get rebuilt).
            low = self._first_written(low, high)
        first = self.entry(low) if low < high else None
        if first is not None and first[0] < log_min:
            # The first index whose next written entry is at or past log_min. Unwritten
            # entries (a power loss kept later entries and lost earlier ones) are judged
            # by the written one after them: a hole is not "below the log" for lack of
            # an entry, nor does it hide the entries after it.
            while low < high:
                middle = (low + high) // 2
                probe = self._first_written(middle, high)
                found = self.entry(probe) if probe < high else None
                if found is not None and found[0] < log_min:
                    low = probe + 1
                else:  # (None below high: its file vanished, and the look is redone)
                    high = middle
        return low

    def _lost_files(self) -> bool:
        """Whether a read since the last ``_before_advance`` met a file that vanished
        (another process's retention deleted it); queues whose files are never deleted
        under them say no."""
        return False

    def _before_advance(self) -> None:  # noqa: B027 - optional hook
        """Called before the minimum is moved."""

    def _dropped_below(self, index: int) -> None:  # noqa: B027 - optional hook
        """Called once the minimum has moved up to ``index``."""

    def _first_written(self, low: int, high: int) -> int:
        """The first index in ``[low, high)`` whose entry is written, else ``high``."""
        while low < high:
            count = min(high - low, SCAN_ENTRIES)
            data = self.read(low, count)
            for i in range(len(data) // ENTRY_SIZE):
                if ENTRY.unpack_from(data, i * ENTRY_SIZE)[1]:
                    return low + i
            if len(data) < count * ENTRY_SIZE:
                return high
            low += count
        return high
