"""A native ``get`` reads the store's state as words and plain dict items (issue 29, the
missed `get` target): whether the store is closed or forked from the store's refusals
word (the append's, issue 31 part 10), the log's tail from the log's namespace; no
attribute of the store or of its commit log is looked up through their classes."""

from __future__ import annotations

import pytest

from storeadapter.engine import Message, StoreClosedError, dataplane
from storeadapter.engine.commitlog import CommitLog


class _CountingLog(CommitLog):
    """A commit log that notes every attribute looked up through its class."""

    looked_up: list[str] = []

    def __getattribute__(self, name: str):
        _CountingLog.looked_up.append(name)
        return super().__getattribute__(name)


def test_a_get_looks_up_no_attribute_of_the_commit_log(store):
    sent = [store.append("t", f"body {i}".encode(), queue=i % 4) for i in range(20)]
    assert store.get(sent[0].message_id).body == b"body 0"  # the first get binds the core
    log = store.commitlog
    log.__class__ = _CountingLog
    _CountingLog.looked_up.clear()
    try:
        got = [store.get(result.message_id) for result in sent]
        looked_up = list(_CountingLog.looked_up)
    finally:
        log.__class__ = CommitLog
    assert [message.body for message in got] == [f"body {i}".encode() for i in range(20)]
    assert looked_up == []


def test_a_get_declines_when_the_refusals_word_says_forked(store):
    sent = store.append("t", b"payload", queue=0)
    assert store._core.get(sent.message_id).body == b"payload"

    store._refusals.set(dataplane.REFUSED_FORKED, True)
    try:
        assert store._core.get(sent.message_id) is None
    finally:
        store._refusals.set(dataplane.REFUSED_FORKED, False)
    assert store._core.get(sent.message_id).body == b"payload"


def test_a_store_marked_forked_refuses_a_get_with_a_typed_error(store):
    sent = store.append("t", b"payload", queue=0)
    store.get(sent.message_id)

    store._mark_forked()
    try:
        assert store._core.get(sent.message_id) is None
        with pytest.raises(StoreClosedError):
            store.get(sent.message_id)
    finally:
        store._forked = False
        store._refusals.set(dataplane.REFUSED_FORKED, False)


@pytest.mark.parametrize("reason", ["REFUSED_FAILED", "REFUSED_DISK_FULL"])
def test_a_store_that_refuses_writes_still_serves_gets_natively(store, reason):
    sent = store.append("t", b"payload", queue=1)

    store._refusals.set(getattr(dataplane, reason), True)
    try:
        message = store._core.get(sent.message_id)
    finally:
        store._refusals.set(getattr(dataplane, reason), False)
    assert message is not None and message.body == b"payload"


def test_a_get_past_a_tail_moved_back_in_the_namespace_is_declined(store):
    first = store.append("t", b"first", queue=0)
    second = store.append("t", b"second", queue=0)
    assert store._core.get(second.message_id).body == b"second"

    tail = store.commitlog.tail
    store.commitlog.tail = second.commit_offset
    try:
        assert store._core.get(second.message_id) is None
        assert store._core.get(first.message_id).body == b"first"
    finally:
        store.commitlog.tail = tail
    assert store._core.get(second.message_id).body == b"second"


def test_messages_of_several_topics_carry_their_own_topic_names(store):
    store.create_topic("u", queues=2)
    sent = [
        store.append("t" if i % 3 else "u", f"body {i}".encode(), queue=i % 2) for i in range(30)
    ]
    for result in sent + sent[::-1]:
        message = store._core.get(result.message_id)
        assert message.topic == result.topic
        assert message.body == store.get(result.message_id).body


def test_a_message_born_before_it_was_stored_keeps_both_times(store):
    [sent] = store.append_batch("t", [Message(b"x", queue=0, born_time_ms=1234)])

    message = store._core.get(sent.message_id)
    assert message.born_time_ms == 1234
    assert message.store_time_ms == sent.store_time_ms != 1234
    assert message == store._get_long_way(sent.message_id)


def test_a_message_born_as_it_was_stored_holds_one_int_for_both_times(store):
    sent = store.append("t", b"x", queue=0)

    message = store._core.get(sent.message_id)
    assert message.born_time_ms == message.store_time_ms == sent.store_time_ms
    assert message.born_time_ms is message.store_time_ms
    assert message == store._get_long_way(sent.message_id)
