"""Deleting a group (copying another group's offsets is a reset: test_offset_reset.py)."""

from __future__ import annotations

import pytest

from storeadapter.engine import MessageStore
from tests.engine.storetools import small_config


@pytest.fixture
def store(tmp_path):
    with MessageStore.open(tmp_path / "store", small_config()) as opened:
        opened.create_topic("t", queues=2)
        opened.append_batch("t", [{"body": f"m{i}", "queue": i % 2} for i in range(10)])
        yield opened


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
