"""Retention run by another process while this one has the store open and has looked at
its queues: the queue files retention deleted are ones this process listed but never
opened. Following the new minimum (before an append, or a read) must not trip on them.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from storeadapter.engine import MessageStore
from tests.faults.faultharness import (
    QUEUES,
    TOPIC,
    AckWriter,
    append_some,
    check_store,
    create_store,
    fault_config,
    populate,
    read_acks,
)
from tests.faults.forkserver import ForkServer

FAR_FUTURE_MS = 1 << 50


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


@pytest.fixture
def store_after_retention_elsewhere(server, tmp_path):
    path = tmp_path / "store"
    create_store(path)
    acked = populate(path, "async", 500, 1, tmp_path / "acks.txt")
    store = MessageStore.open(path, fault_config("sync"))
    for queue in range(QUEUES):
        store.queue_range(TOPIC, queue)  # lists the queue's files, opens its first and last
    outcome = server.run(
        "tests.faults.faultharness:expire_once",
        tmp_path / "retention.stderr",
        path=str(path),
        mode="sync",
        now_ms=FAR_FUTURE_MS,
    )
    assert outcome.exit_code == 0, outcome
    yield store, acked
    store.close()


def test_an_append_follows_retention_done_by_another_process(
    store_after_retention_elsewhere, tmp_path
):
    store, acked = store_after_retention_elsewhere
    writer = AckWriter(tmp_path / "more.txt")
    append_some(store, random.Random(2), "more", 0, writer)
    found = check_store(store, acked + read_acks(tmp_path / "more.txt"), context="append")
    assert found.lost == [] and found.removed


def test_a_read_follows_retention_done_by_another_process(store_after_retention_elsewhere):
    store, acked = store_after_retention_elsewhere
    for queue in range(QUEUES):
        low, high = store.queue_range(TOPIC, queue)
        assert low > 0
        messages = store.read(TOPIC, queue, 0, max_messages=5)
        assert [m.queue_offset for m in messages] == list(range(low, min(high, low + 5)))
    found = check_store(store, acked, context="read")
    assert found.lost == [] and found.removed


def test_a_read_racing_retention_in_another_process_does_not_fail(
    store_after_retention_elsewhere,
):
    """The other process deletes queue files just after this one caught up with it and
    before it reads them (simulated: this read does not catch up)."""
    store, acked = store_after_retention_elsewhere
    store._follow = lambda: None
    try:
        for queue in range(QUEUES):
            for offset in range(0, 100, 8):  # offsets in files this process never opened
                for message in store.read(TOPIC, queue, offset, max_messages=5):
                    assert message.queue == queue
    finally:
        del store._follow
    with MessageStore.open(store.path, fault_config("sync")) as fresh:
        found = check_store(fresh, acked, context="read after the race")
    assert found.lost == [] and found.removed
