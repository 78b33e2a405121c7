"""A bounded cache of open file descriptors, least recently used closed first.

A store with 100,000 queues cannot keep every consume-queue and time-index file open:
their descriptors are opened on use and closed when more than ``limit`` are open. A
descriptor in use (pinned) is never closed under its user.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

DEFAULT_LIMIT = 1024


class HandleCache:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._open: OrderedDict[object, int] = OrderedDict()
        self._pins: dict[object, int] = {}
        self._doomed: dict[object, int] = {}  # forgotten while pinned: closed at unpin

    def acquire(self, owner: object, opener: Callable[[], int]) -> int:
        """``owner``'s descriptor, opened with ``opener`` if closed, pinned until
        ``release(owner)``."""
        with self._lock:
            fd = self._open.get(owner)
            if fd is None:
                fd = opener()
                self._open[owner] = fd
                self._evict()
            else:
                self._open.move_to_end(owner)
            self._pins[owner] = self._pins.get(owner, 0) + 1
            return fd

    def release(self, owner: object) -> None:
        with self._lock:
            pins = self._pins[owner] - 1
            if pins:
                self._pins[owner] = pins
            else:
                del self._pins[owner]
                doomed = self._doomed.pop(owner, None)
                if doomed is not None:
                    os.close(doomed)

    @contextmanager
    def use(self, owner: object, opener: Callable[[], int]) -> Iterator[int]:
        """Hold ``owner``'s descriptor for the ``with`` block."""
        fd = self.acquire(owner, opener)
        try:
            yield fd
        finally:
            self.release(owner)

    def _evict(self) -> None:
        # Least recently used first; pinned descriptors are skipped (few are pinned at
        # once, so this stops after a step or two instead of walking every open file).
        while len(self._open) > self.limit:
            for owner in self._open:
                if owner not in self._pins:
                    break
            else:
                return
            os.close(self._open.pop(owner))

    def forget(self, owner: object) -> None:
        """Close ``owner``'s descriptor (its file is closed or deleted)."""
        with self._lock:
            fd = self._open.pop(owner, None)
            if fd is None:
                return
            if owner in self._pins:
                self._doomed[owner] = fd
            else:
                os.close(fd)

    @property
    def open_count(self) -> int:
        return len(self._open)

    def close(self) -> None:
        with self._lock:
            for fd in self._open.values():
                os.close(fd)
            self._open.clear()
