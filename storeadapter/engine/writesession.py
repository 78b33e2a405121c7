"""The write session: the one place the store's write lock (the pen) is taken.

Appends (``Writer.write_group``) and changes (topics, offsets, retention: the store's
``_exclusive``) both write in a session: take the thread lock, then the pen; catch up
with what other processes published; note in the shared state that a write begins,
clearing first what a writer that died (or failed) before publishing left; run; and
end it: an append publishes its new tail (``publish_tail``), a change notes that it
wrote no log bytes (``SharedState.finish_write``); then let go of the pen.

The pen is one of two locks, chosen per process when it opens the store
(``open_pen``; docs/FORMAT.md, "Shared state" and "Lock files"):

* the robust, process-shared mutex in the ``state`` header (``_native.Pen``): no
  system call when no one else holds it; a busy one is waited for without the GIL,
  in sleeps of at most 100 ms each followed by a fresh try (native/src/pen.rs: a
  wake-up given to a waiter killed before it ran is otherwise lost for good).
  Its last owner dead (``lock`` returns True) means what the shared state's
  ``writing`` flag says: clear that writer's extent; then the mutex is marked
  consistent (also when the clearing failed: the flag stays set and the next writer
  clears). Such a process holds ``write.lock`` shared from open to close, so an
  older engine, which takes it exclusively for each write, waits while it is open.
* ``FlockPen``: that exclusive ``flock`` on ``write.lock`` per write, as older engines
  take it; used where the mutex is unavailable (a platform without robust mutexes,
  a marker of another pthread layout in the header) or asked for with
  ``TIDEMARK_WRITE_LOCK=flock``. Such a process behaves as an older engine: while a
  process with the mutex has the store open, its writes wait.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from .dataplane import ThreadLock
from .errors import DiskFullError, StoreFailedError
from .locks import StoreLocks
from .seam import Watched
from .sharedstate import SharedState

#: Set to "flock" to write as older engines do (an exclusive flock per write).
WRITE_LOCK_ENV = "TIDEMARK_WRITE_LOCK"


class Pen(Protocol):
    def lock(self) -> bool:
        """Take it; True when its last owner died holding it."""

    def consistent(self) -> None:
        """After a ``lock`` that returned True: the dead owner is dealt with."""

    def unlock(self) -> None: ...


class FlockPen:
    """The exclusive ``flock`` on ``write.lock`` for each write (older engines' lock)."""

    def __init__(self, locks: StoreLocks) -> None:
        self._locks = locks

    def lock(self) -> bool:
        self._locks.lock_writes()
        return False  # a dead holder's flock is gone; the ``writing`` flag tells

    def consistent(self) -> None:
        pass

    def unlock(self) -> None:
        self._locks.unlock_writes()


def open_pen(locks: StoreLocks, state_path: Path, alone: bool) -> Pen:
    """The pen of a process opening the store (it holds ``open.lock``; ``alone``: no
    other process has it open, so the mutex is initialised again, see
    native/src/pen.rs): the mutex in ``state`` when the platform and the header allow,
    with ``write.lock`` then held shared until close (waiting for an older engine's
    write under way); else the flock."""
    from . import dataplane

    if os.environ.get(WRITE_LOCK_ENV, "").strip().lower() == "flock":
        return FlockPen(locks)
    try:
        pen = dataplane.Pen.open(state_path, alone)
    except OSError:  # robust process-shared mutexes refused by the platform
        return FlockPen(locks)
    if pen is None:  # the header holds a mutex of another pthread layout
        return FlockPen(locks)
    locks.share_writes()
    return pen


@contextmanager
def held_alone(pen: Pen) -> Iterator[None]:
    """Hold the pen while the store opens: no catch-up, no clearing (recovery, or the
    next writer, deals with a dead writer's extent: the ``writing`` flag stays set)."""
    died = pen.lock()
    try:
        if died:
            pen.consistent()
        yield
    finally:
        pen.unlock()


class WriteSession(metaclass=Watched):
    """The store's write sessions (``with session as failure:`` for an append,
    ``with session.change():`` for a change); see the module's docstring. Its steps
    that stay the store's are passed in: ``check`` (raise if the store refuses writes),
    ``catch_up`` (follow what other processes published), ``tail`` (the commit log's
    tail), ``clear_dead_writer`` (take in what a dead writer left, up to its extent),
    ``fail`` (refuse writes from now on), ``failure_of`` (the typed error of a failed
    write) and ``published`` (note the tail and ring sequence just published)."""

    def __init__(
        self,
        pen: Pen,
        shared: SharedState,
        thread_lock: ThreadLock,
        follow_lock: ThreadLock,
        *,
        check: Callable[[], None],
        catch_up: Callable[[], None],
        tail: Callable[[], int],
        clear_dead_writer: Callable[[int], None],
        fail: Callable[[BaseException], None],
        failure_of: Callable[[OSError], DiskFullError | StoreFailedError],
        published: Callable[[int, int], None],
    ) -> None:
        self.pen = pen
        self._shared = shared
        self._thread_lock = thread_lock
        self._follow_lock = follow_lock
        self._check = check
        self._catch_up = catch_up
        self._tail = tail
        self._clear_dead_writer = clear_dead_writer
        self._fail = fail
        self._failure_of = failure_of
        self._published = published

    def __enter__(self) -> DiskFullError | StoreFailedError | None:
        """Hold the pen, caught up, with a write begun; returns None, or the typed error
        of a dead writer's clearing that failed (the store then refuses writes, and the
        caller writes nothing: the next writer clears). Ending the write is the
        caller's (``publish_tail``; ``change`` does it for changes); ``__exit__`` lets go
        of the pen.

        A class, not a generator, for appends' sake: this is on every append's path."""
        self._thread_lock.acquire()
        try:
            self._check()
            died = self.pen.lock()
        except BaseException:
            self._thread_lock.release()
            raise
        try:
            self._follow_lock.acquire()
            try:
                self._catch_up()  # mends a dead writer's half update of the header
                return self._begin(died)
            except BaseException:
                self._follow_lock.release()
                raise
        except BaseException:
            try:
                self.pen.unlock()
            finally:
                self._thread_lock.release()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self._follow_lock.release()
        try:
            self.pen.unlock()
        finally:
            self._thread_lock.release()

    def _begin(self, died: bool) -> DiskFullError | StoreFailedError | None:
        """Note that a write begins; first clear what the last writer left if it died
        (or failed) before publishing; then, if the pen's last owner died, mark it
        consistent (also when the clearing failed: the ``writing`` flag stays set)."""
        try:
            left = self._shared.begin_write(self._tail())
            if left is not None:
                self._clear_dead_writer(left)
        except OSError as error:
            self._fail(error)
            failure = self._failure_of(error)
            failure.__cause__ = error
            return failure
        finally:
            if died:
                self.pen.consistent()
        return None

    def settle_dead_owner(self) -> None:
        """The native append (nativeappend.py), holding the thread lock and the pen,
        found the pen's last owner dead: catch up, clear what that writer left and mark
        the pen consistent, as ``__enter__`` does, and end the write. The caller lets go
        of the pen and writes the long way. A failed clearing leaves the store failed
        (the long way then raises its error)."""
        with self._follow_lock:
            self._settle(True)

    def _settle(self, died: bool) -> None:
        """Holding the thread lock, the pen and the follow lock after a dead writer:
        catch up (its half update of the header made safe), clear what it left, mark
        the pen consistent (``died``: it died holding the mutex), end the write."""
        self._catch_up()  # mends a half update (SharedState.read_held)
        if self._begin(died) is None:
            self._shared.finish_write()

    def wait_out(self) -> None:
        """A reader without the pen found the shared header mid-update: wait for the
        writer (without the GIL) by taking the thread lock and the pen, and let go.
        A live writer holds the pen until its update is whole, however long it is
        descheduled; one that died holding it is settled here as the next writer
        would settle it (``settle_dead_owner``); a header left mid-update with the pen
        free (a flock writer that died, or a settled owner of an older engine) is
        mended. The caller holds neither lock (``SharedState.read``)."""
        self._thread_lock.acquire()
        try:
            died = self.pen.lock()
            try:
                if self._shared.mend() or died:
                    with self._follow_lock:
                        self._settle(died)
            finally:
                self.pen.unlock()
        finally:
            self._thread_lock.release()

    @contextmanager
    def change(self) -> Iterator[None]:
        """A session for a change other than an append (topics, offsets, retention):
        raises a failed clearing's typed error; ends the write whatever happens."""
        with self as failure:
            if failure is not None:
                raise failure
            try:
                yield
            finally:
                self._shared.finish_write()

    def publish_tail(
        self, tail: int, notes: list[tuple[int, int, int, int]], finished: bool
    ) -> None:
        """End an append's write: publish ``tail`` with the queue ends it moved
        (``notes``); ``finished``: nothing is left past it to clear."""
        ring_seq = self._shared.publish_tail(tail, notes, finished=finished)
        self._published(tail, ring_seq)

    def extent(self) -> int:
        """The end the write under way has marked in the shared state."""
        return self._shared.extent()


__all__ = ["WRITE_LOCK_ENV", "FlockPen", "Pen", "WriteSession", "held_alone", "open_pen"]
