"""SIGKILL at chosen moments: segment rolls, consume-queue file creation, offset commits,
retention, and recovery itself.

A child forked by the fork server replaces one engine function (or fileio call) with a
wrapper that kills the process before or after its Nth matching call (``arm_kill``);
the engine has no test hooks. Each case first asserts that the kill point was reached
(the child died of SIGKILL), then opens the store and checks it.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore
from storeadapter.engine.record import HEADER_SIZE
from tests.faults.faultharness import (
    QUEUES,
    TOPIC,
    Ack,
    AckWriter,
    append_some,
    at_site,
    check_store,
    create_store,
    fault_config,
    kill,
    populate,
    read_acks,
)
from tests.faults.forkserver import ForkServer

FAR_FUTURE_MS = 1 << 50
KEYS = [f"k{i}" for i in range(16)]
ENGINE = "storeadapter.engine"


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


def _case_id(case: dict) -> str:
    if "site" in case:
        return f"{case['when']}-{case['site']}-{case['nth']}"
    target = case["target"].removeprefix(f"{ENGINE}.").replace(":", ".")
    extra = f"-in-{case['caller']}" if "caller" in case else ""
    return f"{case['when']}-{target}{extra}-{case['nth']}"


def _killed(server: ForkServer, tmp_path: Path, target: str, **kwargs: object) -> None:
    outcome = server.run(target, tmp_path / "child.stderr", **kwargs)
    assert outcome.killed, f"the kill point {kwargs.get('kill')} was never reached: {outcome}"


def _check_keys(store: MessageStore, found) -> None:
    """Key lookups return only messages that are still readable, intact, where they are."""
    for key in KEYS:
        for message in store.query_by_key(TOPIC, key, limit=1000):
            assert found.messages.get(message.message_id) == message, f"key {key}: {message}"


def _reopen_and_write_more(path: Path, mode: str, acked: list[Ack], tmp_path: Path) -> None:
    """The store goes on after the crash: more appends, a clean reopen, still all there."""
    more = populate(path, "async", 20, 99, tmp_path / "acks-after.txt")
    with MessageStore.open(path, fault_config(mode)) as store:
        found = check_store(store, acked + more, context="after writing more")
        assert found.lost == []


# ------------------------------------------------------------ (a) and (b): appends

ROLL = [
    # the record that does not fit is not written, nor the end-of-segment marker
    kill("commitlog:CommitLog.close_segment", nth=1),
    kill("commitlog:CommitLog.close_segment", nth=3),
    # marker written, no next segment yet
    kill("fileio:pwrite_all", "after", caller="CommitLog.close_segment"),
    # next segment file created empty (0 bytes), not preallocated
    kill("fileio:preallocate", caller="Segment.create"),
    kill("fileio:preallocate", "after", nth=2, caller="Segment.create"),
    # preallocated, before / after its fsync and its directory's fsync
    kill("fileio:fsync", "after", caller="Segment.create"),
    kill("fileio:fsync_dir", "after", nth=2, caller="Segment.create"),
    # the first records of the new segment written, not yet published
    at_site("log.record", "after", nth=2, where="offset == 0"),
    # a segment's fdatasync (the flusher's, or sync mode's group commit's), before and after
    at_site("log.sync", nth=12),
    at_site("log.sync", "after", nth=13),
]
QUEUE_FILE = [
    # the new queue file exists with 0 bytes
    kill("fileio:ftruncate", caller="QueueFile.create"),
    kill("fileio:ftruncate", "after", nth=2, caller="QueueFile.create"),
    # sized, before / after its fsync and its directory's fsync
    kill("fileio:fsync", nth=3, caller="QueueFile.create"),
    kill("fileio:fsync_dir", "after", nth=1, caller="QueueFile.create"),
    # the first entries of a new queue file written, not yet published
    at_site("queue.entry", "after", nth=2, where="offset == 0"),
    # the queue files' fsync by the flusher (async) or at a checkpoint
    at_site("queue.sync", "after", nth=6),
]


APPEND_CASES = [("sync", point) for point in ROLL + QUEUE_FILE] + [
    ("async", point) for point in ROLL + QUEUE_FILE[-2:]
]


@pytest.mark.parametrize(
    ("mode", "point"), APPEND_CASES, ids=[f"{m}-{_case_id(p)}" for m, p in APPEND_CASES]
)
def test_kill_while_appending_keeps_every_acknowledged_message(server, tmp_path, mode, point):
    path = tmp_path / "store"
    create_store(path, mode)
    acked = populate(path, "async", 30, 1, tmp_path / "acks-before.txt")
    _killed(
        server,
        tmp_path,
        "tests.faults.faultharness:write_until_killed",
        path=str(path),
        mode=mode,
        acks=str(tmp_path / "acks.txt"),
        seed=2,
        kill=point,
        limit=2000,
        native=str(tmp_path / "native.txt"),
    )
    if "site" in point:  # the store core wrote until the kill (it declines under a kill
        # point that replaces a function it stands in for: a kill point at a site does not)
        appended, batched = map(int, (tmp_path / "native.txt").read_text().split())
        assert appended + batched > 0, f"{mode} {point}: no native append before the kill"
        print(f"\n{mode} {_case_id(point)}: {appended} native appends, {batched} batches")
    acked += read_acks(tmp_path / "acks.txt")
    with MessageStore.open(path, fault_config(mode)) as store:
        found = check_store(store, acked, context=f"{mode} {point}")
        assert found.lost == [], f"{mode} {point}: lost {found.lost[:3]}"
        _check_keys(store, found)
    _reopen_and_write_more(path, mode, acked, tmp_path)


CLOSE = [
    # the last flush: segments synced, checkpoint not saved; then saved
    kill("checkpoint:Checkpoint.save", caller="MessageStore.close"),
    kill("checkpoint:Checkpoint.save", "after", caller="MessageStore.close"),
    # the clean-shutdown mark: the abort marker about to go, gone, its directory synced
    kill("fileio:unlink", caller="MessageStore.close"),
    kill("fileio:unlink", "after", caller="MessageStore.close"),
    kill("fileio:fsync_dir", "after", caller="MessageStore.close"),
]


CLOSE_CASES = [("sync", point) for point in CLOSE] + [("async", point) for point in CLOSE[:2]]


@pytest.mark.parametrize(
    ("mode", "point"), CLOSE_CASES, ids=[f"{m}-{_case_id(p)}" for m, p in CLOSE_CASES]
)
def test_kill_while_closing_keeps_every_acknowledged_message(server, tmp_path, mode, point):
    path = tmp_path / "store"
    create_store(path, mode)
    _killed(
        server,
        tmp_path,
        "tests.faults.faultharness:write_until_killed",
        path=str(path),
        mode=mode,
        acks=str(tmp_path / "acks.txt"),
        seed=6,
        kill=point,
        limit=30,
    )
    acked = read_acks(tmp_path / "acks.txt")
    assert len(acked) >= 30
    with MessageStore.open(path, fault_config(mode)) as store:
        found = check_store(store, acked, context=f"{mode} {point}")
        assert found.lost == [], f"{mode} {point}: lost {found.lost[:3]}"
        _check_keys(store, found)
    _reopen_and_write_more(path, mode, acked, tmp_path)


# ---------------------------------------------------------------- (c) offset commits

COMMIT = [
    kill("fileio:pwrite_all", nth=5, caller="OffsetStore._append"),
    kill("fileio:pwrite_all", "after", nth=6, caller="OffsetStore._append"),
    kill("fileio:fdatasync", nth=7, caller="OffsetStore.sync"),
    kill("fileio:fdatasync", "after", nth=8, caller="OffsetStore.sync"),
    # compaction: the new journal created, the snapshot not yet written
    kill("fileio:fsync_dir", "after", nth=1, caller="OffsetStore.compact"),
    # snapshot written to its temp file, before / after the rename
    kill("fileio:rename", nth=2, caller="OffsetStore.compact"),
    kill("fileio:rename", "after", nth=2, caller="OffsetStore.compact"),
    # snapshot in place, the old journal deleted or not yet
    kill("fileio:unlink", nth=3, caller="OffsetStore.compact"),
    kill("fileio:unlink", "after", nth=3, caller="OffsetStore.compact"),
]


def _commit_progress(path: Path) -> tuple[dict, tuple | None]:
    """(last done offset per (group, queue), the commit in flight or None)."""
    done: dict[tuple[str, int], int] = {}
    pending = None
    for line in path.read_text().split("\n")[:-1]:
        what, group, queue, offset = line.split()
        key = (group, int(queue))
        if what == "intent":
            pending = (key, int(offset))
        else:
            done[key] = int(offset)
            pending = None
    return done, pending


@pytest.mark.parametrize("point", COMMIT, ids=_case_id)
def test_kill_during_offset_commit_leaves_old_or_new_offset(server, tmp_path, point):
    path = tmp_path / "store"
    create_store(path)
    populate(path, "async", 120, 3, tmp_path / "acks.txt")
    progress = tmp_path / "progress.txt"
    _killed(
        server,
        tmp_path,
        "tests.faults.faultharness:commit_until_killed",
        path=str(path),
        mode="sync",
        progress=str(progress),
        kill=point,
        count=400,
        compact_bytes=700,
    )
    done, pending = _commit_progress(progress)
    assert done, "no commit finished before the kill"
    with MessageStore.open(path, fault_config("sync")) as store:
        for group in ("g0", "g1", "g2"):
            for queue in range(QUEUES):
                key = (group, queue)
                allowed = {done.get(key)}
                if pending is not None and pending[0] == key:
                    allowed.add(pending[1])
                committed = store.committed_offset(group, TOPIC, queue)
                assert committed in allowed, f"{point}: {key} is {committed}, not {allowed}"
                history = store.offset_history(group, TOPIC, queue, limit=1)
                if committed is not None:
                    assert history[0].new == committed, f"{point}: {key} history {history}"
                    assert 0 <= committed <= store.queue_range(TOPIC, queue)[1]
        store.commit_offset("g0", TOPIC, 0, 1)
        store.commit_offset("g1", TOPIC, 1, 2)
    with MessageStore.open(path, fault_config("sync")) as store:
        assert store.committed_offset("g0", TOPIC, 0) == 1, f"{point}: a later commit was lost"
        assert store.committed_offset("g1", TOPIC, 1) == 2, f"{point}: a later commit was lost"


# ------------------------------------------------------------------- (d) retention

RETENTION = [
    kill("segment:Segment.retire", nth=1),
    kill("segment:Segment.retire", nth=2),
    kill("segment:Segment.retire", nth=9),
    # a segment file unlinked, its descriptor not yet closed
    kill("fileio:unlink", "after", nth=4, caller="Segment.retire"),
    # every segment gone, queue minimums not yet moved
    kill("consumequeue:ConsumeQueue.advance_min", nth=1),
    # some queues' minimums moved (and their old files deleted), others not
    kill("consumequeue:ConsumeQueue.advance_min", "after", nth=2),
    kill("fileio:unlink", nth=3, caller="ConsumeQueue._remove_file"),
    kill("fileio:unlink", "after", nth=7, caller="ConsumeQueue._remove_file"),
    # key-index files below the new minimum, before / after their deletion
    kill("keyindex:KeyIndex.delete_below"),
    kill("keyindex:KeyIndex.delete_below", "after"),
    # all done but retention.json
    kill("fileio:write_atomic", caller="Upkeep.delete_expired"),
]


@pytest.fixture(scope="module")
def full_store(tmp_path_factory) -> tuple[Path, list[Ack]]:
    """A store of 500 messages over some 90 segments, for retention to delete."""
    root = tmp_path_factory.mktemp("full")
    path = root / "store"
    create_store(path)
    return path, populate(path, "async", 500, 4, root / "acks.txt")


@pytest.mark.parametrize("point", RETENTION, ids=_case_id)
def test_kill_during_retention_leaves_a_consistent_store(server, tmp_path, full_store, point):
    path = tmp_path / "store"
    shutil.copytree(full_store[0], path)
    acked = list(full_store[1])
    _killed(
        server,
        tmp_path,
        "tests.faults.faultharness:expire_until_killed",
        path=str(path),
        mode="sync",
        kill=point,
        now_ms=FAR_FUTURE_MS,
    )
    with MessageStore.open(path, fault_config("sync")) as store:
        found = check_store(store, acked, context=f"retention {point}")
        assert found.lost == [], f"{point}: lost {found.lost[:3]} (log min {found.log_min})"
        segments = [s.base for s in store.stats().segments]
        assert found.log_min == segments[0], f"{point}: the log's min is not a segment start"
        _check_keys(store, found)
        store.delete_expired(now_ms=FAR_FUTURE_MS)  # finishing the job is fine too
        found = check_store(store, acked, context=f"retention {point}, then again")
        assert found.lost == [] and len(store.stats().segments) == 1
        assert found.removed, "retention removed nothing"
        _check_keys(store, found)


@pytest.mark.parametrize("point", RETENTION[::2], ids=_case_id)
def test_kill_during_retention_beside_a_reader_leaves_it_consistent(
    server, tmp_path, full_store, point
):
    """This process has the store open (everything read once) while another one runs
    retention and dies: this one, following, still reads a consistent store, writes on,
    and leaves it recoverable."""
    path = tmp_path / "store"
    shutil.copytree(full_store[0], path)
    acked = list(full_store[1])
    with MessageStore.open(path, fault_config("sync")) as reader:
        check_store(reader, acked, context="before retention")
        _killed(
            server,
            tmp_path,
            "tests.faults.faultharness:expire_until_killed",
            path=str(path),
            mode="sync",
            kill=point,
            now_ms=FAR_FUTURE_MS,
        )
        found = check_store(reader, acked, context=f"retention {point}, read beside")
        assert found.lost == [], f"{point}: lost {found.lost[:3]} (log min {found.log_min})"
        _check_keys(reader, found)
        more_acks = tmp_path / "acks-more.txt"
        writer = AckWriter(more_acks)
        rng = random.Random(5)
        for number in range(30):
            append_some(reader, rng, "more", number, writer)
        acked += read_acks(more_acks)
        found = check_store(reader, acked, context=f"retention {point}, written beside")
        assert found.lost == []
        reader.delete_expired(now_ms=FAR_FUTURE_MS)
    with MessageStore.open(path, fault_config("sync")) as store:
        found = check_store(store, acked, context=f"retention {point}, reopened")
        assert found.lost == [] and found.removed
        _check_keys(store, found)


# -------------------------------------------------------------------- (e) recovery

RECOVERY = [
    # queue entries being rebuilt from the log
    [kill("consumequeue:ConsumeQueue.write", "after", nth=1)],
    [kill("consumequeue:ConsumeQueue.write", "after", nth=6)],
    [kill("fileio:fsync_dir", "after", nth=2, caller="QueueFile.create")],
    # the torn tail being erased: before the zero range, after it, after its fsync
    [kill("fileio:zero_range", caller="Segment.zero_from")],
    [kill("fileio:zero_range", "after", caller="Segment.zero_from")],
    [kill("fileio:fsync", "after", caller="Segment.zero_from")],
    # the key index being rebuilt
    [kill("keyindex:KeyIndex.put_many", "after")],
    # recovery done, its report or the abort marker not yet written
    [kill("fileio:write_atomic", caller="MessageStore._open_alone")],
    [kill("fileio:fsync_dir", "after", caller="MessageStore._open_alone")],
    # the first checkpoint after recovery, before and after; the index marker
    [kill("checkpoint:Checkpoint._write")],
    [kill("checkpoint:Checkpoint._write", "after")],
    [kill("fileio:touch", caller="MessageStore._open")],
    # killed twice, at different moments
    [
        kill("consumequeue:ConsumeQueue.write", "after", nth=3),
        kill("keyindex:KeyIndex.put_many", "after"),
    ],
]


@pytest.fixture(scope="module")
def crashed_store(tmp_path_factory) -> tuple[Path, list[Ack], dict]:
    """A store that needs a full recovery, and what recovering it without a kill gives.

    Its checkpoint, consume-queue files and key index are gone (rebuilt from the whole
    log) and a torn copy of a record's head lies after the tail (erased).
    """
    root = tmp_path_factory.mktemp("crashed")
    path = root / "store"
    create_store(path)
    acked = populate(path, "async", 400, 5, root / "acks.txt")
    with MessageStore.open(path, fault_config("sync")) as store:
        tail = store.stats().commit_log.tail
        first = store.read(TOPIC, 0, 0, 1)[0]
    (path / "abort").touch()
    (path / "checkpoint").unlink()
    for queue in range(QUEUES):
        for queue_file in (path / "consumequeue" / TOPIC / str(queue)).iterdir():
            queue_file.unlink()
    for index_file in (path / "index").iterdir():
        index_file.unlink()
    segment = max((path / "commitlog").iterdir())
    head = _log_bytes(path, first.commit_offset, HEADER_SIZE + 12)
    with open(segment, "r+b") as handle:
        handle.seek(tail - int(segment.name))
        handle.write(head)
    reference = root / "reference"
    shutil.copytree(path, reference)
    with MessageStore.open(reference, fault_config("sync")) as store:
        assert store.last_recovery.truncated_bytes > 0
        state = _state(store, acked)
    return path, acked, state


def _log_bytes(path: Path, offset: int, count: int) -> bytes:
    for segment in sorted((path / "commitlog").iterdir(), reverse=True):
        if int(segment.name) <= offset:
            with open(segment, "rb") as handle:
                handle.seek(offset - int(segment.name))
                return handle.read(count)
    raise AssertionError(f"no segment holds {offset}")


def _state(store: MessageStore, acked: list[Ack]) -> dict:
    found = check_store(store, acked, context="recovered")
    assert found.lost == []
    _check_keys(store, found)
    return {
        "tail": store.stats().commit_log.tail,
        "ranges": found.ranges,
        "messages": sorted(
            (m.queue, m.queue_offset, m.message_id) for m in found.messages.values()
        ),
        "keys": {k: [m.message_id for m in store.query_by_key(TOPIC, k)] for k in KEYS},
    }


@pytest.mark.parametrize(
    "points", RECOVERY, ids=lambda points: "+".join(_case_id(p) for p in points)
)
def test_killed_recovery_restarts_and_ends_the_same(server, tmp_path, crashed_store, points):
    source, acked, reference = crashed_store
    path = tmp_path / "store"
    shutil.copytree(source, path)
    for point in points:
        _killed(
            server,
            tmp_path,
            "tests.faults.faultharness:open_until_killed",
            path=str(path),
            mode="sync",
            kill=point,
        )
    with MessageStore.open(path, fault_config("sync")) as store:
        assert _state(store, acked) == reference, f"{points}"
