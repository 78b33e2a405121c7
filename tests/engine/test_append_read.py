"""Round trips: append, read by queue offset, get by id; queue choice; segment rolling."""

from __future__ import annotations

import re

import pytest

from storeadapter.engine import (
    STATUS_OK,
    Message,
    MessageStore,
    OffsetOutOfRangeError,
    StoreClosedError,
    StoreError,
)
from tests.engine.storetools import (
    QUEUE_FILE_ENTRIES,
    SEGMENT_BYTES,
    queue_file_paths,
    read_all,
    read_everything,
    record_length,
    segment_paths,
)


def test_append_returns_where_the_message_landed(store):
    result = store.append("t", b"hello", queue=2)

    assert result.topic == "t"
    assert result.queue == 2
    assert result.queue_offset == 0
    assert result.status == STATUS_OK
    assert re.fullmatch(r"[0-9A-F]{24}", result.message_id)
    assert result.store_time_ms > 0


def test_get_by_id_returns_every_field(store):
    result = store.append(
        "t", b"\x00body\xff", key="order-1", tag="created", properties={"a": "1", "b": "two"}
    )

    message = store.get(result.message_id)

    assert message.message_id == result.message_id
    assert message.topic == "t"
    assert message.queue == result.queue
    assert message.queue_offset == result.queue_offset
    assert message.commit_offset == result.commit_offset
    assert message.store_time_ms == result.store_time_ms
    assert 0 < message.born_time_ms <= message.store_time_ms
    assert message.tag == "created"
    assert message.keys == ["order-1"]
    assert message.properties == {"a": "1", "b": "two"}
    assert message.body == b"\x00body\xff"


def test_read_by_queue_offset_returns_the_same_message_as_get(store):
    result = store.append("t", b"payload", key="k", tag="x", properties={"p": "v"})

    [read] = store.read("t", result.queue, result.queue_offset, max_messages=1)

    assert read == store.get(result.message_id)


def test_str_body_is_stored_as_utf8(store):
    result = store.append("t", "héllo ✓")

    assert store.get(result.message_id).body == "héllo ✓".encode()


def test_several_keys_round_trip(store):
    result = store.append("t", b"x", key=["a", "b", "c"])

    assert store.get(result.message_id).keys == ["a", "b", "c"]


def test_message_without_key_tag_or_properties_reads_back_empty(store):
    result = store.append("t", b"plain")

    message = store.get(result.message_id)

    assert message.keys == []
    assert message.tag is None
    assert message.properties == {}


def test_append_batch_accepts_bytes_str_dicts_and_messages(store):
    results = store.append_batch(
        "t",
        [
            b"raw",
            "text",
            {"body": b"from dict", "key": "k1", "tag": "d", "properties": {"x": "y"}},
            Message(b"from message", key=["m1", "m2"], tag="m", queue=3, born_time_ms=12345),
        ],
    )

    messages = [store.get(r.message_id) for r in results]
    assert [m.body for m in messages] == [b"raw", b"text", b"from dict", b"from message"]
    assert (messages[2].keys, messages[2].tag, messages[2].properties) == (["k1"], "d", {"x": "y"})
    assert (messages[3].keys, messages[3].tag, messages[3].queue) == (["m1", "m2"], "m", 3)
    assert messages[3].born_time_ms == 12345
    assert all(r.status == STATUS_OK for r in results)


def test_append_batch_assigns_contiguous_queue_offsets(store):
    results = store.append_batch("t", [Message(f"m{i}", queue=1) for i in range(10)])

    assert [r.queue_offset for r in results] == list(range(10))
    assert [m.body for m in read_all(store, "t", 1)] == [f"m{i}".encode() for i in range(10)]
    offsets = [r.commit_offset for r in results]
    assert offsets == sorted(offsets) and len(set(offsets)) == 10


