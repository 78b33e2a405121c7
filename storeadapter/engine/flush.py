"""The flush service: one background thread that makes appended data durable.

``async`` mode: every ``flush_interval_ms`` (sooner when an appender kicks it past
the dirty-bytes threshold) it fsyncs the commit log and consume queues and writes
the checkpoint. ``sync`` mode adds group commit: writers ask to be called back
(``on_durable``); the thread fsyncs the commit log up to the tail as it is at that
moment, which covers every writer waiting then, however many, and calls them back.

Sync appends the native append core wrote wait on its group commit instead
(``_native.LogSyncer``, native/src/group_commit.rs; docs/PERFORMANCE.md, "Issue 31
(part 9)"): a flusher thread of its own fdatasyncs the log back to back, without the GIL,
while they wait. This service keeps its other jobs and tells that group commit of its
flushes (``advance``) and of the store's failure (``fail``); ``flushed`` is the higher of
the two, and ``log_syncs`` counts the log fdatasyncs of both.

Between flushes the thread also looks at the shared notes ring (``keep_up``:
``MessageStore._keep_up``), so that a process that neither appends nor reads follows the
others through their notes before the ring wraps, instead of walking every record's
header at its next flush (docs/PERFORMANCE.md, idle31-s58).
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import DiskFullError, StoreFailedError

if TYPE_CHECKING:
    from .dataplane import Asks


class FlushService:
    def __init__(
        self,
        sync_log: Callable[[], int],
        flush_all: Callable[[], int],
        interval_s: float,
        on_failure: Callable[[BaseException], None],
        unsynced: Callable[[], bool] | None = None,
        pretouch: Callable[[], None] | None = None,
        asks: Asks | None = None,
        keep_up: Callable[[], float] | None = None,
    ) -> None:
        self._sync_log = sync_log
        # Whether there is anything to sync: an appender just woken still counts as a
        # waiter until it runs, and must not cause another, empty, fdatasync.
        self._unsynced = unsynced or (lambda: True)
        self._flush_all = flush_all
        self._interval_s = interval_s
        self._on_failure = on_failure
        self._cond = threading.Condition()  # the flush thread waits on it for work
        # (commit-log end, callback) of writers waiting for their records to be durable
        self._waiting: list[tuple[int, Callable[[BaseException | None], None]]] = []
        self._kicked = False
        # The pretoucher (the native append's pages ahead of the tail), when asked.
        self._pretouch = pretouch
        self._touch = False
        self._stopping = False
        # Between flushes, a look at what other processes publish (``MessageStore._keep_up``:
        # following them through the notes ring before it wraps); it answers the seconds
        # to the next look.
        self._keep_up = keep_up
        # The native append's asks (``dataplane.Asks``): told whenever ``_flushed`` moves,
        # it asks for a flush (``kick``) past ``flush_dirty_bytes`` beyond it.
        self._asks = asks
        self._flushed = 0
        # Sync mode with the native append: its group commit (store.py sets it).
        self.native = None
        self.log_syncs = 0  # fdatasyncs of log segments by the engine's Python
        self.failure: BaseException | None = None
        self.last_flush_ms: int | None = None
        self._thread = threading.Thread(target=self._run, name="tidemark-flush", daemon=True)

    @property
    def flushed(self) -> int:
        """The log is durable below this offset."""
        native = self.native
        if native is None:
            return self._flushed
        return max(self._flushed, native.flushed)

    @property
    def syncs(self) -> int:
        """How many fdatasyncs of the log this process issued since it opened the store
        (the engine's and its group commit's)."""
        native = self.native
        return self.log_syncs + (native.syncs if native is not None else 0)

    def start(self, flushed: int) -> None:
        self._flushed = flushed
        if self._asks is not None:
            self._asks.flushed(flushed)
        self._thread.start()

    def kick(self) -> None:
        """Ask for a full flush now (the dirty-bytes threshold was passed)."""
        with self._cond:
            self._kicked = True
            self._cond.notify_all()

    def touch(self) -> None:
        """Ask for the pages ahead of the tail to be faulted in (the native append asks
        every so many bytes; ``MessageStore._pretouch``)."""
        if self._pretouch is not None:
            with self._cond:
                self._touch = True
                self._cond.notify_all()

    def advance(self, flushed: int) -> None:
        """Record that everything below ``flushed`` is durable; call back the waiters it
        covers."""
        native = self.native
        if native is not None:
            native.advance(flushed)
        with self._cond:
            if flushed > self._flushed:
                self._flushed = flushed
                if self._asks is not None:
                    self._asks.flushed(flushed)
            self.last_flush_ms = time.time_ns() // 1_000_000
            durable = self.flushed
            covered = [w for w in self._waiting if w[0] <= durable]
            if covered:
                self._waiting = [w for w in self._waiting if w[0] > durable]
        for _end, callback in covered:
            callback(None)

    def fail(self, error: BaseException) -> None:
        with self._cond:
            if self.failure is None:
                self.failure = error
            waiting, self._waiting = self._waiting, []
            self._cond.notify_all()
        native = self.native
        if native is not None:
            native.fail(getattr(error, "errno", None) or errno.EIO)
        for _end, callback in waiting:
            callback(self.refusal())

    def refusal(self) -> StoreFailedError:
        full = getattr(self.failure, "errno", None) == errno.ENOSPC
        return (DiskFullError if full else StoreFailedError)(
            f"the store could not make writes durable ({self.failure}); "
            "it refuses writes until it is reopened"
        )

    def on_durable(self, end: int, callback: Callable[[BaseException | None], None]) -> None:
        """Call ``callback(None)`` once the log is durable up to ``end`` (on the flush
        thread, or now if it already is), or ``callback(error)`` if an fsync fails
        first (the store then refuses writes)."""
        with self._cond:
            if self.failure is None and self.flushed < end:
                self._waiting.append((end, callback))
                self._cond.notify()
                return
            failed = self.failure is not None
        callback(self.refusal() if failed else None)

    def _run(self) -> None:
        next_full = time.monotonic() + self._interval_s
        next_look = time.monotonic() if self._keep_up is not None else float("inf")
        while True:
            with self._cond:
                while (
                    not self._stopping
                    and not self._kicked
                    and not self._touch
                    and (not self._waiting or self.failure is not None or not self._unsynced())
                ):
                    remaining = min(next_full, next_look) - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                if self._stopping:
                    return
                now = time.monotonic()
                full = self._kicked or now >= next_full
                self._kicked = False
                touch, self._touch = self._touch, False
                synced = full or (self._waiting and self._unsynced())
                look = not synced and now >= next_look
            if touch and self.failure is None and self._pretouch is not None:
                self._pretouch()
                if not synced and not look:
                    continue  # woken for the pretoucher alone
            if look:
                next_look = now + self._look()
                continue
            if self.failure is not None:
                next_full = time.monotonic() + self._interval_s
                continue
            try:
                if full:
                    self.advance(self._flush_all())
                    next_full = time.monotonic() + self._interval_s
                else:
                    self.advance(self._sync_log())
            except BaseException as error:  # an fsync failed: never retry and carry on
                self.fail(error)
                self._on_failure(error)

    def _look(self) -> float:
        """One look between flushes (``keep_up``); the seconds to the next. What it
        raises is left to the next flush, whose follow meets it again and fails the
        store if it must."""
        if self.failure is not None or self._keep_up is None:
            return self._interval_s
        try:
            return self._keep_up()
        except Exception:  # noqa: BLE001 - see above
            return self._interval_s

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join()
