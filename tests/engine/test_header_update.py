"""A writer stopped, or killed, in the middle of its update of the `state` header.

The writer makes the sequence word odd, writes the fields, makes it even again
(sharedstate.py). A live writer may be descheduled there for long on a loaded machine
(here: SIGSTOPped); a reader must wait for it, never take it as dead by time and act on
half its update. A writer that really died there leaves a half update that the next
holder of the pen must make safe: its notes were never published, so nobody may
follow its tail from the notes.

The writer is a process of its own that appends the long way
(``SharedState.publish_tail``) and stops itself right after one of the header's stores.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from storeadapter.engine import sharedstate
from tests.engine.storetools import assert_dense_and_unique

REPO = Path(__file__).resolve().parents[2]

# Opens the store, then appends one message to queue 0 of topic "t" the long way,
# stopping itself (SIGSTOP) right after publish_tail stores the word at offset
# argv[2] (a sharedstate name) once the tail is stored; prints the queue offset.
_WRITER = """
import os, signal, sys
from storeadapter.engine import MessageStore, sharedstate
from tests.engine.storetools import small_config

store = MessageStore.open(sys.argv[1], small_config())
store.__dict__.pop("append", None)  # the long way: SharedState.publish_tail
store._appender = None
real = sharedstate._SEQUENCE
stop_at = getattr(sharedstate, sys.argv[2])


class StopInside:
    size = real.size
    unpack_from = real.unpack_from
    tail_stored = False

    def pack_into(self, data, at, value):
        real.pack_into(data, at, value)
        if at == sharedstate._TAIL_AT:
            self.tail_stored = True
        if self.tail_stored and at == stop_at:
            self.tail_stored = False
            os.kill(os.getpid(), signal.SIGSTOP)


sharedstate._SEQUENCE = StopInside()
print(store.append("t", b"from the stopped writer", queue=0).queue_offset, flush=True)
sharedstate._SEQUENCE = real
store.close()
"""


def _stopped_writer(store_path: Path, stop_at: str) -> subprocess.Popen:
    """A writer process stopped inside its header update, after the store named."""
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(store_path), stop_at],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _, status = os.waitpid(child.pid, os.WUNTRACED)
    if not os.WIFSTOPPED(status):
        child.returncode = os.waitstatus_to_exitcode(status)
        raise AssertionError(f"the writer ended instead: {child.stderr.read().decode()}")
    return child


def _sequence(store_path: Path) -> int:
    data = (store_path / "state").read_bytes()[: sharedstate.STATE_HEADER.size]
    return sharedstate.STATE_HEADER.unpack(data)[2]


def _read_while_stopped(child: subprocess.Popen, read):
    """``read()`` while the writer stays stopped, the writer continued 0.3 s later (six
    times what readers took for "dead" before); (what was read, whether it came back
    before the writer went on, the writer's output). The writer must end well."""
    continued = threading.Event()

    def go_on() -> None:
        time.sleep(0.3)
        continued.set()
        os.kill(child.pid, signal.SIGCONT)

    thread = threading.Thread(target=go_on, daemon=True)
    thread.start()
    try:
        seen = read()
        returned_while_stopped = not continued.is_set()
        thread.join()
        stdout, stderr = child.communicate(timeout=60)
    finally:
        if child.returncode is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, stderr.decode()
    return seen, returned_while_stopped, stdout


def test_a_reader_waits_for_a_live_writer_stopped_inside_its_header_update(open_store, store_path):
    reader = open_store()
    reader.create_topic("t", queues=2)
    first = reader.append("t", b"first", queue=0)
    assert reader.queue_range("t", 0) == (0, 1)
    child = _stopped_writer(store_path, "_TAIL_AT")
    assert _sequence(store_path) & 1, "stopped inside the update"

    snapshot, returned_while_stopped, stdout = _read_while_stopped(child, reader._shared.read)

    assert not returned_while_stopped, f"a live writer's half update was read: {snapshot}"
    assert int(stdout) == 1
    assert snapshot == reader._shared.read(), "the whole update, as published"

    assert reader.queue_range("t", 0) == (0, 2)
    after = reader.append("t", b"after", queue=0)
    assert (first.queue_offset, after.queue_offset) == (0, 2)
    assert sorted(assert_dense_and_unique(reader, "t")) == sorted(
        [b"first", b"from the stopped writer", b"after"]
    )


def test_a_follow_waits_for_a_live_writer_stopped_inside_its_header_update(open_store, store_path):
    reader = open_store()
    reader.create_topic("t", queues=2)
    reader.append("t", b"first", queue=0)
    child = _stopped_writer(store_path, "_TAIL_AT")

    # queue_range follows the others first
    seen, returned_while_stopped, _ = _read_while_stopped(child, lambda: reader.queue_range("t", 0))

    assert not returned_while_stopped, f"followed a live writer's half update: {seen}"
    assert seen == (0, 2)
    assert [m.body for m in reader.read("t", 0, 0)] == [b"first", b"from the stopped writer"]


def test_a_writer_dead_inside_its_header_update_leaves_no_queue_offset_to_hand_out_twice(
    open_store, store_path
):
    reader = open_store()
    other = open_store()
    reader.create_topic("t", queues=2)
    reader.append("t", b"first", queue=0)
    assert other.queue_range("t", 0) == (0, 1)
    # Dead after it stored the tail and ended its write, before the ring's sequence:
    # its note of queue 0 was never published.
    child = _stopped_writer(store_path, "_EXTENT_AT")
    child.kill()
    child.wait()
    child.communicate()

    other.append("t", b"from the other", queue=1)  # takes the pen from the dead writer
    mine = reader.append("t", b"from the reader", queue=0)

    assert mine.queue_offset == 2, "queue offset 1 is the dead writer's published message"
    bodies = assert_dense_and_unique(reader, "t")
    assert sorted(bodies) == sorted(
        [b"first", b"from the stopped writer", b"from the other", b"from the reader"]
    )
    assert sorted(assert_dense_and_unique(other, "t")) == sorted(bodies)


def test_a_read_only_reader_waits_for_a_live_writer_and_not_for_a_dead_one(
    open_store, store_path, config
):
    from storeadapter.spark.logview import read_shared_state

    # This process's store must not mend the dead writer before the read-only read looks:
    # its flusher's periodic flush follows the log, and a follow waiting on the pen while
    # the writer is stopped takes it, and clears, the moment the writer is killed.
    reader = open_store(cfg=dataclasses.replace(config, flush_interval_ms=3_600_000))
    reader.create_topic("t", queues=2)
    reader.append("t", b"first", queue=0)
    child = _stopped_writer(store_path, "_TAIL_AT")

    seen, returned_while_stopped, _ = _read_while_stopped(
        child, lambda: read_shared_state(store_path)
    )

    assert not returned_while_stopped, f"read a live writer's half update: {seen}"
    assert seen == read_shared_state(store_path)

    child = _stopped_writer(store_path, "_TAIL_AT")
    child.kill()
    child.wait()
    child.communicate()
    dead = read_shared_state(store_path)  # returns: its writer is dead
    assert dead.ring_seq == -1 and _sequence(store_path) & 1
    assert reader.queue_range("t", 0) == (0, 3)  # mended by this reader, on the pen
    assert read_shared_state(store_path).ring_seq >= 0
