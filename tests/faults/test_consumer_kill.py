"""A group consumer SIGKILLed at random moments, again and again, while producers add
messages: its committed offsets never pass a message it did not handle (at-least-once),
never pass the queue's end, and the group still gets through everything."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest

from storeadapter.engine import MessageStore
from tests.faults.faultharness import QUEUES, TOPIC, create_store, fault_config, populate
from tests.faults.forkserver import ForkServer
from tests.faults.stressroles import GROUP

ROUNDS = 15
SEED = 8


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


def _handled(path) -> set[tuple[int, int]]:
    """(queue, offset) of every message the consumer's handler returned from."""
    if not path.exists():
        return set()
    lines = path.read_text().split("\n")[:-1]
    return {(int(line.split()[1]), int(line.split()[2])) for line in lines}


def _lines(path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_killed_consumer_never_commits_past_an_unhandled_message(server, tmp_path):
    path = tmp_path / "store"
    create_store(path)
    populate(path, "async", 300, 1, tmp_path / "acks-0.txt")
    rng = random.Random(SEED)
    out = tmp_path / "handled.txt"
    for round_number in range(ROUNDS):
        consumer = server.spawn(
            "tests.faults.stressroles:consume",
            tmp_path / f"consumer-{round_number}.stderr",
            path=str(path),
            consumer_id="c",
            out=str(out),
            stop_at=time.time() + 3600,
            threads=3,
        )
        before = _lines(out)
        deadline = time.monotonic() + 10
        while _lines(out) == before and time.monotonic() < deadline:
            assert consumer.poll() is None, consumer.poll()  # wait until it handles some
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.5))
        consumer.kill()
        assert consumer.wait().killed, consumer.wait()
        handled = _handled(out)
        with MessageStore.open(path, fault_config("async")) as store:
            for queue in range(QUEUES):
                committed = store.committed_offset(GROUP, TOPIC, queue)
                low, high = store.queue_range(TOPIC, queue)
                if committed is None:
                    continue
                assert committed <= high, f"round {round_number} (seed {SEED}): {queue}"
                unhandled = [o for o in range(low, committed) if (queue, o) not in handled]
                assert not unhandled, (
                    f"round {round_number} (seed {SEED}): queue {queue} committed "
                    f"{committed} past unhandled offsets {unhandled[:10]}"
                )
        populate(path, "async", 20, 100 + round_number, tmp_path / f"acks-{round_number}")
    with MessageStore.open(path, fault_config("async")) as store:
        ranges = [store.queue_range(TOPIC, q) for q in range(QUEUES)]
        committed = [store.committed_offset(GROUP, TOPIC, q) or 0 for q in range(QUEUES)]
    assert sum(committed) > 0, "the consumer never committed anything"
    print(f"\nconsumer kills: {ROUNDS}, committed {committed} of {ranges}")
