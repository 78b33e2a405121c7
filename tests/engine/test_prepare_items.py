"""``_native.prepare_items``: ``append_batch``'s items prepared in one call, as
``Writer.prepare`` prepares each (writer.prepare_batch; PERFORMANCE.md, issue 31 part 5)."""

from __future__ import annotations

import pytest

from storeadapter.engine import MessageStore
from storeadapter.engine.errors import (
    InvalidMessageError,
    MessageTooLargeError,
    QueueFrozenError,
    QueueNotFoundError,
)
from storeadapter.engine.results import Message
from tests.engine.storetools import read_all, small_config

MAX_BODY = 4096


class _OwnMessage(Message):
    """A caller's subclass of Message (left to the Python loop)."""

    __slots__ = ()


def _dict_after_a_deletion() -> dict:
    """A {"body", "queue"} dict whose entries are not its first two (one was deleted)."""
    item = {"body": b"d", "tag": "gone", "queue": 1}
    del item["tag"]
    return item


VALID = [
    {"queue": 1, "body": b"queue first"},
    {"".join(["bo", "dy"]): b"a key not interned", "queue": 1},
    _dict_after_a_deletion(),
    dict([("body", b"from pairs"), ("queue", 2)]),
    b"plain",
    b"",
    "text",
    "",
    "ünïcødé ✓ 𝄞",
    {"body": b"x"},
    {"body": "ünïcødé"},
    {"body": b"", "queue": 2},
    {"body": b"q", "queue": None, "key": None, "tag": None, "properties": None},
    {"body": b"k", "key": "order-1"},
    {"body": b"k", "key": ["a", "ß", "c"]},
    {"body": b"k", "key": []},
    {"body": b"k", "key": "k" * 2000},
    {"body": b"t", "tag": "paid"},
    {"body": b"t", "tag": "é" * 127},
    {"body": b"t", "tag": "t" * 255},
    {"body": b"p", "properties": {}},
    {"body": b"p", "properties": {"region": "eu", "ключ": "значение", "e": ""}},
    {"body": b"m", "queue": 1, "key": ["k1", "k2"], "tag": "t", "properties": {"a": "b"}},
    {"body": b"B" * MAX_BODY},
    {"properties": {"a": "1"}, "tag": "x", "body": "order of keys"},
    Message(b"m"),
    Message("ünï", ["k1", "k2"], "paid", 2, {"region": "eu"}),
    Message(b"m", "k", None, None, {}),
    {"body": b"b", "born_time_ms": 5},
    {"body": b"b", "born_time_ms": 0, "queue": 1, "tag": "t"},
    {"body": b"b", "born_time_ms": None},
    Message(b"b", born_time_ms=1_700_000_000_000),
]
REFUSED = [
    ({"body": b"x", "queue": 9}, QueueNotFoundError),
    ({"body": b"x", "queue": -1}, QueueNotFoundError),
    ({"body": b"x", "queue": True}, QueueNotFoundError),
    ({"body": b"x", "queue": "1"}, QueueNotFoundError),
    ({"body": b"x", "queue": 3}, QueueFrozenError),
    ({"body": b"B" * (MAX_BODY + 1)}, MessageTooLargeError),
    (b"B" * (MAX_BODY + 1), MessageTooLargeError),
    ({"body": 5}, InvalidMessageError),
    ({"queue": 1}, InvalidMessageError),
    ({"body": b"x", "colour": "red"}, InvalidMessageError),
    ({"body": b"x", "key": ""}, InvalidMessageError),
    ({"body": b"x", "key": ["a", 1]}, InvalidMessageError),
    ({"body": b"x", "key": "a\x1fb"}, InvalidMessageError),
    ({"body": b"x", "key": "k" * 0x10000}, InvalidMessageError),
    ({"body": b"x", "tag": ""}, InvalidMessageError),
    ({"body": b"x", "tag": "t" * 256}, InvalidMessageError),
    ({"body": b"x", "tag": "é" * 128}, InvalidMessageError),
    ({"body": b"x", "tag": 7}, InvalidMessageError),
    ({"body": b"x", "tag": "a\x01"}, InvalidMessageError),
    ({"body": b"x", "properties": {"": "v"}}, InvalidMessageError),
    ({"body": b"x", "properties": {"a": 1}}, InvalidMessageError),
    ({"body": b"x", "properties": {"a": "b\x02"}}, InvalidMessageError),
    ({"body": b"x", "properties": {"DEDUP_ID": "d"}}, InvalidMessageError),
    ({"body": b"x", "properties": ["a"]}, InvalidMessageError),
    ({"body": b"x", "properties": {"p": "v" * 0x10000}}, InvalidMessageError),
    (12, InvalidMessageError),
    (Message(b"x", queue=9), QueueNotFoundError),
    (Message(b"x", queue=3), QueueFrozenError),
    (Message(b"x", tag=""), InvalidMessageError),
    (Message(b"x", key=""), InvalidMessageError),
    (Message(5), InvalidMessageError),
    (Message(b"B" * (MAX_BODY + 1)), MessageTooLargeError),
    ({"body": b"x", "born_time_ms": -1}, InvalidMessageError),
    ({"body": b"x", "born_time_ms": "5"}, InvalidMessageError),
    (Message(b"x", born_time_ms=1.5), InvalidMessageError),
    # Fields that each fit but together do not fit in a segment (64 KiB here).
    ({"body": b"x", "key": "k" * 40000, "properties": {"p": "v" * 40000}}, MessageTooLargeError),
]
# Left to the Python loop though valid (it prepares them the same): not refused.
LEFT = [
    {"body": b"x", "key": ("a", "b")},
    {"body": bytearray(b"x")},
    {"body": b"x", "dedup_id": "d1"},
    {"body": b"x", "born_time_ms": True},
    {"body": b"x", "born_time_ms": 1 << 63},
    Message(b"x", dedup_id="d1"),
    Message(bytearray(b"x")),
    _OwnMessage(b"x"),
]


