"""A native ``get`` fills the bytes object of a body it made before again, once no one
else holds it and it is as long (issue 29: a 1 KiB body's ``malloc`` and ``free`` were
~565 instructions a ``get``; docs/PERFORMANCE.md, "get29-s45"). What a caller holds
never changes, and a body written over hashes as its new bytes."""

from __future__ import annotations

import sys

import pytest

from tests.engine.storetools import small_config

LENGTH = 700  # past CPython's small-object allocator (512), below the core's cap


@pytest.fixture
def config():
    return small_config(segment_bytes=1 << 18, max_message_bytes=1 << 17)


def _bodies(store, count: int, length: int = LENGTH) -> list[tuple[str, bytes]]:
    sent = []
    for i in range(count):
        body = bytes([i % 251]) * length
        sent.append((store.append("t", body, queue=i % 4).message_id, body))
    return sent


def _kept(store, bodies: list[bytes]) -> list[bool]:
    """Which of ``bodies`` the store core holds beside the caller: those that closing
    the store (which lets go of what the core keeps) leaves with one reference fewer."""
    before = [sys.getrefcount(bodies[i]) for i in range(len(bodies))]
    store.close()
    return [sys.getrefcount(bodies[i]) == before[i] - 1 for i in range(len(bodies))]


def test_bodies_the_caller_holds_never_change(store):
    sent = _bodies(store, 12)
    held = [store.get(message_id) for message_id, _ in sent]  # all held at once
    for _ in range(3):
        for message_id, _ in reversed(sent):
            store.get(message_id)  # let go at once: these may be filled again

    assert [message.body for message in held] == [body for _, body in sent]


def test_a_loop_holding_the_last_message_reads_every_body(store):
    sent = _bodies(store, 12)
    seen = []
    message = None
    for message_id, _ in sent * 2:
        message = store.get(message_id)  # the one before is still held during the call
        seen.append((message.body, hash(message.body)))
    del message

    assert seen == [(body, hash(body)) for _, body in sent * 2]


def test_a_body_written_over_hashes_as_its_new_bytes(store):
    (first, first_body), (second, second_body) = _bodies(store, 2)
    body = store.get(first).body
    assert hash(body) == hash(first_body)  # cached in the object
    del body

    again = store.get(second).body

    assert again == second_body
    assert hash(again) == hash(second_body)
    assert {second_body: 1}[again] == 1


def test_get_keeps_the_last_two_bodies_and_close_lets_them_go(store):
    sent = _bodies(store, 3)
    bodies = [store.get(message_id).body for message_id, _ in sent]

    assert _kept(store, bodies) == [False, True, True]


@pytest.mark.parametrize("length", [100, 512, 513, 64 << 10, (64 << 10) + 1])
def test_only_bodies_past_the_small_allocator_and_under_64_kib_are_kept(store, length):
    ((message_id, sent),) = _bodies(store, 1, length)

    body = store.get(message_id).body

    assert body == sent
    assert _kept(store, [body]) == [512 < length <= 64 << 10]


def test_bodies_of_other_lengths_are_not_written_over(store):
    short, long_ = _bodies(store, 1, LENGTH)[0], _bodies(store, 1, LENGTH + 1)[0]
    body = store.get(short[0]).body
    del body
    assert store.get(long_[0]).body == long_[1]
    assert store.get(short[0]).body == short[1]
