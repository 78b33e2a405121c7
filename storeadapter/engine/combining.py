"""Group commit for sync mode: appends that arrive while another thread is writing are
written by it, and one fsync covers the whole group.

Without it, sync appenders queue on the store's write lock and take it in turn, each
for a write of its own (an OS file lock, a catch-up, a pwrite, a publish); every
hand-over of the lock is a thread wake-up, and each appender is woken once more when
its fsync is done. (Async appenders do not wait for an fsync: for them the lock, which
a running thread takes again before a woken one gets it, costs less than a wake-up per
append, so they keep writing for themselves.)

With it (LevelDB's writer queue, in front of the flush service):

1. An appender that finds no writer at work becomes the *leader*; the others queue
   their work behind it and sleep. The leader first waits, at most ``fill_wait_s``,
   for as many appenders as its predecessor's group had: a group that just became
   durable comes back one thread at a time (PostgreSQL's ``commit_delay``).
2. The leader takes everything queued (its own work first) and writes it all under one
   hold of the write lock (``write_group``).
3. It asks the flush service to call back once the log is durable past the group, and
   hands the lead to the first appender queued meanwhile, if any.
4. The flush thread wakes every member of the group with its outcome: its results, or
   the error its work alone met, or the fsync's failure.

A member sleeps once and is woken once. A member whose work is written but not durable
``timeout_s`` later returns ``on_timeout(outcome)`` (FLUSH_TIMEOUT), as before.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import Any

from .flush import FlushService

_QUEUED, _LEAD, _WRITTEN, _DONE, _ABANDONED = range(5)


def _copy_of(error: BaseException) -> BaseException:
    """The same error for another thread to raise (one exception object raised in two
    threads at once would mix their tracebacks)."""
    try:
        copied = copy.copy(error)
    except Exception:
        return error
    copied.__cause__ = error.__cause__
    return copied


class _Turn:
    """One appender's place: its work, its state, and the lock it sleeps on."""

    __slots__ = ("work", "wake", "state", "outcome", "written_at")

    def __init__(self, work: Any) -> None:
        self.work = work
        self.wake: threading.Lock | None = None  # made only when it has to sleep
        self.state = _QUEUED
        self.outcome: Any = None  # the results, or the exception meant for this work
        self.written_at = 0.0

    def sleep_here(self) -> None:
        self.wake = threading.Lock()
        self.wake.acquire()


class WriteCombiner:
    """Groups the work of concurrent sync appenders; see the module's docstring.

    ``write_group(works)`` writes a group under the write lock and returns one outcome
    per work (a result, or an exception for that work alone) and the commit-log tail
    after the group; whatever it raises is every member's error.
    """

    def __init__(
        self,
        write_group: Callable[[list[Any]], tuple[list[Any], int]],
        flusher: Callable[[], FlushService],
        timeout_s: float,
        fill_wait_s: float,
        on_timeout: Callable[[Any], Any],
    ) -> None:
        self._write_group = write_group
        self._flusher = flusher
        self._timeout_s = timeout_s
        self._fill_wait_s = fill_wait_s
        self._on_timeout = on_timeout
        self._lock = threading.Lock()
        self._filled = threading.Condition(self._lock)
        self._queue: list[_Turn] = []
        self._leading = False
        self._last_group = 1
        self._want = 0  # the queue length a waiting leader wants to be told of

    def submit(self, work: Any) -> Any:
        """Have ``work`` written and made durable, by this thread or by the leader of its
        group; return its outcome, or raise the error meant for it."""
        turn = _Turn(work)
        with self._lock:
            if self._leading:
                turn.sleep_here()
                self._queue.append(turn)
                if self._want and len(self._queue) >= self._want:
                    self._filled.notify()
            else:
                self._leading = True
                turn.state = _LEAD
        if turn.state != _LEAD:
            self._sleep(turn)
        if turn.state == _LEAD:
            self._lead(turn)
            if turn.state != _DONE:  # written: now it waits for its fsync
                self._sleep(turn)
        if turn.state == _ABANDONED:
            return self._on_timeout(turn.outcome)
        if isinstance(turn.outcome, BaseException):
            raise turn.outcome
        return turn.outcome

    def _sleep(self, turn: _Turn) -> None:
        """Sleep until made leader or done; a written turn gives up ``timeout_s`` after
        its write (its state becomes _ABANDONED)."""
        while True:
            if turn.state == _WRITTEN:
                left = turn.written_at + self._timeout_s - time.monotonic()
            else:
                left = self._timeout_s  # not written yet: no deadline, look again later
            if left > 0 and turn.wake.acquire(timeout=left):
                return
            with self._lock:
                if turn.state == _WRITTEN and (
                    time.monotonic() >= turn.written_at + self._timeout_s
                ):
                    turn.state = _ABANDONED
                    return
                if turn.state == _DONE:
                    return  # settled just as the wait ended; its wake-up is not needed

    def _lead(self, leader: _Turn) -> None:
        with self._lock:
            # A leader handed the lead is still first in the queue; a new one is not in it.
            first = [] if self._queue and self._queue[0] is leader else [leader]
            target = self._last_group
            if len(first) + len(self._queue) < target and self._fill_wait_s > 0:
                self._want = target - len(first)
                deadline = time.monotonic() + self._fill_wait_s
                while len(first) + len(self._queue) < target:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._filled.wait(left)
                self._want = 0
            group = first + self._queue
            self._queue = []
            self._last_group = len(group)
        try:
            outcomes, end = self._write_group([turn.work for turn in group])
        except BaseException as error:
            self._hand_over()
            self._settle(group, [error] + [_copy_of(error) for _ in group[1:]])
            return
        waiting = []
        now = time.monotonic()
        with self._lock:
            for turn, outcome in zip(group, outcomes, strict=True):
                turn.outcome = outcome
                if isinstance(outcome, BaseException):
                    turn.state = _DONE
                    if turn is not leader:
                        turn.wake.release()
                else:
                    turn.state = _WRITTEN
                    turn.written_at = now
                    waiting.append(turn)
        if waiting:
            if leader.wake is None:
                leader.sleep_here()
            self._flusher().on_durable(end, lambda error: self._durable(waiting, error))
        self._hand_over()

    def _durable(self, group: list[_Turn], error: BaseException | None) -> None:
        """Called by the flush thread: the log is durable past the group (or the store
        failed with ``error``): wake every member still waiting."""
        with self._lock:
            for turn in group:
                if turn.state == _WRITTEN:
                    turn.state = _DONE
                    if error is not None:
                        turn.outcome = _copy_of(error)
                    turn.wake.release()

    def _hand_over(self) -> None:
        """Make the first appender queued the next leader, or say no one leads."""
        with self._lock:
            if not self._queue:
                self._leading = False
                return
            successor = self._queue[0]
            successor.state = _LEAD
        successor.wake.release()

    def _settle(self, group: list[_Turn], outcomes: list[Any]) -> None:
        """Give each member its outcome; wake the sleeping ones."""
        with self._lock:
            for turn, outcome in zip(group, outcomes, strict=True):
                turn.outcome = outcome
                turn.state = _DONE
                if turn.wake is not None:
                    turn.wake.release()
