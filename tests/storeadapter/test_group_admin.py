"""Copying a group's offsets and deleting a group."""

from __future__ import annotations

import pytest

from storeadapter.engine import MessageStore, StoreError
from storeadapter.group_admin import copy_offsets
from tests.engine.storetools import small_config


@pytest.fixture
def store(tmp_path):
    with MessageStore.open(tmp_path / "store", small_config()) as opened:
        opened.create_topic("t", queues=2)
        opened.append_batch("t", [{"body": f"m{i}", "queue": i % 2} for i in range(10)])
        yield opened


def test_copy_gives_the_target_the_sources_offsets(store):
    store.commit_offset("source", "t", 0, 3)
    store.commit_offset("source", "t", 1, 4)

    changes = copy_offsets(store, "source", "target", who="alice")

    assert [store.committed_offset("target", "t", q) for q in (0, 1)] == [3, 4]
    assert {c.reason for c in changes} == {"copy:source"}


def test_copy_takes_offsets_committed_long_before_the_latest_changes(store):
    store.create_topic("old", queues=1)
    store.append("old", b"x")
    store.commit_offset("source", "old", 0, 1)
    store.create_topic("wide", queues=1001)
    store.append_batch("wide", [{"body": b"x", "queue": q} for q in range(1001)])
    # more changes since than the history gives at once
    store.commit_offsets("source", "wide", dict.fromkeys(range(1001), 1))

    copy_offsets(store, "source", "target", who="alice")

    assert store.committed_offset("target", "old", 0) == 1


def test_copy_from_a_group_without_offsets_is_refused(store):
    with pytest.raises(StoreError, match="no committed offsets"):
        copy_offsets(store, "nobody", "target", who="alice")


def test_copy_onto_itself_is_refused(store):
    with pytest.raises(StoreError):
        copy_offsets(store, "g", "g", who="alice")


def test_delete_group_forgets_offsets_history_and_members(store, tmp_path):
    store.commit_offset("g", "t", 0, 3)
    members = tmp_path / "store" / "groups" / "g" / "members"
    members.mkdir(parents=True)

    assert store.delete_group("g") is True

    assert store.committed_offset("g", "t", 0) is None
    assert store.offset_history("g") == []
    assert "g" not in store.groups()
    assert not members.exists()


def test_deleting_an_unknown_group_says_so(store):
    assert store.delete_group("never") is False


def test_a_deleted_group_stays_deleted_after_a_reopen(tmp_path):
    path = tmp_path / "s"
    with MessageStore.open(path, small_config()) as store:
        store.create_topic("t", queues=1)
        store.append("t", b"x")
        store.commit_offset("g", "t", 0, 1)
        store.delete_group("g")

    with MessageStore.open(path, small_config()) as store:
        assert store.groups() == []
