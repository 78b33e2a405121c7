"""A queue removed and added back is a new queue to every process, including one that
did not look at the store in between (issue 27, case 4)."""

from __future__ import annotations

import pytest

from storeadapter.engine import MessageStore
from tests.engine.storetools import small_config


def _remove_and_add_back(store: MessageStore, topic: str, queue: int) -> None:
    store.freeze_queue(topic, queue)
    store.remove_queue(topic, queue)
    store.add_queues(topic, 1)


@pytest.fixture(params=["files", "shared"])
def layout(request) -> str:
    return request.param


@pytest.fixture
def two_openers(tmp_path, layout):
    path = tmp_path / "store"
    admin = MessageStore.open(path, small_config())
    admin.create_topic("t", queues=2, layout=layout)
    other = MessageStore.open(path, small_config())
    yield admin, other
    other.close()
    admin.close()


def test_a_queue_added_back_serves_nothing_of_the_removed_one_to_a_process_that_did_not_look(
    two_openers,
):
    admin, other = two_openers
    for i in range(20):
        admin.append("t", f"old {i}".encode(), queue=1)
    assert len(other.read("t", 1, 0, max_messages=64)) == 20  # the other has the queue open

    _remove_and_add_back(admin, "t", 1)

    assert other.read("t", 1, 0, max_messages=64) == []
    assert other.queue_range("t", 1) == admin.queue_range("t", 1) == (0, 0)


def test_an_append_to_a_queue_added_back_is_seen_by_every_process(two_openers):
    admin, other = two_openers
    for i in range(20):
        admin.append("t", f"old {i}".encode(), queue=1)
    other.read("t", 1, 0, max_messages=64)

    _remove_and_add_back(admin, "t", 1)
    result = other.append("t", b"new", queue=1)
    other.flush()

    assert result.queue_offset == 0
    assert [m.body for m in admin.read("t", 1, 0)] == [b"new"]
    assert [m.body for m in other.read("t", 1, 0)] == [b"new"]


def test_a_queue_removed_empty_and_added_back_takes_appends_every_process_sees(two_openers):
    # Nothing is appended in between: the queue added back has the same ``since``.
    admin, other = two_openers
    assert other.read("t", 1, 0) == []  # the other has the queue's (empty) files open

    _remove_and_add_back(admin, "t", 1)
    other.append("t", b"new", queue=1)
    other.flush()

    assert [m.body for m in admin.read("t", 1, 0)] == [b"new"]


def test_a_process_that_never_used_the_removed_queue_reads_only_the_new_one(two_openers):
    admin, other = two_openers
    for i in range(20):
        admin.append("t", f"old {i}".encode(), queue=1)
    late = MessageStore.open(admin.path, small_config())  # knows the old queue's blocks
    try:
        _remove_and_add_back(admin, "t", 1)
        admin.append("t", b"new", queue=1)

        assert [m.body for m in late.read("t", 1, 0, max_messages=64)] == [b"new"]
    finally:
        late.close()
