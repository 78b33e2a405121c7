"""Many queues: loaded when used, with a bounded number of open files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore, StoreConfig
from storeadapter.engine.handles import HandleCache
from tests.engine.storetools import INDEX_ENTRIES, INDEX_SLOTS

TOPICS = 6
QUEUES = 500  # 3,000 queues in all
OPEN_FILES = 32


def _config() -> StoreConfig:
    return StoreConfig(
        index_slots=INDEX_SLOTS,
        index_entries=INDEX_ENTRIES,
        segment_bytes=1 << 20,
        queue_file_entries=64,
        max_open_queue_files=OPEN_FILES,
        # No background flush while descriptors are counted: it opens files of its own
        # for a moment (the queue-ends witness, directories it fsyncs).
        flush_interval_ms=600_000,
    )


def _open_fds(under: Path) -> int:
    """This process's open descriptors on files under ``under`` (other threads of the test
    process, a Spark gateway or a Celery worker, open and close their own meanwhile)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        count += target.startswith(str(under))
    return count


@pytest.mark.one_layout
def test_thousands_of_queues_stay_within_the_open_file_limit(tmp_path):
    path = tmp_path / "store"
    with MessageStore.open(path, _config()) as store:
        for t in range(TOPICS):
            store.create_topic(f"t{t}", queues=QUEUES)
        before = _open_fds(path)
        for t in range(TOPICS):
            store.append_batch(f"t{t}", [{"body": f"{t}/{q}", "queue": q} for q in range(QUEUES)])
        assert _open_fds(path) <= before + OPEN_FILES + 2

    with MessageStore.open(path, _config()) as store:
        before = _open_fds(path)
        for t in range(TOPICS):
            for q in range(QUEUES):
                assert [m.body for m in store.read(f"t{t}", q, 0)] == [f"{t}/{q}".encode()]
        assert _open_fds(path) <= before + OPEN_FILES + 2


def test_a_reopened_store_loads_no_queue_until_it_is_used(tmp_path):
    path = tmp_path / "store"
    with MessageStore.open(path, _config()) as store:
        store.create_topic("t", queues=QUEUES)
        store.append("t", b"x", queue=7)

    with MessageStore.open(path, _config()) as store:
        queues = store._registry.all_queues()
        assert not any(q.loaded for q in queues)
        assert store.queue_range("t", 7) == (0, 1)
        assert [q.loaded for q in queues].count(True) == 1


def test_the_handle_cache_closes_the_least_recently_used(tmp_path):
    cache = HandleCache(limit=2)
    paths = [tmp_path / f"f{i}" for i in range(3)]
    for path in paths:
        path.write_bytes(b"data")
    owners = [object() for _ in paths]

    for owner, path in zip(owners, paths, strict=True):
        with cache.use(owner, lambda p=path: os.open(p, os.O_RDONLY)) as fd:
            assert os.pread(fd, 4, 0) == b"data"

    assert cache.open_count == 2
    cache.close()
    assert cache.open_count == 0


def test_a_descriptor_in_use_is_not_closed_under_its_user(tmp_path):
    cache = HandleCache(limit=1)
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_bytes(b"first")
    second.write_bytes(b"second")
    owner_a, owner_b = object(), object()

    with cache.use(owner_a, lambda: os.open(first, os.O_RDONLY)) as fd_a:
        with cache.use(owner_b, lambda: os.open(second, os.O_RDONLY)):
            assert os.pread(fd_a, 5, 0) == b"first"  # pinned: still open
        cache.forget(owner_a)
        assert os.pread(fd_a, 5, 0) == b"first"  # forgotten while pinned: closed later
    cache.close()
