"""The native store core answers ``get`` in one call, as the Python path would, and
declines (None) whatever the long way must judge."""

from __future__ import annotations

import pytest

from storeadapter.engine import CorruptRecordError, MessageNotFoundError, StoreClosedError
from storeadapter.engine.record import decode_record
from tests.engine.storetools import append_in_another_process, flip_bit


def _python_path(store, commit_offset):
    """The message the engine's Python reference decodes at ``commit_offset``."""
    segment, pos = store.commitlog.locate(commit_offset)
    return decode_record(segment.view, pos, segment.size, commit_offset, store._id_prefix)


def _append_varied(store, count):
    return [
        store.append(
            "t",
            f"body {i}".encode() * (i % 7 + 1),
            queue=i % 4,
            tag=None if i % 3 else f"tag{i % 5}",
            key=[f"k{i}", f"j{i % 2}"] if i % 2 else None,
            properties={"p": str(i), "q": "v"} if i % 4 == 1 else None,
        )
        for i in range(count)
    ]


def test_the_core_gives_the_message_the_python_path_decodes_across_segments(store):
    results = _append_varied(store, 120)
    assert len(store.commitlog.segments) > 2

    for result in results:
        message = store._core.get(result.message_id)
        assert message is not None
        assert message == _python_path(store, result.commit_offset)
        assert message.message_id == result.message_id
        assert store.get(result.message_id) == message


def test_a_record_damaged_under_an_open_store_is_declined_and_reported_by_the_long_way(
    store, store_path
):
    results = _append_varied(store, 10)
    victim = results[4]
    assert store._core.get(victim.message_id) is not None
    flip_bit(store_path, victim.commit_offset + 60, bit=2)  # inside the record's text

    assert store._core.get(victim.message_id) is None
    with pytest.raises(CorruptRecordError):
        store.get(victim.message_id)
    reported = [c.commit_offset for c in store.stats().corruptions]
    assert victim.commit_offset in reported
    assert store._core.get(results[5].message_id) == _python_path(store, results[5].commit_offset)


def test_ids_the_store_does_not_write_are_left_to_the_long_way(store):
    result = store.append("t", b"payload", queue=0)
    while result.message_id.lower() == result.message_id:  # hex digits only: no lowercase
        result = store.append("t", b"payload", queue=0)
    lowercase = result.message_id.lower()

    assert store._core.get(lowercase) is None
    assert store._core.get(42) is None
    assert store.get(lowercase).message_id == result.message_id
    past_tail = result.message_id[:8] + f"{store.commitlog.tail:016X}"
    assert store._core.get(past_tail) is None
    with pytest.raises(MessageNotFoundError):
        store.get(past_tail)


def test_segments_added_and_deleted_after_a_get_are_seen_by_the_core(store):
    first = store.append("t", b"first", queue=0)
    assert store._core.get(first.message_id).body == b"first"
    later = _append_varied(store, 60)
    assert first.commit_offset < store.commitlog.segments[-1].base

    assert store._core.get(later[-1].message_id) == _python_path(store, later[-1].commit_offset)
    store.delete_expired(now_ms=2**62)

    assert store._core.get(first.message_id) is None
    with pytest.raises(MessageNotFoundError):
        store.get(first.message_id)
    assert store.get(later[-1].message_id) == _python_path(store, later[-1].commit_offset)


def test_appends_of_another_process_are_got_through_the_core(open_store, store_path, tmp_path):
    store = open_store()
    store.create_topic("t", queues=4)
    before = store.append("t", b"before", queue=0)
    assert store._core.get(before.message_id).body == b"before"
    ids = append_in_another_process(store_path, "other", 40, tmp_path / "acks")
    assert len(ids) == 40
    bodies = [store._core.get(message_id).body for message_id in ids]
    assert bodies == [f"other-{i}".encode() for i in range(40)]


def test_a_closed_store_core_declines_and_get_says_the_store_is_closed(open_store):
    store = open_store()
    store.create_topic("t", queues=1)
    result = store.append("t", b"payload")
    store.close()

    assert store._core.get(result.message_id) is None
    with pytest.raises(StoreClosedError):
        store.get(result.message_id)
