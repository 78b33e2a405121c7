"""Appends that must be refused: oversized bodies, bad fields, unknown topics and queues."""

from __future__ import annotations

import pytest

from storeadapter.engine import (
    InvalidMessageError,
    Message,
    MessageStore,
    MessageTooLargeError,
    QueueNotFoundError,
    StoreClosedError,
    StoreConfig,
    TopicNotFoundError,
)
from tests.engine.storetools import (
    INDEX_ENTRIES,
    INDEX_SLOTS,
    MAX_MESSAGE_BYTES,
    SEGMENT_BYTES,
    read_log_bytes,
    segment_paths,
    tail,
)


def _snapshot(store: MessageStore) -> tuple:
    """What a refused append must leave unchanged: queue ranges and the log tail."""
    ranges = tuple(
        store.queue_range(info.name, q) for info in store.topics() for q in range(info.queues)
    )
    return ranges, tail(store)


def test_body_of_exactly_max_message_bytes_is_accepted(store):
    result = store.append("t", b"m" * MAX_MESSAGE_BYTES)

    assert store.get(result.message_id).body == b"m" * MAX_MESSAGE_BYTES


def test_oversized_body_is_refused_and_nothing_written(store, store_path):
    store.append("t", b"before")
    before = _snapshot(store)
    log_tail = tail(store)

    with pytest.raises(MessageTooLargeError, match=str(MAX_MESSAGE_BYTES)):
        store.append("t", b"x" * (MAX_MESSAGE_BYTES + 1))

    assert _snapshot(store) == before
    assert read_log_bytes(store_path, log_tail, 64) == bytes(64)


def test_oversized_str_body_is_measured_in_encoded_bytes(store):
    before = _snapshot(store)

    with pytest.raises(MessageTooLargeError):
        store.append("t", "é" * (MAX_MESSAGE_BYTES // 2 + 1))

    assert _snapshot(store) == before


def test_batch_with_one_oversized_message_writes_none(store, store_path):
    store.append("t", b"before")
    before = _snapshot(store)
    log_tail = tail(store)

    with pytest.raises(MessageTooLargeError):
        store.append_batch("t", [b"ok 1", b"ok 2", b"x" * (MAX_MESSAGE_BYTES + 1), b"ok 3"])

    assert _snapshot(store) == before
    assert read_log_bytes(store_path, log_tail, 64) == bytes(64)


@pytest.mark.parametrize(
    "bad",
    [
        42,
        None,
        {"body": b"x", "colour": "red"},
        {"body": b"x", 5: "five"},
        {"key": "no body"},
        Message(b"x", tag=""),
        Message(b"x", key=""),
        Message(b"x", properties={"n": 1}),
        Message(b"x", queue=99),
    ],
    ids=[
        "int",
        "none",
        "unknown-field",
        "int-field",
        "no-body",
        "empty-tag",
        "empty-key",
        "int-prop",
        "queue",
    ],
)
def test_batch_with_one_invalid_message_writes_none(store, bad):
    before = _snapshot(store)

    with pytest.raises((InvalidMessageError, QueueNotFoundError)):
        store.append_batch("t", [b"good", Message(b"good too", queue=1), bad])

    assert _snapshot(store) == before


@pytest.mark.parametrize("layout", ["files", "shared"])
def test_a_dict_with_a_key_that_is_not_a_str_is_an_invalid_message_naming_it(store, layout):
    store.create_topic("keys", queues=2, layout=layout)

    with pytest.raises(InvalidMessageError, match=r"got \[5, 'body'\]"):
        store.append_batch("keys", [{"body": b"x", 5: "five"}])

    assert store.queue_range("keys", 0) == store.queue_range("keys", 1) == (0, 0)


def test_record_larger_than_a_segment_is_refused_and_nothing_written(tmp_path):
    config = StoreConfig(
        index_slots=INDEX_SLOTS, index_entries=INDEX_ENTRIES, segment_bytes=SEGMENT_BYTES
    )  # default max_message_bytes: 4 MiB
    with MessageStore.open(tmp_path / "store", config) as store:
        store.create_topic("t", queues=1)
        store.append("t", b"before")
        before = _snapshot(store)

        with pytest.raises(MessageTooLargeError):
            store.append("t", b"x" * SEGMENT_BYTES)

        assert _snapshot(store) == before
        assert store.append("t", b"after").queue_offset == 1


def test_batch_whose_last_record_is_larger_than_a_segment_writes_none(tmp_path):
    config = StoreConfig(
        index_slots=INDEX_SLOTS, index_entries=INDEX_ENTRIES, segment_bytes=SEGMENT_BYTES
    )  # default max_message_bytes: 4 MiB
    with MessageStore.open(tmp_path / "store", config) as store:
        store.create_topic("t", queues=1)
        before = _snapshot(store)

        with pytest.raises(MessageTooLargeError):
            store.append_batch("t", [b"small 1", b"small 2", b"x" * SEGMENT_BYTES])

        assert _snapshot(store) == before
        assert store.read("t", 0, 0) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tag", ""),
        ("tag", 7),
        ("tag", "a\x1fb"),
        ("tag", "t" * 256),
        ("key", ""),
        ("key", 5),
        ("key", ["ok", "bad\x01"]),
        ("properties", {"n": 1}),
        ("properties", {"": "v"}),
        ("properties", {"k": "v\x02"}),
        ("properties", ["not", "a", "mapping"]),
    ],
)
def test_invalid_message_fields_are_refused_and_nothing_written(store, field, value):
    before = _snapshot(store)

    with pytest.raises(InvalidMessageError):
        store.append("t", b"body", **{field: value})

    assert _snapshot(store) == before


