"""A writer killed after writing its batch and before publishing it, whose batch holds a
long all-zero body (issue 17, case 2).

The writer records the extent it is about to write before writing; the next writer
clears all of it, however many zeros it holds. Clearing only up to the first all-zero
stretch left the dead writer's later records in place, and once the next writer's
records ran past the zeros, a clean reopen served the dead writer's unacknowledged
messages in place of acknowledged ones.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest

from storeadapter.engine import MessageStore
from tests.faults.faultharness import (
    TOPIC,
    Ack,
    body_digest,
    check_store,
    fault_config,
    make_body,
    sized_body,
)
from tests.faults.forkserver import ForkServer

BIG = {"segment_bytes": 1 << 20, "max_message_bytes": 256 << 10}


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_dead_writers_batch_with_a_long_zero_body_is_cleared_whole(server, tmp_path, mode):
    path = tmp_path / "store"
    with MessageStore.open(path, fault_config(mode, **BIG)) as store:
        store.create_topic(TOPIC, queues=4)
        store.append_batch(TOPIC, [sized_body("first", n, 10) for n in range(4)])
    ready = tmp_path / "ready"
    holder = server.spawn(
        "tests.faults.faultharness:hold_open_with",
        tmp_path / "holder.stderr",
        path=str(path),
        mode=mode,
        ready=str(ready),
        overrides=BIG,
    )
    while not ready.exists():
        assert holder.poll() is None, holder.poll()
        time.sleep(0.01)
    rng = random.Random(5)
    dead_batch = [bytes(160 << 10)] + [make_body(rng, "dead", n) for n in range(120)]
    outcome = server.run(
        "tests.faults.faultharness:batch_until_killed",
        tmp_path / "dead.stderr",
        path=str(path),
        mode=mode,
        kill={"target": "storeadapter.engine.commitlog:CommitLog.write", "when": "after"},
        bodies=[body.hex() for body in dead_batch],
        overrides=BIG,
    )
    assert outcome.killed, outcome
    acked: list[Ack] = []
    with MessageStore.open(path, fault_config(mode, **BIG)) as store:  # joins the holder
        for number in range(0, 400, 8):
            bodies = [make_body(rng, "live", number + i, 700) for i in range(8)]
            results = store.append_batch(TOPIC, bodies)
            acked += [
                Ack(r.message_id, r.queue, r.queue_offset, r.commit_offset, body_digest(b))
                for r, b in zip(results, bodies, strict=True)
            ]
    holder.kill()
    holder.wait()
    with MessageStore.open(path, fault_config(mode, **BIG)) as store:
        found = check_store(store, acked, context="after the reopen")
        assert found.lost == [], f"acknowledged messages lost or replaced: {found.lost[:3]}"
        dead = [m for m in found.messages.values() if b"dead:" in m.body[:40]]
        assert dead == [], "the dead writer's unacknowledged messages came back"
