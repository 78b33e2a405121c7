"""A process killed while it opens (recovers) the store, with another waiting to open it.

When a process dies the kernel releases its file locks one by one, in no promised
order: the store's open lock can be free while the dead process's exclusive session
lock is still held for a moment. A process waiting to open must not take that lock for
a live member and join a store whose recovery never finished: it recovers the store
itself.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator

import pytest

from storeadapter.engine import MessageStore
from tests.faults.faultharness import create_store, fault_config, populate
from tests.faults.forkserver import ForkServer

ENGINE = "storeadapter.engine"


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


def _crashed_store(tmp_path):
    path = tmp_path / "store"
    create_store(path)
    populate(path, "async", 50, 1, tmp_path / "acks.txt")
    (path / "abort").touch()
    return path


def test_opening_waits_for_a_dead_openers_session_lock(tmp_path):
    path = _crashed_store(tmp_path)
    dying = os.open(path / "lock", os.O_RDWR)
    fcntl.flock(dying, fcntl.LOCK_EX)  # a dead opener's lock, not yet released
    opened: list[MessageStore] = []
    opener = threading.Thread(target=lambda: opened.append(MessageStore.open(path, fault_config())))
    opener.start()
    time.sleep(0.3)
    os.close(dying)
    opener.join(10)
    [store] = opened
    try:
        assert store.last_recovery.clean_shutdown is False, "it joined instead of recovering"
        assert store.last_recovery.finished_ms > 0
    finally:
        store.close()


def test_a_process_waiting_to_open_recovers_after_the_opener_died(server, tmp_path):
    for attempt in range(3):
        path = tmp_path / f"try-{attempt}"
        path.mkdir()
        store = _crashed_store(path)
        (store / "abort").unlink()  # the last session closed cleanly, then a crash
        reached = path / "reached"
        dying = server.spawn(
            "tests.faults.faultharness:open_until_killed",
            path / "dying.stderr",
            path=str(store),
            mode="sync",
            kill={
                "target": f"{ENGINE}.fileio:touch",
                "caller": "MessageStore._open_alone",
                "pause_s": 0.05,
                "mark": str(reached),
            },
        )
        while not reached.exists():  # it holds the open lock, recovering
            assert dying.poll() is None, dying.poll()
            time.sleep(0.002)
        out = path / "waiting.json"
        waiting = server.spawn(
            "tests.faults.faultharness:open_and_report",
            path / "waiting.stderr",
            path=str(store),
            mode="sync",
            out=str(out),
        )
        assert dying.wait().killed, dying.wait()
        outcome = waiting.wait()
        assert outcome.exit_code == 0, outcome
        report = json.loads(out.read_text())
        assert report == {"abort_marker": True, "recovered_here": True}, f"attempt {attempt}"
