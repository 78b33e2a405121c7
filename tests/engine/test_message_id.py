"""Message ids: format, lookup by id, and every kind of bad id as a typed error."""

from __future__ import annotations

import re
import sys

import pytest

from storeadapter.engine import (
    InvalidMessageIdError,
    MessageNotFoundError,
    StoreClosedError,
)
from tests.engine.storetools import SEGMENT_BYTES, record_length, tail

HEADER_SIZE = 56  # docs/FORMAT.md: the fixed record header; the body follows topic, tag, ...


def _id(store, commit_offset: int) -> str:
    prefix = store.stats().store_id
    return f"{prefix}{commit_offset:016X}"


def test_message_id_is_24_hex_digits_with_the_store_prefix(store):
    results = [store.append("t", f"m{i}") for i in range(5)]

    prefix = store.stats().store_id
    assert all(re.fullmatch(r"[0-9A-F]{24}", r.message_id) for r in results)
    assert all(r.message_id.startswith(prefix) for r in results)
    assert len({r.message_id for r in results}) == 5


def test_message_ids_made_natively_are_strings_as_python_makes_them(store):
    store.create_topic("s", queues=4, layout="shared")
    made = [r.message_id for r in store.append_batch("s", [{"body": b"x", "queue": 1}] * 40)]
    made += [m.message_id for m in store.read("s", 1, 0, 40)]
    for message_id in made:
        copy = "".join(list(message_id))  # the same characters, a string Python made
        assert type(message_id) is str and message_id.isascii() and len(message_id) == 24
        assert message_id == copy and hash(message_id) == hash(copy)
        assert sys.getsizeof(message_id) == sys.getsizeof(copy)
        assert message_id.encode() == copy.encode() and message_id.lower() == copy.lower()
        assert {message_id: 1}[copy] == 1 and sys.intern(message_id) == copy
        assert store.get(message_id).message_id == message_id


def test_message_id_encodes_the_commit_offset(store):
    results = [store.append("t", f"m{i}") for i in range(5)]

    assert [int(r.message_id[8:], 16) for r in results] == [r.commit_offset for r in results]


def test_get_works_after_reopen(open_store):
    store = open_store()
    store.create_topic("t", queues=2)
    results = [store.append("t", f"body {i}" * 40) for i in range(40)]
    store.close()

    reopened = open_store()

    assert [reopened.get(r.message_id).body for r in results] == [
        f"body {i}".encode() * 40 for i in range(40)
    ]


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "abc",
        "G" * 24,
        "0" * 23,
        "0" * 25,
        "0" * 23 + "-",
        " " + "0" * 23,
        "０" * 24,
        "0x" + "0" * 22,
        "0" * 1000,
        24,
        None,
        b"0" * 24,
        ["0" * 24],
    ],
    ids=repr,
)
def test_malformed_id_raises_invalid_message_id(store, bad):
    store.append("t", b"x")

    with pytest.raises(InvalidMessageIdError):
        store.get(bad)


def test_invalid_message_id_error_has_a_sentence(store):
    with pytest.raises(InvalidMessageIdError) as raised:
        store.get("nope")

    assert "nope" in str(raised.value)
    assert "24" in str(raised.value)


def test_id_of_another_store_raises_message_not_found(open_store, tmp_path):
    store = open_store()
    store.create_topic("t", queues=1)
    mine = store.append("t", b"mine")
    other = open_store(tmp_path / "other")
    other.create_topic("t", queues=1)
    theirs = other.append("t", b"theirs")
    assert mine.commit_offset == theirs.commit_offset

    with pytest.raises(MessageNotFoundError):
        store.get(theirs.message_id)


def test_id_beyond_the_tail_raises_message_not_found(store):
    last = store.append("t", b"last")
    end = tail(store)

    for offset in (end, end + 1, end + SEGMENT_BYTES * 10, 0xFFFF_FFFF_FFFF_FFFF):
        with pytest.raises(MessageNotFoundError):
            store.get(_id(store, offset))
    assert store.get(last.message_id).body == b"last"


def test_id_pointing_into_the_middle_of_a_record_raises_message_not_found(store, store_path):
    result = store.append("t", b"an ordinary body without surprises", key="k", tag="t")
    length = record_length(store_path, result.commit_offset)

    for offset in range(result.commit_offset + 1, result.commit_offset + length):
        with pytest.raises(MessageNotFoundError):
            store.get(_id(store, offset))


def test_id_pointing_at_an_end_of_segment_marker_raises_message_not_found(store, store_path):
    results = [store.append("t", b"z" * 500) for _ in range(20)]
    rolled = next(r for r in results if r.commit_offset >= SEGMENT_BYTES)
    before = max(r for r in results if r.commit_offset < SEGMENT_BYTES)
    marker = before.commit_offset + record_length(store_path, before.commit_offset)
    assert marker < rolled.commit_offset

    with pytest.raises(MessageNotFoundError):
        store.get(_id(store, marker))


def test_id_pointing_at_record_magic_inside_a_body_is_not_found_and_not_a_corruption(store):
    body = b"ticket TDMR-1234 closed by ops"  # the record magic is the ASCII text "TDMR"
    result = store.append("t", body)
    inside = result.commit_offset + HEADER_SIZE + len("t") + body.index(b"TDMR") - 4

    with pytest.raises(MessageNotFoundError):
        store.get(_id(store, inside))
    assert store.stats().corruptions == []


def test_every_offset_of_the_log_is_either_a_message_or_not_found(store):
    results = {}
    for i in range(60):
        result = store.append("t", f"message {i} ".encode() * (i % 9 + 1), tag=f"t{i % 3}")
        results[result.commit_offset] = result
    end = tail(store)

    for offset in range(0, end + 16):
        message_id = _id(store, offset)
        if offset in results:
            assert store.get(message_id).message_id == message_id
        else:
            with pytest.raises(MessageNotFoundError):
                store.get(message_id)


def test_get_on_a_closed_store_raises_store_closed(store):
    result = store.append("t", b"x")
    store.close()

    with pytest.raises(StoreClosedError):
        store.get(result.message_id)
