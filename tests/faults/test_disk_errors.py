"""A full or failing disk (issue 8): ENOSPC and EIO from writes and fsyncs, and the
disk-use thresholds.

Faults are injected with FaultyFS into ``fileio``. When a write or fsync fails, the call
that needed it raises a typed error with a sentence (DiskFullError for ENOSPC,
StoreFailedError otherwise); the store then refuses every later write
(StoreFailedError) until it is reopened, still serves reads, and loses nothing it had
acknowledged, neither when reopened nor after a power loss at that moment.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path

import pytest

from storeadapter.engine import (
    DiskFullError,
    Message,
    MessageStore,
    StoreError,
    StoreFailedError,
)
from tests.engine.storetools import read_everything, small_config
from tests.faults.faultyfs import FaultyFS, skip_syncs


@dataclass(frozen=True)
class Scenario:
    """Which call fails, and what the test does to reach it."""

    name: str
    mode: str
    ops: tuple[str, ...]
    path_part: str
    trigger: str  # "append", "keyed-append", "roll" or "flush"


SCENARIOS = [
    Scenario("log-write", "sync", ("pwrite_all",), "commitlog", "append"),
    Scenario("log-write", "async", ("pwrite_all",), "commitlog", "append"),
    Scenario("queue-write", "sync", ("pwrite_all",), "consumequeue", "append"),
    Scenario("queue-write", "async", ("pwrite_all",), "consumequeue", "append"),
    Scenario("index-write", "async", ("pwrite_all",), "index", "keyed-append"),
    Scenario("segment-reserve", "async", ("preallocate",), "commitlog", "roll"),
    Scenario("log-fsync", "sync", ("fdatasync", "fsync"), "commitlog", "append"),
    Scenario("log-fsync", "async", ("fdatasync", "fsync"), "commitlog", "flush"),
    Scenario("queue-fsync", "async", ("fdatasync", "fsync"), "consumequeue", "flush"),
    Scenario("checkpoint-fsync", "async", ("fdatasync",), "checkpoint", "flush"),
]
ERRNOS = {"ENOSPC": errno.ENOSPC, "EIO": errno.EIO}
CASES = [
    pytest.param(scenario, name, id=f"{scenario.name}-{scenario.mode}-{name}")
    for scenario in SCENARIOS
    for name in ERRNOS
]


def config(mode: str):
    return small_config(flush_mode=mode, flush_interval_ms=600_000, flush_timeout_ms=600_000)


@dataclass
class Failed:
    """A store that met the fault, and what it had acknowledged before."""

    store: MessageStore
    fs: FaultyFS
    path: Path
    acked: dict[str, bytes]  # message id -> body
    error: BaseException
    image_acked: dict[str, bytes]  # what a power loss right after the fault must keep
    image: object


def _fill(store: MessageStore, acked: dict[str, bytes], count: int, start: int) -> None:
    for i in range(start, start + count):
        body = f"message {i} ".encode() * 8
        result = store.append("t", body, key=f"k{i % 3}")
        acked[result.message_id] = body


def meet_fault(tmp_path: Path, scenario: Scenario, code: int, opened: list) -> Failed:
    path = tmp_path / "store"
    fs = FaultyFS(path)
    fs.install()
    opened.append(fs)
    store = MessageStore.open(path, config(scenario.mode))
    opened.append(store)
    store.create_topic("t", queues=2)
    acked: dict[str, bytes] = {}
    _fill(store, acked, 20, 0)
    store.flush()
    _fill(store, acked, 3, 20)  # acknowledged (in sync mode: fsynced) after the last flush
    durable = dict(acked) if scenario.mode == "sync" else dict(list(acked.items())[:20])
    fs.fail(scenario.ops, code, path_part=scenario.path_part, times=None)
    error = None
    try:
        if scenario.trigger == "flush":
            store.flush()
        elif scenario.trigger == "roll":
            for _ in range(100):  # until a new segment is needed
                store.append("t", b"r" * 600)
        elif scenario.trigger == "keyed-append":
            store.append_batch("t", [Message(b"keyed", key="k-new")])
        else:
            store.append("t", b"the one that fails")
    except StoreError as raised:
        error = raised
    image = fs.capture("after the fault")
    return Failed(store, fs, path, acked, error, durable, image)


@pytest.fixture
def meet(tmp_path):
    """``meet(scenario, name)``: a store that met the fault; cleaned up afterwards."""
    opened: list = []
    yield lambda scenario, name: meet_fault(tmp_path, scenario, ERRNOS[name], opened)
    for thing in reversed(opened):
        if isinstance(thing, FaultyFS):
            thing.uninstall()
        else:
            thing.close()


def _expected_class(name: str) -> type[StoreError]:
    return DiskFullError if name == "ENOSPC" else StoreFailedError


@pytest.mark.parametrize(("scenario", "name"), CASES)
def test_the_call_that_meets_the_fault_raises_a_typed_error_with_a_sentence(meet, scenario, name):
    result = meet(scenario, name)
    assert type(result.error) is _expected_class(name)
    assert result.fs.failures, "the fault was never hit"
    assert "refuses writes" in str(result.error)
    assert str(result.fs.failures[0].strerror) in str(result.error)


@pytest.mark.parametrize(("scenario", "name"), CASES)
def test_no_write_is_accepted_after_the_fault_even_once_the_disk_recovers(meet, scenario, name):
    result = meet(scenario, name)
    result.fs.clear_faults()
    with pytest.raises(StoreFailedError):
        result.store.append("t", b"later")
    with pytest.raises(StoreFailedError):
        result.store.append_batch("t", [b"later", b"still later"])
    assert result.store.failed


@pytest.mark.parametrize(("scenario", "name"), CASES)
def test_the_failed_store_still_serves_what_it_acknowledged(meet, scenario, name):
    result = meet(scenario, name)
    for message_id, body in result.acked.items():
        assert result.store.get(message_id).body == body
    served = {m.message_id for ms in read_everything(result.store).values() for m in ms}
    assert set(result.acked) <= served


@pytest.mark.parametrize(("scenario", "name"), CASES)
def test_reopened_after_the_fault_the_store_has_every_acknowledged_message(meet, scenario, name):
    result = meet(scenario, name)
    result.fs.uninstall()
    result.store.close()
    with skip_syncs(), MessageStore.open(result.path, config(scenario.mode)) as reopened:
        for message_id, body in result.acked.items():
            assert reopened.get(message_id).body == body
        messages = read_everything(reopened)
        for (_topic, _queue), queue_messages in messages.items():
            offsets = [m.queue_offset for m in queue_messages]
            assert offsets == list(range(len(offsets)))
        assert reopened.append("t", b"after the reopen").status == "OK"


@pytest.mark.parametrize(("scenario", "name"), CASES)
def test_power_loss_right_after_the_fault_keeps_every_durable_acknowledgement(
    meet, tmp_path, scenario, name
):
    """sync: every acknowledged append; async: every one before the last flush()."""
    result = meet(scenario, name)
    result.fs.uninstall()
    result.store.close()
    image = result.image.materialize(tmp_path / "image")
    with skip_syncs(), MessageStore.open(image, config(scenario.mode)) as reopened:
        for message_id, body in result.image_acked.items():
            assert reopened.get(message_id).body == body


# ----------------------------------------------------------------- disk thresholds

SEGMENT = 4096
TOTAL = 40 * SEGMENT  # the fake disk: 40 segments
RATIOS = {"disk_warn_ratio": 0.5, "disk_force_ratio": 0.8, "disk_reject_ratio": 0.95}


def threshold_config():
    return small_config(retention_hours=10_000, **RATIOS)


def _usage(ratio: float) -> tuple[int, int]:
    return int(ratio * TOTAL), TOTAL


@pytest.fixture
def disk(tmp_path):
    """A store on a fake disk whose use the test sets (``disk.fake_usage``)."""
    path = tmp_path / "store"
    with FaultyFS(path) as fs:
        fs.fake_usage = _usage(0.1)
        store = MessageStore.open(path, threshold_config())
        store.create_topic("t", queues=1)
        fs.store = store
        yield fs
        store.close()


@pytest.mark.parametrize("ratio", [0.95, 0.99, 1.0])
def test_appends_are_refused_with_disk_full_at_or_past_the_reject_ratio(disk, ratio):
    disk.fake_usage = _usage(ratio)
    disk.store.flush()  # disk use is measured at each flush

    with pytest.raises(DiskFullError, match="disk_reject_ratio"):
        disk.store.append("t", b"refused")
    with pytest.raises(DiskFullError):
        disk.store.append_batch("t", [b"refused too"])
    assert disk.store.queue_range("t", 0) == (0, 0)


def test_appends_are_accepted_just_under_the_reject_ratio(disk):
    disk.fake_usage = _usage(0.94)
    disk.store.flush()

    assert disk.store.append("t", b"accepted").status == "OK"


def test_appends_resume_once_disk_use_falls_under_the_reject_ratio(disk):
    disk.fake_usage = _usage(0.97)
    disk.store.flush()
    with pytest.raises(DiskFullError):
        disk.store.append("t", b"refused")

    disk.fake_usage = _usage(0.5)
    disk.store.flush()

    assert disk.store.append("t", b"accepted").queue_offset == 0
    assert not disk.store.failed


def _fill_segments(store: MessageStore, count: int) -> None:
    while len(store.stats().segments) < count:
        store.append_batch("t", [b"x" * 900] * 4)


def test_retention_past_the_force_ratio_deletes_unexpired_oldest_segments_down_to_warn(disk):
    store = disk.store
    _fill_segments(store, 20)
    bases = [s.base for s in store.stats().segments]
    disk.fake_usage = _usage(0.86)

    report = store.delete_expired()

    # 0.86 - k/40 < 0.5 first holds for k = 15 segments of 4096 bytes each.
    assert [s["base"] for s in report.deleted_segments] == bases[:15]
    assert {s["reason"] for s in report.deleted_segments} == {"disk"}
    assert [s.base for s in store.stats().segments] == bases[15:]


def test_retention_under_the_force_ratio_keeps_unexpired_segments(disk):
    store = disk.store
    _fill_segments(store, 6)
    bases = [s.base for s in store.stats().segments]
    disk.fake_usage = _usage(0.79)

    report = store.delete_expired()

    assert report.deleted_segments == []
    assert [s.base for s in store.stats().segments] == bases


def test_forced_retention_never_deletes_the_active_segment(disk):
    store = disk.store
    _fill_segments(store, 3)
    active = store.stats().segments[-1].base
    disk.fake_usage = _usage(1.0)

    store.delete_expired()

    assert [s.base for s in store.stats().segments] == [active]
    low, high = store.queue_range("t", 0)
    assert store.read("t", 0, low, max_messages=1000)[-1].queue_offset == high - 1
