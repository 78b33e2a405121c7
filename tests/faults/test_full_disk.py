"""A real full disk (a 4 MiB tmpfs filled with a ballast file), with a fault-filesystem
twin for each case where mounting is not allowed (issue 17, cases 1, 6 and 8).

* A batch that meets ENOSPC after part of it reached the log fails with DiskFullError and
  leaves its extent marked: the next writer (another process, once space is back) clears
  all of it before writing, so no message of the failed batch ever shows up and no
  acknowledged message is replaced, after a clean restart either.
* A segment roll on a full disk fails with DiskFullError before anything is acknowledged
  into the new segment: no sparse segment that fails later, mid-record.
* Single appends (the native one-call append among them) on a full disk end in
  DiskFullError, never a SIGBUS: the ``state`` file's mapping is reserved whole.
* Topic changes whose ``topics.json`` cannot be saved raise a typed StoreError and leave
  the store as it was, in memory and after a reopen.
"""

from __future__ import annotations

import errno
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from storeadapter.engine import (
    DiskFullError,
    MessageStore,
    StoreConfig,
    StoreError,
    TopicNotFoundError,
)
from tests.engine.storetools import read_all
from tests.faults.faultharness import (
    TOPIC,
    Ack,
    body_digest,
    check_store,
    make_body,
    sized_body,
)
from tests.faults.faultyfs import FaultyFS
from tests.faults.smalldisk import small_disk

REPO = Path(__file__).resolve().parents[2]
SEGMENT = 64 << 10
MODES = ("sync", "async")


def disk_config(mode: str) -> StoreConfig:
    return StoreConfig(
        segment_bytes=SEGMENT,
        max_message_bytes=16 << 10,
        queue_file_entries=64,
        index_slots=64,
        index_entries=512,
        flush_mode=mode,
        flush_interval_ms=600_000,
        flush_timeout_ms=600_000,
        disk_warn_ratio=1.0,
        disk_force_ratio=1.0,
        disk_reject_ratio=1.0,
    )


def _acks(results, bodies) -> list[Ack]:
    return [
        Ack(r.message_id, r.queue, r.queue_offset, r.commit_offset, body_digest(b))
        for r, b in zip(results, bodies, strict=True)
    ]


