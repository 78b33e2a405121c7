"""Idempotent produce: a dedup id is stored once within the dedup window."""

from __future__ import annotations

import pytest

from storeadapter.engine import STATUS_DUPLICATE, STATUS_OK, InvalidMessageError, Message, clock
from tests.engine.storetools import read_all


def test_a_repeated_dedup_id_returns_the_original_and_writes_nothing(store):
    first = store.append("t", b"pay 10", dedup_id="payment-1")
    again = store.append("t", b"pay 10", dedup_id="payment-1")

    assert first.status == STATUS_OK
    assert again.status == STATUS_DUPLICATE
    assert again.message_id == first.message_id
    assert (again.queue, again.queue_offset) == (first.queue, first.queue_offset)
    assert sum(len(read_all(store, "t", q)) for q in range(4)) == 1


def test_the_dedup_id_is_kept_as_a_property(store):
    result = store.append("t", b"x", dedup_id="abc", properties={"a": "b"})

    assert store.get(result.message_id).properties == {"a": "b", "DEDUP_ID": "abc"}


def test_duplicates_inside_one_batch_are_written_once(store):
    results = store.append_batch(
        "t",
        [
            Message(b"a", dedup_id="same"),
            Message(b"b", dedup_id="other"),
            {"body": b"a again", "dedup_id": "same"},
        ],
    )

    assert [r.status for r in results] == [STATUS_OK, STATUS_OK, STATUS_DUPLICATE]
    assert results[2].message_id == results[0].message_id
    assert sum(len(read_all(store, "t", q)) for q in range(4)) == 2


def test_dedup_holds_across_a_reopen(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=2)
    first = store.append("t", b"once", dedup_id="d-1")
    store.close()

    again = open_store().append("t", b"once", dedup_id="d-1")

    assert again.status == STATUS_DUPLICATE
    assert again.message_id == first.message_id


def test_dedup_holds_across_store_objects(open_store):
    first_store = open_store()
    second_store = open_store()
    first_store.create_topic("t", queues=1)

    first = first_store.append("t", b"once", dedup_id="d-2")
    again = second_store.append("t", b"once", dedup_id="d-2")

    assert again.status == STATUS_DUPLICATE
    assert again.message_id == first.message_id


def test_the_same_dedup_id_in_another_topic_is_not_a_duplicate(store):
    store.create_topic("u", queues=1)
    store.append("t", b"x", dedup_id="d")

    assert store.append("u", b"x", dedup_id="d").status == STATUS_OK


def test_after_the_window_the_same_id_is_written_again(store, monkeypatch):
    first = store.append("t", b"x", dedup_id="late")
    later = first.store_time_ms + store.config.dedup_window_s * 1000 + 1
    monkeypatch.setattr(clock, "now_ms", lambda: later)

    again = store.append("t", b"x", dedup_id="late")

    assert again.status == STATUS_OK
    assert again.message_id != first.message_id


@pytest.mark.parametrize("dedup_id", ["", "a\x01b", 42, "x" * 257])
def test_a_bad_dedup_id_is_refused(store, dedup_id):
    with pytest.raises(InvalidMessageError):
        store.append("t", b"x", dedup_id=dedup_id)


def test_the_dedup_property_cannot_be_set_by_hand(store):
    with pytest.raises(InvalidMessageError, match="reserved"):
        store.append("t", b"x", properties={"DEDUP_ID": "sneaky"})
