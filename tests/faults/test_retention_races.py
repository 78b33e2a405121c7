"""Queue files deleted by another process's retention while this process is in the
middle of using them: following a new minimum, or fsyncing the files it marked dirty.

Found by the chaos test (seed 4242): a restarted producer's append failed with
"[Errno 2] No such file or directory: .../consumequeue/t/1/00000000000000001088".
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest

from storeadapter.engine import MessageStore, clock
from storeadapter.engine.consumequeue import ConsumeQueue
from tests.faults.faultharness import (
    QUEUES,
    TOPIC,
    check_store,
    create_store,
    fault_config,
    make_body,
    populate,
)
from tests.faults.forkserver import ForkServer

FAR_FUTURE_MS = 1 << 50
#: This process's own flusher must not run during the test (it follows too).
IDLE_FLUSHER = {"flush_interval_ms": 3_600_000}


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


def _populate_in_thirds(path, tmp_path) -> tuple[list, list[int]]:
    """Three batches of messages, each newer than the one before; the cut-off times
    between them (store time just after the first and the second batch)."""
    acked, cuts = [], []
    for third in range(3):
        acked += populate(path, "async", 150, third, tmp_path / f"acks{third}.txt")
        time.sleep(0.02)
        cuts.append(clock.now_ms())
        time.sleep(0.02)
    return acked, cuts[:2]


def test_a_follower_whose_queue_files_vanish_mid_follow_keeps_the_live_ones(
    server, tmp_path, monkeypatch
):
    """This process follows retention's new minimum; just as it has forgotten the
    files that retention deleted, a second retention run elsewhere deletes the next
    ones. The entry at its old minimum is then unreadable: that is not "unwritten", and
    must not move its minimum to the queue's end (deleting every file but the last)."""
    path = tmp_path / "store"
    create_store(path)
    acked, (first_cut, second_cut) = _populate_in_thirds(path, tmp_path)
    retention_ms = int(fault_config().retention_hours * 3_600_000)

    def expire(now_ms: int, name: str) -> None:
        outcome = server.run(
            "tests.faults.faultharness:expire_once",
            tmp_path / f"{name}.stderr",
            path=str(path),
            mode="async",
            now_ms=now_ms + retention_ms,
        )
        assert outcome.exit_code == 0, outcome

    store = MessageStore.open(path, fault_config("async", **IDLE_FLUSHER))
    try:
        for queue in range(QUEUES):
            store.queue_range(TOPIC, queue)  # lists each queue's files
        expire(first_cut, "first")
        original = ConsumeQueue._before_advance
        raced = []

        def before_advance(queue: ConsumeQueue) -> None:
            original(queue)
            if not raced:  # the first queue this process moves: the second run now
                raced.append(queue.owner)
                expire(second_cut, "second")

        monkeypatch.setattr(ConsumeQueue, "_before_advance", before_advance)
        ranges = {queue: store.queue_range(TOPIC, queue) for queue in range(QUEUES)}
        monkeypatch.undo()
        assert raced
        with MessageStore.open(path, fault_config("async")) as fresh:
            found = check_store(fresh, acked, context="after the race")
            truth = {queue: fresh.queue_range(TOPIC, queue) for queue in range(QUEUES)}
        assert found.lost == [], f"lost {len(found.lost)}, e.g. {found.lost[:3]}"
        assert found.present and found.removed
        for queue in range(QUEUES):  # this process's minimum: behind the truth, not past it
            assert ranges[queue][0] <= truth[queue][0], (queue, ranges[queue], truth[queue])
            assert ranges[queue][1] == truth[queue][1], (queue, ranges[queue], truth[queue])
        store.queue_range(TOPIC, 0)  # follows the second run
        assert {q: store.queue_range(TOPIC, q) for q in range(QUEUES)} == truth
    finally:
        store.close()


def test_a_flush_of_queue_files_a_dead_retention_deleted_does_not_fail_appends(server, tmp_path):
    """Another process appends; this one follows (its next flush must fsync the queue
    files written). Retention elsewhere deletes those files and is killed before it
    publishes its new minimum, so this process still lists them. Its flush, and its
    next append, must not fail: a file retention deleted holds nothing to make durable."""
    path = tmp_path / "store"
    create_store(path)
    acked = populate(path, "async", 50, 1, tmp_path / "acks1.txt")
    store = MessageStore.open(path, fault_config("sync", **IDLE_FLUSHER))
    try:
        for queue in range(QUEUES):
            store.queue_range(TOPIC, queue)
        outcome = server.run(
            "tests.faults.faultharness:append_forever",
            tmp_path / "append.stderr",
            path=str(path),
            mode="async",
            acks=str(tmp_path / "acks2.txt"),
            seed=2,
            limit=300,
        )
        assert outcome.exit_code == 0, outcome
        store.queue_range(TOPIC, 0)  # follows: the queue files written are now dirty here
        outcome = server.run(
            "tests.faults.faultharness:expire_until_killed",
            tmp_path / "retention.stderr",
            path=str(path),
            mode="async",
            kill={"target": "storeadapter.engine.keyindex:KeyIndex.delete_below"},
            now_ms=FAR_FUTURE_MS,
        )
        assert outcome.killed, outcome
        store.flush()
        store.append(TOPIC, make_body(random.Random(3), "after", 0))
    finally:
        store.close()
    with MessageStore.open(path, fault_config("async")) as fresh:
        found = check_store(fresh, acked, context="after the dead retention")
    assert found.lost == [] and found.removed


def test_the_next_writer_publishes_the_minimum_a_dead_retention_left_unpublished(server, tmp_path):
    """Retention deleted segments and queue files, and was killed before publishing the
    log's new first offset. The next writer, which clears what a dead writer left,
    finishes the run: the processes that have the store open move their minimums."""
    path = tmp_path / "store"
    create_store(path)
    populate(path, "async", 300, 1, tmp_path / "acks1.txt")
    store = MessageStore.open(path, fault_config("async", **IDLE_FLUSHER))
    try:
        before = {queue: store.queue_range(TOPIC, queue) for queue in range(QUEUES)}
        outcome = server.run(
            "tests.faults.faultharness:expire_until_killed",
            tmp_path / "retention.stderr",
            path=str(path),
            mode="async",
            kill={"target": "storeadapter.engine.keyindex:KeyIndex.delete_below"},
            now_ms=FAR_FUTURE_MS,
        )
        assert outcome.killed, outcome
        outcome = server.run(
            "tests.faults.faultharness:append_small",
            tmp_path / "append.stderr",
            path=str(path),
            mode="async",
            acks=str(tmp_path / "acks2.txt"),
        )
        assert outcome.exit_code == 0, outcome
        with MessageStore.open(path, fault_config("async")) as fresh:
            truth = {queue: fresh.queue_range(TOPIC, queue) for queue in range(QUEUES)}
            log_min = fresh.stats().commit_log.min_offset
        assert log_min > 0
        assert store.stats().commit_log.min_offset == log_min
        for queue in range(QUEUES):
            assert store.queue_range(TOPIC, queue) == truth[queue]
            assert truth[queue][0] > before[queue][0], (queue, before[queue], truth[queue])
    finally:
        store.close()
