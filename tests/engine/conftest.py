"""Fixtures for the engine tests: real stores in tmp_path with tiny segments."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore, StoreConfig
from tests.engine.storetools import (
    small_config,
)


@pytest.fixture
def config() -> StoreConfig:
    return small_config()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def open_store(store_path: Path, config: StoreConfig) -> Iterator[Callable[..., MessageStore]]:
    """Open a store (default: ``store_path`` with ``config``); all are closed at teardown."""
    opened: list[MessageStore] = []

    def _open(path: Path | None = None, cfg: StoreConfig | None = None) -> MessageStore:
        store = MessageStore.open(path or store_path, cfg or config)
        opened.append(store)
        return store

    yield _open
    for store in reversed(opened):
        store.close()


@pytest.fixture
def store(open_store: Callable[..., MessageStore]) -> MessageStore:
    """An open store with topic ``t`` of 4 queues."""
    opened = open_store()
    opened.create_topic("t", queues=4)
    return opened


@pytest.fixture
def files_store(open_store: Callable[..., MessageStore]) -> MessageStore:
    """Like ``store``, but ``t`` keeps files per queue whatever layout the run tests (for
    tests about those files)."""
    opened = open_store()
    opened.create_topic("t", queues=4, layout="files")
    return opened


@pytest.fixture
def no_keep_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """No store object's flush thread follows other objects' appends between its flushes
    (``MessageStore._keep_up``): for a test that sets how far behind a follower is."""
    from storeadapter.engine import store as store_module

    monkeypatch.setattr(store_module, "KEEP_UP_NOTES", 1 << 62)
