"""Warm mappings: a background thread maps in, in this process, the pages of the segments
that hold what was written since its last pass, so that a reader does not pay each
page's first touch of the mapping.

Appends write segments with ``pwrite``: their pages are in the page cache, but this
process's mapping of the segment has no page-table entries for them until something
loads from them. A reader's first load of each run of pages faulted (about 80 ns a 1 KiB
message, a quarter of a read's CPU here: docs/PERFORMANCE.md, issue 29 part 5).
``MADV_POPULATE_READ`` does the same page-table work in one call, off the reader's
path and without the GIL (``dataplane.populate``; Python's ``mmap.madvise`` keeps it).

It runs on a thread of its own (``WarmService``), asked every ``WARM_ASK_BYTES`` by
async appends and by sync mode's fsyncs, and after each full flush (what this process
followed, and the last bytes appended),
not on the flush thread itself: a dirty-bytes flush's fsync takes 40-180 ms here, and a
reader that starts meanwhile would find the last of those bytes cold.

Warming starts at the process's first read (``engage``): a process that only appends
has no reader to warm for, and pays nothing. At the first read, what was written since
the store opened is warmed, at most the last ``WARM_BACK_BYTES`` of it (bytes written
that recently are still in the page cache; older ones would be read from the disk).
Older records are read, or not, as before; each step maps at most ``bound`` bytes, so
that a store's close never waits long.
"""

from __future__ import annotations

import errno
import threading

from . import dataplane
from .commitlog import CommitLog

#: Bytes mapped in by one step: about 2-5 ms here.
WARM_BYTES = 32 << 20
#: Async appends ask for what they wrote to be mapped in every this many bytes.
WARM_ASK_BYTES = 4 << 20
#: At a process's first read, at most this many of the last bytes written since the
#: store opened are mapped in.
WARM_BACK_BYTES = 256 << 20


class Warmer:
    """Maps in the log's bytes from ``start`` on, a step at a time, as the tail moves."""

    __slots__ = ("_log", "warmed", "bound", "_off")

    def __init__(self, log: CommitLog, start: int, bound: int = WARM_BYTES) -> None:
        self._log = log
        self.warmed = start
        self.bound = bound
        self._off = False  # the kernel has no MADV_POPULATE_READ

    def step(self) -> bool:
        """Map in up to ``bound`` bytes past what earlier steps did, up to the tail;
        return whether the step stopped at its bound with more to do."""
        tail = self._log.tail
        if self._off or self.warmed >= tail:
            self.warmed = min(self.warmed, tail)  # a failed write's bytes were given up
            return False
        end = min(tail, self.warmed + self.bound)
        _bases, segments = self._log._located
        with self._log.closing:
            for segment in segments:
                if segment.end <= self.warmed or segment.base >= end:
                    continue
                start = max(self.warmed, segment.base) - segment.base
                stop = min(end, segment.end) - segment.base
                # EFAULT (a segment cut short under its mapping) leaves the rest of that
                # segment to the readers, which meet the damage as before.
                try:
                    failed = dataplane.populate(segment.map, start, stop)
                except ValueError:  # the mapping is closed: nothing left to map in
                    continue
                if failed == errno.EINVAL:
                    self._off = True
                    return False
        self.warmed = end
        return end < tail


class WarmService:
    """The thread that runs a ``Warmer``'s steps when asked, until it has caught up."""

    def __init__(self, warmer: Warmer, asks: dataplane.Asks | None = None) -> None:
        self._warmer = warmer
        # The native append's asks: told whenever ``engaged`` or ``asked`` moves, it
        # calls ``soon`` past ``WARM_ASK_BYTES`` beyond ``asked`` once engaged.
        self._asks = asks
        self._cond = threading.Condition()
        self._wanted = False
        self._stopping = False
        #: Whether this process has read: until then, asks are ignored.
        self.engaged = False
        #: The log's end when warming was last asked for.
        self.asked = warmer.warmed
        self._thread = threading.Thread(target=self._run, name="tidemark-warm", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def engage(self, tail: int) -> None:
        """The process's first read: map in what was written since the store opened (at
        most its last ``WARM_BACK_BYTES``) up to ``tail``, and from now on what is
        written or followed when asked."""
        with self._cond:
            if self.engaged:
                return
            self.engaged = True
            self._warmer.warmed = max(self._warmer.warmed, tail - WARM_BACK_BYTES)
            self._moved()
        self.soon(tail)

    def soon(self, end: int) -> None:
        """Ask for the log up to ``end`` (and whatever is past it by then) to be mapped in."""
        if not self.engaged:
            return
        with self._cond:
            self.asked = end
            self._moved()
            self._wanted = True
            self._cond.notify()

    def _moved(self) -> None:
        if self._asks is not None:
            self._asks.warm(self.engaged, self.asked)

    def behind(self, end: int) -> None:
        """Ask for the log up to ``end`` to be mapped in if it is ``WARM_ASK_BYTES`` past
        the last ask (one wake-up per that many bytes written)."""
        if self.engaged and end - self.asked > WARM_ASK_BYTES:
            self.soon(end)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._wanted and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                self._wanted = False
            while self._warmer.step() and not self._stopping:
                pass

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()
