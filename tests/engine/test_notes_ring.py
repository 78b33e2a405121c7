"""A follower about a whole ring of notes behind a writer that overwrites the ring.

The ring in the `state` file keeps the last 8,192 queue-end notes (sharedstate.py). A
process that follows without the pen (a reader, a flush thread) reads the notes it has
not seen, while a writer in another process may be overwriting the oldest of them for
its next append, whose notes are not published yet: the ring sequence does not show
them. Such a slot read mid-overwrite held its old sequence and some of the new note's
fields, and ``notes`` took it (about 70 a second at the boundary on this machine): a
queue end from another queue, or from the future. The writer now stores a slot's
sequence before its fields, and the reader reads a slot whole, then its sequence again.

Each writer here is a process of its own; the reader sits at the overwrite boundary
(the slot the writer writes next) or around 8,192 notes behind, and checks every note
it takes against the note that the writer published under that sequence number.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore, sharedstate
from storeadapter.engine.sharedstate import RING_ENTRIES, SharedState
from tests.engine.storetools import small_config

REPO = Path(__file__).resolve().parents[2]
QUEUES = 5  # not a divisor of the ring: a slot's old and new notes are of other queues
MASK = 0xFFFFFFFF
MAX_FOLLOWS = 200
READS = 200_000
#: The follower's pause between two looks at the writer's ring sequence while it waits to
#: be ``distance`` notes behind: a few dozen notes at the writer's pace, well inside the
#: 400 the distances leave below the ring's size. Spinning instead took a core from the
#: writer on a loaded machine (make test's four workers on two cores): 9.5 s of CPU where
#: the test alone takes 1.9.
FOLLOW_PAUSE_S = 0.0001

# Publishes notes with fields made from their sequence numbers (``_note``), in batches
# of 1 to 7, the long way (``SharedState.publish_tail``), until its stdin closes.
_PYTHON_WRITER = """
import os, select, sys
from storeadapter.engine.sharedstate import SharedState, _RING_SEQ_AT, _SEQUENCE
from tests.engine.test_notes_ring import _note

state = SharedState(sys.argv[1])
print("writing", flush=True)
rounds = 0
while True:
    rounds += 1
    if rounds % 256 == 0 and select.select([sys.stdin], [], [], 0)[0]:
        break
    ring_seq = _SEQUENCE.unpack_from(state.map, _RING_SEQ_AT)[0]
    count = 1 + rounds % 7
    state.publish_tail(1, [_note(ring_seq + n) for n in range(1, count + 1)])
"""

# Appends batches of one message to each queue of topic "t" (the native batch: one note
# per queue, each queue's new end the batch's number), until its stdin closes.
_STORE_WRITER = """
import select, sys
from storeadapter.engine import Message, MessageStore
from tests.engine.test_notes_ring import QUEUES, ring_config

store = MessageStore.open(sys.argv[1], ring_config())
assert store._appender is not None, "the native append is not in use"
batch = [Message(b"m", queue=queue) for queue in range(QUEUES)]
print("writing", flush=True)
number = 0
while True:
    if number % 64 == 0 and select.select([sys.stdin], [], [], 0)[0]:
        break
    store.append_batch("t", batch)
    number += 1
