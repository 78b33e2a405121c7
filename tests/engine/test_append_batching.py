"""Batched appends encode every record byte for byte as the reference encoder does, and
give the same results, whichever path a batch takes (bodies alone, dicts, keyed, dedup,
across segments, shared block files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from storeadapter.engine import STATUS_DUPLICATE, STATUS_OK, MessageStore
from storeadapter.engine.record import (
    RECORD_OVERHEAD,
    encode_head,
    encode_keys,
    encode_properties,
    encode_tag,
    encode_trailer,
    head_packer,
)
from tests.engine.storetools import SHARED_LAYOUT, read_all, read_log_bytes, small_config


def expected_record(store: MessageStore, result, body: bytes, tag=None, keys=(), props=None):
    message = store.get(result.message_id)
    topic = result.topic.encode()
    tag_bytes = encode_tag(tag)
    keys_bytes = encode_keys(list(keys)) if keys else b""
    props_bytes = encode_properties(props)
    length = RECORD_OVERHEAD + len(topic) + len(tag_bytes) + len(keys_bytes)
    length += len(props_bytes) + len(body)
    head = encode_head(
        length,
        result.commit_offset,
        result.queue_offset,
        message.born_time_ms,
        result.store_time_ms,
        result.queue,
        len(body),
        topic,
        tag_bytes,
        keys_bytes,
        props_bytes,
    )
    return head + body + encode_trailer(head, body, length)


def check_bytes(store: MessageStore, store_path: Path, results, bodies, **fields) -> None:
    store.flush()
    for result, body in zip(results, bodies, strict=True):
        want = expected_record(store, result, body, **fields)
        assert read_log_bytes(store_path, result.commit_offset, len(want)) == want
        assert result.message_id == f"{store.identity.id_prefix}{result.commit_offset:016X}"
        assert store.get(result.message_id).body == body


def test_head_packer_packs_what_encode_head_does():
    head = encode_head(90, 7, 3, 11, 12, 2, 5, b"topic", b"tg", b"k", b"")
    packed = head_packer(8)(90, 0x524D4454, 7, 3, 11, 12, 2, 5, 0, 5, 2, 1, 0, b"topictgk")
    assert packed == head


def test_plain_batch_is_byte_exact_and_round_robin(store, store_path):
    bodies = [bytes([i]) * (i % 7 + 1) for i in range(30)]
    results = store.append_batch("t", bodies)

    assert [r.status for r in results] == [STATUS_OK] * 30
    assert [r.queue for r in results] == [i % 4 for i in range(30)]
    assert [r.queue_offset for r in results] == [i // 4 for i in range(30)]
    offsets = [r.commit_offset for r in results]
    assert offsets == sorted(offsets)
    check_bytes(store, store_path, results, bodies)
    more = store.append_batch("t", [b"x", b"y"])
    assert [(r.queue, r.queue_offset) for r in more] == [(2, 7), (3, 7)]
    assert [m.body for m in read_all(store, "t", 2)][-1] == b"x"


def test_plain_batch_after_a_frozen_queue_skips_it(store):
    store.freeze_queue("t", 1)
    results = store.append_batch("t", [b"a", b"b", b"c", b"d"])
    assert [r.queue for r in results] == [0, 2, 3, 0]
    assert [r.queue_offset for r in results] == [0, 0, 0, 1]


def test_dict_batch_with_queues_is_byte_exact(store, store_path):
    items = [{"body": b"m%d" % i, "queue": i % 3} for i in range(12)]
    items.append({"body": b"no queue"})
    results = store.append_batch("t", items)

    assert [r.queue for r in results[:12]] == [i % 3 for i in range(12)]
    assert [r.queue_offset for r in results[:12]] == [i // 3 for i in range(12)]
    check_bytes(store, store_path, results, [item["body"] for item in items])


@pytest.mark.parametrize(
    "item",
    [{"body": b"x", "queue": 9}, {"body": b"x", "queue": True}, {"body": 5, "queue": 0}],
)
def test_dict_batch_errors_are_unchanged(store, item):
    with pytest.raises(Exception) as caught:
        store.append_batch("t", [{"body": b"ok", "queue": 0}, item])
    assert type(caught.value).__name__ in ("QueueNotFoundError", "InvalidMessageError")
    assert store.queue_range("t", 0) == (0, 0)


def test_keyed_tagged_batch_is_byte_exact(store, store_path):
    items = [
        {"body": b"b%d" % i, "key": [f"k{i}", "z"], "tag": "tg", "properties": {"p": "v"}}
        for i in range(10)
    ]
    results = store.append_batch("t", items)
    store.flush()
    for item, result in zip(items, results, strict=True):
        want = expected_record(
            store, result, item["body"], tag="tg", keys=item["key"], props={"p": "v"}
        )
        assert read_log_bytes(store_path, result.commit_offset, len(want)) == want
    assert [m.body for m in store.query_by_key("t", "k3")] == [b"b3"]


def test_dedup_results_keep_their_places(store):
    first = store.append_batch("t", [{"body": b"a", "dedup_id": "A"}])[0]
    results = store.append_batch(
        "t",
        [
            b"one",
            {"body": b"a again", "dedup_id": "A"},
            {"body": b"b", "dedup_id": "B"},
            b"two",
            {"body": b"b again", "dedup_id": "B"},
        ],
    )

    assert [r.status for r in results] == [
        STATUS_OK,
        STATUS_DUPLICATE,
        STATUS_OK,
        STATUS_OK,
        STATUS_DUPLICATE,
    ]
    assert results[1] == first._replace(status=STATUS_DUPLICATE)
    assert results[4] == results[2]._replace(status=STATUS_DUPLICATE)
    assert store.get(results[3].message_id).body == b"two"


def test_plain_batch_across_segments_is_byte_exact(store, store_path):
    bodies = [bytes([i % 251]) * 200 for i in range(60)]  # several 4 KiB segments
    results = store.append_batch("t", bodies)
    check_bytes(store, store_path, results, bodies)
    assert len({r.commit_offset // 4096 for r in results}) > 1


def test_shared_topic_batches_allocate_and_read_back(store_path, open_store):
    config = small_config(**SHARED_LAYOUT)
    store = open_store(store_path, config)
    store.create_topic("s", queues=50, layout="shared")
    sent: dict[int, list[bytes]] = {}
    for round_ in range(6):
        items = []
        for i in range(120):
            queue = (i * 7 + round_) % 50
            body = b"%d:%d:%d" % (round_, i, queue)
            sent.setdefault(queue, []).append(body)
            items.append({"body": body, "queue": queue})
        store.append_batch("s", items)
    for queue, bodies in sent.items():
        assert [m.body for m in read_all(store, "s", queue)] == bodies
    store.close()

    again = open_store(store_path, config)
    for queue, bodies in sent.items():
        assert [m.body for m in read_all(again, "s", queue)] == bodies
        assert again.queue_range("s", queue) == (0, len(bodies))
