"""The native seam's sites beyond the writes of a plain append (native/src/python/io_seam.rs):
``log.sync`` (the group commit's fdatasync, on its own thread), ``queue.reserve`` (the
``fallocate`` of a queue file's window before the core stores entries into it) and
``block.entry`` (a shared topic's entries stored into its block files). A fault plan
(``FaultyFS``) fails them with an errno, kills the process before or after
the n-th one, and records them in its power-loss model; the core keeps running under it
(in sync mode too)."""

from __future__ import annotations

import errno
import threading

import pytest

from storeadapter.engine import DiskFullError, MessageStore, StoreConfig
from storeadapter.engine.errors import StoreFailedError
from tests.engine.storetools import read_all, run_until_killed
from tests.faults.faultyfs import FaultyFS

THREADS = 6


def config(mode: str) -> StoreConfig:
    """The tests' store in ``mode``: 4 MiB segments in sync mode, 1 MiB in async."""
    return StoreConfig(
        flush_mode=mode,
        segment_bytes=(4 if mode == "sync" else 1) << 20,
        queue_file_entries=4096,
        index_slots=64,
        index_entries=512,
        flush_interval_ms=600_000,
    )


def _until(predicate, what: str) -> None:
    pause = threading.Event()
    for _ in range(3000):
        if predicate():
            return
        pause.wait(0.01)
    raise AssertionError(f"never: {what}")


def test_sync_appends_run_natively_under_a_plan_and_their_fdatasyncs_are_log_sync(tmp_path):
    path = tmp_path / "s"
    with FaultyFS(path) as fs, MessageStore.open(path, config("sync")) as store:
        store.create_topic("t", queues=2, layout="files")
        for i in range(40):
            store.append("t", b"m%02d" % i)
        assert store._appender.appended >= 38
        assert fs.native_calls.get("log.sync", 0) >= 1
    with MessageStore.open(path, config("sync")) as store:
        assert sorted(m.body for q in range(2) for m in read_all(store, "t", q)) == [
            b"m%02d" % i for i in range(40)
        ]


@pytest.mark.parametrize(
    ("code", "error_type"), [(errno.EIO, StoreFailedError), (errno.ENOSPC, DiskFullError)]
)
def test_a_failed_log_sync_under_the_group_commit_reaches_every_waiter_as_a_typed_error(
    tmp_path, code, error_type
):
    path = tmp_path / "s"
    with FaultyFS(path) as fs, MessageStore.open(path, config("sync")) as store:
        store.create_topic("t", queues=2, layout="files")
        for queue in range(2):
            store.append("t", b"durable", queue=queue)
        store.append("t", b"durable")  # the group commit has the segment now
        written = store._appender.appended
        assert written >= 1
        store._log_syncer.hold_syncs(True)
        outcomes: list = [None] * THREADS

        def append(i: int) -> None:
            try:
                outcomes[i] = store.append("t", b"lost-%d" % i)
            except Exception as error:  # noqa: BLE001 - the test looks at it
                outcomes[i] = error

        # One at a time: each written natively, then waiting for the group commit (a
        # thread that found another one writing would take the long way instead).
        threads = [threading.Thread(target=append, args=(i,)) for i in range(THREADS)]
        for number, thread in enumerate(threads, 1):
            thread.start()
            _until(lambda n=number: store._appender.appended >= written + n, "written")
        assert outcomes == [None] * THREADS  # all of them wait
        fs.fail("log.sync", code)
        store._log_syncer.hold_syncs(False)
        for thread in threads:
            thread.join()
        for outcome in outcomes:
            assert isinstance(outcome, error_type), outcome
        assert [e.errno for e in fs.failures] == [code]
        with pytest.raises(StoreFailedError):
            store.append("t", b"after")


_KILLED = r"""
import sys
from pathlib import Path
from storeadapter.engine import MessageStore
from tests.faults.faultyfs import FaultyFS
from tests.faults.test_native_sites import config as store_config

path, site, when, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[4], sys.argv[5]
nth = int(sys.argv[3])
acked = Path(sys.argv[6])
config = store_config(mode)
with FaultyFS(path) as fs:
    store = MessageStore.open(path, config)
    layout = "shared" if site == "block.entry" else "files"
    store.create_topic("t", queues=2, layout=layout)
    fs.kill_at(site, nth, when)
    with acked.open("a") as out:
        for i in range(3000):
            if layout == "shared":
                items = [{"body": b"k%05d-%d" % (i, j), "tag": "x"} for j in range(5)]
                bodies = [item["body"] for item in items]
                store.append_batch("t", items)
            else:
                bodies = [b"k%05d" % i]
                store.append("t", bodies[0])
            out.write("".join(b.decode() + "\n" for b in bodies))
            out.flush()
"""


@pytest.mark.parametrize(
    ("site", "nth", "when", "mode"),
    [
        ("log.sync", 30, "before", "sync"),
        ("log.sync", 31, "after", "sync"),
        ("block.entry", 40, "before", "async"),
        ("block.entry", 41, "after", "async"),
    ],
)
def test_a_kill_at_a_site_loses_nothing_acknowledged(tmp_path, site, nth, when, mode):
    path, acked = tmp_path / "s", tmp_path / "acked"
    run_until_killed(_KILLED, path, site, nth, when, mode, acked)
    done = acked.read_text().split()
    assert done, "the child was killed before its first acknowledgement"
    with MessageStore.open(path, config(mode)) as store:
        bodies = {m.body.decode() for q in range(2) for m in read_all(store, "t", q)}
        assert [body for body in done if body not in bodies] == []
        store.append("t", b"after")


def test_enospc_at_a_window_reservation_is_disk_full_and_the_store_writes_after_space_returns(
    tmp_path,
):
    path = tmp_path / "s"
    with FaultyFS(path) as fs, MessageStore.open(path, config("async")) as store:
        store.create_topic("t", queues=1, layout="files")
        acked = [store.append("t", b"m%05d" % i) for i in range(8)]  # the first window
        assert fs.native_calls.get("queue.reserve", 0) == 1
        fs.fail("queue.reserve", errno.ENOSPC)
        refused = None
        for i in range(8, 5000):
            try:
                acked.append(store.append("t", b"m%05d" % i))
            except DiskFullError:
                refused = i
                break
        assert refused is not None, "no window was reserved past the first"
        assert [e.errno for e in fs.failures] == [errno.ENOSPC]
        # As any failed write: the store refuses writes until it is reopened.
        with pytest.raises(StoreFailedError):
            store.append("t", b"refused")
    with FaultyFS(path) as fs, MessageStore.open(path, config("async")) as store:
        fs.adopt()
        store.append("t", b"after")  # space returned: the window is reserved now
        assert fs.native_calls.get("queue.reserve") == 1
        assert store._appender.appended == 1
        bodies = [m.body for m in read_all(store, "t", 0)]
    assert bodies == [b"m%05d" % i for i in range(refused)] + [b"after"]
    assert len(acked) == refused
