"""A writer killed with SIGKILL, again and again: nothing acknowledged is ever lost."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore
from tests.engine.crash_writer import body_hash, body_is_intact, writer_config
from tests.engine.storetools import read_all
from tests.faults.forkserver import ForkServer

WRITER = "tests.engine.crash_writer:write_until_killed"
QUEUES = 4


def _create(path: Path, mode: str) -> None:
    with MessageStore.open(path, writer_config(mode)) as store:
        store.create_topic("t", queues=QUEUES)


def _ack_lines(ack_path: Path) -> list[str]:
    if not ack_path.exists():
        return []
    data = ack_path.read_text()
    return data.split("\n")[:-1]  # a last line without its newline was cut by the kill


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    """Writers are forked from a process that imported the engine once."""
    with ForkServer() as running:
        yield running


def _run_and_kill(
    server: ForkServer, path: Path, mode: str, ack_path: Path, seed: int, delay: float
) -> None:
    """Start the writer, wait until it acknowledged something, then SIGKILL it."""
    log = ack_path.with_suffix(".stderr")
    child = server.spawn(WRITER, log, path=str(path), mode=mode, ack_path=str(ack_path), seed=seed)
    try:
        deadline = time.monotonic() + 30
        while not _ack_lines(ack_path):
            assert child.poll() is None, f"writer died: {log.read_text()}"
            assert time.monotonic() < deadline, "writer acknowledged nothing in 30 s"
            time.sleep(0.005)
        time.sleep(delay)
        assert child.poll() is None, f"writer died: {log.read_text()}"
    finally:
        child.kill()
        outcome = child.wait()
    assert outcome.killed, outcome


def _check_queues_contiguous_and_intact(store: MessageStore) -> dict[str, tuple[int, int]]:
    """Every queue: offsets min..max with no gap or duplicate, every body intact."""
    seen: dict[str, tuple[int, int]] = {}
    for queue in range(QUEUES):
        low, high = store.queue_range("t", queue)
        messages = read_all(store, "t", queue)
        assert [m.queue_offset for m in messages] == list(range(low, high)), f"queue {queue}"
        for message in messages:
            assert message.queue == queue
            assert body_is_intact(message.body), f"damaged body at {message.message_id}"
            assert message.message_id not in seen
            seen[message.message_id] = (queue, message.queue_offset)
    assert store.stats().corruptions == []
    return seen


@pytest.mark.one_layout
def test_sigkill_during_sync_appends_loses_no_acknowledged_message(server, tmp_path):
    path = tmp_path / "store"
    _create(path, "sync")
    rng = random.Random(1122)
    acknowledged: dict[str, tuple[int, int, str]] = {}
    for iteration in range(10):
        ack_path = tmp_path / f"acks-{iteration}.txt"
        _run_and_kill(server, path, "sync", ack_path, iteration, rng.uniform(0.0, 0.25))
        for line in _ack_lines(ack_path):
            message_id, queue, queue_offset, digest = line.split()
            acknowledged[message_id] = (int(queue), int(queue_offset), digest)

        with MessageStore.open(path, writer_config("sync")) as store:
            assert store.stats().last_recovery.clean_shutdown is False
            seen = _check_queues_contiguous_and_intact(store)
            for message_id, (queue, queue_offset, digest) in acknowledged.items():
                message = store.get(message_id)
                assert (message.queue, message.queue_offset) == (queue, queue_offset)
                assert body_hash(message.body) == digest, f"iteration {iteration}: {message_id}"
                [read] = store.read("t", queue, queue_offset, max_messages=1)
                assert read.message_id == message_id
                assert seen[message_id] == (queue, queue_offset)
    assert len(acknowledged) > 10


@pytest.mark.one_layout
def test_sigkill_during_async_appends_never_leaves_the_store_corrupt(server, tmp_path):
    path = tmp_path / "store"
    _create(path, "async")
    rng = random.Random(2211)
    total = 0
    for iteration in range(6):
        ack_path = tmp_path / f"acks-{iteration}.txt"
        _run_and_kill(server, path, "async", ack_path, 100 + iteration, rng.uniform(0.0, 0.25))

        with MessageStore.open(path, writer_config("async")) as store:
            seen = _check_queues_contiguous_and_intact(store)
            assert len(seen) >= total
            total = len(seen)
    assert total > 0