def _spill_batch(store: MessageStore, rng: random.Random) -> list[bytes]:
    """Bodies that fill what is left of the active segment and go on into the next."""
    left = SEGMENT - store.stats().commit_log.tail % SEGMENT
    size = min(12_000, max(200, left // 3))
    return [sized_body("fails", n, size) for n in range(6)]


def _start(path: Path, mode: str, rng: random.Random) -> tuple[MessageStore, list[Ack]]:
    store = MessageStore.open(path, disk_config(mode))
    store.create_topic(TOPIC, queues=4)
    bodies = [make_body(rng, "before", n) for n in range(20)]
    acked = _acks(store.append_batch(TOPIC, bodies), bodies)
    store.flush()
    return store, acked


def _after_space_is_back(path: Path, mode: str, rng: random.Random) -> list[Ack]:
    """Another process (a second store object) appends and is acknowledged."""
    acked = []
    with MessageStore.open(path, disk_config(mode)) as other:
        for number in range(12):
            body = make_body(rng, "after", number, 40)
            acked += _acks([other.append(TOPIC, body)], [body])
    return acked


def _check_clean_restart(path: Path, mode: str, acked: list[Ack]) -> None:
    with MessageStore.open(path, disk_config(mode)) as store:
        found = check_store(store, acked, context="after a restart")
        assert found.lost == [], f"acknowledged messages lost or replaced: {found.lost}"
        failed = [m for m in found.messages.values() if m.body[16:].startswith(b"fails:")]
        assert failed == [], "messages of the batch that failed are in the queues"


@pytest.mark.parametrize("mode", MODES)
def test_a_batch_failing_half_way_on_a_full_disk_never_replaces_a_later_message(tmp_path, mode):
    rng = random.Random(1)
    with small_disk(tmp_path) as disk:
        path = disk.path / "store"
        store, acked = _start(path, mode, rng)
        disk.fill()
        with pytest.raises(DiskFullError):
            store.append_batch(TOPIC, _spill_batch(store, rng))
        disk.free()
        acked += _after_space_is_back(path, mode, rng)
        store.close()
        _check_clean_restart(path, mode, acked)


@pytest.mark.parametrize("mode", MODES)
def test_a_batch_failing_half_way_with_enospc_from_the_fault_filesystem(tmp_path, mode):
    rng = random.Random(2)
    path = tmp_path / "store"
    with FaultyFS(path, real_sync=False) as fs:
        store, acked = _start(path, mode, rng)
        next_segment = f"{(store.stats().commit_log.tail // SEGMENT + 1) * SEGMENT:020d}"
        fs.fail("pwrite_all", errno.ENOSPC, path_part=next_segment, times=None)
        with pytest.raises(DiskFullError):
            store.append_batch(TOPIC, _spill_batch(store, rng))
        fs.clear_faults()
        acked += _after_space_is_back(path, mode, rng)
        store.close()
    _check_clean_restart(path, mode, acked)


@pytest.mark.parametrize("mode", MODES)
def test_a_segment_roll_on_a_full_disk_fails_before_anything_is_acknowledged_into_it(
    tmp_path, mode
):
    rng = random.Random(3)
    with small_disk(tmp_path) as disk:
        path = disk.path / "store"
        store, acked = _start(path, mode, rng)
        disk.fill(leave=8192)  # room for a page or two of a sparse segment, not for a segment
        segments = len(store.stats().segments)
        with pytest.raises(DiskFullError):
            for number in range(400):  # until a roll is needed
                body = sized_body("roll", number, 300)
                acked += _acks([store.append(TOPIC, body)], [body])
        assert len(store.stats().segments) == segments, "a segment was added"
        assert not any(ack.commit_offset >= segments * SEGMENT for ack in acked)
        commitlog = sorted(p.name for p in (path / "commitlog").iterdir())
        assert len(commitlog) == segments, f"a new segment file was left: {commitlog}"
        store.close()
        disk.free()
        _check_clean_restart(path, mode, acked)


def _topic_changes(store: MessageStore) -> dict:
    return {
        "create": lambda: store.create_topic("more", queues=2),
        "add-queues": lambda: store.add_queues(TOPIC, 2),
        "freeze": lambda: store.freeze_queue(TOPIC, 1),
        "delete": lambda: store.delete_topic(TOPIC),
    }


def _topics_view(store: MessageStore) -> list[tuple]:
    return [(t.name, t.queues, tuple(t.frozen)) for t in store.topics()]


@pytest.mark.parametrize("change", ["create", "add-queues", "freeze", "delete"])
def test_a_topic_change_that_cannot_be_saved_on_a_full_disk_changes_nothing(tmp_path, change):
    rng = random.Random(4)
    with small_disk(tmp_path) as disk:
        path = disk.path / "store"
        store, acked = _start(path, "sync", rng)
        before = _topics_view(store)
        disk.fill()
        with pytest.raises(StoreError) as raised:
            _topic_changes(store)[change]()
        assert type(raised.value) is DiskFullError, raised.value
        assert _topics_view(store) == before
        with pytest.raises(TopicNotFoundError):
            store.append("more", b"x")
        disk.free()
        body = make_body(rng, "later", 0)
        acked += _acks([store.append(TOPIC, body)], [body])
        store.close()
        with MessageStore.open(path, disk_config("sync")) as reopened:
            assert _topics_view(reopened) == before
            assert check_store(reopened, acked).lost == []


@pytest.mark.parametrize("change", ["create", "add-queues", "freeze", "delete"])
def test_a_topic_change_that_cannot_be_saved_with_enospc_from_the_fault_filesystem(
    tmp_path, change
):
    rng = random.Random(5)
    path = tmp_path / "store"
    with FaultyFS(path) as fs:
        store, acked = _start(path, "sync", rng)
        before = _topics_view(store)
        fs.fail(("write_atomic", "pwrite_all"), errno.ENOSPC, path_part="topics.json")
        with pytest.raises(DiskFullError):
            _topic_changes(store)[change]()
        fs.clear_faults()
        assert _topics_view(store) == before
        body = make_body(rng, "later", 0)
        acked += _acks([store.append(TOPIC, body)], [body])
        store.close()
    with MessageStore.open(path, disk_config("sync")) as reopened:
        assert _topics_view(reopened) == before
        assert check_store(reopened, acked).lost == []


def test_a_failed_batch_is_cleared_by_its_own_writer_when_no_other_writes_after(tmp_path):
    """The writer whose batch failed zeroes what it wrote (the space was reserved), so
    a restart with no other writer in between shows none of it either."""
    rng = random.Random(6)
    path = tmp_path / "store"
    with FaultyFS(path) as fs:
        store, acked = _start(path, "sync", rng)
        reader = MessageStore.open(path, disk_config("sync"))
        next_segment = f"{(store.stats().commit_log.tail // SEGMENT + 1) * SEGMENT:020d}"
        fs.fail("pwrite_all", errno.ENOSPC, path_part=next_segment, times=None)
        with pytest.raises(DiskFullError):
            store.append_batch(TOPIC, _spill_batch(store, rng))
        fs.clear_faults()
        store.close()
        reader.close()  # the last to close, having written nothing
    assert sorted(p.name for p in (path / "commitlog").iterdir()) == [f"{0:020d}"]
    with MessageStore.open(path, disk_config("sync")) as reopened:
        for number in range(30):
            body = make_body(rng, "after", number, 40)
            acked += _acks([reopened.append(TOPIC, body)], [body])
    _check_clean_restart(path, "sync", acked)


def child_config(**fields) -> StoreConfig:
    """The children's store: a 1 MiB segment that holds every append they make, flushed
    only when asked, and no disk-use guard to refuse appends before the disk is full."""
    return StoreConfig(
        segment_bytes=1 << 20,
        index_slots=64,
        index_entries=512,
        flush_mode="async",
        flush_interval_ms=600_000,
        disk_warn_ratio=1.0,
        disk_force_ratio=1.0,
        disk_reject_ratio=1.0,
        **fields,
    )


def appends_until_the_disk_is_full(script: str, mount: Path) -> list[str]:
    """Run ``script`` in a child (a store into a hole of a mapping on a full disk would
    end it with SIGBUS) and return what it printed after its ``DiskFullError``."""
    child = subprocess.run(
        [sys.executable, "-c", script, str(mount)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    word, *printed = child.stdout.split()
    assert word == "DiskFullError"
    return printed


_SINGLE_APPENDS = r"""
import sys
from pathlib import Path
from storeadapter.engine import DiskFullError, MessageStore
from tests.faults.smalldisk import SmallDisk
from tests.faults.test_full_disk import single_append_config

mount = Path(sys.argv[1])
store = MessageStore.open(mount / "store", single_append_config())
store.create_topic("t", queues=4)
for _ in range(8):  # each queue's files made (a new file meets a full disk in Python)
    store.append("t", b"before")
SmallDisk(mount).fill()
acknowledged = 8
try:
    for _ in range(5000):
        store.append("t", b"x" * 50)
        acknowledged += 1
except DiskFullError:
    print("DiskFullError", acknowledged, store._appender.appended)
"""


def single_append_config() -> StoreConfig:
    """Room for thousands of single appends in one segment and one file per queue, so
    that the disk fills at a queue file's new page, under the native append."""
    return child_config(queue_file_entries=1024)


def test_single_appends_on_a_full_disk_end_in_disk_full_error_never_a_sigbus(tmp_path):
    # The `state` file's ring of notes was sparse once, on every path: a SIGBUS.
    with small_disk(tmp_path) as disk:
        acknowledged, native = appends_until_the_disk_is_full(_SINGLE_APPENDS, disk.path)
        assert int(native) > 0, "the native append wrote until the disk was full"
        disk.free()
        with MessageStore.open(disk.path / "store", single_append_config()) as store:
            ranges = [store.queue_range("t", queue) for queue in range(4)]
            assert sum(high - low for low, high in ranges) == int(acknowledged)


_WINDOW_APPENDS = r"""
import sys
from pathlib import Path
from storeadapter.engine import DiskFullError, MessageStore
from tests.faults.smalldisk import SmallDisk
from tests.faults.test_full_disk import window_config

mount = Path(sys.argv[1])
store = MessageStore.open(mount / "store", window_config())
store.create_topic("t", queues=1)
acknowledged = 0
for _ in range(8):  # the queue's first window reserved, its time index made
    store.append("t", b"m%06d" % acknowledged)
    acknowledged += 1
SmallDisk(mount).fill()
try:
    for _ in range(12000):
        store.append("t", b"m%06d" % acknowledged)
        acknowledged += 1
except DiskFullError:
    print("DiskFullError", acknowledged, store._appender.appended, store._appender.reserved)
"""


def window_config() -> StoreConfig:
    """One queue whose file (16,384 entries, 320 KiB) holds several reserved windows,
    and a segment (1 MiB) that holds every append the test makes."""
    return child_config(queue_file_entries=16384)


def test_a_full_disk_at_a_queue_window_extension_is_a_disk_full_error(tmp_path):
    with small_disk(tmp_path) as disk:
        acknowledged, native, reserved = appends_until_the_disk_is_full(_WINDOW_APPENDS, disk.path)
        # The entries went into the window reserved before the disk filled (64 KiB:
        # 3,276 entries, far past the page a pwrite would have failed on), and the
        # error came at the next window's reservation.
        assert int(acknowledged) >= 3000 and int(native) >= 2900
        assert int(reserved) >= 1
        disk.free()
        with MessageStore.open(disk.path / "store", window_config()) as store:
            assert store.queue_range("t", 0) == (0, int(acknowledged))
            more = [store.append("t", b"m%06d" % n) for n in range(int(acknowledged), 5000)]
            assert [r.queue_offset for r in more] == list(range(int(acknowledged), 5000))
            store.append_batch("t", [b"m%06d" % n for n in range(5000, 5400)])
        with MessageStore.open(disk.path / "store", window_config()) as store:
            bodies = [m.body for m in read_all(store, "t", 0)]
            assert bodies == [b"m%06d" % n for n in range(5400)]


_SHARED_BATCHES = r"""
import sys
from pathlib import Path
from storeadapter.engine import DiskFullError, MessageStore
from tests.faults.smalldisk import SmallDisk
from tests.faults.test_full_disk import shared_batch_config

mount = Path(sys.argv[1])
store = MessageStore.open(mount / "store", shared_batch_config())
store.create_topic("t", queues=40, layout="shared")
store.append_batch("t", [{"body": b"before", "queue": q} for q in range(40)])
SmallDisk(mount).fill()
acknowledged = 40
native = store._appender.batched
try:
    for b in range(5000):
        batch = [{"body": b"x" * 50, "queue": (b * 7 + i) % 40} for i in range(20)]
        store.append_batch("t", batch)
        acknowledged += len(batch)
except DiskFullError:
    print("DiskFullError", acknowledged, store._appender.batched - native)
"""


def shared_batch_config() -> StoreConfig:
    """A shared topic whose block files fill after a few hundred entries (a new file
    meets the full disk in Python); its blocks are stored natively into mappings."""
    return child_config(shared_block_entries=4, shared_blocks_per_file=64)


def test_shared_batches_on_a_full_disk_end_in_disk_full_error_never_a_sigbus(tmp_path):
    # shared_core.rs reserves a block file's space before mapping it.
    with small_disk(tmp_path) as disk:
        acknowledged, native = appends_until_the_disk_is_full(_SHARED_BATCHES, disk.path)
        assert int(native) > 0, "the native shared batch wrote until the disk was full"
        disk.free()
        with MessageStore.open(disk.path / "store", shared_batch_config()) as store:
            ranges = [store.queue_range("t", queue) for queue in range(40)]
            assert sum(high - low for low, high in ranges) == int(acknowledged)
            for queue in (0, 13, 39):
                low, high = ranges[queue]
                found = store.read("t", queue, low, max_messages=high - low + 1)
                assert [m.queue_offset for m in found] == list(range(low, high))