store.close()
"""


def _note(ring_seq: int) -> tuple[int, int, int, int]:
    """The note the Python writer publishes under ``ring_seq``: each field differs from
    the slot's previous and next note's."""
    return ring_seq & MASK, (ring_seq * 7) & MASK, ring_seq * 3, ring_seq * 5


def ring_config():
    # Segments large enough for a few wraps of the ring without a roll every dozen
    # appends; the follower's flusher never runs meanwhile (it would follow too).
    return small_config(segment_bytes=8 << 20, flush_mode="async", flush_interval_ms=600_000)


@contextmanager
def _writer(script: str, path: Path) -> Iterator[subprocess.Popen]:
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(path)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        line = child.stdout.readline()
        assert line == b"writing\n", child.stderr.read().decode()
        yield child
    finally:
        child.stdin.close()
        try:
            child.wait(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == 0, child.stderr.read().decode()


def _ring_seq(state: SharedState) -> int:
    return sharedstate._SEQUENCE.unpack_from(state.map, sharedstate._RING_SEQ_AT)[0]


def _read_notes(state: SharedState, after: int, upto: int) -> list[tuple] | None:
    return state.notes(after, upto)


def _read_noted_ends(state: SharedState, after: int, upto: int) -> list[tuple] | None:
    """``noted_ends`` as notes: the Python writer's notes are each of a queue of its own
    (``_note``), so each comes back alone, with the latest store time of them all."""
    noted = state.noted_ends(after, upto)
    if noted is None:
        return None
    ends, store_ms = noted
    latest = max((_note(ring_seq)[3] for ring_seq in range(after + 1, upto + 1)), default=None)
    if store_ms != latest:
        return [("store time", store_ms, latest)]
    return [(*end, _note(ring_seq)[3]) for ring_seq, end in enumerate(ends, after + 1)]


@pytest.mark.one_layout  # the ring alone: no store, no topic
@pytest.mark.parametrize("read", [_read_notes, _read_noted_ends], ids=["notes", "noted_ends"])
def test_notes_read_at_the_overwrite_boundary_are_whole_or_refused(tmp_path, read):
    """Read the slot the writer overwrites next, again and again (and now and then the
    whole ring behind it): every note taken is the one published under its number."""
    path = tmp_path / "state"
    SharedState(path).close()
    state = SharedState(path)
    taken = refused = whole_rings = 0
    wrong: list[tuple[int, tuple, tuple]] = []
    with _writer(_PYTHON_WRITER, path) as child:
        while _ring_seq(state) <= RING_ENTRIES:
            assert child.poll() is None
        reads = 0
        # At least READS, and on until the boundary was met both ways (a slot read before
        # the writer's overwrite and one after it), if the writer stood still meanwhile.
        while reads < READS or (not (taken and refused) and reads < 50 * READS):
            assert child.poll() is None
            newest = _ring_seq(state)
            after = newest - RING_ENTRIES  # its slot next is the writer's next
            upto = newest if reads % 1000 == 0 else after + 1
            notes = read(state, after, upto)
            reads += 1
            if notes is None:
                refused += 1
                continue
            taken += 1
            whole_rings += upto == newest
            for ring_seq, note in enumerate(notes, after + 1):
                if note != _note(ring_seq):
                    wrong.append((ring_seq, note, _note(ring_seq)))
    state.close()
    assert not wrong, f"{len(wrong)} of {taken} notes taken were torn, e.g. {wrong[:3]}"
    # The boundary was reached both ways: slots read before and after the overwrite.
    assert taken and refused, (taken, refused)


@pytest.mark.one_layout  # the ring alone: no store, no topic
def test_noted_ends_are_the_notes_taken_in_per_queue(tmp_path):
    path = tmp_path / "state"
    SharedState(path).close()
    state = SharedState(path)
    notes = [(1, 0, 5, 100), (2, 3, 7, 90), (1, 0, 6, 120), (1, 1, 2, 80), (2, 3, 9, 95)]
    state.publish_tail(1, notes)
    state.publish_tail(2, [(1, 1, 4, 70)])

    assert state.noted_ends(0, 6) == ([(1, 0, 6), (2, 3, 9), (1, 1, 4)], 120)
    assert state.noted_ends(2, 4) == ([(1, 0, 6), (1, 1, 2)], 120)
    assert state.noted_ends(6, 6) == ([], None)
    state.close()


@pytest.mark.one_layout  # the ring alone: no store, no topic
def test_noted_ends_refuse_what_notes_refuse(tmp_path):
    path = tmp_path / "state"
    SharedState(path).close()
    state = SharedState(path)
    state.publish_tail(1, [(1, 0, n, n) for n in range(1, RING_ENTRIES + 11)])
    newest = _ring_seq(state)

    assert state.notes(newest - RING_ENTRIES - 1, newest) is None
    assert state.noted_ends(newest - RING_ENTRIES - 1, newest) is None  # more than the ring
    assert state.noted_ends(5, 12) is None  # overwritten
    assert state.noted_ends(-1, 3) is None
    assert state.noted_ends(newest - RING_ENTRIES, newest) == ([(1, 0, RING_ENTRIES + 10)], newest)
    state.close()


def _queue_ends(store: MessageStore) -> list[int]:
    return [queue.max_offset for queue in store._registry.topics["t"].queues]


def _expected_ends(notes: int) -> list[int]:
    """Each queue's end once the store writer published ``notes`` notes (a batch's notes
    go in queue order, one each: queue q has every QUEUES-th note from the q-th)."""
    return [(notes - queue + QUEUES - 1) // QUEUES for queue in range(QUEUES)]


def test_a_follower_about_a_ring_behind_takes_the_notes_or_walks_the_records(
    tmp_path, monkeypatch, no_keep_up
):
    """A second store, in the test's process, follows a native batch writer each time the
    writer published 7,792 to 8,192 notes or a few more past what it saw, while the
    writer goes on (overwriting the oldest of those notes): its queue ends are always
    those the writer published up to the tail it followed (a torn note would raise one
    to another queue's end, or to a later one), by the notes or by the walk of the
    records."""
    from storeadapter.engine import store as store_module

    path = tmp_path / "store"
    with MessageStore.open(path, ring_config()) as store:
        store.create_topic("t", queues=QUEUES)
    follower = MessageStore.open(path, ring_config())
    walks = []
    real_follow_log = store_module.follow_log

    def counted_follow_log(*args, **kwargs):
        walks.append(args[1])
        return real_follow_log(*args, **kwargs)

    monkeypatch.setattr(store_module, "follow_log", counted_follow_log)
    try:
        for queue in range(QUEUES):
            follower.queue_range("t", queue)  # loaded: notes raise their ends
        start = follower._seen.ring_seq
        follows = 0
        # The nearest and the farthest alternately, towards the middle: both ways come
        # within a few follows, whatever the writer's pace.
        near_to_far = range(RING_ENTRIES - 400, RING_ENTRIES + 10, 10)
        alternating = itertools.chain.from_iterable(
            zip(near_to_far, reversed(near_to_far), strict=True)
        )
        distances = itertools.cycle(list(alternating)[: len(near_to_far)])
        with _writer(_STORE_WRITER, path) as child:
            # Until both ways were taken a few times (the writer's pace decides which).
            while follows < MAX_FOLLOWS and min(follows - len(walks), len(walks)) < 3:
                distance = next(distances)
                seen = follower._seen.ring_seq
                snapshot = follower._shared.read()
                while snapshot.ring_seq - seen < distance:
                    assert child.poll() is None, child.stderr.read().decode()
                    time.sleep(FOLLOW_PAUSE_S)
                    snapshot = follower._shared.read()
                with follower._follow_lock:  # as _follow does, with this snapshot
                    follower._follow_to(snapshot)
                follows += 1
                notes = snapshot.ring_seq - start
                assert _queue_ends(follower) == _expected_ends(notes), (
                    f"follow {follows} ({snapshot.ring_seq - seen} notes behind): ends "
                    f"{_queue_ends(follower)} after {notes} notes"
                )
        by_notes = follows - len(walks)
        # Around the ring's size both ways: some follows by the notes, some by the walk.
        assert by_notes and walks, (by_notes, len(walks))
        for queue in range(QUEUES):
            low, high = follower.queue_range("t", queue)
            messages = follower.read("t", queue, high - 1, max_messages=1)
            assert [m.queue_offset for m in messages] == [high - 1]
    finally:
        follower.close()