@pytest.fixture
def store(tmp_path):
    with MessageStore.open(
        tmp_path / "s", small_config(max_message_bytes=MAX_BODY, segment_bytes=1 << 16)
    ) as store:
        store.create_topic("t", queues=4, layout="files")
        store.freeze_queue("t", 3)
        yield store


def _native(store, items):
    return store._writer.prepare_batch_native(store._registry.topics["t"], items)


def _python(store, items):
    state = store._registry.topics["t"]
    writer = store._writer
    return writer.prepare_batch_python(state, items, writer.plain_body_limit(state))


@pytest.mark.parametrize("item", VALID, ids=range(len(VALID)))
def test_each_valid_item_is_prepared_as_the_python_loop_prepares_it(store, item):
    assert _native(store, [item]) == _python(store, [item])


def test_a_batch_of_every_valid_item_is_prepared_as_the_python_loop_prepares_it(store):
    assert _native(store, VALID) == _python(store, VALID)


def test_tags_repeated_and_more_than_the_kept_ones_hash_as_the_python_loop_hashes(store):
    # The native call keeps the first 16 distinct tags' hashes; the others are hashed
    # each time.
    items = [{"body": b"x", "tag": f"t{i % 40}-ü"} for i in range(120)]
    items += [{"body": b"y"}, {"body": b"z", "tag": "t3-ü"}]

    assert _native(store, items) == _python(store, items)


@pytest.mark.parametrize("item", [i for i, _ in REFUSED], ids=range(len(REFUSED)))
def test_an_item_prepare_refuses_leaves_the_batch_to_the_python_loop(store, item):
    assert _native(store, [b"ok", item]) is None


@pytest.mark.parametrize(("item", "error"), REFUSED, ids=range(len(REFUSED)))
def test_a_bad_item_gives_the_typed_error_and_writes_nothing(store, item, error):
    before = [store.queue_range("t", q) for q in range(4)], store.commitlog.tail
    with pytest.raises(error):
        _python(store, [b"ok", item])
    with pytest.raises(error):
        store.append_batch("t", [{"body": b"ok", "key": "k"}, item])
    assert ([store.queue_range("t", q) for q in range(4)], store.commitlog.tail) == before


@pytest.mark.parametrize("item", LEFT, ids=range(len(LEFT)))
def test_other_valid_items_go_the_python_loop(store, item):
    assert _native(store, [item]) is None
    assert _python(store, [item])


def test_a_batch_of_dicts_reads_back_as_written(store):
    items = [i for i in VALID if type(i) is dict]
    items += [i._asdict() for i in VALID if type(i) is Message]
    results = store.append_batch("t", items)
    found = {m.commit_offset: m for q in range(4) for m in read_all(store, "t", q)}
    for item, result in zip(items, results, strict=True):
        message = found[result.commit_offset]
        body = item["body"]
        assert message.body == (body.encode() if type(body) is str else body)
        key = item.get("key") or []
        assert message.keys == ([key] if type(key) is str else key)
        assert message.tag == item.get("tag")
        assert message.properties == (item.get("properties") or {})
        if item.get("queue") is not None:
            assert message.queue == item["queue"]
