"""The OS file locks that let several processes share one store directory.

* ``lock``: every process holds a shared lock on it while it has the store open. The
  one that gets it exclusively at open is alone, and runs recovery.
* ``open.lock``: held exclusively while a process opens or closes the store, so those
  transitions (and the decision "am I alone?") never interleave. A process joining a
  store open elsewhere lets go of it once joined, before it waits for the pen (the
  write lock): never wait for the pen while holding ``open.lock``.
* ``write.lock``: a process writing with the mutex in ``state`` (writesession.py)
  holds it shared from open to close; one writing with the flock (older engines, or
  where the mutex is unavailable) holds it exclusively for each append batch or
  metadata change. So writers of either kind in different processes take turns, and
  one of the flock kind waits while one of the mutex kind has the store open.

``flock`` locks belong to an open file, not a thread: threads of one process must also
hold the store's thread lock. A process that forks gets copies of these open files, so
a store must not be used across ``fork`` (the store checks this; see ``ForkGuard``).
"""

from __future__ import annotations

import fcntl
import os
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class StoreLocks:
    def __init__(self, directory: Path) -> None:
        self._session = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        self._opening = os.open(directory / "open.lock", os.O_RDWR | os.O_CREAT, 0o644)
        self._writing = os.open(directory / "write.lock", os.O_RDWR | os.O_CREAT, 0o644)
        self._holds_opening = False

    @contextmanager
    def opening(self) -> Iterator[bool]:
        """Hold the open lock; yield True when no other process has the store open.

        On success the session is joined (a shared lock is held until ``closing``). A
        process that is not alone may let go of the open lock early (``step_aside``),
        once joined, before it waits for the pen.
        """
        fcntl.flock(self._opening, fcntl.LOCK_EX)
        self._holds_opening = True
        try:
            # Members hold the session lock shared; only a process opening or closing,
            # under the open lock, holds it exclusively. Held exclusively now, it belongs
            # to one that died doing so: the kernel frees a dead process's locks one by
            # one, in no set order. Wait for it to go rather than join a half-open store.
            fcntl.flock(self._session, fcntl.LOCK_SH)
            try:
                fcntl.flock(self._session, fcntl.LOCK_EX | fcntl.LOCK_NB)
                alone = True
            except BlockingIOError:
                # A refused conversion has dropped the shared lock (flock(2): the old
                # lock goes first): join again, so this process counts from now on.
                fcntl.flock(self._session, fcntl.LOCK_SH)
                alone = False
            yield alone
            fcntl.flock(self._session, fcntl.LOCK_SH)
        except BaseException:
            fcntl.flock(self._session, fcntl.LOCK_UN)
            raise
        finally:
            self.step_aside()

    def step_aside(self) -> None:
        """Let go of the open lock inside ``opening`` (a joiner, before it waits for the
        pen: a writer may keep the pen for long, and every process opening or closing
        the store would wait behind this one). Its session lock keeps it counted."""
        if self._holds_opening:
            self._holds_opening = False
            fcntl.flock(self._opening, fcntl.LOCK_UN)

    @contextmanager
    def closing(self) -> Iterator[bool]:
        """Leave the session; yield True when this was the last process in it."""
        fcntl.flock(self._opening, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._session, fcntl.LOCK_UN)
            try:
                fcntl.flock(self._session, fcntl.LOCK_EX | fcntl.LOCK_NB)
                last = True
            except BlockingIOError:
                last = False
            yield last
        finally:
            fcntl.flock(self._session, fcntl.LOCK_UN)
            fcntl.flock(self._opening, fcntl.LOCK_UN)

    def lock_writes(self) -> None:
        fcntl.flock(self._writing, fcntl.LOCK_EX)

    def unlock_writes(self) -> None:
        fcntl.flock(self._writing, fcntl.LOCK_UN)

    def share_writes(self) -> None:
        """Hold ``write.lock`` shared until ``unshare_writes`` (or close): writers that
        take it exclusively wait meanwhile (waits for one under way)."""
        fcntl.flock(self._writing, fcntl.LOCK_SH)

    def unshare_writes(self) -> None:
        fcntl.flock(self._writing, fcntl.LOCK_UN)

    def close(self) -> None:
        for fd in (self._writing, self._opening, self._session):
            os.close(fd)


class ForkGuard:
    """Marks every open store unusable in a child process after ``os.fork``."""

    _stores: weakref.WeakSet = weakref.WeakSet()
    _installed = False

    @classmethod
    def watch(cls, store: object) -> None:
        if not cls._installed:
            os.register_at_fork(after_in_child=cls._after_fork)
            cls._installed = True
        cls._stores.add(store)

    @classmethod
    def _after_fork(cls) -> None:
        for store in list(cls._stores):
            store._mark_forked()  # type: ignore[attr-defined]
        cls._stores = weakref.WeakSet()
