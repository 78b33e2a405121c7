"""``MessageStore.get_many``: several ids in one call, read in commit-log order, answered
in the callers' order; each id answered as ``get`` answers it, None for an id without a
message (issue 29: `get` at 1 KiB; docs/PERFORMANCE.md, "get29-s45")."""

from __future__ import annotations

import gc
import random

import pytest

from storeadapter.engine import (
    CorruptRecordError,
    InvalidMessageIdError,
    MessageNotFoundError,
    StoreClosedError,
)
from tests.engine.storetools import append_in_another_process, flip_bit, segment_paths


def _fill(store, count: int = 60) -> list:
    """``count`` messages of topics ``t`` (made if missing) and ``u``, of 10 to 70 bytes."""
    if "t" not in [info.name for info in store.topics()]:
        store.create_topic("t", queues=4)
    store.create_topic("u", queues=2)
    return [
        store.append("t" if i % 3 else "u", f"message {i} ".encode() * (1 + i % 7), queue=i % 2)
        for i in range(count)
    ]


def test_messages_come_in_the_order_asked_whatever_their_offsets(store):
    sent = _fill(store)
    ids = [result.message_id for result in sent]
    random.Random(7).shuffle(ids)

    got = store.get_many(ids)

    assert [message.message_id for message in got] == ids
    assert got == [store.get(message_id) for message_id in ids]


def test_ids_of_other_topics_are_answered_each_with_its_own(store):
    sent = _fill(store)
    mixed = [sent[5], sent[3], sent[1], sent[0], sent[2]]  # "t" and "u", out of order

    got = store.get_many(result.message_id for result in mixed)

    assert [(m.topic, m.queue, m.queue_offset) for m in got] == [
        (r.topic, r.queue, r.queue_offset) for r in mixed
    ]
    assert [m.body for m in got] == [store.get(r.message_id).body for r in mixed]


def test_many_ids_across_segments_and_repeated(store, store_path):
    sent = _fill(store, 200)
    assert len(segment_paths(store_path)) >= 5
    ids = [result.message_id for result in sent] * 2
    random.Random(3).shuffle(ids)

    got = store.get_many(ids)

    assert [message.message_id for message in got] == ids
    assert [message.body for message in got] == [store.get(i).body for i in ids]
    assert store._core.get_many(ids)[1] == []  # none of them taken the long way


def test_an_id_without_a_message_is_none_in_its_place(store):
    sent = _fill(store, 10)
    past_the_tail = f"{store._id_prefix}{store.commitlog.tail + 4096:016X}"
    not_a_record = f"{store._id_prefix}{sent[3].commit_offset + 1:016X}"
    other_store = f"{int(store._id_prefix, 16) ^ 1:08X}{sent[0].commit_offset:016X}"
    for message_id in (past_the_tail, not_a_record, other_store):
        with pytest.raises(MessageNotFoundError):
            store.get(message_id)

    got = store.get_many(
        [sent[2].message_id, past_the_tail, sent[0].message_id, not_a_record, other_store]
    )

    assert got[0] == store.get(sent[2].message_id)
    assert got[2] == store.get(sent[0].message_id)
    assert got[1] is None and got[3] is None and got[4] is None


@pytest.mark.parametrize("bad", ["nope", "0" * 23, "Z" * 24, 42, None, b"0" * 24])
def test_a_bad_id_raises_the_error_get_raises(store, bad):
    sent = _fill(store, 10)
    with pytest.raises(InvalidMessageIdError) as from_get:
        store.get(bad)

    with pytest.raises(InvalidMessageIdError) as from_many:
        store.get_many([sent[1].message_id, bad, sent[0].message_id])

    assert str(from_many.value) == str(from_get.value)


def test_ids_written_otherwise_are_read_as_get_reads_them(store):
    sent = _fill(store, 10)
    # An id is hex of the host and the offset; the offsets of ten records always give one a letter.
    written = next(r.message_id for r in sent if r.message_id.lower() != r.message_id)
    lower = written.lower()

    got = store.get_many([lower, written])

    assert got == [store.get(lower), store.get(written)]


def test_a_record_that_fails_its_check_raises_corrupt_record(open_store, store_path):
    store = open_store()
    sent = _fill(store, 40)
    victim = sent[6]
    store.close()
    flip_bit(store_path, victim.commit_offset + 70, bit=2)  # in the body
    reopened = open_store()

    with pytest.raises(CorruptRecordError) as raised:
        reopened.get_many([sent[1].message_id, victim.message_id])

    assert raised.value.offset == victim.commit_offset


def test_nothing_asked_nothing_answered_and_a_closed_store_refuses(open_store):
    store = open_store()
    sent = _fill(store, 5)
    assert store.get_many([]) == []
    store.close()

    with pytest.raises(StoreClosedError):
        store.get_many([sent[0].message_id])
    with pytest.raises(StoreClosedError):
        store.get_many([])


def test_get_many_as_the_first_read_starts_warming(open_store):
    store = open_store()
    sent = _fill(store, 5)
    store.close()
    reopened = open_store()
    assert not reopened._reading

    assert [m.message_id for m in reopened.get_many([sent[1].message_id])] == [sent[1].message_id]
    assert reopened._reading
    assert reopened.__dict__["get"].__self__ is reopened._core  # `get` bound to the core
    assert reopened.get(sent[2].message_id).message_id == sent[2].message_id


def test_appends_of_another_process_are_got_in_one_call(open_store, store_path, tmp_path):
    store = open_store()
    sent = _fill(store, 5)
    assert store.get_many([sent[0].message_id])[0].message_id == sent[0].message_id
    ids = append_in_another_process(store_path, "other", 40, tmp_path / "acks")
    assert len(ids) == 40

    messages, declined = store._core.get_many(ids[::-1])

    assert [m.body for m in messages] == [f"other-{i}".encode() for i in range(40)][::-1]
    assert declined == []


def test_the_collector_runs_at_most_once_a_call_and_is_left_as_it_was(store):
    sent = _fill(store, 300)
    ids = [result.message_id for result in sent] * 5  # 4,500 containers made
    assert gc.get_threshold()[0] * 3 < 3 * len(ids)
    starts = []

    def note(phase: str, _info: dict) -> None:
        if phase == "start":
            starts.append(phase)

    gc.callbacks.append(note)
    try:
        messages, declined = store._core.get_many(ids)
    finally:
        gc.callbacks.remove(note)
    assert declined == [] and len(messages) == len(ids)
    assert len(starts) <= 1
    assert gc.isenabled()

    gc.disable()
    try:
        store.get_many(ids[:10])
        assert not gc.isenabled()
    finally:
        gc.enable()