def test_empty_batch_writes_nothing(store):
    assert store.append_batch("t", []) == []
    assert all(store.queue_range("t", q) == (0, 0) for q in range(4))


def test_explicit_queue_is_used(store):
    for queue in (3, 0, 3):
        assert store.append("t", b"x", queue=queue).queue == queue

    assert [store.queue_range("t", q)[1] for q in range(4)] == [1, 0, 0, 2]


def test_same_key_always_goes_to_the_same_queue(store):
    queues = {store.append("t", f"m{i}", key="customer-42").queue for i in range(20)}

    assert len(queues) == 1


def test_first_key_routes_a_message_with_several_keys(store):
    single = store.append("t", b"a", key="route-me").queue

    assert store.append("t", b"b", key=["route-me", "other"]).queue == single


def test_round_robin_spreads_over_every_queue(store):
    results = [store.append("t", f"m{i}") for i in range(8)]

    assert sorted(r.queue for r in results) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_keys_spread_over_several_queues(store):
    queues = {store.append("t", b"x", key=f"key-{i}").queue for i in range(100)}

    assert len(queues) > 1


def test_read_returns_messages_in_queue_order_from_the_offset(store):
    for i in range(10):
        store.append("t", f"m{i}", queue=0)

    messages = store.read("t", 0, 4, max_messages=3)

    assert [m.body for m in messages] == [b"m4", b"m5", b"m6"]
    assert [m.queue_offset for m in messages] == [4, 5, 6]


def test_read_result_says_where_to_continue(store):
    for i in range(5):
        store.append("t", f"m{i}", queue=0)

    result = store.read_result("t", 0, 1, max_messages=2)

    assert (result.next_offset, result.min_offset, result.max_offset) == (3, 0, 5)


def test_read_with_tag_returns_only_that_tag(store):
    tags = ["a", "b", None, "a", "bb", "a", None, "b"]
    for i, tag in enumerate(tags):
        store.append("t", f"m{i}", tag=tag, queue=0)

    messages = store.read("t", 0, 0, max_messages=32, tag="a")

    assert [m.body for m in messages] == [b"m0", b"m3", b"m5"]
    assert all(m.tag == "a" for m in messages)


def test_read_with_tag_respects_max_messages_and_next_offset(store):
    for i in range(20):
        store.append("t", f"m{i}", tag="even" if i % 2 == 0 else "odd", queue=0)

    result = store.read_result("t", 0, 0, max_messages=3, tag="odd")

    assert [m.body for m in result.messages] == [b"m1", b"m3", b"m5"]
    assert result.next_offset == 6


def test_read_with_unknown_tag_returns_nothing(store):
    for i in range(5):
        store.append("t", f"m{i}", tag="a", queue=0)

    assert store.read("t", 0, 0, tag="never-used") == []


def test_read_at_or_beyond_the_max_offset_returns_nothing(store):
    for i in range(3):
        store.append("t", f"m{i}", queue=0)

    assert store.read("t", 0, 3) == []
    assert store.read("t", 0, 1000) == []
    assert store.read("t", 1, 0) == []


@pytest.mark.parametrize("offset", [-1, -1000])
def test_read_at_a_negative_offset_raises(store, offset):
    store.append("t", b"x", queue=0)

    with pytest.raises(OffsetOutOfRangeError):
        store.read("t", 0, offset)


@pytest.mark.parametrize("max_messages", [0, -1])
def test_read_with_max_messages_below_one_raises_a_store_error(store, max_messages):
    with pytest.raises(StoreError):
        store.read("t", 0, 0, max_messages=max_messages)


