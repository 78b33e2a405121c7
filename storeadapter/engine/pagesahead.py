"""The log's page-cache pages made ahead of the tail, off the pen (issue 31;
docs/PERFORMANCE.md, procs31-s58).

A batch writes its records with one ``pwrite`` under the pen. Into pages that are not in
the page cache yet, that ``pwrite`` makes them there: a folio allocated and inserted,
buffer heads, ext4's block look-ups, and on this VM the host's backing of a page the
guest has not touched lately (free pages are reported to the host). Measured with bare
``pwrite``s of 520 KB: 18-32 us into pages that exist, 55-62 into pages just freed,
880-1,200 into pages the host must back.

So a thread of its own (not the flush thread, whose fsyncs take tens of milliseconds)
reads the active segment's next ``AHEAD_BYTES`` past the tail when a batch asks
(``FlushService.make_pages``, every 256 KiB of log). Reading changes no byte: the file's
reserved, unwritten range reads as zeros, and the kernel leaves clean pages of zeros in
the page cache; the ``pwrite`` then only copies into them. Nothing is written, so the
fault seam, the power-loss model and recovery's scan see nothing of it; a read that fails
is a hint lost, nothing more. A read done while another process writes the same pages
reads whichever bytes it finds and throws them away.
"""

from __future__ import annotations

import contextlib
import os
import threading

from .commitlog import CommitLog

#: How far past the tail the pages are made.
AHEAD_BYTES = 4 << 20
#: Bytes read by one call (the ``closing`` lock let go between them).
STEP_BYTES = 512 << 10


class PagesAhead:
    """The thread that reads the active segment ahead of the tail when asked."""

    def __init__(self, log: CommitLog) -> None:
        self._log = log
        # The log offset below which this process already made the pages.
        self._made = 0
        self._buffer = bytearray(STEP_BYTES)
        self._cond = threading.Condition()
        self._wanted = False
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="tidemark-ahead", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def soon(self) -> None:
        """Ask for the pages ahead of the tail to be made."""
        with self._cond:
            self._wanted = True
            self._cond.notify()

    def step(self) -> bool:
        """Read the next ``STEP_BYTES`` of the active segment past what was made, up to
        ``AHEAD_BYTES`` past the tail; return whether there is more to read."""
        log = self._log
        with log.closing:
            segment = log.active
            if segment is None or segment.fd < 0:
                return False
            tail = log.tail
            start = max(self._made, tail, segment.base)
            stop = min(tail + AHEAD_BYTES, segment.end, start + STEP_BYTES)
            if start >= stop:
                return False
            with contextlib.suppress(OSError):  # a hint: a failed read fails nothing
                os.preadv(
                    segment.fd, [memoryview(self._buffer)[: stop - start]], start - segment.base
                )
            self._made = stop
            return stop < min(tail + AHEAD_BYTES, segment.end)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._wanted and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                self._wanted = False
            while not self._stopping and self.step():
                pass

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()
