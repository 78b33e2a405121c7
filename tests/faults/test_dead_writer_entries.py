"""A writer killed after writing a queue's entries, before publishing, while another
process keeps the store open, or a batch failing on a full disk after some of its
queues' entries were written: whoever clears the records past the tail must clear
their consume-queue entries too. Else an entry of a queue nobody wrote to since
points at the offset where the next writer's records (of other queues) now lie; once a
checkpoint covers them, recovery trusts that entry as dispatched, and the queue ends in
an offset that reads as nothing (a gap at its end, reported as another entry's record).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator

import pytest

from storeadapter.engine import DiskFullError, MessageStore
from storeadapter.engine.queuebase import ENTRY_SIZE
from tests.faults.faultharness import (
    TOPIC,
    check_store,
    create_store,
    fault_config,
    populate,
    read_acks,
    sized_body,
    start_holder,
)
from tests.faults.faultyfs import FaultyFS
from tests.faults.forkserver import ForkServer

ENGINE = "storeadapter.engine"
HARNESS = "tests.faults.faultharness"


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_entries_of_a_dead_writer_do_not_survive_into_a_checkpoint_over_later_records(
    server, tmp_path, mode
):
    path = tmp_path / "store"
    create_store(path, mode)
    acked = populate(path, mode, 4, 1, tmp_path / "acks-0.txt")
    holder = start_holder(server, tmp_path, path, mode)
    outcome = server.run(
        f"{HARNESS}:append_to_queue_until_killed",
        tmp_path / "a.stderr",
        path=str(path),
        mode=mode,
        kill={"target": f"{ENGINE}.consumequeue:ConsumeQueue.write", "when": "after"},
        queue=2,
        body=sized_body("dead", 0, 40).hex(),
    )
    assert outcome.killed, outcome
    outcome = server.run(
        f"{HARNESS}:append_flush_then_die",
        tmp_path / "b.stderr",
        path=str(path),
        mode=mode,
        acks=str(tmp_path / "acks-b.txt"),
        queues=[0, 0, 0],
    )
    assert outcome.killed, outcome
    acked += read_acks(tmp_path / "acks-b.txt")
    holder.kill()
    assert holder.wait().killed
    with MessageStore.open(path, fault_config(mode)) as store:
        found = check_store(store, acked, context=mode)
        assert found.lost == [], found.lost
        assert store.stats().corruptions == []


def test_entries_of_a_batch_that_failed_on_a_full_disk_do_not_survive_into_a_checkpoint(
    server, tmp_path
):
    path = tmp_path / "store"
    create_store(path, "sync")
    acked = populate(path, "sync", 4, 1, tmp_path / "acks-0.txt")
    with FaultyFS(path, real_sync=False) as fs:
        store = MessageStore.open(path, fault_config("sync"))
        # Queue 2's entries are written, then queue 1's meet a full disk.
        fs.fail("pwrite_all", errno.ENOSPC, path_part=f"consumequeue/{TOPIC}/1/", times=None)
        with pytest.raises(DiskFullError):
            store.append_batch(
                TOPIC,
                [
                    {"body": sized_body("fails", 0, 40), "queue": 2},
                    {"body": sized_body("fails", 1, 40), "queue": 2},
                    {"body": sized_body("fails", 2, 40), "queue": 2},
                    {"body": sized_body("fails", 3, 40), "queue": 1},
                ],
            )
        fs.clear_faults()
        store.close()
    # The failed batch's entries in queue 2 (offsets 1 to 3) are gone from its file.
    packed = (path / "consumequeue" / TOPIC / "2" / f"{0:020d}").read_bytes()
    assert packed[ENTRY_SIZE : 4 * ENTRY_SIZE] == bytes(3 * ENTRY_SIZE)
    outcome = server.run(
        f"{HARNESS}:append_flush_then_die",
        tmp_path / "b.stderr",
        path=str(path),
        mode="sync",
        acks=str(tmp_path / "acks-b.txt"),
        # Over the first two of the failed batch's entries in queue 2, one of them after
        # the checkpoint (so that recovery looks at the queue): the third stays stale.
        queues=[2, 0, 0, 0],
        then=[2],
    )
    assert outcome.killed, outcome
    acked += read_acks(tmp_path / "acks-b.txt")
    with MessageStore.open(path, fault_config("sync")) as reopened:
        found = check_store(reopened, acked, context="after the failed batch")
        assert found.lost == [], found.lost
        assert reopened.stats().corruptions == []
