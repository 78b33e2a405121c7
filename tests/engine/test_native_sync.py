"""Sync appends through the native append, waiting on its group commit without the GIL
(nativeappend.log_syncer, native/src/group_commit.rs; issue 31, part 9)."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from storeadapter.engine import MessageStore
from storeadapter.engine.checkpoint import read_checkpoint
from storeadapter.engine.errors import DiskFullError, StoreFailedError
from storeadapter.engine.record import RECORD_OVERHEAD
from storeadapter.engine.results import STATUS_FLUSH_TIMEOUT, STATUS_OK
from tests.engine.storetools import read_all, small_config

THREADS = 8
TOPIC = "t"


def _sync_config(**overrides):
    """Sync settings whose flush timeout no loaded disk reaches: an fdatasync that took
    over the default 5 s beside another suite's writeback answered FLUSH_TIMEOUT, a
    right answer the tests here are not about (the timeout's own test sets its own)."""
    settings = {"flush_interval_ms": 600_000, "flush_timeout_ms": 600_000, **overrides}
    return small_config(flush_mode="sync", **settings)


def _topic(store, queues: int) -> None:
    """A topic whose queues have their files (the native append declines the write
    that creates one)."""
    store.create_topic(TOPIC, queues=queues, layout="files")
    for queue in range(queues):
        store.append(TOPIC, b"first", queue=queue)


def _end(result, body: bytes) -> int:
    return result.commit_offset + RECORD_OVERHEAD + len(TOPIC) + len(body)


def _until_written(store, since: int, count: int = THREADS) -> None:
    """Wait until the native append wrote ``count`` single appends more than the
    ``since`` it had written (its writers then wait for their fsync). Counted from the
    test's own start: how many of the setup's appends went native is not the test's
    business (one too few let a thread append after the failure, a race)."""
    pause = threading.Event()
    for _ in range(3000):
        if store._appender.appended >= since + count:
            return
        pause.wait(0.01)
    raise AssertionError(f"{store._appender.appended - since} appends written, not {count}")


def _on_threads(work, threads: int = THREADS) -> list:
    """Run ``work(i)`` on ``threads`` threads started together; their outcomes (a value
    or the exception raised)."""
    outcomes: list = [None] * threads
    barrier = threading.Barrier(threads)

    def run(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = work(i)
        except Exception as error:  # noqa: BLE001 - the test looks at it
            outcomes[i] = error

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return outcomes


@pytest.mark.parametrize("segment_bytes", [1 << 14, 1 << 22], ids=["rolling", "one-segment"])
def test_a_sync_append_returns_only_once_its_record_is_durable(tmp_path, segment_bytes):
    per_thread = 60
    with MessageStore.open(tmp_path / "s", _sync_config(segment_bytes=segment_bytes)) as store:
        _topic(store, 3)
        syncs_before = store._flusher.syncs

        def append(i: int) -> list:
            seen = []
            for n in range(per_thread):
                body = b"thread-%d-%d" % (i, n)
                result = store.append(TOPIC, body)
                # Durable when it returns: every fsync that acknowledged covered its end.
                seen.append((result, _end(result, body), store._flusher.flushed))
            return seen

        outcomes = _on_threads(append)
        for outcome in outcomes:
            assert not isinstance(outcome, Exception), outcome
            for result, end, flushed in outcome:
                assert result.status == STATUS_OK
                assert flushed >= end
        assert store._appender.appended > 0  # the native call took them
        total = THREADS * per_thread
        syncs = store._flusher.syncs - syncs_before
        assert 0 < syncs <= total
        last_end = max(end for outcome in outcomes for _r, end, _f in outcome)
        # The durable watermark followed the fsyncs that acknowledged (no full flush ran).
        assert read_checkpoint(tmp_path / "s" / "checkpoint").commitlog_flushed >= last_end
        bodies = sorted(m.body for q in range(3) for m in read_all(store, TOPIC, q))
        assert len(bodies) == total + 3


def test_batches_and_dict_items_wait_for_their_fsync_too(tmp_path):
    with MessageStore.open(tmp_path / "s", _sync_config(segment_bytes=1 << 22)) as store:
        _topic(store, 2)
        batched = store._appender.batched
        results = store.append_batch(TOPIC, [b"a", b"b", b"c"])
        items = store.append_batch(TOPIC, [{"body": b"d", "tag": "x"}, {"body": b"e"}])
        assert store._appender.batched == batched + 2
        for result in results + items:
            assert result.status == STATUS_OK
        assert store._flusher.flushed >= _end(items[-1], b"e")


def _shared_sync_store(path):
    """A sync store with a shared topic of 3 queues whose first blocks are made (the
    native append declines the write that makes one)."""
    config = _sync_config(
        segment_bytes=1 << 22,
        shared_layout_above=0,
        shared_block_entries=4,
        shared_blocks_per_file=64,
    )
    store = MessageStore.open(path, config)
    store.create_topic(TOPIC, queues=3, layout="shared")
    for queue in range(3):
        store.append(TOPIC, b"first", queue=queue)
    return store


@pytest.mark.parametrize("form", ["append", "append_batch"])
def test_a_shared_topics_native_write_waits_for_its_fsync_too(tmp_path, form):
    with _shared_sync_store(tmp_path / "s") as store:
        counter = "appended" if form == "append" else "batched"
        before = getattr(store._appender, counter)
        store._log_syncer.hold_syncs(True)  # no fdatasync until the append is written
        seen: list = []

        def append() -> None:
            if form == "append":
                result = store.append(TOPIC, b"held", queue=1, tag="x")
            else:
                result = store.append_batch(TOPIC, [{"body": b"held", "queue": 1, "tag": "x"}])[0]
            seen.append((result, store._flusher.flushed))

        runner = threading.Thread(target=append)
        runner.start()
        pause = threading.Event()
        for _ in range(3000):
            if getattr(store._appender, counter) > before:
                break
            pause.wait(0.01)
        store._log_syncer.hold_syncs(False)
        runner.join()
        assert getattr(store._appender, counter) == before + 1  # the native call wrote it
        (result, flushed), body = seen[0], b"held"
        assert result.status == STATUS_OK
        end = result.commit_offset + RECORD_OVERHEAD + len(TOPIC) + len(body) + len(b"x")
        assert flushed >= end  # durable when it returned


@pytest.mark.parametrize(
    ("code", "error_type"), [(errno.EIO, StoreFailedError), (errno.ENOSPC, DiskFullError)]
)
def test_a_failed_fdatasync_fails_every_waiter_with_the_typed_error(tmp_path, code, error_type):
    with MessageStore.open(tmp_path / "s", _sync_config(segment_bytes=1 << 22)) as store:
        _topic(store, 2)
        store.append(TOPIC, b"durable")  # the group commit takes the segment
        store._log_syncer.hold_syncs(True)
        since = store._appender.appended
        waiting = threading.Barrier(THREADS + 1)

        def append(i: int):
            waiting.wait()
            return store.append(TOPIC, b"lost-%d" % i)

        threads_done: list = []
        runner = threading.Thread(target=lambda: threads_done.extend(_on_threads(append)))
        runner.start()
        waiting.wait()
        _until_written(store, since)  # all of them wait for an fsync now
        store._log_syncer.fail_syncs(code)
        store._log_syncer.hold_syncs(False)
        runner.join()
        assert len(threads_done) == THREADS
        for outcome in threads_done:
            assert isinstance(outcome, error_type), outcome
        assert store.failed
        # Later appends are refused as after any failure (StoreFailedError).
        with pytest.raises(StoreFailedError):
            store.append(TOPIC, b"after")
        with pytest.raises(StoreFailedError):
            store.append_batch(TOPIC, [b"after"])


def test_waiters_one_fdatasync_covered_return_though_none_appends_again(tmp_path):
    # The flusher unparks the first waiter a fdatasync covered; each waiter unparks the
    # next one as it lets go of the GIL for its next append's wait (native/src/
    # group_commit.rs, the relay). Here none of them appends again: the flusher itself
    # unparks the rest, long before their wait's timeout (a waiter left parked would
    # wait its 600 s and the test time out).
    config = _sync_config(segment_bytes=1 << 22)
    with MessageStore.open(tmp_path / "s", config) as store:
        _topic(store, 2)
        store.append(TOPIC, b"first")  # the group commit takes the segment
        store._log_syncer.hold_syncs(True)
        since = store._appender.appended
        started = threading.Barrier(THREADS + 1)
        outcomes: list = []

        def append(i: int):
            started.wait()
            return store.append(TOPIC, b"once-%d" % i)

        runner = threading.Thread(target=lambda: outcomes.extend(_on_threads(append)))
        runner.start()
        started.wait()
        _until_written(store, since)  # all of them wait for one fdatasync
        syncs = store._log_syncer.syncs
        store._log_syncer.hold_syncs(False)
        runner.join()
        # Usually one fdatasync covers them all; a waiter that registers after it began
        # is covered by the next (a round covering more than one leaves a relay that no
        # append passes on, as here): whichever, none is left parked.
        assert store._log_syncer.syncs > syncs
        for i, outcome in enumerate(outcomes):
            assert not isinstance(outcome, Exception), outcome
            assert outcome.status == STATUS_OK
            assert store._flusher.flushed >= _end(outcome, b"once-%d" % i)


def test_close_while_appends_wait_returns_them_durable(tmp_path):
    path = tmp_path / "s"
    store = MessageStore.open(path, _sync_config(segment_bytes=1 << 22))
    _topic(store, 2)
    store.append(TOPIC, b"first")
    store._log_syncer.hold_syncs(True)  # no fdatasync of its own: the close's covers them
    since = store._appender.appended
    started = threading.Barrier(THREADS + 1)
    outcomes: list = []

    def append(i: int):
        started.wait()
        return store.append(TOPIC, b"waiting-%d" % i)

    runner = threading.Thread(target=lambda: outcomes.extend(_on_threads(append)))
    runner.start()
    started.wait()
    _until_written(store, since)  # all of them wait (no fdatasync is issued)
    store.close()
    runner.join()
    for outcome in outcomes:
        assert not isinstance(outcome, Exception), outcome
        assert outcome.status == STATUS_OK
    with MessageStore.open(path, _sync_config(segment_bytes=1 << 22)) as reopened:
        bodies = {m.body for q in range(2) for m in read_all(reopened, TOPIC, q)}
    assert {b"waiting-%d" % i for i in range(THREADS)} <= bodies


def test_a_wait_no_fsync_covers_in_time_gets_flush_timeout(tmp_path):
    # Long enough for the last append's fdatasync on a loaded machine (50 ms failed once
    # in a make test); the held ones time out whatever the length.
    config = _sync_config(segment_bytes=1 << 22, flush_timeout_ms=500)
    with MessageStore.open(tmp_path / "s", config) as store:
        _topic(store, 1)
        store.append(TOPIC, b"first")
        store._log_syncer.hold_syncs(True)
        appended = store._appender.appended
        result = store.append(TOPIC, b"late")
        batch = store.append_batch(TOPIC, [b"late-1", b"late-2"])
        assert store._appender.appended == appended + 1
        assert result.status == STATUS_FLUSH_TIMEOUT
        assert [r.status for r in batch] == [STATUS_FLUSH_TIMEOUT] * 2
        store._log_syncer.hold_syncs(False)
        assert store.append(TOPIC, b"on time").status == STATUS_OK


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_closed_store_holds_no_descriptor_of_its_files_while_it_waits_for_the_collector(
    tmp_path, mode
):
    # A closed store's objects hold one another until the collector runs; a descriptor
    # kept until then (the group commit's segment) kept a deleted segment's blocks and
    # cached pages, freed later in the middle of someone else's work.

    path = tmp_path / "s"
    config = small_config(flush_mode=mode, flush_interval_ms=600_000)
    store = MessageStore.open(path, config)
    _topic(store, 2)
    store.append_batch(TOPIC, [b"x" * 100] * 50)
    store.append(TOPIC, b"y")
    store.close()

    held = [
        target
        for fd in os.listdir("/proc/self/fd")
        if (target := _link(f"/proc/self/fd/{fd}")) and target.startswith(str(path))
    ]
    assert store is not None  # still referenced: nothing was collected
    assert held == []


def _link(name: str) -> str | None:
    try:
        return os.readlink(name)
    except OSError:
        return None
