"""Metadata changes a crash can cut short (issue 17, cases 7 and 11).

* A process killed inside ``delete_topic``, after ``topics.json`` no longer lists the
  topic and before the groups' offsets on it were dropped: a topic re-created under the
  same name must start with no committed offsets (else its groups skip its first
  messages), whether it is re-created after a reopen or by a process that had the
  store open all along.
* ``store.json`` missing next to a store's files: the open refuses with a sentence
  instead of giving the store a new identity (every old message id would stop
  resolving).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from storeadapter.engine import MessageStore, StoreFormatError
from tests.faults.faultharness import QUEUES, TOPIC, create_store, fault_config
from tests.faults.forkserver import ForkServer


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


def _with_group_offsets(path) -> None:
    create_store(path, "sync")
    with MessageStore.open(path, fault_config("sync")) as store:
        store.append_batch(TOPIC, [b"m"] * (4 * QUEUES))
        for queue in range(QUEUES):
            store.commit_offset("g", TOPIC, queue, 3)


def _delete_killed_after_saving_topics(server, tmp_path, path) -> None:
    outcome = server.run(
        "tests.faults.faultharness:delete_topic_until_killed",
        tmp_path / "child.stderr",
        path=str(path),
        mode="sync",
        topic=TOPIC,
        kill={
            "target": "storeadapter.engine.metadata:TopicTable.save_changed",
            "when": "after",
            "caller": "TopicAdmin.delete_topic",
        },
    )
    assert outcome.killed, outcome


def _assert_starts_fresh(store: MessageStore) -> None:
    store.create_topic(TOPIC, queues=QUEUES)
    assert [store.committed_offset("g", TOPIC, q) for q in range(QUEUES)] == [None] * QUEUES
    result = store.append(TOPIC, b"first of the new topic", queue=0)
    assert result.queue_offset == 0
    assert "g" not in store.groups()


def test_a_topic_recreated_after_a_killed_delete_inherits_no_offsets(server, tmp_path):
    path = tmp_path / "store"
    _with_group_offsets(path)
    _delete_killed_after_saving_topics(server, tmp_path, path)
    with MessageStore.open(path, fault_config("sync")) as store:
        assert TOPIC not in [t.name for t in store.topics()]
        _assert_starts_fresh(store)


def test_a_topic_recreated_beside_a_killed_delete_inherits_no_offsets(server, tmp_path):
    path = tmp_path / "store"
    _with_group_offsets(path)
    with MessageStore.open(path, fault_config("sync")) as store:  # open all along
        _delete_killed_after_saving_topics(server, tmp_path, path)
        _assert_starts_fresh(store)


def test_a_missing_store_json_next_to_a_stores_files_refuses_to_open(tmp_path):
    path = tmp_path / "store"
    create_store(path, "sync")
    with MessageStore.open(path, fault_config("sync")) as store:
        store.append(TOPIC, b"kept")
    (path / "store.json").unlink()
    with pytest.raises(StoreFormatError, match="store.json"):
        MessageStore.open(path, fault_config("sync"))
    assert not (path / "store.json").exists()


def test_an_empty_directory_still_becomes_a_new_store(tmp_path):
    path = tmp_path / "store"
    path.mkdir()
    with MessageStore.open(path, fault_config("sync")) as store:
        assert store.topics() == []
    assert (path / "store.json").exists()
