"""read() and get() decode a record in one unpack: what they give and what they refuse."""

from __future__ import annotations

import pytest

from storeadapter.engine import CorruptRecordError, MessageNotFoundError, record
from tests.engine.storetools import flip_bit, read_all, small_config


def _expected(result, topic, body, tag=None, keys=(), properties=None):
    return (
        result.message_id,
        topic,
        result.queue,
        result.queue_offset,
        result.commit_offset,
        result.store_time_ms,
        tag,
        list(keys),
        dict(properties or {}),
        body,
    )


def _fields(message):
    return (
        message.message_id,
        message.topic,
        message.queue,
        message.queue_offset,
        message.commit_offset,
        message.store_time_ms,
        message.tag,
        message.keys,
        message.properties,
        message.body,
    )


def test_read_and_get_give_every_field_with_and_without_tag_keys_properties(store):
    sent = [
        store.append("t", b"plain", queue=1),
        store.append("t", b"tagged", tag="red", queue=1),
        store.append("t", b"keyed", key=["k1", "k2"], queue=1),
        store.append("t", b"props", properties={"a": "1", "b": "x=y"}, queue=1),
        store.append("t", b"", tag="blue", key="k", properties={"p": ""}, queue=1),
        store.append("t", "é".encode() * 40, tag="ü", key="ß", properties={"ä": "ö"}, queue=1),
    ]
    extras = [
        {},
        {"tag": "red"},
        {"keys": ["k1", "k2"]},
        {"properties": {"a": "1", "b": "x=y"}},
        {"tag": "blue", "keys": ["k"], "properties": {"p": ""}},
        {"tag": "ü", "keys": ["ß"], "properties": {"ä": "ö"}},
    ]
    bodies = [b"plain", b"tagged", b"keyed", b"props", b"", "é".encode() * 40]
    expected = [
        _expected(result, "t", body, **extra)
        for result, body, extra in zip(sent, bodies, extras, strict=True)
    ]

    messages = store.read("t", 1, 0, 100)

    assert [_fields(m) for m in messages] == expected
    assert [_fields(store.get(r.message_id)) for r in sent] == expected
    assert all(type(m.body) is bytes for m in messages)
    assert messages[0].keys is not messages[1].keys  # each message its own list and dict
    assert messages[0].properties is not messages[1].properties


def test_read_by_tag_through_the_one_unpack_path(store):
    for i in range(30):
        store.append("t", str(i).encode(), tag=("a" if i % 3 == 0 else None), queue=0)

    tagged = store.read("t", 0, 0, 100, tag="a")

    assert [m.body for m in tagged] == [str(i).encode() for i in range(0, 30, 3)]
    assert store.read("t", 0, 0, 100, tag="b") == []


def test_a_lowercase_message_id_reads_the_message_with_its_canonical_id(store):
    result = store.append("t", b"x")

    message = store.get(result.message_id.lower())

    assert message.message_id == result.message_id
    assert message.body == b"x"


def test_an_id_of_another_store_is_not_found(store):
    result = store.append("t", b"x")
    other = f"{(int(result.message_id[:8], 16) + 1) % 2**32:08X}{result.message_id[8:]}"

    with pytest.raises(MessageNotFoundError):
        store.get(other)


def test_records_longer_than_the_one_unpack_limit_are_read_too(open_store, tmp_path):
    big = record.MAX_SHAPED_LENGTH + 100
    store = open_store(tmp_path / "big", small_config(segment_bytes=1 << 20, max_message_bytes=big))
    store.create_topic("big", queues=1)
    bodies = [b"a" * big, b"small", bytes(range(256)) * (big // 256)]
    results = [store.append("big", body, tag="t", key="k") for body in bodies]

    assert [m.body for m in store.read("big", 0, 0, 10)] == bodies
    assert [store.get(r.message_id).body for r in results] == bodies
    assert store.stats().corruptions == []


def test_many_record_shapes_while_the_shape_cache_is_tiny(store, monkeypatch):
    monkeypatch.setattr(record, "_MAX_SHAPES", 3)
    bodies = [b"x" * n for n in range(40)]
    results = [store.append("t", body, queue=2) for body in bodies]

    assert [m.body for m in store.read("t", 2, 0, 100)] == bodies
    assert [store.get(r.message_id).body for r in results] == bodies


@pytest.mark.parametrize("where", ["header", "tag", "properties", "body", "trailer"])
def test_a_damaged_record_is_reported_and_never_served(open_store, store_path, where):
    store = open_store()
    store.create_topic("t", queues=1)
    results = [
        store.append("t", f"body {i}".encode(), tag="tg", properties={"p": "v"}) for i in range(5)
    ]
    victim = results[2]
    store.close()
    offset_in_record = {
        "header": 20,  # the queue offset
        "tag": 56 + 1,
        "properties": 56 + 1 + 2 + 1,
        "body": 56 + 1 + 2 + 3 + 2,
        "trailer": record.record_length(b"t", b"tg", b"", b"p\x01v", b"body 2") - 6,
    }[where]
    flip_bit(store_path, victim.commit_offset + offset_in_record, bit=3)

    reopened = open_store()
    messages = read_all(reopened, "t", 0)

    assert [m.body for m in messages] == [b"body 0", b"body 1", b"body 3", b"body 4"]
    corruptions = reopened.stats().corruptions
    assert victim.commit_offset in [c.commit_offset for c in corruptions]
    with pytest.raises((CorruptRecordError, MessageNotFoundError)):
        reopened.get(victim.message_id)


def test_decode_record_agrees_with_check_record_on_a_damaged_length(store):
    result = store.append("t", b"payload", queue=0)
    segment, pos = store.commitlog.locate(result.commit_offset)
    view = memoryview(bytearray(segment.view[pos : pos + 200]))
    prefix = result.message_id[:8]

    assert record.decode_record(view, 0, len(view), result.commit_offset, prefix).body == (
        b"payload"
    )
    length = int.from_bytes(view[0:4], "little")
    with pytest.raises(CorruptRecordError, match="queue entry says"):
        record.decode_record(view, 0, len(view), result.commit_offset, prefix, length + 1)
    with pytest.raises(CorruptRecordError, match="lives at"):
        record.decode_record(view, 0, len(view), result.commit_offset + 1, prefix)
    view[0] ^= 1
    with pytest.raises(CorruptRecordError):
        record.decode_record(view, 0, len(view), result.commit_offset, prefix)
    with pytest.raises(CorruptRecordError, match="header runs past"):
        record.decode_record(view, 0, 30, result.commit_offset, prefix)
