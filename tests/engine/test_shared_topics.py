"""Shared topics: every queue's entries in blocks of a few shared files (issue 10).

The rest of the engine suite runs against shared topics too (``make test`` runs it again
with ``TIDEMARK_TEST_LAYOUT=shared``); these tests are about what only they do.
"""

from __future__ import annotations

import random
import time

import pytest

from storeadapter.engine import MessageStore
from tests.engine.storetools import SHARED_LAYOUT, read_all, small_config

# Not run again in the shared-layout pass: every store here is
# opened with shared_config, the same config in both passes.
pytestmark = pytest.mark.one_layout

HOUR_MS = 3_600_000


def shared_config(**overrides):
    return small_config(**{**SHARED_LAYOUT, "shared_layout_above": 1024, **overrides})


def test_a_topic_with_more_queues_than_the_threshold_is_shared(tmp_path):
    with MessageStore.open(tmp_path / "s", shared_config(shared_layout_above=8)) as store:
        small = store.create_topic("small", queues=8)
        big = store.create_topic("big", queues=9)

    assert (small.layout, big.layout) == ("files", "shared")
    queue_dirs = [p.name for p in (tmp_path / "s" / "consumequeue" / "big").iterdir()]
    assert queue_dirs == ["blocks"]


def test_twenty_thousand_queues_cost_a_few_files(tmp_path):
    path = tmp_path / "s"
    rng = random.Random(7)
    sent: dict[int, list[bytes]] = {}
    with MessageStore.open(path, shared_config(shared_blocks_per_file=4096)) as store:
        store.create_topic("m", queues=20_000)
        for start in range(0, 40_000, 500):
            batch = []
            for i in range(start, start + 500):
                queue = rng.randrange(20_000)
                body = f"{queue}:{len(sent.setdefault(queue, []))}:{i}".encode()
                sent[queue].append(body)
                batch.append({"body": body, "queue": queue})
            store.append_batch("m", batch)

    with MessageStore.open(path, shared_config()) as reopened:
        for queue in rng.sample(sorted(sent), 500):
            assert [m.body for m in read_all(reopened, "m", queue)] == sent[queue]
        assert reopened.queue_range("m", 19_999)[1] == len(sent.get(19_999, []))
    files = list((path / "consumequeue" / "m" / "blocks").iterdir())
    assert 1 <= len(files) <= 10


def test_another_process_reads_what_was_appended_to_new_blocks(tmp_path):
    path = tmp_path / "s"
    writer = MessageStore.open(path, shared_config())
    reader = MessageStore.open(path, shared_config())
    try:
        writer.create_topic("m", queues=2000)
        writer.append("m", b"first", queue=1500)
        assert [m.body for m in reader.read("m", 1500, 0)] == [b"first"]

        writer.append_batch("m", [{"body": f"b{q}".encode(), "queue": q} for q in range(2000)])

        assert [m.body for m in reader.read("m", 1999, 0)] == [b"b1999"]
        assert [m.body for m in reader.read("m", 1500, 0, 5)] == [b"first", b"b1500"]
    finally:
        reader.close()
        writer.close()


def test_retention_deletes_block_files_of_expired_entries_and_keeps_queue_ends(
    tmp_path, monkeypatch
):
    from storeadapter.engine import clock, fileio

    now = {"ms": 1_800_000_000_000}
    monkeypatch.setattr(clock, "now_ms", lambda: now["ms"])
    monkeypatch.setattr(fileio, "disk_usage", lambda path: (1, 100))
    path = tmp_path / "s"
    config = shared_config(retention_hours=1)
    with MessageStore.open(path, config) as store:
        store.create_topic("m", queues=2000)
        for _ in range(6):
            store.append_batch("m", [{"body": b"x" * 40, "queue": q} for q in range(2000)])
        blocks = path / "consumequeue" / "m" / "blocks"
        files_before = len(list(blocks.iterdir()))
        now["ms"] += 3 * HOUR_MS
        store.append_batch("m", [{"body": b"new", "queue": q} for q in (0, 1999)])

        report = store.delete_expired()

        assert report.deleted_segments
        assert len(list(blocks.iterdir())) < files_before
        assert store.queue_range("m", 0)[1] == 7
        assert [m.body for m in read_all(store, "m", 1999)][-1] == b"new"
    with MessageStore.open(path, config) as reopened:
        assert reopened.queue_range("m", 5)[1] == 6
        assert [m.body for m in read_all(reopened, "m", 0)] == [b"new"]


