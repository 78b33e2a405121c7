"""One open ``MessageStore`` per process and directory, for the console and workers.

Web workers, Celery workers and management commands call ``store_at(path)`` instead
of opening stores themselves: the store is opened once and shared by the process's
threads. A process forked from one that had stores open (Celery's prefork pool, a
pre-forking web server) opens its own: a store never crosses a fork.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from storeadapter.engine import MessageStore, StoreConfig
from storeadapter.reports import log_recovery

_lock = threading.Lock()
_stores: dict[Path, MessageStore] = {}
_owner_pid = os.getpid()


def store_at(path: str | os.PathLike, config: StoreConfig | None = None) -> MessageStore:
    """The process's open store at ``path`` (opened with ``config`` the first time)."""
    global _owner_pid
    key = Path(path).resolve()
    with _lock:
        if os.getpid() != _owner_pid:  # forked: the parent's stores are not ours
            _stores.clear()
            _owner_pid = os.getpid()
        store = _stores.get(key)
        if store is None or store.closed:
            opening_ms = time.time_ns() // 1_000_000  # recovery stamps the wall clock
            store = _stores[key] = MessageStore.open(key, config)
            log_recovery(store, opening_ms)
        return store


def store_exists(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a store (for jobs that read its files without opening it)."""
    return (Path(path) / "commitlog").is_dir()


def close_all() -> None:
    """Close every store this process opened (at shutdown, or between tests)."""
    with _lock:
        stores = list(_stores.values()) if os.getpid() == _owner_pid else []
        _stores.clear()
    for store in stores:
        store.close()
