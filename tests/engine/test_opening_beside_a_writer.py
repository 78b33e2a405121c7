"""Opening a store while another process holds the pen (the write lock).

A process that joins a store already open elsewhere waits for the pen to read the
store's files consistently. It must not hold ``open.lock`` while it waits: every other
process opening or closing the store would queue behind it, for as long as the pen's
holder keeps writing (a mutex is not fair: a writer appending in a loop can keep it
for long stretches). Seen as a producer blocked >20 s in ``StoreLocks.opening`` in
tests/faults/test_chaos.py.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

from storeadapter.engine.writesession import FlockPen

REPO = Path(__file__).resolve().parents[2]

OPENER = """
import sys
from storeadapter.engine import MessageStore
from tests.engine.storetools import small_config
store = MessageStore.open(sys.argv[1], small_config())
store.append("t", sys.argv[2].encode())
store.close()
"""


def _open_in_another_process(path: Path, body: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", OPENER, str(path), body],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _session_members(path: Path) -> set[int]:
    """Pids holding the store's session lock (``lock``) shared: those that joined."""
    inode = os.stat(path / "lock").st_ino
    members = set()
    with open("/proc/locks") as locks:
        for line in locks:
            fields = line.split()
            if "->" in fields or len(fields) < 6 or fields[1] != "FLOCK":
                continue  # a waiter, or another kind of lock
            if int(fields[5].rsplit(":", 1)[1]) == inode:
                members.add(int(fields[4]))
    return members


def _wait_until(condition, what: str, children: list[subprocess.Popen]) -> None:
    """Poll ``condition``; a generous bound only turns a hang into a failure."""
    deadline = time.monotonic() + 30
    while not condition():
        for child in children:
            assert child.poll() is None, child.communicate()[1].decode()
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def _open_lock_free(path: Path) -> bool:
    fd = os.open(path / "open.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_openers_waiting_for_a_writers_pen_do_not_queue_on_the_open_lock(open_store, store_path):
    holder = open_store()
    holder.create_topic("t", queues=1)
    pen = holder._pen
    assert not isinstance(pen, FlockPen), "the mutex pen (the flock one cannot be re-entered)"
    pen.lock()  # a writer holding the pen for as long as it likes
    children: list[subprocess.Popen] = []
    try:
        children.append(_open_in_another_process(store_path, "second"))
        _wait_until(
            lambda: children[0].pid in _session_members(store_path),
            "the second opener joins",
            children,
        )
        _wait_until(
            lambda: _open_lock_free(store_path),
            "the second opener, waiting for the pen, lets go of open.lock",
            children,
        )
        children.append(_open_in_another_process(store_path, "third"))
        _wait_until(
            lambda: children[1].pid in _session_members(store_path),
            "the third opener joins while the pen is still held",
            children,
        )
    finally:
        pen.unlock()
        for child in children:
            _, stderr = child.communicate(timeout=120)
            assert child.returncode == 0, stderr.decode()

    bodies = [m.body for m in holder.read("t", 0, 0, 10)]
    assert sorted(bodies) == [b"second", b"third"]