def test_a_block_file_retention_deletes_is_no_longer_mapped_while_the_store_stays_open(
    tmp_path, monkeypatch
):
    # A deleted file's space stays in use while a mapping of it lives: retention on a full
    # disk freed nothing until the next new block file was mapped or the store closed.
    from storeadapter.engine import clock, fileio

    path = tmp_path / "s"
    config = shared_config(
        retention_hours=1,
        flush_mode="async",
        segment_bytes=1 << 20,
        max_message_bytes=4096,
        shared_layout_above=0,
    )
    with MessageStore.open(path, config) as store:
        store.create_topic("m", queues=64)
        for _ in range(6):
            store.append_batch("m", [{"body": b"x" * 3000, "queue": q} for q in range(64)])
        assert store._appender.batched >= 1  # the native batch, which maps block files
        blocks = path / "consumequeue" / "m" / "blocks"
        files_before = len(list(blocks.iterdir()))
        later = clock.now_ms() + 3 * HOUR_MS
        monkeypatch.setattr(clock, "now_ms", lambda: later)
        monkeypatch.setattr(fileio, "disk_usage", lambda path: (1, 100))
        store.append_batch("m", [{"body": b"new", "queue": q} for q in (0, 63)])

        assert store.delete_expired().deleted_segments
        assert len(list(blocks.iterdir())) < files_before
        with open("/proc/self/maps") as maps:
            deleted = [line for line in maps if str(path) in line and "(deleted)" in line]

        assert deleted == []


def test_queue_ranges_and_topic_stats_take_a_page_of_queues(tmp_path):
    with MessageStore.open(tmp_path / "s", shared_config()) as store:
        store.create_topic("m", queues=5000)
        store.append_batch("m", [{"body": b"x", "queue": q} for q in (10, 11, 11, 4999)])

        assert store.queue_ranges("m", 10, 3) == [(0, 1), (0, 2), (0, 0)]
        assert store.queue_ranges("m", 4998, 10) == [(0, 0), (0, 1)]
        assert store.queue_ranges("m", 6000, 10) == []
        stats = store.topic_stats("m", 10, 2)
        assert sorted(stats.queues) == [10, 11]
        assert stats.messages == 3
        assert len(store.queue_ranges("m")) == 5000


def test_adding_a_million_queues_costs_no_work_per_queue(tmp_path):
    """Issue 32: adding 1.4M queues in one call took 11 s, a queue object and an offsets
    look-up each, and a deep copy of the topic's per-queue list to save it."""
    with MessageStore.open(tmp_path / "s", shared_config()) as store:
        store.create_topic("m", queues=2000)
        store.commit_offset("g", "m", 1, 0)
        started = time.process_time()

        added = store.add_queues("m", 1_000_000)

        spent = time.process_time() - started
        assert added.queues == 1_002_000
        assert store.committed_offset("g", "m", 1) == 0
        assert spent < 2.0, f"adding a million queues took {spent:.2f} s of CPU"


def test_an_open_makes_no_list_of_a_million_writable_queues_until_one_is_placed(tmp_path):
    """The open of a store with a million queues built the topic's writable list (a
    million ints, ~0.1 s of CPU, half a clean open) though only a message without a
    queue needs it; it is made on first use, and again after a freeze."""
    path = tmp_path / "s"
    with MessageStore.open(path, shared_config()) as store:
        store.create_topic("m", queues=1_000_000)
        store.append_batch("m", [{"body": b"x", "queue": q} for q in (3, 999_999)])
    with MessageStore.open(path, shared_config()) as store:
        state = store._registry.topics["m"]
        assert state._writable is None
        store.append_batch("m", [{"body": b"q", "queue": 5}])
        assert state._writable is None
        placed = store.append_batch("m", [b"a", b"b"])
        assert [r.queue for r in placed] == [0, 1]
        assert len(state.writable) == 1_000_000
        store.freeze_queue("m", 2)
        assert state._writable is None
        assert store.append("m", b"c").queue == 3
        assert 2 not in state.writable and len(state.writable) == 999_999


def test_a_shared_queue_with_nothing_in_it_is_loaded_without_a_look_at_the_log(
    tmp_path, monkeypatch
):
    # A queue's first use (a million queues: each once) checks its ends against the log
    # only when it has entries: one with none has no end to trim or minimum to move, and
    # a shared topic keeps no witness of more. A queue with entries is still checked.
    from storeadapter.engine import store as store_module

    checked = []
    genuine = store_module.trim_queue_end

    def recording(log, queue, *rest):
        checked.append(queue.owner[1])
        return genuine(log, queue, *rest)

    with MessageStore.open(tmp_path / "s", shared_config()) as store:
        store.create_topic("t", queues=8, layout="shared")
        store.append_batch("t", [{"body": b"a", "queue": 3}])
    monkeypatch.setattr(store_module, "trim_queue_end", recording)
    with MessageStore.open(tmp_path / "s", shared_config()) as store:
        assert [store.queue_range("t", q) for q in (2, 3)] == [(0, 0), (0, 1)]
        assert checked == [3]
        assert [m.body for m in read_all(store, "t", 3)] == [b"a"]
