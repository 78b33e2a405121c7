"""The write mutex in `state` (native/src/pen.rs, writesession.py) between processes.

A writer SIGKILLed while it holds the mutex leaves it to the next taker marked
owner-dead; the next writer clears what the dead one wrote past the published tail
and goes on, nothing acknowledged lost. A writer on the flock path (an older engine,
here one with TIDEMARK_WRITE_LOCK=flock) waits while a writer with the mutex has the
store open, so their writes never interleave.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore, _native
from storeadapter.engine.sharedstate import SharedState
from storeadapter.engine.writesession import WRITE_LOCK_ENV
from tests.engine.storetools import append_in_another_process, small_config
from tests.faults.faultharness import (
    check_store,
    create_store,
    fault_config,
    populate,
    read_acks,
    start_holder,
)
from tests.faults.forkserver import ForkServer

ENGINE = "storeadapter.engine"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


def _writer_killed_holding_the_mutex(server: ForkServer, tmp_path: Path, path: Path, mode: str):
    """A store with a few messages and a member holding it open, whose last writer was
    SIGKILLed in the middle of an append (records written, nothing published): it held
    the mutex. Returns the member and the acknowledged messages."""
    create_store(path, mode)
    acked = populate(path, mode, 3, 1, tmp_path / "acks-0.txt")
    holder = start_holder(server, tmp_path, path, mode)
    outcome = server.run(
        "tests.faults.faultharness:write_until_killed",
        tmp_path / "a.stderr",
        path=str(path),
        mode=mode,
        acks=str(tmp_path / "acks-a.txt"),
        seed=2,
        kill={"target": f"{ENGINE}.commitlog:CommitLog.write", "when": "after", "nth": 5},
        limit=1000,
    )
    assert outcome.killed, outcome
    return holder, acked + read_acks(tmp_path / "acks-a.txt")


def test_a_writer_killed_holding_the_mutex_leaves_it_owner_dead(server, tmp_path):
    path = tmp_path / "store"
    holder, _ = _writer_killed_holding_the_mutex(server, tmp_path, path, "async")
    try:
        pen = _native.Pen.open(path / "state")
        assert pen.lock() is True, "the next taker is told its last owner died"
        pen.consistent()
        pen.unlock()
        assert pen.lock() is False
        pen.unlock()
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_next_writer_after_a_writer_killed_holding_the_mutex_clears_its_extent_and_goes_on(
    server, tmp_path, mode
):
    path = tmp_path / "store"
    holder, acked = _writer_killed_holding_the_mutex(server, tmp_path, path, mode)
    state = SharedState(path / "state")
    try:
        assert state.write_pending(), "the dead writer had begun a write"
        outcome = server.run(
            "tests.faults.faultharness:append_small",
            tmp_path / "b.stderr",
            path=str(path),
            mode=mode,
            acks=str(tmp_path / "acks-b.txt"),
        )
        assert outcome.exit_code == 0, outcome
        acked += read_acks(tmp_path / "acks-b.txt")
        assert len(acked) > 3
        assert not state.write_pending(), "the next writer cleared and published"
    finally:
        state.close()
        holder.kill()
        holder.wait()
    with MessageStore.open(path, fault_config(mode)) as store:
        found = check_store(store, acked, context=mode)
        assert found.lost == [], found.lost
        assert store.last_recovery.corruptions == []


def _acked(acks: Path) -> list[str]:
    return acks.read_text().split() if acks.exists() else []


def test_a_flock_writer_waits_while_a_mutex_writer_has_the_store_open(tmp_path):
    path = tmp_path / "store"
    config = small_config(flush_mode="async")
    acks = tmp_path / "old.acks"
    with MessageStore.open(path, config) as store:
        store.create_topic("t", queues=2)
        before = [store.append("t", f"new-{n}".encode()) for n in range(10)]
        old = subprocess.Popen(
            [sys.executable, str(REPO / "tests/engine/producer_process.py"), str(path)]
            + ["old", "40", str(acks)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), WRITE_LOCK_ENV: "flock"},
            stderr=subprocess.PIPE,
        )
        after = []
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            after.append(store.append("t", f"new-{10 + len(after)}".encode()))
            time.sleep(0.01)
        assert old.poll() is None, "the flock writer went on beside the mutex writer"
        assert _acked(acks) == []
    _, stderr = old.communicate(timeout=60)
    assert old.returncode == 0, stderr.decode()
    old_ids = _acked(acks)
    assert len(old_ids) == 40
    with MessageStore.open(path, config) as store:
        ours = before + after
        last_ours = max(r.commit_offset for r in ours)
        theirs = [store.get(message_id) for message_id in old_ids]
        assert min(m.commit_offset for m in theirs) > last_ours, "no interleaving"
        for result in ours:
            assert store.get(result.message_id).body == result_body(ours, result)
        messages = sum(len(store.read("t", q, 0, 1000)) for q in range(2))
        assert messages == len(ours) + 40


def result_body(ours: list, result) -> bytes:
    return f"new-{ours.index(result)}".encode()


HOLD_THE_MUTEX = """
import sys, time
from pathlib import Path
from storeadapter.engine import _native
pen = _native.Pen.open(sys.argv[1])
pen.lock()
Path(sys.argv[2]).touch()
time.sleep(float(sys.argv[3]))
pen.unlock()
"""


def test_a_writer_waiting_for_the_mutex_lets_other_threads_run(tmp_path):
    path = tmp_path / "store"
    with MessageStore.open(path, small_config(flush_mode="async")) as store:
        store.create_topic("t", queues=1)
        ready = tmp_path / "held"
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_THE_MUTEX, str(path / "state"), str(ready), "1.0"],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        while not ready.exists():
            assert holder.poll() is None
            time.sleep(0.01)
        done = threading.Event()
        appender = threading.Thread(target=lambda: (store.append("t", b"late"), done.set()))
        started = time.monotonic()
        appender.start()
        spins = 0
        while not done.is_set() and time.monotonic() - started < 0.5:
            spins += 1  # runs only while the waiting appender has let go of the GIL
        assert not done.is_set(), "the append waited for the other process"
        appender.join(timeout=30)
        assert done.is_set()
        assert holder.wait(timeout=30) == 0
        assert spins > 10_000
        assert [m.body for m in store.read("t", 0, 0)] == [b"late"]


def test_a_mutex_writer_opening_beside_a_flock_writer_stops_its_writes_until_it_closes(
    tmp_path,
):
    path = tmp_path / "store"
    config = small_config(flush_mode="async")
    with MessageStore.open(path, config) as store:
        store.create_topic("t", queues=2)
    acks = tmp_path / "old.acks"
    old = subprocess.Popen(
        [sys.executable, str(REPO / "tests/engine/producer_process.py"), str(path)]
        + ["old", "30000", str(acks)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), WRITE_LOCK_ENV: "flock"},
        stderr=subprocess.PIPE,
    )
    while len(_acked(acks)) < 50:
        assert old.poll() is None, "the flock writer finished before the other opened"
        time.sleep(0.01)
    with MessageStore.open(path, config) as store:
        ours = [store.append("t", f"new-{n}".encode()) for n in range(20)]
        seen = len(_acked(acks))
        time.sleep(0.3)
        assert len(_acked(acks)) == seen, "the flock writer wrote beside the mutex writer"
    _, stderr = old.communicate(timeout=120)
    assert old.returncode == 0, stderr.decode()
    with MessageStore.open(path, config) as store:
        low = min(r.commit_offset for r in ours)
        high = max(r.commit_offset for r in ours)
        theirs = [store.get(message_id).commit_offset for message_id in _acked(acks)]
        assert len(theirs) == 30000
        assert not [offset for offset in theirs if low <= offset <= high], "interleaved"


def test_processes_write_on_the_flock_path_when_the_header_holds_a_foreign_mutex(tmp_path):
    """A mutex of another pthread layout in `state` (another C library shares the
    directory) is left alone: every process takes the per-write flock, none holds
    `write.lock` shared, so writers in two processes both go on."""
    path = tmp_path / "store"
    config = small_config(flush_mode="async")
    with MessageStore.open(path, config) as store:
        store.create_topic("t", queues=2)
    with open(path / "state", "r+b") as state:
        state.seek(3968)
        state.write(b"TDMX" + (1).to_bytes(4, "little") + (999).to_bytes(4, "little"))
    foreign = (path / "state").read_bytes()[3968:4096]
    with MessageStore.open(path, config) as store:
        ours = [store.append("t", b"ours") for _ in range(5)]
        theirs = append_in_another_process(path, "t", 30, tmp_path / "acks")
        ours += [store.append("t", b"ours") for _ in range(5)]
        assert len(theirs) == 30 and len(ours) == 10
    assert (path / "state").read_bytes()[3968:4096] == foreign
