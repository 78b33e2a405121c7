"""Writers SIGKILLed at named moments while a long-lived member keeps the store open.

The member (a console, a consumer: here ``hold_open``, a process that only has the store
open) never recovers the store; its flush thread follows what the writers published,
fsyncs what they wrote and saves checkpoints, and when it finds a dead writer's half
update of the `state` header it settles that writer itself (``WriteSession.wait_out``:
it clears the dead writer's extent, as the next writer would). The paths by which such
a member could make acknowledged messages vanish, each taken here at a kill point:

* a checkpoint the member saves past what the dead writer left (the writer killed in its
  own flush, between its fsyncs and its checkpoint, or in a roll or a queue file's
  creation, with entries and records written but not published);
* the member's queue ends, cached from before the kill, while it or the next writer
  clears the dead writer's extent (the entries it left past the published tail);
* the dead writer's header update left half done, settled by the member's reader.

After each kill: the member's flush covers the published tail; a process joining beside
the member finds every acknowledged message; a next writer writes over what the dead
left and a joiner still finds everything; then the member dies too and the recovery of
the whole store (from the checkpoints the member saved) finds everything again.
(tests/faults/test_crash_loop.py kills at random moments beside a member; this file at
the moments named.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore
from storeadapter.engine.checkpoint import read_checkpoint
from storeadapter.engine.sharedstate import SharedState
from tests.faults.faultharness import (
    Ack,
    at_site,
    check_store,
    create_store,
    fault_config,
    kill,
    populate,
    read_acks,
)
from tests.faults.forkserver import Child, ForkServer

ENGINE = "storeadapter.engine"
#: A bound on the wait for the member's flush (it runs every 20 ms): not a timing checked.
MEMBER_FLUSH_S = 60


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


POINTS = [
    # records written past the tail, not published (the store core's and the long way's)
    at_site("log.record", "after", nth=25),
    # a queue's entries written past its published end, not published
    at_site("queue.entry", "after", nth=25),
    # the first entries of a new queue file, not published
    at_site("queue.entry", "after", nth=2, where="offset == 0"),
    # a roll: the marker written, no next segment; the next one made, its records not published
    kill("fileio:pwrite_all", "after", caller="CommitLog.close_segment"),
    at_site("log.record", "after", nth=2, where="offset == 0"),
    # a long-way publish: before it (notes not written), and after the header update
    kill("sharedstate:SharedState.publish_tail", nth=12),
    kill("sharedstate:SharedState.publish_tail", "after", nth=12),
    # the writer's own flush: segments fsynced, queue files not yet; checkpoint not saved;
    # checkpoint saved (the member's checkpoints go on from there)
    at_site("log.sync", "after", nth=3),
    at_site("queue.sync", nth=4),
    kill("checkpoint:Checkpoint.save", nth=3),
    kill("checkpoint:Checkpoint.save", "after", nth=3),
]

# Inside the header update of a long-way publish (``append_killed_in_header``): the
# sequence odd, the tail stored; and the writing flag cleared too (its notes unpublished).
HEADER_POINTS = [{"header": "_TAIL_AT"}, {"header": "_EXTENT_AT"}]

CASES = [("async", point) for point in POINTS + HEADER_POINTS] + [
    ("sync", point) for point in POINTS[:4] + HEADER_POINTS
]


def _case_id(case: tuple[str, dict]) -> str:
    mode, point = case
    if "header" in point:
        return f"{mode}-in-header-after-{point['header']}"
    if "site" in point:
        where = f"-{point['where']}" if point["where"] else ""
        return f"{mode}-{point['when']}-{point['site']}-{point['nth']}{where}".replace(" ", "")
    target = point["target"].removeprefix(f"{ENGINE}.").replace(":", ".")
    caller = f"-in-{point['caller']}" if "caller" in point else ""
    return f"{mode}-{point['when']}-{target}{caller}-{point['nth']}"


def append_killed_in_header(path: str, mode: str, acks: str, header: str) -> None:
    """A child: append 30 messages, then one the long way, SIGKILLed inside its header
    update right after the store of the word at ``header`` (a sharedstate name) once
    the tail is stored: the sequence is left odd (tests/engine/test_header_update.py
    stops a writer there instead)."""
    import os
    import random
    import signal

    from storeadapter.engine import sharedstate
    from tests.faults.faultharness import TOPIC, AckWriter, append_some, make_body

    rng = random.Random(4)
    writer = AckWriter(acks)
    store = MessageStore.open(path, fault_config(mode))
    number = 0
    while number < 30:
        number += append_some(store, rng, "h", number, writer)
    store.__dict__.pop("append", None)  # the long way: SharedState.publish_tail
    store._appender = None
    real = sharedstate._SEQUENCE
    kill_at = getattr(sharedstate, header)

    class KillInside:
        size = real.size
        unpack_from = real.unpack_from
        tail_stored = False

        def pack_into(self, data, at, value):
            real.pack_into(data, at, value)
            if at == sharedstate._TAIL_AT:
                self.tail_stored = True
            if self.tail_stored and at == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    sharedstate._SEQUENCE = KillInside()
    store.append(TOPIC, make_body(rng, "h", number))


def _member(server: ForkServer, tmp_path: Path, path: Path, mode: str) -> Child:
    ready = tmp_path / "member-ready"
    member = server.spawn(
        "tests.faults.faultharness:hold_open",
        tmp_path / "member.stderr",
        path=str(path),
        mode=mode,
        ready=str(ready),
    )
    while not ready.exists():
        assert member.poll() is None, member.poll()
        time.sleep(0.01)
    return member


def _member_flushed(path: Path, member: Child) -> None:
    """Wait until the member settled whatever the dead writer left in the header and a
    checkpoint covers the published tail (the member's, or an earlier one's)."""
    state = SharedState(path / "state")
    try:
        deadline = time.monotonic() + MEMBER_FLUSH_S
        while True:
            assert member.poll() is None, f"the member ended: {member.poll()}"
            snapshot = state.read()  # no store here: a half update comes back as ring_seq -1
            checkpoint = read_checkpoint(path / "checkpoint")
            if (
                snapshot.ring_seq >= 0
                and checkpoint is not None
                and checkpoint.commitlog_flushed >= snapshot.tail
                and checkpoint.dispatched >= snapshot.tail
            ):
                return
            assert time.monotonic() < deadline, f"the member never flushed: {snapshot}"
            time.sleep(0.01)
    finally:
        state.close()


def _check_beside(path: Path, mode: str, acked: list[Ack], context: str) -> None:
    with MessageStore.open(path, fault_config(mode)) as store:
        found = check_store(store, acked, context=context)
        assert found.lost == [], f"{context}: lost {found.lost[:3]}"


@pytest.mark.parametrize(("mode", "point"), CASES, ids=[_case_id(c) for c in CASES])
def test_a_writer_killed_beside_a_member_loses_nothing_acknowledged(server, tmp_path, mode, point):
    path = tmp_path / "store"
    create_store(path, mode)
    acked = populate(path, "async", 30, 1, tmp_path / "acks-before.txt")
    member = _member(server, tmp_path, path, mode)
    try:
        if "header" in point:
            outcome = server.run(
                f"{__name__}:append_killed_in_header",
                tmp_path / "writer.stderr",
                path=str(path),
                mode=mode,
                acks=str(tmp_path / "acks.txt"),
                header=point["header"],
            )
        else:
            outcome = server.run(
                "tests.faults.faultharness:write_until_killed",
                tmp_path / "writer.stderr",
                path=str(path),
                mode=mode,
                acks=str(tmp_path / "acks.txt"),
                seed=2,
                kill=point,
                limit=2000,
                native=str(tmp_path / "native.txt"),
            )
        assert outcome.killed, f"the kill point {point} was never reached: {outcome}"
        acked += read_acks(tmp_path / "acks.txt")
        _member_flushed(path, member)
        _check_beside(path, mode, acked, f"{mode} {point}: joined beside the member")
        # The next writer clears what the dead one left (unless the member did) and
        # writes over it; the member follows and checkpoints that too.
        acked += populate(path, mode, 40, 3, tmp_path / "acks-next.txt")
        _member_flushed(path, member)
        _check_beside(path, mode, acked, f"{mode} {point}: after the next writer")
    finally:
        member.kill()
        member.wait()
    with MessageStore.open(path, fault_config(mode)) as store:
        assert store.last_recovery.clean_shutdown is False
        found = check_store(store, acked, context=f"{mode} {point}: recovered")
        assert found.lost == [], f"{mode} {point}: recovered, lost {found.lost[:3]}"
