"""A writer killed before it published, in a shared topic, while other processes keep the
store open: the blocks it allocated must not be taken for real ones by a reader, and the
next writer must erase them before it allocates in their place.

A shared topic's blocks are found from their headers (docs/FORMAT.md, "Shared topics"):
the dead writer's headers are valid ones. Processes take in blocks only up to the
allocation end published with the commit-log tail they followed to (``blocks/allocated``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from storeadapter.engine import MessageStore
from tests.engine.storetools import SHARED_LAYOUT, small_config
from tests.faults.faultharness import arm_kill
from tests.faults.forkserver import ForkServer

TOPIC = "m"
QUEUES = 2000
THIS = "tests.faults.test_dead_writer_shared"


def config():
    return small_config(**{**SHARED_LAYOUT, "shared_blocks_per_file": 64})


def append_to_queues(path: str, queues: list[int], label: str, kill: dict | None = None) -> None:
    """A child: append one message ``<label>:<queue>`` to each queue, in one batch."""
    store = MessageStore.open(path, config())
    if kill is not None:
        arm_kill(**kill)
    store.append_batch(TOPIC, [{"body": f"{label}:{q}".encode(), "queue": q} for q in queues])
    store.close()


def hold_open(path: str, ready: str) -> None:
    """A child: keep the store open until killed, so that others join it."""
    store = MessageStore.open(path, config())
    open(ready, "w").close()
    while True:
        store.queue_range(TOPIC, 0)
        time.sleep(0.05)


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


def bodies(store: MessageStore, queue: int) -> list[bytes]:
    return [m.body for m in store.read(TOPIC, queue, 0, max_messages=10)]


def test_a_dead_writers_blocks_are_not_taken_in_and_are_erased_by_the_next(server, tmp_path):
    path = tmp_path / "store"
    with MessageStore.open(path, config()) as store:
        store.create_topic(TOPIC, queues=QUEUES, layout="shared")
        store.append_batch(TOPIC, [{"body": f"first:{q}".encode(), "queue": q} for q in range(10)])
    ready = tmp_path / "ready"
    holder = server.spawn(
        f"{THIS}:hold_open", tmp_path / "holder.stderr", path=str(path), ready=str(ready)
    )
    while not ready.exists():
        assert holder.poll() is None
        time.sleep(0.01)
    reader = MessageStore.open(path, config())
    try:
        assert bodies(reader, 5) == [b"first:5"]
        dead = server.run(
            f"{THIS}:append_to_queues",
            tmp_path / "a.stderr",
            path=str(path),
            queues=list(range(100, 200)),
            label="dead",
            kill={"target": "storeadapter.engine.sharedstate:SharedState.publish_tail"},
        )
        assert dead.killed, dead

        assert bodies(reader, 150) == []
        assert reader._topics[TOPIC].blocks.block_of(150, 0) is None

        done = server.run(
            f"{THIS}:append_to_queues",
            tmp_path / "b.stderr",
            path=str(path),
            queues=[150, *range(300, 400)],
            label="next",
        )
        assert done.exit_code == 0, done

        assert bodies(reader, 150) == [b"next:150"]
        assert all(bodies(reader, q) == [f"next:{q}".encode()] for q in range(300, 400))
        assert all(bodies(reader, q) == [] for q in range(100, 200) if q != 150)
    finally:
        reader.close()
        holder.kill()
        holder.wait()

    with MessageStore.open(path, config()) as recovered:
        assert recovered.last_recovery.clean_shutdown is False
        assert bodies(recovered, 150) == [b"next:150"]
        assert all(bodies(recovered, q) == [f"first:{q}".encode()] for q in range(10))
        assert all(bodies(recovered, q) == [f"next:{q}".encode()] for q in range(300, 400))
        assert all(bodies(recovered, q) == [] for q in range(100, 200) if q != 150)
