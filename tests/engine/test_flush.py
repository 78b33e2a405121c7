"""Flush modes: group commit in sync mode, flush timeouts, and fsync failures."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from storeadapter.engine import (
    STATUS_FLUSH_TIMEOUT,
    STATUS_OK,
    Message,
    MessageStore,
    StoreConfig,
    StoreFailedError,
    fileio,
)
from storeadapter.engine.checkpoint import read_checkpoint
from tests.engine.storetools import (
    INDEX_ENTRIES,
    INDEX_SLOTS,
    MAX_MESSAGE_BYTES,
    QUEUE_FILE_ENTRIES,
    SEGMENT_BYTES,
    append_in_another_process,
    read_all,
    read_everything,
    segment_paths,
    small_config,
    stall_fdatasync,
    tail,
)


def _config(mode: str, **overrides) -> StoreConfig:
    settings = dict(
        segment_bytes=SEGMENT_BYTES,
        max_message_bytes=MAX_MESSAGE_BYTES,
        queue_file_entries=QUEUE_FILE_ENTRIES,
        flush_mode=mode,
    )
    settings.update(overrides)
    return StoreConfig(index_slots=INDEX_SLOTS, index_entries=INDEX_ENTRIES, **settings)


@pytest.fixture
def sync_store(open_store):
    store = open_store(cfg=_config("sync"))
    store.create_topic("t", queues=4)
    return store


def _failing_fdatasync(fd: int) -> None:
    raise OSError(errno.EIO, "Input/output error (injected)")


def test_sync_append_returns_ok_after_an_fsync_covered_it(sync_store, monkeypatch):
    real = fileio.fdatasync
    synced: list[int] = []

    def counting(fd: int) -> None:
        real(fd)
        synced.append(fd)

    monkeypatch.setattr(fileio, "fdatasync", counting)

    result = sync_store.append("t", b"durable")

    assert result.status == STATUS_OK
    assert synced, "append returned before any fdatasync"
    assert sync_store.stats().commit_log.flushed >= tail(sync_store)


def test_sync_append_batch_returns_ok_for_every_message(sync_store):
    results = sync_store.append_batch("t", [f"m{i}" for i in range(50)])

    assert [r.status for r in results] == [STATUS_OK] * 50


def test_slow_fsync_returns_flush_timeout_not_ok(open_store, monkeypatch):
    store = open_store(cfg=_config("sync", flush_timeout_ms=50))
    store.create_topic("t", queues=1)
    release = stall_fdatasync(monkeypatch)

    result = store.append("t", b"slow")

    release.set()
    assert result.status == STATUS_FLUSH_TIMEOUT
    assert store.get(result.message_id).body == b"slow"


def test_appends_return_ok_again_once_fsync_is_fast_again(open_store, monkeypatch):
    store = open_store(cfg=_config("sync", flush_timeout_ms=50))
    store.create_topic("t", queues=1)
    release = stall_fdatasync(monkeypatch)
    assert store.append("t", b"slow").status == STATUS_FLUSH_TIMEOUT
    monkeypatch.undo()
    release.set()

    statuses = [store.append("t", f"fast {i}").status for i in range(20)]

    assert STATUS_OK in statuses
    assert not store.failed
    assert [m.body for m in read_all(store, "t", 0)][0] == b"slow"


def test_fsync_failure_in_sync_mode_fails_the_append_and_every_later_write(sync_store, monkeypatch):
    sync_store.commit_offset("g", "t", 0, 0)
    monkeypatch.setattr(fileio, "fdatasync", _failing_fdatasync)

    with pytest.raises(StoreFailedError):
        sync_store.append("t", b"not durable")

    for write in (
        lambda: sync_store.append("t", b"later"),
        lambda: sync_store.append_batch("t", [b"later"]),
        lambda: sync_store.create_topic("u", queues=1),
        lambda: sync_store.delete_topic("t"),
        lambda: sync_store.commit_offset("g", "t", 0, 0),
        lambda: sync_store.flush(),
    ):
        with pytest.raises(StoreFailedError):
            write()
    assert sync_store.failed
    assert sync_store.stats().failed


def test_store_stays_failed_even_when_fsync_works_again(sync_store, monkeypatch):
    monkeypatch.setattr(fileio, "fdatasync", _failing_fdatasync)
    with pytest.raises(StoreFailedError):
        sync_store.append("t", b"not durable")
    monkeypatch.undo()

    with pytest.raises(StoreFailedError):
        sync_store.append("t", b"still refused")


def test_reads_still_work_after_an_fsync_failure(sync_store, monkeypatch):
    acknowledged = sync_store.append("t", b"acknowledged", queue=0)
    monkeypatch.setattr(fileio, "fdatasync", _failing_fdatasync)
    with pytest.raises(StoreFailedError):
        sync_store.append("t", b"not durable")

    assert sync_store.get(acknowledged.message_id).body == b"acknowledged"
    assert sync_store.read("t", 0, 0)[0].body == b"acknowledged"


def test_fsync_failure_in_async_mode_fails_flush_and_later_appends(open_store, monkeypatch):
    store = open_store(cfg=_config("async", flush_interval_ms=600_000))
    store.create_topic("t", queues=1)
    store.append("t", b"before")
    monkeypatch.setattr(fileio, "fdatasync", _failing_fdatasync)

    with pytest.raises(StoreFailedError):
        store.flush()

    monkeypatch.undo()
    with pytest.raises(StoreFailedError):
        store.append("t", b"after")


def test_reopen_after_an_fsync_failure_writes_again_and_keeps_acknowledged_messages(
    open_store, store_path, monkeypatch
):
    store = open_store(cfg=_config("sync"))
    store.create_topic("t", queues=2)
    acknowledged = [store.append("t", f"ack {i}") for i in range(20)]
    assert all(r.status == STATUS_OK for r in acknowledged)
    monkeypatch.setattr(fileio, "fdatasync", _failing_fdatasync)
    with pytest.raises(StoreFailedError):
        store.append("t", b"not durable")
    monkeypatch.undo()
    store.close()

    reopened = open_store(cfg=_config("sync"))

    assert reopened.stats().last_recovery.clean_shutdown is False
    for i, result in enumerate(acknowledged):
        message = reopened.get(result.message_id)
        assert (message.body, message.queue_offset) == (f"ack {i}".encode(), result.queue_offset)
    result = reopened.append("t", b"works again")
    assert result.status == STATUS_OK
    assert reopened.get(result.message_id).body == b"works again"


def test_failed_store_close_leaves_the_abort_marker(open_store, store_path, monkeypatch):
    store = open_store(cfg=_config("sync"))
    store.create_topic("t", queues=1)
    monkeypatch.setattr(fileio, "fdatasync", _failing_fdatasync)
    with pytest.raises(StoreFailedError):
        store.append("t", b"x")
    monkeypatch.undo()

    store.close()

    assert (store_path / "abort").exists()


def test_concurrent_sync_appenders_all_get_ok_and_every_message_is_readable(sync_store):
    threads, per_thread = 8, 40
    results: dict[int, list] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def appender(number: int) -> None:
        try:
            start.wait()
            results[number] = [
                sync_store.append("t", f"thread {number} message {i}") for i in range(per_thread)
            ]
        except BaseException as error:  # reported below
            errors.append(error)

    workers = [threading.Thread(target=appender, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)

    assert errors == []
    every = [r for rs in results.values() for r in rs]
    assert len(every) == threads * per_thread
    assert {r.status for r in every} == {STATUS_OK}
    assert len({r.message_id for r in every}) == len(every)
    for number, rs in results.items():
        for i, result in enumerate(rs):
            assert sync_store.get(result.message_id).body == f"thread {number} message {i}".encode()
    everything = read_everything(sync_store)
    for messages in everything.values():
        assert [m.queue_offset for m in messages] == list(range(len(messages)))
    assert sum(len(m) for m in everything.values()) == threads * per_thread


def test_concurrent_sync_batches_all_get_ok(sync_store):
    outcomes: list = []

    def batcher(number: int) -> None:
        outcomes.extend(sync_store.append_batch("t", [Message(f"{number}-{i}") for i in range(20)]))

    workers = [threading.Thread(target=batcher, args=(n,)) for n in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)

    assert len(outcomes) == 160
    assert {r.status for r in outcomes} == {STATUS_OK}


def test_async_append_returns_ok(open_store):
    store = open_store(cfg=_config("async"))
    store.create_topic("t", queues=1)

    assert store.append("t", b"x").status == STATUS_OK


def test_flush_writes_a_checkpoint_covering_the_tail(open_store, store_path):
    store = open_store(cfg=_config("async", flush_interval_ms=600_000))
    store.create_topic("t", queues=1)
    for i in range(30):
        store.append("t", f"m{i}" * 10)

    store.flush()

    checkpoint = read_checkpoint(store_path / "checkpoint")
    assert checkpoint.commitlog_flushed == tail(store)
    assert checkpoint.dispatched == tail(store)


def test_async_store_survives_reopen_without_explicit_flush(open_store, store_path):
    store = open_store(cfg=_config("async", flush_interval_ms=600_000))
    store.create_topic("t", queues=2)
    results = [store.append("t", f"m{i}") for i in range(25)]
    store.close()

    reopened = MessageStore.open(store_path, _config("async"))
    try:
        assert [reopened.get(r.message_id).body for r in results] == [
            f"m{i}".encode() for i in range(25)
        ]
    finally:
        reopened.close()


def test_a_lone_sync_producer_costs_one_log_fdatasync_per_append(open_store, monkeypatch):
    from storeadapter.engine import fileio

    store = open_store(cfg=small_config(flush_mode="sync", flush_interval_ms=600_000))
    store.create_topic("t", queues=1)
    store.append("t", b"warm up")
    syncs = []
    real = fileio.fdatasync
    monkeypatch.setattr(
        fileio, "fdatasync", lambda fd: (syncs.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd))
    )

    for i in range(50):
        store.append("t", f"m{i}".encode())

    log_syncs = [path for path in syncs if "/commitlog/" in path]
    assert len(log_syncs) <= 52  # one per append (a woken appender still counted as
    # waiting made the flusher fsync again with nothing new: about two per append)
    # and one of the checkpoint, whose durable watermark follows the acknowledging fsync
    assert len(syncs) - len(log_syncs) <= 52


ENTRY_SIZE = 20  # a consume-queue entry's bytes (FORMAT.md)


def _recorded_fdatasyncs(monkeypatch) -> list[str]:
    """The paths of the files fdatasynced from now on, in order."""
    from storeadapter.engine import fileio

    syncs: list[str] = []
    real = fileio.fdatasync
    monkeypatch.setattr(
        fileio, "fdatasync", lambda fd: (syncs.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd))
    )
    return syncs


def test_a_flush_with_nothing_written_since_the_last_one_issues_no_fdatasync(
    open_store, monkeypatch
):
    store = open_store(cfg=small_config(flush_interval_ms=600_000))
    store.create_topic("t", queues=4)
    store.append_batch("t", [f"m{i}".encode() for i in range(20)])
    store.flush()
    syncs = _recorded_fdatasyncs(monkeypatch)

    store.flush()

    assert syncs == []  # an idle store's flusher synced the active segment every round
    # (at times a device cache flush, 10 ms: twice a second in every process open)


def test_a_flush_finding_another_process_flushed_past_its_tail_issues_no_fdatasync(
    open_store, store_path, tmp_path, monkeypatch
):
    store = open_store(cfg=small_config(flush_interval_ms=600_000))
    store.create_topic("t", queues=4)
    store.append("t", b"first")
    store.flush()
    append_in_another_process(store_path, "other", 40, tmp_path / "acks")  # its close
    # flushed everything it wrote, and its checkpoint says so
    syncs = _recorded_fdatasyncs(monkeypatch)

    store.flush()

    assert syncs == []
    assert sum(len(read_all(store, "t", q)) for q in range(4)) == 41
    assert read_checkpoint(store_path / "checkpoint").dispatched == tail(store)


def test_a_flush_after_recovery_cut_the_log_below_the_checkpoint_still_syncs_what_it_wrote(
    tmp_path, monkeypatch
):
    path = tmp_path / "s"
    config = small_config(flush_interval_ms=600_000)
    with MessageStore.open(path, config) as store:
        store.create_topic("t", queues=1, layout="files")
        store.append_batch("t", [f"m{i}".encode() for i in range(30)])
        cut_at = store.read("t", 0, 10, max_messages=1)[0].commit_offset
    for segment in segment_paths(path):  # the log lost from record 10 on, with its entries
        if int(segment.name) > cut_at:
            segment.unlink()
        else:
            last = segment
    with open(last, "r+b") as handle:
        handle.truncate(cut_at - int(last.name))
    queue_file = path / "consumequeue" / "t" / "0" / "00000000000000000000"
    with open(queue_file, "r+b") as handle:
        handle.truncate(10 * ENTRY_SIZE)

    with MessageStore.open(path, config) as store:
        assert read_checkpoint(path / "checkpoint").commitlog_flushed > tail(store)
        store.append("t", b"after the cut")
        syncs = _recorded_fdatasyncs(monkeypatch)
        store.flush()

    # below the checkpoint's watermark, but written after it: no other process synced it
    assert any("/commitlog/" in synced for synced in syncs)
    assert any("/consumequeue/" in synced for synced in syncs)