@pytest.mark.parametrize("body", [None, 12, 1.5, ["b"]], ids=["none", "int", "float", "list"])
def test_body_that_is_not_bytes_or_str_is_refused(store, body):
    with pytest.raises(InvalidMessageError):
        store.append("t", body)


def test_unknown_topic_raises_topic_not_found_everywhere(store):
    calls = [
        lambda: store.append("nope", b"x"),
        lambda: store.append_batch("nope", [b"x"]),
        lambda: store.read("nope", 0, 0),
        lambda: store.read_result("nope", 0, 0),
        lambda: store.queue_range("nope", 0),
        lambda: store.delete_topic("nope"),
        lambda: store.commit_offset("g", "nope", 0, 0),
        lambda: store.committed_offset("g", "nope", 0),
    ]
    for call in calls:
        with pytest.raises(TopicNotFoundError, match="nope"):
            call()


@pytest.mark.parametrize("queue", [4, 100, -1, "0", True, 1.5])
def test_bad_queue_raises_queue_not_found(store, queue):
    before = _snapshot(store)

    with pytest.raises(QueueNotFoundError):
        store.append("t", b"x", queue=queue)
    with pytest.raises(QueueNotFoundError):
        store.append_batch("t", [Message(b"x", queue=queue)])
    with pytest.raises(QueueNotFoundError):
        store.read("t", queue, 0)
    with pytest.raises(QueueNotFoundError):
        store.queue_range("t", queue)

    assert _snapshot(store) == before


def test_operations_on_a_closed_store_raise_store_closed(store):
    result = store.append("t", b"x")
    store.close()

    for call in (
        lambda: store.append("t", b"y"),
        lambda: store.append_batch("t", [b"y"]),
        lambda: store.read("t", 0, 0),
        lambda: store.get(result.message_id),
        lambda: store.create_topic("u"),
        lambda: store.topics(),
        lambda: store.stats(),
        lambda: store.flush(),
    ):
        with pytest.raises(StoreClosedError):
            call()


def test_refused_append_does_not_create_a_segment(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=1)
    segments = segment_paths(store_path)

    with pytest.raises(MessageTooLargeError):
        store.append("t", b"x" * (MAX_MESSAGE_BYTES + 1))

    assert segment_paths(store_path) == segments
