"""The native fault seam (native/src/python/io_seam.rs): the store core's writes at named
sites, shown to the fault plan (``FaultyFS``), which may fail them with an
errno, kill the process before or after the n-th one, and records them in its
power-loss model in order with the Python side's writes. The core keeps running under
such a plan, where it declines under any other."""

from __future__ import annotations

import errno
import random
from pathlib import Path

import pytest

from storeadapter.engine import DiskFullError, MessageStore, StoreConfig, clock
from tests.engine.storetools import read_all, run_until_killed
from tests.faults.faultyfs import FaultyFS, skip_syncs

PINNED_MS = 1_750_000_000_000
# Written by flushes or opens whose bytes depend on the wall clock or the process
# (a slot's time, the recovery report's durations, locks, the mapped shared state),
# not by appends.
_VOLATILE = {
    "state",
    "checkpoint",
    "store.json",
    "recovery.json",
    "write.lock",
    "store.lock",
    "abort",
}


def config(mode: str = "async") -> StoreConfig:
    return StoreConfig(
        flush_mode=mode,
        segment_bytes=1 << 20,
        queue_file_entries=4096,
        index_slots=64,
        index_entries=512,
        flush_interval_ms=600_000,
    )


def workload(path: Path, mode: str = "async") -> dict[str, int]:
    """Singles, plain batches and dict batches (tags, keys, properties) to a topic of
    files per queue, and dict batches to a shared topic, with the clock pinned; what the
    native calls did."""
    clock.pin(PINNED_MS)
    try:
        with MessageStore.open(path, config(mode)) as store:
            store.create_topic("t", queues=3, layout="files")
            store.create_topic("shared", queues=2, layout="shared")
            for i in range(400):
                store.append("t", b"single-%04d" % i)
            for b in range(8):
                store.append_batch("t", [b"plain-%d-%d" % (b, i) for i in range(60)])
            for b in range(4):
                items = [
                    {"body": b"dict-%d-%d" % (b, i), "tag": f"tag{i % 5}", "key": f"k{i}"}
                    for i in range(40)
                ]
                store.append_batch("t", items)
            for b in range(6):
                items = [{"body": b"block-%d-%d" % (b, i), "tag": "x"} for i in range(30)]
                store.append_batch("shared", items)
            core = store._appender
            done = {"appended": core.appended, "batched": core.batched, "marked": core.marked}
            store.flush()
        return done
    finally:
        clock.pin(None)


def data_files(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.name not in _VOLATILE and "offsets" not in p.parts
    }


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_one_workload_under_the_direct_and_the_recording_io_writes_the_same_bytes(tmp_path, mode):
    direct = workload(tmp_path / "direct", mode)
    with FaultyFS(tmp_path / "recorded") as fs:
        recorded = workload(tmp_path / "recorded", mode)
        image = fs.capture()

    # The core ran under the plan (it declines under a plan without native sites) and
    # the plan saw its calls by site.
    assert recorded["appended"] > 350 and recorded["batched"] >= 15, recorded
    assert direct["appended"] > 350, direct
    assert fs.native_calls.get("log.record", 0) >= recorded["appended"]
    assert fs.native_calls.get("queue.entry", 0) >= recorded["appended"]
    assert fs.native_calls.get("timeindex.mark", 0) > 0
    assert fs.native_calls.get("queue.reserve", 0) >= 3
    assert fs.native_calls.get("block.entry", 0) >= 5
    assert (fs.native_calls.get("log.sync", 0) > 0) == (mode == "sync")
    assert data_files(tmp_path / "direct") == data_files(tmp_path / "recorded")
    # Every write reached the model, in order: its image with no page lost is the
    # directory as it is.
    shown = image.materialize(tmp_path / "image", pages=lambda _path, _page: False)
    assert data_files(shown) == data_files(tmp_path / "recorded")


def test_a_plan_without_native_sites_still_turns_the_core_down(tmp_path):
    with (
        FaultyFS(tmp_path / "s", native=False) as fs,
        MessageStore.open(tmp_path / "s", config()) as store,
    ):
        store.create_topic("t", queues=2, layout="files")
        for i in range(50):
            store.append("t", b"m%d" % i)
        assert store._appender.appended == 0
    assert fs.native_calls == {}


@pytest.mark.parametrize("site", ["queue.entry", "log.record"])
def test_a_site_failed_with_enospc_is_a_disk_full_error_and_nothing_acknowledged_is_lost(
    tmp_path, site
):
    path = tmp_path / "s"
    with FaultyFS(path) as fs, MessageStore.open(path, config()) as store:
        store.create_topic("t", queues=2, layout="files")
        acked = [store.append("t", b"m%03d" % i) for i in range(100)]
        before = store._appender.appended
        fs.fail(site, errno.ENOSPC)
        with pytest.raises(DiskFullError):
            store.append("t", b"refused")
        assert store._appender.appended == before
        assert fs.failures and fs.failures[0].errno == errno.ENOSPC
    with MessageStore.open(path, config()) as store:
        bodies = sorted(m.body for q in range(2) for m in read_all(store, "t", q))
        assert bodies == sorted(b"m%03d" % i for i in range(100))
        assert len(acked) == 100
        store.append("t", b"after")


_KILLED = r"""
import sys
from pathlib import Path
from storeadapter.engine import MessageStore
from tests.faults.faultyfs import FaultyFS, skip_syncs
from tests.faults.test_native_io import config

path, site, nth, when = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
acked = Path(sys.argv[5])
with FaultyFS(path) as fs:
    store = MessageStore.open(path, config())
    store.create_topic("t", queues=2, layout="files")
    fs.kill_at(site, nth, when)
    with acked.open("a") as out:
        for i in range(100000):
            store.append("t", b"k%05d" % i)
            out.write(f"{i}\n")
            out.flush()
"""


