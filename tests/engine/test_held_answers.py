"""Answers that hold many messages (issue 34, item 1, step 4): a read of up to 10,000
and a filtered scan that may keep 10,000 copy each body of 256 bytes or more past the
CPU's caches (non-temporal stores: `stream::copy_past_cache`), and every message made
by the core takes the tag and the properties' names and values from the message made
before it when their bytes are the same (`Recent` in native/src/python/reader.rs). Both
must give exactly the messages the long way (`_read_long_way`, Python decoding) gives:
every field, every body byte at every length and alignment, texts that change from one
message to the next, more properties than the core keeps, and lists and dicts of their
own in each message."""

from __future__ import annotations

import pytest

from storeadapter.engine import filters
from tests.engine.storetools import small_config

TOPIC = "t"
COUNT = 240


class _View:
    """A store that is not a MessageStore: the scan reads it through ``read``."""

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        return getattr(self._store, name)


def _properties(i: int) -> dict | None:
    if i % 9 == 4:
        return None
    if i % 17 == 3:  # more properties than the core keeps texts for (16)
        return {f"p{n}": f"v{(n * i) % 3}" for n in range(20)}
    properties = {"region": "eu" if i % 3 else "us", "tier": "gold"}
    if i % 4 == 1:
        properties = {"tier": "gold", "region": "eu"}  # the same names, in another order
    if i % 5 == 2:
        properties["note"] = "été ✓" if i % 2 else ""  # not ASCII; an empty value
    return properties


def _body(i: int) -> bytes:
    # Short ones (copied as usual) and 256 B to ~2.3 KiB (past the caches), at lengths
    # that start and end everywhere within a cache line.
    size = 10 + i % 5 if i % 6 == 0 else 256 + (i * 37) % 2100
    return bytes((i * 7 + n) % 251 for n in range(size))


@pytest.fixture
def store(open_store, store_path):
    opened = open_store(
        store_path,
        small_config(shared_layout_above=1024, segment_bytes=1 << 20, max_message_bytes=4096),
    )
    opened.create_topic(TOPIC, queues=2)
    for i in range(COUNT):
        opened.append(
            TOPIC,
            _body(i),
            queue=i % 2,
            tag=None if i % 7 == 0 else ("paid" if i % 4 == 0 else "ouvert é"),
            key=None if i % 8 == 0 else ([f"k{i}", f"j{i % 3}", "z"] if i % 5 == 0 else f"k{i}"),
            properties=_properties(i),
        )
    return opened


def _long_way(store, queue: int) -> list:
    return store._read_long_way(TOPIC, queue, 0, 10_000)


@pytest.mark.parametrize("count", [10_000, 7, 500])
def test_reads_of_any_size_give_the_long_ways_messages(store, count):
    for queue in range(2):
        expected = _long_way(store, queue)
        assert len(expected) == COUNT // 2
        read = []
        while len(read) < len(expected):
            read += store.read(TOPIC, queue, len(read), count)
        assert read == expected
        assert [bytes(m.body) for m in read] == [bytes(m.body) for m in expected]


def test_a_scan_that_may_keep_ten_thousand_gives_the_long_ways_messages(store):
    expression = "body_size >= 0 && queue >= 0"
    native = filters.scan(store, TOPIC, expression, max_matches=filters.MAX_MATCHES)
    view = filters.scan(_View(store), TOPIC, expression, max_matches=filters.MAX_MATCHES)
    expected = _long_way(store, 0) + _long_way(store, 1)
    assert native.messages == expected
    assert view.messages == expected
    assert native.cursor is None and native.scanned == COUNT


def test_each_message_has_lists_and_dicts_of_its_own(store):
    read = store.read(TOPIC, 1, 0, 10_000)
    plain = [m for m in read if m.properties.get("region") == "eu" and len(m.keys) == 1]
    first, second = plain[0], plain[1]
    first.properties["region"] = "changed"
    first.keys.append("added")
    assert second.properties["region"] == "eu"
    assert second.keys == [f"k{second.queue_offset * 2 + 1}"]
    assert store.read(TOPIC, 1, first.queue_offset, 1)[0].properties["region"] == "eu"
