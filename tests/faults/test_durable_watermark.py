"""The durable watermark: what the acknowledging fsyncs covered (issue 17, cases 4 and 5).

* Bit rot in the newest acknowledged record of a sync store, found after a crash, lies
  below the watermark: it is reported as corruption, never truncated as a torn tail, and
  its queue offset is not handed out again (a group already past it would never receive
  the message that took it).
* A group that committed past what a power loss kept (readers see records before their
  fsync; commits are fsynced at once) is clamped back to the queue's end by recovery,
  which reports it: the next message is delivered to the group.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from storeadapter.engine import MessageStore, StoreConfig
from storeadapter.engine.record import HEADER_SIZE
from tests.engine.storetools import flip_bit
from tests.faults.faultharness import TOPIC, create_store, fault_config, read_acks
from tests.faults.faultyfs import FaultyFS
from tests.faults.forkserver import ForkServer


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


def test_bit_rot_in_the_newest_acknowledged_record_is_reported_not_truncated(server, tmp_path):
    path = tmp_path / "store"
    create_store(path, "sync")
    outcome = server.run(
        "tests.faults.faultharness:append_then_die",
        tmp_path / "child.stderr",
        path=str(path),
        mode="sync",
        acks=str(tmp_path / "acks.txt"),
        count=30,
        group="g",
        # No full flush meanwhile: only the sync appends' own fsyncs raise the watermark
        # (a checkpoint past the record would leave it to readers to find the damage).
        overrides={"flush_interval_ms": 600_000},
    )
    assert outcome.killed, outcome
    acked = read_acks(tmp_path / "acks.txt")
    newest = max(acked, key=lambda ack: ack.commit_offset)
    flip_bit(path, newest.commit_offset + HEADER_SIZE + len(TOPIC) + 20)
    with MessageStore.open(path, fault_config("sync")) as store:
        recovery = store.stats().last_recovery
        assert recovery.truncated_at is None, recovery
        assert newest.commit_offset in [c.commit_offset for c in recovery.corruptions]
        queue = newest.queue
        assert store.queue_range(TOPIC, queue)[1] == newest.queue_offset + 1
        committed = store.committed_offset("g", TOPIC, queue)
        assert committed == newest.queue_offset + 1
        result = store.append(TOPIC, b"the next one", queue=queue)
        assert result.queue_offset == committed
        assert [m.body for m in store.read(TOPIC, queue, committed)] == [b"the next one"]
        assert store.read(TOPIC, queue, newest.queue_offset, 1)[0].body == b"the next one"
        assert newest.commit_offset in [c.commit_offset for c in store.stats().corruptions]


def _async_config() -> StoreConfig:
    return fault_config("async", flush_interval_ms=600_000, flush_dirty_bytes=1 << 30)


def test_a_group_committed_past_what_a_power_loss_kept_gets_the_next_message(tmp_path):
    path = tmp_path / "store"
    with FaultyFS(path) as fs:
        store = MessageStore.open(path, _async_config())
        store.create_topic(TOPIC, queues=1)
        store.append_batch(TOPIC, [b"flushed"] * 5)
        store.flush()
        store.append_batch(TOPIC, [b"unflushed"] * 5)  # acknowledged, within the window
        assert len(store.read(TOPIC, 0, 0, 100)) == 10
        store.commit_offset("g", TOPIC, 0, 10)  # fsynced at once
        image = fs.capture("after the commit")
        store.close()
    with MessageStore.open(image.materialize(tmp_path / "image"), _async_config()) as store:
        low, high = store.queue_range(TOPIC, 0)
        assert high == 5
        committed = store.committed_offset("g", TOPIC, 0)
        assert committed == 5
        clamped = store.stats().last_recovery.offsets_clamped
        assert [
            (c["group"], c["topic"], c["queue"], c["committed"], c["end"]) for c in clamped
        ] == [("g", TOPIC, 0, 10, 5)]
        store.append(TOPIC, b"the next one")
        assert [m.body for m in store.read(TOPIC, 0, committed)] == [b"the next one"]