def test_segments_roll_with_twenty_digit_names_and_every_message_stays_readable(store, store_path):
    bodies = [bytes([65 + i % 26]) * (50 + i * 7 % 400) for i in range(120)]
    results = [store.append("t", body) for body in bodies]

    paths = segment_paths(store_path)
    assert len(paths) >= 5
    assert all(re.fullmatch(r"\d{20}", p.name) for p in paths)
    assert [int(p.name) for p in paths] == [i * SEGMENT_BYTES for i in range(len(paths))]
    assert all(p.stat().st_size == SEGMENT_BYTES for p in paths)
    for body, result in zip(bodies, results, strict=True):
        message = store.get(result.message_id)
        assert message.body == body
        assert store.read("t", result.queue, result.queue_offset, 1) == [message]


def test_no_record_straddles_two_segments(store, store_path):
    results = [store.append("t", b"y" * 300) for _ in range(60)]

    for result in results:
        end = result.commit_offset + record_length(store_path, result.commit_offset)
        assert result.commit_offset // SEGMENT_BYTES == (end - 1) // SEGMENT_BYTES


def test_consume_queue_files_roll_and_reads_cross_them(files_store, store_path):
    store = files_store
    count = QUEUE_FILE_ENTRIES * 2 + 5
    store.append_batch("t", [Message(f"m{i}", queue=0) for i in range(count)])

    names = [p.name for p in queue_file_paths(store_path, "t", 0)]
    assert names == [f"{i * QUEUE_FILE_ENTRIES:020d}" for i in range(3)]
    messages = store.read("t", 0, QUEUE_FILE_ENTRIES - 2, max_messages=5)
    assert [m.queue_offset for m in messages] == list(
        range(QUEUE_FILE_ENTRIES - 2, QUEUE_FILE_ENTRIES + 3)
    )
    assert [m.body for m in read_all(store, "t", 0)] == [f"m{i}".encode() for i in range(count)]


def test_reopen_after_close_keeps_everything(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=3)
    bodies = [f"message {i}".encode() * (i % 30 + 1) for i in range(80)]
    results = [store.append("t", body, key=f"k{i % 7}") for i, body in enumerate(bodies)]
    before = read_everything(store)
    store.close()

    reopened = open_store()

    assert read_everything(reopened) == before
    assert [reopened.get(r.message_id).body for r in results] == bodies


def test_append_after_reopen_continues_the_offsets(open_store):
    store = open_store()
    store.create_topic("t", queues=1)
    last = [store.append("t", f"m{i}") for i in range(30)][-1]
    store.close()

    reopened = open_store()
    result = reopened.append("t", b"after")

    assert result.queue_offset == 30
    assert result.commit_offset > last.commit_offset
    assert reopened.read("t", 0, 29, max_messages=2)[1].body == b"after"


def test_context_manager_closes_the_store(store_path, config):
    with MessageStore.open(store_path, config) as store:
        store.create_topic("t", queues=1)
        result = store.append("t", b"inside")

    with pytest.raises(StoreClosedError):
        store.append("t", b"after close")
    assert not (store_path / "abort").exists()
    with MessageStore.open(store_path, config) as again:
        assert again.get(result.message_id).body == b"inside"


def test_close_twice_is_harmless(open_store):
    store = open_store()
    store.close()
    store.close()

    with pytest.raises(StoreClosedError):
        store.topics()


def test_the_append_path_writes_exactly_the_reference_encoding(store, store_path):
    from storeadapter.engine.record import encode_head, encode_trailer, record_length

    result = store.append("t", b"body", key=["k1", "k2"], tag="tg", properties={"a": "b"})
    stored = store.get(result.message_id)
    keys, properties = b"k1\x1fk2", b"a\x01b"
    length = record_length(b"t", b"tg", keys, properties, b"body")
    head = encode_head(
        length,
        result.commit_offset,
        result.queue_offset,
        stored.born_time_ms,
        stored.store_time_ms,
        result.queue,
        4,
        b"t",
        b"tg",
        keys,
        properties,
    )
    expected = head + b"body" + encode_trailer(head, b"body", length)

    segment = store_path / "commitlog" / f"{0:020d}"
    raw = segment.read_bytes()[result.commit_offset : result.commit_offset + length]
    assert raw == expected
