"""A waiter for the write mutex whose wake-up went to a process killed before it ran
(native/src/pen.rs, ``Pen::lock``).

glibc's robust mutex wakes one waiter when its owner lets go. If that waiter is
SIGKILLed before it runs, and another process takes the mutex meanwhile by its fast
path (no waiter flag: the trying appenders and every new taker do), the kernel wakes
no one at the killed waiter's exit (the mutex is not free and not its), and no unlock
wakes anyone after (no flag): the other waiters slept for ever while the store went on
around them. That is what `make test` saw in test_chaos (a producer killed just after
its previous incarnation, two producers of four stuck for 60 s after the stop, the
others done). The engine's wait re-checks the mutex every slice, so such a waiter
takes it at most a slice late.

The kill is staged: the holder and the first waiter on one CPU, the waiter at
``SCHED_IDLE``, so the woken waiter cannot run before the holder has killed it and
taken the mutex again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.faults.faultharness import TOPIC, create_store

REPO = Path(__file__).resolve().parents[2]

#: The holder: take the mutex, start the first waiter (on this CPU, SCHED_IDLE), say
#: "queued" once it sleeps on the mutex; on "go": let go (which wakes that waiter),
#: SIGKILL it before it runs, take the mutex again (fast path), reap it, let go.
HOLDER = r"""
import os, signal, subprocess, sys, time
from storeadapter.engine import _native
from tests.faults.test_pen_wakeup import sleeping_on_pen
state, cpu = sys.argv[1], int(sys.argv[2])
os.sched_setaffinity(0, {cpu})
pen = _native.Pen.open(state)
assert pen.lock() is False
first = subprocess.Popen([sys.executable, "-c", sys.argv[3], state])
deadline = time.monotonic() + 60
while not sleeping_on_pen(first.pid, first.pid, state):
    assert time.monotonic() < deadline and first.poll() is None, "no first waiter"
    time.sleep(0.01)
# Asleep on the mutex: from now on it runs only on this CPU, and only when we do not.
os.sched_setaffinity(first.pid, {cpu})
os.sched_setscheduler(first.pid, os.SCHED_IDLE, os.sched_param(0))
print("queued", flush=True)
assert sys.stdin.readline().strip() == "go"
pen.unlock()
os.kill(first.pid, signal.SIGKILL)
died = pen.lock()
os.sched_setscheduler(first.pid, os.SCHED_OTHER, os.sched_param(0))
first.wait()
pen.unlock()
print("staged" if died is False else "raced", flush=True)
"""

#: The first waiter: sleep on the mutex (the holder then keeps it off the CPU).
FIRST = r"""
import sys
from storeadapter.engine import _native
pen = _native.Pen.open(sys.argv[1])
pen.lock()
pen.unlock()
"""

#: The engine's waiter: a store open in sync mode; on "append", one append (which
#: waits for the mutex), then "appended"; then close.
APPENDER = r"""
import sys
from storeadapter.engine import MessageStore
from tests.faults.faultharness import TOPIC, fault_config
with MessageStore.open(sys.argv[1], fault_config("sync")) as store:
    print("open", flush=True)
    assert sys.stdin.readline().strip() == "append"
    store.append(TOPIC, b"after a lost wake-up", queue=0)
    print("appended", flush=True)
"""


def sleeping_on_pen(pid: int, tid: int, state: str) -> bool:
    """Whether thread ``tid`` of ``pid`` sleeps in a futex call on the word of the
    write mutex (byte 4032 of ``state``, in any of its mappings of the file)."""
    try:
        call = Path(f"/proc/{pid}/task/{tid}/syscall").read_text().split()
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return False
    if not call or call[0] != "202":  # futex (x86-64)
        return False
    address = int(call[1], 16)
    real = os.path.realpath(state)
    for line in maps:
        fields = line.split()
        if len(fields) < 6 or fields[5] != real:
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        if start <= address < end and address - start + int(fields[2], 16) == 4032:
            return True
    return False


def _python(code: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )


def _said(process: subprocess.Popen, timeout: float) -> str:
    """The next line ``process`` prints, or "" at its end; fails after ``timeout``."""
    from threading import Thread

    line: list[str] = []
    reader = Thread(target=lambda: line.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert line, f"nothing said within {timeout} s"
    return line[0].strip()


#: How many times the staging is tried: under load the killed waiter can still run
#: before the holder kills it (the holder itself descheduled), which stages nothing.
ATTEMPTS = 5


def _stage(path: Path) -> str:
    """One staging over a fresh store at ``path``: "appended" when the appender, its
    wake-up lost, took the mutex; "raced" when the killed waiter ran first."""
    create_store(path, "sync")
    state = str(path / "state")
    cpu = min(os.sched_getaffinity(0))
    appender = _python(APPENDER, str(path))
    holder = None
    try:
        assert _said(appender, 60) == "open"
        holder = _python(HOLDER, state, str(cpu), FIRST)
        assert _said(holder, 60) == "queued"
        appender.stdin.write("append\n")
        appender.stdin.flush()
        deadline = time.monotonic() + 30
        while not sleeping_on_pen(appender.pid, appender.pid, state):
            assert time.monotonic() < deadline, "the appender never waited for the mutex"
            time.sleep(0.01)
        holder.stdin.write("go\n")
        holder.stdin.flush()
        staged = _said(holder, 30)
        assert holder.wait(30) == 0
        if staged != "staged":
            return "raced"
        # The holder has let go: the appender, its wake-up lost, must take the mutex.
        assert _said(appender, 10) == "appended", "the appender sleeps on a free mutex"
        assert appender.wait(30) == 0
        return "appended"
    finally:
        for process in (holder, appender):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, SCHED_IDLE")
def test_a_waiter_whose_wake_up_went_to_a_killed_waiter_takes_the_mutex(tmp_path):
    outcomes = []
    for attempt in range(ATTEMPTS):
        path = tmp_path / f"store{attempt}"
        outcomes.append(_stage(path))
        if outcomes[-1] == "appended":
            break
    assert outcomes[-1] == "appended", f"the killed waiter ran first {ATTEMPTS} times"
    from storeadapter.engine import MessageStore
    from tests.faults.faultharness import fault_config

    with MessageStore.open(path, fault_config("sync")) as store:
        assert store.queue_range(TOPIC, 0)[1] == 1
