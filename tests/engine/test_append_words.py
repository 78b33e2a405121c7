"""The words the native append checks (native/src/python/words.rs; docs/PERFORMANCE.md,
"Issue 31 (part 10)"): the store's refusals, moved where a store closes, forks, fails or
finds its disk full, and the asks, moved by the flusher, the warmer and waiting pulls."""

from __future__ import annotations

import os
import threading

import pytest

from storeadapter.engine import (
    DiskFullError,
    MessageStore,
    StoreClosedError,
    StoreFailedError,
    dataplane,
)
from storeadapter.engine import reading as reading_module
from storeadapter.engine.warming import WARM_ASK_BYTES
from tests.engine.storetools import small_config

NEVER = 2**63 - 1


def _open(path, **overrides) -> MessageStore:
    roomy = {"segment_bytes": 16 << 20, "max_message_bytes": 64 << 10, "queue_file_entries": 4096}
    config = small_config(flush_mode="async", **{**roomy, **overrides})
    store = MessageStore.open(path, config)
    store.create_topic("t", queues=2, layout="files")
    return store


def _native_appends(store, count: int = 20) -> int:
    """How many of ``count`` appends the core took (one may meet the flusher's locks)."""
    before = store._appender.appended
    for i in range(count):
        store.append("t", b"m-%d" % i)
    return store._appender.appended - before


def test_a_store_failed_between_two_appends_is_seen_by_the_next_through_the_word(tmp_path):
    with _open(tmp_path / "s") as store:
        assert _native_appends(store) > 0
        assert store._refusals.value == 0

        store._fail(OSError(5, "injected"))

        assert store._refusals.value == dataplane.REFUSED_FAILED
        before = store._appender.appended
        with pytest.raises(StoreFailedError):
            store.append("t", b"refused")
        with pytest.raises(StoreFailedError):
            store.append_batch("t", [b"refused"] * 3)
        assert store._appender.append("t", b"refused") is None
        assert store._appender.appended == before


def test_a_disk_past_its_reject_ratio_and_back_moves_the_word_both_ways(tmp_path):
    with _open(tmp_path / "s") as store:
        store._disk.ratio = store.config.disk_reject_ratio
        assert store._refusals.value == dataplane.REFUSED_DISK_FULL
        with pytest.raises(DiskFullError):
            store.append("t", b"refused")

        store._disk.ratio = 0.1  # space returned (as the next measure would find)

        assert store._refusals.value == 0
        assert _native_appends(store) > 0


def test_a_closed_store_refuses_through_the_word_and_a_kept_append_goes_the_long_way(tmp_path):
    store = _open(tmp_path / "s")
    kept = store.append  # the core's bound call, kept past the close
    core = store._appender
    assert _native_appends(store) > 0

    store.close()

    assert store._refusals.value & dataplane.REFUSED_CLOSED
    assert core.append("t", b"late") is None
    with pytest.raises(StoreClosedError):
        kept("t", b"late")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_store_opened_before_a_fork_is_refused_in_the_child_through_the_word(tmp_path):
    with _open(tmp_path / "s") as store:
        assert _native_appends(store) > 0
        core = store._appender
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # the child: report through the pipe, leave without cleanup
            try:
                seen = [store._refusals.value == dataplane.REFUSED_FORKED]
                seen.append(core.append("t", b"child") is None)
                try:
                    store.append("t", b"child")
                    seen.append(False)
                except StoreClosedError:
                    seen.append(True)
                os.write(write, bytes(int(s) for s in seen))
            finally:
                os._exit(0)
        os.close(write)
        answer = os.read(read, 16)
        os.close(read)
        os.waitpid(child, 0)

        assert list(answer) == [1, 1, 1]
        assert store._refusals.value == 0  # the parent's store still takes writes
        assert _native_appends(store) > 0


def test_a_pull_waiting_is_woken_by_a_native_append(tmp_path, monkeypatch):
    # The pull's own poll made long: only the append's wake-up ends its wait.
    monkeypatch.setattr(reading_module, "_PULL_POLL_S", 120.0)
    with _open(tmp_path / "s") as store:
        arrivals = store._reader.arrivals
        wakes = []
        genuine_wake = arrivals.wake

        def counted_wake():
            wakes.append(store.commitlog.tail)
            genuine_wake()

        arrivals.wake = counted_wake
        assert _native_appends(store, 5) > 0
        assert wakes == []  # no pull waits: the word says so, nobody is asked
        queue = store._queue("t", 0)
        offset = queue.max_offset
        pulled = []
        puller = threading.Thread(
            target=lambda: pulled.extend(store.pull("g", "t", 0, 1, timeout_s=60, offset=offset))
        )
        puller.start()
        while store._asks.ends[2] == NEVER:  # until the pull waits
            puller.join(0.001)

        before = store._appender.appended
        while queue.max_offset == offset:
            store.append("t", b"wake up")  # the round-robin reaches queue 0 within two
        puller.join(30)

        assert not puller.is_alive()
        assert wakes, "the native append woke the waiting pull"
        assert store._appender.appended > before
        assert pulled and pulled[0].queue_offset == offset
        assert store._asks.ends[2] == NEVER  # the pull no longer waits


def test_the_warmer_is_asked_by_native_appends_once_engaged(tmp_path):
    with _open(tmp_path / "s") as store:
        asked = []
        genuine_soon = store._warm.soon

        def recorded_soon(end):
            asked.append(end)
            genuine_soon(end)

        store._warm.soon = recorded_soon
        body = b"w" * 60_000
        for _ in range(80):  # 4.8 MB, past WARM_ASK_BYTES: not engaged, so not asked
            store.append("t", body)
        assert asked == []
        assert store._asks.ends[1] == NEVER

        store.get(store.append("t", b"x").message_id)  # the first read engages warming

        engaged_at = store._asks.ends[1]
        assert engaged_at < NEVER
        before = store._appender.appended
        while not asked or asked[-1] <= engaged_at:
            store.append("t", body)
        assert store._appender.appended > before
        assert asked[-1] > engaged_at
        assert store._asks.ends[1] == asked[-1] + WARM_ASK_BYTES  # moved by the ask


def test_the_flusher_is_kicked_past_the_dirty_bytes_and_moves_its_word(tmp_path):
    with _open(tmp_path / "s", flush_dirty_bytes=64 << 10, flush_interval_ms=60_000) as store:
        kicks = []
        genuine_kick = store._flusher.kick

        def counted_kick():
            kicks.append(store.commitlog.tail)
            genuine_kick()

        store._flusher.kick = counted_kick
        start = store._asks.ends[0]
        assert start == store._flusher.flushed + (64 << 10)
        body = b"f" * 1000
        while not kicks:
            store.append("t", body)
        assert kicks[0] > start
        store._flusher.advance(store.commitlog.tail)  # as the kicked flush ends

        assert store._asks.ends[0] == store.commitlog.tail + (64 << 10)


def test_sync_mode_asks_for_no_flush():
    asks = dataplane.Asks(None, 100)
    asks.flushed(10)

    assert asks.ends == (NEVER, NEVER, NEVER, NEVER)
    asks.warm(True, 50)
    asks.pulls(1)
    assert asks.ends[1:] == (150, -(2**63), -(2**63))
    asks.pulls(0)
    asks.warm(False, 50)
    assert asks.ends == (NEVER, NEVER, NEVER, NEVER)
