"""Files another process created, adopted before they are written into or vouched for
(issue 27, case 3).

A writer killed while creating a file leaves it with its name not yet durable (the
fsync of its directory had not run). A process that goes on writing into such a file
must first make its name durable (``fileio.adopt``: an fsync of the file and of its
directory), else a power loss takes the file, and with it what was acknowledged into
it: a commit-log segment left empty at its creation, a consume-queue file, a journal
generation of the committed offsets. The queue-ends witness is fsynced by the flush
that writes it: it exists to outlive the power loss.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from storeadapter.engine import MessageStore
from tests.engine.storetools import read_all
from tests.faults.durableharness import NO_FLUSH
from tests.faults.faultharness import (
    TOPIC,
    Ack,
    body_digest,
    check_store,
    create_store,
    fault_config,
    populate,
    sized_body,
)
from tests.faults.faultyfs import FaultyFS
from tests.faults.forkserver import ForkServer

FILEIO = "storeadapter.engine.fileio"


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


def _kill_modelled(server, tmp_path, path, target: str, caller: str, nth: int = 1) -> None:
    outcome = server.run(
        "tests.faults.durableharness:append_until_killed_modelled",
        tmp_path / "child.stderr",
        path=str(path),
        mode="sync",
        model=str(tmp_path / "model"),
        kill={"target": target, "caller": caller, "nth": nth},
        count=40,
    )
    assert outcome.killed, outcome


def _append_acknowledged(store: MessageStore, label: str, count: int) -> list[Ack]:
    acks = []
    for number in range(count):
        body = sized_body(label, number, 40)
        result = store.append(TOPIC, body, queue=0)
        acks.append(
            Ack(result.message_id, 0, result.queue_offset, result.commit_offset, body_digest(body))
        )
    return acks


def test_a_segment_left_empty_by_a_killed_writer_survives_the_next_power_loss(server, tmp_path):
    path = tmp_path / "store"
    create_store(path, "sync", queues=1)
    # The second segment: the writer rolled, and died before reserving its space.
    _kill_modelled(server, tmp_path, path, f"{FILEIO}:preallocate", "Segment.create", nth=2)
    assert [p.stat().st_size for p in sorted((path / "commitlog").iterdir())][-1] == 0
    with FaultyFS(path) as fs:
        fs.load_model(tmp_path / "model")
        store = MessageStore.open(path, fault_config("sync", **NO_FLUSH))
        acked = _append_acknowledged(store, "after", 5)
        image = fs.capture("after the acknowledged appends")
        store.close()
    with MessageStore.open(image.materialize(tmp_path / "image"), fault_config("sync")) as store:
        found = check_store(store, acked, context="after the power loss")
        assert found.lost == [], f"{len(found.lost)} acknowledged messages lost"


def test_a_queue_file_left_by_a_killed_writer_survives_the_next_power_loss(server, tmp_path):
    path = tmp_path / "store"
    create_store(path, "sync", queues=1)
    _kill_modelled(server, tmp_path, path, f"{FILEIO}:fsync_dir", "QueueFile.create")
    with FaultyFS(path) as fs:
        fs.load_model(tmp_path / "model")
        store = MessageStore.open(path, fault_config("sync", **NO_FLUSH))
        acked = _append_acknowledged(store, "after", 10)
        store.flush()
        image = fs.capture("after the flush")
        store.close()
    with MessageStore.open(image.materialize(tmp_path / "image"), fault_config("sync")) as store:
        found = check_store(store, acked, context="after the power loss")
        assert found.lost == [], f"{len(found.lost)} acknowledged messages lost"


def test_an_offsets_journal_left_by_a_killed_compaction_survives_the_next_power_loss(
    server, tmp_path
):
    path = tmp_path / "store"
    create_store(path, "sync", queues=1)
    populate(path, "sync", 50, 1, tmp_path / "acks.txt")
    outcome = server.run(
        "tests.faults.durableharness:commit_until_killed_modelled",
        tmp_path / "child.stderr",
        path=str(path),
        model=str(tmp_path / "model"),
        kill={"target": f"{FILEIO}:fsync_dir", "caller": "OffsetStore.compact"},
        offset=10,
    )
    assert outcome.killed, outcome
    with FaultyFS(path) as fs:
        fs.load_model(tmp_path / "model")
        store = MessageStore.open(path, fault_config("sync", **NO_FLUSH))
        assert store.committed_offset("g", TOPIC, 0) == 10
        store.commit_offset("g", TOPIC, 0, 40)
        image = fs.capture("after the acknowledged commit")
        store.close()
    with MessageStore.open(image.materialize(tmp_path / "image"), fault_config("sync")) as store:
        assert store.committed_offset("g", TOPIC, 0) == 40


def test_the_queue_ends_witness_outlives_a_power_loss(tmp_path):
    path = tmp_path / "store"
    config = fault_config("sync", **NO_FLUSH, queue_file_entries=64)
    with FaultyFS(path) as fs:
        store = MessageStore.open(path, config)
        store.create_topic(TOPIC, queues=1)
        bodies = [sized_body("w", number, 40) for number in range(30)]
        for body in bodies:
            store.append(TOPIC, body, queue=0)
        store.flush()
        image = fs.capture("after the flush")
        store.close()
    recovered = image.materialize(tmp_path / "image")
    # Damage below the checkpoint: the queue file loses its last 20 entries.
    queue_file = recovered / "consumequeue" / TOPIC / "0" / f"{0:020d}"
    with open(queue_file, "r+b") as handle:
        handle.truncate(10 * 20)
    with MessageStore.open(recovered, config) as store:
        assert [m.body for m in read_all(store, TOPIC, 0)] == bodies