@pytest.mark.parametrize(
    ("site", "nth", "when"),
    [
        ("queue.entry", 150, "before"),
        ("queue.entry", 151, "after"),
        ("log.record", 97, "after"),
        ("timeindex.mark", 2, "before"),
    ],
)
def test_a_kill_at_a_native_site_loses_nothing_acknowledged(tmp_path, site, nth, when):
    path, acked = tmp_path / "s", tmp_path / "acked"
    run_until_killed(_KILLED, path, site, nth, when, acked)
    done = [int(line) for line in acked.read_text().split()]
    assert done, "the child was killed before its first acknowledgement"
    with MessageStore.open(path, config()) as store:
        bodies = {m.body for q in range(2) for m in read_all(store, "t", q)}
        missing = [i for i in done if b"k%05d" % i not in bodies]
        assert missing == []
        store.append("t", b"after")


_OVERTAKEN = """
import os
import sys
import threading
from pathlib import Path

from tests.faults.faultyfs import FaultyFS

path = Path(sys.argv[1])
(path / "commitlog").mkdir(parents=True)
fd = os.open(path / "commitlog" / "00000000000000000000", os.O_RDWR | os.O_CREAT)
fs = FaultyFS(path)
fs.kill_at("log.sync", 1, "after")
began, go_on = threading.Event(), threading.Event()


def native_sync() -> None:
    # The group commit's fdatasync: the plan sees its two phases apart, the system call
    # between them without the plan's lock.
    fs._native_call("log.sync", fd, 0, None, "before")
    began.set()
    go_on.wait()
    fs._native_call("log.sync", fd, 0, None, "after")


syncer = threading.Thread(target=native_sync)
syncer.start()
began.wait()
fs.fdatasync(fd)  # the Python side's fdatasync of the log meanwhile: the second call
go_on.set()
syncer.join()
print("not killed")
"""


def test_a_kill_after_the_nth_native_call_comes_though_another_call_overtook_it(tmp_path):
    # The first call at log.sync is the native one; a Python-side call at the same site
    # begins and ends before it ends: the kill comes after the first, not never.
    child = run_until_killed(_OVERTAKEN, tmp_path / "s")

    assert "not killed" not in child.stdout


_NATIVE_SITES = ("log.record", "queue.entry", "timeindex.mark")


def test_power_loss_amid_native_calls_keeps_every_flushed_message(tmp_path):
    """Images of the power-loss model taken at every 7th native write and after every
    other operation of a workload the core writes (singles, plain and dict batches,
    queue files rolling), kept as a power loss would leave them (only fsynced bytes;
    any subset of the unsynced pages; a prefix of the unsynced writes, torn: one of
    these per image, in turn): each, opened (recovery), holds every message acknowledged
    before the last completed flush, intact at its queue offset, and none that was not
    sent."""
    path = tmp_path / "s"
    cfg = StoreConfig(
        flush_mode="async",
        segment_bytes=64 << 10,
        queue_file_entries=64,
        index_slots=64,
        index_entries=512,
        flush_interval_ms=600_000,
    )
    rng = random.Random(31)
    sent: list[tuple[int, int, bytes]] = []
    flushed = 0
    images = []
    writes = 0

    def on_op(op: str) -> None:
        nonlocal writes
        if op in _NATIVE_SITES:
            writes += 1
            if writes % 7 == 0:
                images.append(fs.capture(f"native write {writes} ({op})", flushed))

    with FaultyFS(path) as fs:
        store = MessageStore.open(path, cfg)
        store.create_topic("t", queues=3, layout="files")
        store.flush()
        fs.on_op = on_op
        try:
            for step in range(80):
                choice = rng.random()
                if choice < 0.5:
                    body = rng.randbytes(rng.randint(1, 200))
                    results, bodies = [store.append("t", body)], [body]
                elif choice < 0.75:
                    bodies = [rng.randbytes(rng.randint(1, 120)) for _ in range(rng.randint(2, 9))]
                    results = store.append_batch("t", bodies)
                elif choice < 0.9:
                    bodies = [rng.randbytes(rng.randint(1, 80)) for _ in range(rng.randint(2, 6))]
                    results = store.append_batch(
                        "t", [{"body": b, "tag": "x", "key": f"k{i}"} for i, b in enumerate(bodies)]
                    )
                else:
                    store.flush()
                    flushed = len(sent)
                    results, bodies = [], []
                sent += [(r.queue, r.queue_offset, b) for r, b in zip(results, bodies, strict=True)]
                if step % 2:
                    images.append(fs.capture(f"after operation {step}", flushed))
            native = (store._appender.appended, store._appender.batched)
        finally:
            fs.on_op = None
            store.close()
    assert native[0] > 20 and native[1] > 10, native
    assert writes > 100
    assert 0 < flushed < len(sent)
    sent_bodies = {(queue, offset): body for queue, offset, body in sent}
    for number, image in enumerate(images):
        for variant in [("durable", "pages", "torn")[number % 3]]:
            dest = tmp_path / f"image-{number}-{variant}"
            image.materialize(
                dest,
                torn=rng if variant == "torn" else None,
                pages=rng if variant == "pages" else None,
            )
            with skip_syncs(), MessageStore.open(dest, cfg) as opened:
                found = {
                    (q, m.queue_offset): m.body for q in range(3) for m in read_all(opened, "t", q)
                }
            for queue, offset, body in sent[: image.meta]:
                assert found.get((queue, offset)) == body, (image.label, variant, queue, offset)
            strays = [key for key, body in found.items() if sent_bodies.get(key) != body]
            assert strays == [], (image.label, variant, strays[:5])
