"""A writer killed with SIGKILL, again and again: nothing acknowledged is ever lost."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore
from tests.engine.crash_writer import body_hash, body_is_intact, writer_config
from tests.engine.storetools import read_all

REPO = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("crash_writer.py")
QUEUES = 4


def _create(path: Path, mode: str) -> None:
    with MessageStore.open(path, writer_config(mode)) as store:
        store.create_topic("t", queues=QUEUES)


def _ack_lines(ack_path: Path) -> list[str]:
    if not ack_path.exists():
        return []
    data = ack_path.read_text()
    return data.split("\n")[:-1]  # a last line without its newline was cut by the kill


def _run_and_kill(path: Path, mode: str, ack_path: Path, seed: int, delay: float) -> None:
    """Start the writer, wait until it acknowledged something, then SIGKILL it."""
    log = ack_path.with_suffix(".stderr")
    with open(log, "w") as stderr:
        child = subprocess.Popen(
            [sys.executable, str(WRITER), str(path), mode, str(ack_path), str(seed)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        try:
            deadline = time.monotonic() + 30
            while not _ack_lines(ack_path):
                assert child.poll() is None, f"writer died: {log.read_text()}"
                assert time.monotonic() < deadline, "writer acknowledged nothing in 30 s"
                time.sleep(0.005)
            time.sleep(delay)
            assert child.poll() is None, f"writer died: {log.read_text()}"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
    assert child.returncode == -signal.SIGKILL


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
def test_sigkill_during_sync_appends_loses_no_acknowledged_message(tmp_path):
    path = tmp_path / "store"
    _create(path, "sync")
    rng = random.Random(1122)
    acknowledged: dict[str, tuple[int, int, str]] = {}
    for iteration in range(10):
        ack_path = tmp_path / f"acks-{iteration}.txt"
        _run_and_kill(path, "sync", ack_path, iteration, rng.uniform(0.0, 0.25))
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
def test_sigkill_during_async_appends_never_leaves_the_store_corrupt(tmp_path):
    path = tmp_path / "store"
    _create(path, "async")
    rng = random.Random(2211)
    total = 0
    for iteration in range(6):
        ack_path = tmp_path / f"acks-{iteration}.txt"
        _run_and_kill(path, "async", ack_path, 100 + iteration, rng.uniform(0.0, 0.25))

        with MessageStore.open(path, writer_config("async")) as store:
            seen = _check_queues_contiguous_and_intact(store)
            assert len(seen) >= total
            total = len(seen)
    assert total > 0
