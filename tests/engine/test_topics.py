"""Topics: create, list, delete, re-create; names that must never reach a path."""

from __future__ import annotations

import os

import pytest

from storeadapter.engine import (
    InvalidNameError,
    StoreError,
    TopicExistsError,
    TopicInfo,
    TopicNotFoundError,
)
from tests.engine.storetools import read_all, simulate_crash

BAD_NAMES = ["", "a/b", "..", ".", "x" * 128, "é", None, "../escape", "a b", "a\x00b", "/abs", 7]


def _tree(root) -> set[str]:
    return {
        os.path.relpath(os.path.join(directory, name), root)
        for directory, dirs, files in os.walk(root)
        for name in dirs + files
    }


def test_create_topic_returns_its_info(open_store):
    store = open_store()

    info = store.create_topic("orders", queues=3)

    assert isinstance(info, TopicInfo)
    assert (info.name, info.queues) == ("orders", 3)


def test_topics_lists_every_topic_sorted_by_name(open_store):
    store = open_store()
    for name in ("zeta", "alpha", "mid.dle_-1"):
        store.create_topic(name, queues=2)

    assert [t.name for t in store.topics()] == ["alpha", "mid.dle_-1", "zeta"]
    assert all(t.queues == 2 for t in store.topics())


def test_new_topic_has_empty_queues(open_store):
    store = open_store()
    store.create_topic("t", queues=4)

    assert [store.queue_range("t", q) for q in range(4)] == [(0, 0)] * 4


def test_topics_survive_reopen(open_store):
    store = open_store()
    store.create_topic("a", queues=1)
    store.create_topic("b", queues=5)
    store.close()

    assert [(t.name, t.queues) for t in open_store().topics()] == [("a", 1), ("b", 5)]


def test_creating_an_existing_topic_raises_topic_exists(open_store):
    store = open_store()
    store.create_topic("t", queues=2)
    store.append("t", b"keep me")

    with pytest.raises(TopicExistsError):
        store.create_topic("t", queues=8)

    assert store.topic("t").queues == 2
    assert [m.body for m in read_all(store, "t", 0)] == [b"keep me"]


def test_longest_valid_name_is_accepted(open_store):
    store = open_store()
    name = "n" * 127

    store.create_topic(name, queues=1)
    store.append(name, b"x")

    assert store.read(name, 0, 0)[0].topic == name


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_bad_topic_name_raises_invalid_name_and_creates_nothing(open_store, tmp_path, name):
    store = open_store()
    before = _tree(tmp_path)

    with pytest.raises(InvalidNameError):
        store.create_topic(name, queues=1)

    assert _tree(tmp_path) == before
    assert store.topics() == []


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_bad_topic_name_raises_invalid_name_on_every_call(open_store, tmp_path, name):
    store = open_store()
    before = _tree(tmp_path)

    for call in (
        lambda: store.append(name, b"x"),
        lambda: store.append_batch(name, [b"x"]),
        lambda: store.read(name, 0, 0),
        lambda: store.queue_range(name, 0),
        lambda: store.delete_topic(name),
    ):
        with pytest.raises(InvalidNameError):
            call()

    assert _tree(tmp_path) == before


@pytest.mark.parametrize("queues", [0, -1, (1 << 21) + 1, "4", None, True, 2.0])
def test_bad_queue_count_is_refused_and_creates_nothing(open_store, queues):
    store = open_store()

    with pytest.raises(StoreError):
        store.create_topic("t", queues=queues)

    assert store.topics() == []


def test_a_topic_with_files_per_queue_has_at_most_1024_queues(open_store):
    store = open_store()

    with pytest.raises(StoreError, match="1 to 1024 queues"):
        store.create_topic("t", queues=1025, layout="files")

    assert store.topics() == []


def test_an_unknown_layout_is_refused(open_store):
    store = open_store()

    with pytest.raises(StoreError, match="layout is one of files, shared"):
        store.create_topic("t", queues=4, layout="tiles")


def test_delete_topic_removes_it_and_its_files(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=2)
    store.create_topic("other", queues=1)
    store.append("t", b"x")

    store.delete_topic("t")

    assert [t.name for t in store.topics()] == ["other"]
    assert not (store_path / "consumequeue" / "t").exists()
    with pytest.raises(TopicNotFoundError):
        store.append("t", b"y")


def test_deleted_topic_stays_deleted_after_reopen(open_store):
    store = open_store()
    store.create_topic("t", queues=2)
    store.append("t", b"x")
    store.delete_topic("t")
    store.close()

    assert open_store().topics() == []


def test_deleting_a_topic_keeps_the_others_intact(open_store):
    store = open_store()
    store.create_topic("gone", queues=2)
    store.create_topic("kept", queues=2)
    for i in range(20):
        store.append("gone", f"g{i}")
        store.append("kept", f"k{i}", queue=i % 2)

    store.delete_topic("gone")

    assert [m.body for m in read_all(store, "kept", 0)] == [
        f"k{i}".encode() for i in range(0, 20, 2)
    ]
    assert [m.body for m in read_all(store, "kept", 1)] == [
        f"k{i}".encode() for i in range(1, 20, 2)
    ]


def test_recreated_topic_starts_empty(open_store):
    store = open_store()
    store.create_topic("t", queues=2)
    for i in range(10):
        store.append("t", f"old {i}")
    store.delete_topic("t")

    store.create_topic("t", queues=2)

    assert [store.queue_range("t", q) for q in range(2)] == [(0, 0), (0, 0)]
    assert store.read("t", 0, 0) == []


def test_recreated_topic_starts_empty_after_a_full_recovery(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=2)
    for i in range(30):
        store.append("t", f"old {i}" * 20)
    store.delete_topic("t")
    store.create_topic("t", queues=2)
    new = store.append("t", b"new", queue=1)
    store.close()
    simulate_crash(store_path)

    reopened = open_store()

    assert reopened.queue_range("t", 0) == (0, 0)
    assert reopened.queue_range("t", 1) == (0, 1)
    assert [m.body for m in read_all(reopened, "t", 1)] == [b"new"]
    assert reopened.get(new.message_id).queue_offset == 0


def test_recreated_topic_starts_empty_after_its_queue_files_are_rebuilt(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=1, layout="files")
    for i in range(30):
        store.append("t", f"old {i}" * 20)
    store.delete_topic("t")
    store.create_topic("t", queues=1, layout="files")
    store.append("t", b"new")
    store.close()
    for path in (store_path / "consumequeue" / "t" / "0").iterdir():
        path.unlink()
    simulate_crash(store_path)

    reopened = open_store()

    assert [m.body for m in read_all(reopened, "t", 0)] == [b"new"]


def test_two_topics_share_the_log_but_not_their_offsets(open_store):
    store = open_store()
    store.create_topic("a", queues=1)
    store.create_topic("b", queues=1)

    results = [store.append("a" if i % 3 else "b", f"m{i}") for i in range(30)]

    a = [r for r in results if r.topic == "a"]
    b = [r for r in results if r.topic == "b"]
    assert [r.queue_offset for r in a] == list(range(len(a)))
    assert [r.queue_offset for r in b] == list(range(len(b)))
    assert [m.topic for m in read_all(store, "b", 0)] == ["b"] * len(b)
