"""What a native ``append`` keeps between calls (append_core.rs, issue 31): the store's
``_appender`` and ``_seen``, the log's ``tail`` and ``segments`` and the registry's topic,
each kept while its dict is unchanged (its PEP 509 version), and the ints of a queue and a
topic read and made by hand. A change of any of them between two appends is seen by the
next one, as when each was looked up anew."""

from __future__ import annotations

import pytest

from storeadapter.engine import MessageStore
from tests.engine.storetools import read_all, small_config

_ROOMY = {"segment_bytes": 1 << 20, "queue_file_entries": 4096}


def _open(path) -> MessageStore:
    store = MessageStore.open(path, small_config(flush_mode="async", **_ROOMY))
    store.create_topic("t", queues=3, layout="files")
    return store


def _bodies(store: MessageStore, topic: str = "t") -> list[bytes]:
    queues = len(store._registry.topics[topic].queues)
    found = [m for q in range(queues) for m in read_all(store, topic, q)]
    return [m.body for m in sorted(found, key=lambda m: m.commit_offset)]


def test_an_appender_switched_off_after_native_appends_sends_the_next_the_long_way(tmp_path):
    with _open(tmp_path / "s") as store:
        for i in range(5):
            store.append("t", b"native-%d" % i)
        core = store._appender
        taken = core.appended
        assert taken >= 2
        store._appender = None
        result = store.append("t", b"long")
        assert core.appended == taken
        assert result.queue_offset == 1 and result.queue == 2
        assert _bodies(store)[-1] == b"long"


def test_a_topic_made_again_under_the_same_name_object_takes_the_next_append(tmp_path):
    name = "t"
    with _open(tmp_path / "s") as store:
        for i in range(4):
            store.append(name, b"old-%d" % i)
        store.delete_topic(name)
        store.create_topic(name, queues=2, layout="files")
        results = [store.append(name, b"new-%d" % i) for i in range(3)]
        assert [(r.queue, r.queue_offset) for r in results] == [(0, 0), (1, 0), (0, 1)]
        assert _bodies(store, name) == [b"new-0", b"new-1", b"new-2"]
        assert store._appender.appended >= 6


def test_appends_the_long_way_between_native_ones_move_the_tail_they_write_at(tmp_path):
    with _open(tmp_path / "s") as store:
        results = []
        for i in range(12):
            if i % 3 == 1:  # a dedup id goes the long way, which moves the log's tail
                results.append(store.append("t", b"long-%d" % i, dedup_id=f"d{i}"))
            elif i % 3 == 2:
                results.append(store.append_batch("t", [b"batch-%d" % i])[0])
            else:
                results.append(store.append("t", b"native-%d" % i))
        offsets = [r.commit_offset for r in results]
        assert offsets == sorted(set(offsets))
        assert store.commitlog.tail > offsets[-1]
        assert len(_bodies(store)) == 12
    with MessageStore.open(tmp_path / "s", small_config(flush_mode="async", **_ROOMY)) as again:
        assert [m.commit_offset for q in range(3) for m in read_all(again, "t", q)] != []
        assert sorted(offsets) == sorted(
            m.commit_offset for q in range(3) for m in read_all(again, "t", q)
        )


def test_a_snapshot_replaced_between_appends_is_the_one_renewed(tmp_path):
    with _open(tmp_path / "s") as store:
        store.append("t", b"a")
        store.create_topic("u", queues=1, layout="files")  # a new `_seen`, versions moved
        seen = store._seen
        result = store.append("t", b"b")
        assert store._seen.tail == store.commitlog.tail > result.commit_offset
        assert store._seen.topics_version == seen.topics_version
        assert store._seen.tail > seen.tail


@pytest.mark.parametrize("changes", [-5, 0, 255, 1 << 30, (1 << 40) + 7, (1 << 61) + 3])
def test_a_queues_counters_of_any_size_move_on_by_one(tmp_path, changes):
    """Ints of one, two and three 30-bit digits, and negative ones: read at their place
    (or, past two digits, by the interpreter) and made anew."""
    with _open(tmp_path / "s") as store:
        for _ in range(3):
            store.append("t", b"first")
        queue = store._registry.topics["t"].queues[0]
        queue.changes = changes
        before = store._appender.appended
        result = store.append("t", b"x")
        assert store._appender.appended == before + 1
        assert (result.queue, result.queue_offset) == (0, 1)
        assert queue.changes == changes + 1
        assert queue.max_offset == 2


@pytest.mark.parametrize("turn", [7, (1 << 35) + 1, (1 << 62) + 2])
def test_a_round_robin_of_any_size_picks_its_queue_and_moves_on(tmp_path, turn):
    with _open(tmp_path / "s") as store:
        for _ in range(3):
            store.append("t", b"first")
        topic = store._registry.topics["t"]
        topic.round_robin = turn
        before = store._appender.appended
        result = store.append("t", b"x")
        assert (result.queue, result.queue_offset) == (turn % 3, 1)
        assert topic.round_robin == turn + 1
        assert store._appender.appended == before + 1


def test_counters_held_elsewhere_keep_their_values_and_those_held_alone_move_on(tmp_path):
    """A queue's change count, a topic's round-robin and the snapshot's ring sequence are
    given their next values in place only while their holder alone refers to them: an
    int someone else holds (a name bound to it, a constant of code) keeps its value."""
    with _open(tmp_path / "s") as store:
        for _ in range(3):
            store.append("t", b"first")
        topic = store._registry.topics["t"]
        queue = topic.queues[0]
        queue.changes = 1000  # a constant of this code: held by it too
        topic.round_robin = int("3000")  # held by the slot alone
        store.append("t", b"a")
        assert str(queue.changes) == "1001" and str(topic.round_robin) == "3001"
        held_changes, held_turn, seen = queue.changes, topic.round_robin, store._seen
        ring = str(seen.ring_seq)
        for _ in range(3):
            store.append("t", b"b")
        assert (str(held_changes), str(held_turn), str(seen.ring_seq)) == ("1001", "3001", ring)
        assert str(1000) == "1000"
        assert (queue.changes, topic.round_robin) == (1002, 3004)
        assert store._seen.ring_seq == int(ring) + 3
        del held_changes, held_turn, seen
        store.append("t", b"c")
        assert (queue.changes, topic.round_robin) == (1002, 3005)


def test_appends_to_more_topics_than_the_core_keeps_the_facts_of_name_each_one(tmp_path):
    """The facts of 64 topics are kept (then emptied), and the last answered apart."""
    names = [f"t{i}" for i in range(70)]
    with MessageStore.open(tmp_path / "s", small_config(flush_mode="async", **_ROOMY)) as store:
        for name in names:
            store.create_topic(name, queues=1, layout="files")
            store.append(name, b"first")
        before = store._appender.appended
        for _ in range(2):
            for name in names + names[::-1]:
                result = store.append(name, b"x")
                assert (result.topic, result.queue) == (name, 0)
        assert store._appender.appended == before + 4 * len(names)
        assert [len(read_all(store, name, 0)) for name in names] == [5] * len(names)
