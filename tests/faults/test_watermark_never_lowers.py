"""A peer's full flush never lowers the durable watermark (issue 27, case 5).

A sync writer raises ``commitlog_flushed`` with every fsync that acknowledges appends. A
peer's full flush that chose its target before those appends saves its checkpoint
after them: the checkpoint must keep the higher watermark (every field of a checkpoint
is the highest any process saved), else, after a crash, rot in an acknowledged record
above the peer's target is taken for a torn tail and cut, and its queue offset is handed
out again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from storeadapter.engine import MessageStore
from storeadapter.engine.checkpoint import read_checkpoint
from storeadapter.engine.record import HEADER_SIZE
from tests.engine.storetools import flip_bit
from tests.faults.faultharness import TOPIC, create_store, fault_config, read_acks
from tests.faults.forkserver import ForkServer


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


def test_a_peers_full_flush_keeps_the_writers_higher_durable_watermark(server, tmp_path):
    path = tmp_path / "store"
    create_store(path, "sync")
    outcome = server.run(
        "tests.faults.durableharness:lower_watermark_then_die",
        tmp_path / "child.stderr",
        path=str(path),
        acks=str(tmp_path / "acks.txt"),
        count=10,
    )
    assert outcome.killed, outcome
    acked = read_acks(tmp_path / "acks.txt")
    newest = max(acked, key=lambda ack: ack.commit_offset)
    assert read_checkpoint(path / "checkpoint").commitlog_flushed > newest.commit_offset
    flip_bit(path, newest.commit_offset + HEADER_SIZE + len(TOPIC) + 20)
    with MessageStore.open(path, fault_config("sync")) as store:
        recovery = store.stats().last_recovery
        assert recovery.truncated_at is None, recovery
        assert newest.commit_offset in [c.commit_offset for c in recovery.corruptions]
        assert store.queue_range(TOPIC, newest.queue)[1] == newest.queue_offset + 1
        result = store.append(TOPIC, b"the next one", queue=newest.queue)
        assert result.queue_offset == newest.queue_offset + 1
