"""Adding, freezing, unfreezing and safely removing queues."""

from __future__ import annotations

import pytest

from storeadapter.engine import (
    QueueFrozenError,
    QueueInUseError,
    QueueNotFoundError,
    StoreError,
)
from tests.engine.storetools import lose_queue_files, read_all


def test_added_queues_take_messages_and_survive_a_reopen(open_store):
    store = open_store()
    store.create_topic("t", queues=2)

    info = store.add_queues("t", 2)
    store.append("t", b"to the new one", queue=3)
    store.close()

    reopened = open_store()
    assert info.queues == 4
    assert reopened.topic("t").queues == 4
    assert [m.body for m in reopened.read("t", 3, 0)] == [b"to the new one"]


def test_round_robin_skips_frozen_queues(store):
    store.freeze_queue("t", 1)
    store.freeze_queue("t", 2)

    queues = {store.append("t", b"x").queue for _ in range(12)}

    assert queues == {0, 3}


def test_keys_map_to_writable_queues_only(store):
    store.freeze_queue("t", 0)

    assert {store.append("t", b"x", key=f"k{i}").queue for i in range(40)} <= {1, 2, 3}


def test_an_explicit_frozen_queue_is_refused_and_reads_go_on(store):
    store.append("t", b"before", queue=2)
    store.freeze_queue("t", 2)

    with pytest.raises(QueueFrozenError, match="queue 2"):
        store.append("t", b"after", queue=2)
    assert [m.body for m in store.read("t", 2, 0)] == [b"before"]


def test_a_topic_with_every_queue_frozen_refuses_appends_and_writes_nothing(store):
    for queue in range(4):
        store.freeze_queue("t", queue)

    with pytest.raises(QueueFrozenError, match="every queue"):
        store.append_batch("t", [b"a", b"b"])
    assert all(store.queue_range("t", q) == (0, 0) for q in range(4))


def test_unfreezing_lets_a_queue_take_messages_again(store):
    store.freeze_queue("t", 1)
    store.unfreeze_queue("t", 1)

    assert store.append("t", b"x", queue=1).queue == 1
    assert store.topic("t").frozen == []


def test_freezing_is_seen_by_another_store_object(open_store):
    first = open_store()
    second = open_store()
    first.create_topic("t", queues=2)

    first.freeze_queue("t", 0)

    with pytest.raises(QueueFrozenError):
        second.append("t", b"x", queue=0)
    assert second.topic("t").frozen == [0]


def test_remove_refuses_a_queue_that_is_not_frozen(store):
    with pytest.raises(QueueInUseError, match="not frozen"):
        store.remove_queue("t", 3)


def test_remove_refuses_any_but_the_last_queue(store):
    store.freeze_queue("t", 1)

    with pytest.raises(QueueInUseError, match="only the last queue"):
        store.remove_queue("t", 1)


def test_remove_names_the_groups_still_behind(store):
    for i in range(5):
        store.append("t", f"m{i}", queue=3)
    store.commit_offset("fast", "t", 3, 5)
    store.commit_offset("slow", "t", 3, 2)
    store.commit_offset("new", "t", 0, 0)
    store.freeze_queue("t", 3)

    with pytest.raises(QueueInUseError) as refused:
        store.remove_queue("t", 3)

    assert "slow (3 behind)" in str(refused.value)
    assert "new (5 behind)" in str(refused.value)
    assert "fast" not in str(refused.value)
    assert store.topic("t").queues == 4


def test_remove_a_frozen_fully_consumed_queue(store, store_path):
    store.append("t", b"m", queue=3)
    store.commit_offset("g", "t", 3, 1)
    store.freeze_queue("t", 3)

    info = store.remove_queue("t", 3)

    assert info.queues == 3 and info.frozen == []
    assert not (store_path / "consumequeue" / "t" / "3").exists()
    with pytest.raises(QueueNotFoundError):
        store.read("t", 3, 0)
    assert store.offset_history("g")[0].queue == 3  # history is kept
    with pytest.raises(QueueNotFoundError):
        store.committed_offset("g", "t", 3)


def test_a_queue_added_again_after_removal_does_not_get_old_records(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=2)
    store.append("t", b"old", queue=1)
    store.commit_offset("g", "t", 1, 1)
    store.freeze_queue("t", 1)
    store.remove_queue("t", 1)
    store.add_queues("t", 1)
    store.append("t", b"new", queue=1)
    store.close()
    lose_queue_files(store_path, "t", queues=(1,))
    (store_path / "checkpoint").unlink()
    (store_path / "abort").touch()

    reopened = open_store()

    assert [m.body for m in read_all(reopened, "t", 1)] == [b"new"]


def test_adding_past_the_limit_is_refused(files_store):
    store = files_store
    with pytest.raises(StoreError, match="limit"):
        store.add_queues("t", 1021)


def test_a_shared_topic_takes_queues_past_1024(open_store):
    store = open_store()
    store.create_topic("t", queues=1000, layout="shared")

    info = store.add_queues("t", 1000)

    assert info.queues == 2000
    assert store.append("t", b"far", queue=1999).queue_offset == 0
