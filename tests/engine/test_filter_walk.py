"""The native scan's entry walk (issue 34, item 1): records handed over to the expression
a few at a time (`HAND_OVER` in the store core), each checked with the CRC32C folded by
carry-less multiplication (records of 256 bytes or more, on a CPU that has it) or the
crate's: the same matches, counts and errors as the interpreter alone (`[E].all(x, x)`,
a shape the pre-pass never takes) and as the long way (a view: `read`, then each message
evaluated), and a damaged record still reported, wherever it falls among the batches."""

from __future__ import annotations

import json

import pytest

from storeadapter.engine import MessageStore, filters
from tests.engine.storetools import flip_bit, record_length, small_config

TOPIC = "orders"
COUNT = 150  # 75 a queue: many hand-overs in each

EXPRESSIONS = [
    'properties.region == "eu" && key.startsWith("k1")',
    'tag == "paid" && body.order.total > 100',
    'body.order.total > 100 && tag == "paid"',
    '!(queue == 1) || properties["tier"] != "gold"',
    'body_size > 300 && key != "k7"',
    'text.contains("yy") || offset == 3',
    "body.order.total > 50",  # a body without `order` is an error, counted
]


class _View:
    """A store that is not a MessageStore: the scan reads it through ``read``."""

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        return getattr(self._store, name)


def _body(i: int) -> bytes:
    if i % 11 == 5:
        return b"not json " + b"yy" * (i % 7)
    head = {"order": {"total": (i * 37) % 200, "id": i}, "pad": ""}
    # Short bodies (the crate's CRC) and long ones (folded), in turn.
    pad = "x" * (20 if i % 3 == 0 else 300 + 7 * i)
    return json.dumps({**head, "pad": pad}).encode()


def _populate(store: MessageStore) -> list:
    store.create_topic(TOPIC, queues=2, layout="files")
    results = []
    for i in range(COUNT):
        properties = {"region": "us" if i % 3 == 1 else "eu"}
        if i % 5 == 0:
            properties["tier"] = "gold"
        results.append(
            store.append(
                TOPIC,
                _body(i),
                key=f"k{i}",
                tag="paid" if i % 4 == 0 else "open",
                queue=i % 2,
                properties=properties,
            )
        )
    return results


def _answer(store, expression: str):
    result = filters.scan(store, TOPIC, expression, max_matches=filters.MAX_MATCHES)
    assert result.cursor is None
    return (
        [(m.queue, m.queue_offset) for m in result.messages],
        result.scanned,
        result.errors,
    )


@pytest.fixture(params=["small segments", "1 MiB segments"])
def config(request):
    if request.param == "small segments":
        return small_config(max_message_bytes=4096)
    return small_config(segment_bytes=1 << 20, max_message_bytes=4096)


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_the_walk_answers_as_the_interpreter_and_the_long_way(open_store, expression):
    store = open_store()
    _populate(store)
    native = _answer(store, expression)
    assert native == _answer(store, f"[({expression})].all(x, x)")
    assert native == _answer(_View(store), expression)
    assert native[1] == COUNT


def test_damaged_records_among_the_batches_are_reported_and_the_rest_still_match(
    open_store, store_path
):
    store = open_store()
    results = _populate(store)
    expression = 'properties.region == "eu" && key.startsWith("k1")'
    before, _, _ = _answer(store, expression)
    store.close()
    # Queue 0's offsets 51 (a short body: the crate's CRC) and 55 (a long one: folded),
    # each in a later hand-over than the first; both match the expression.
    victims = [results[102], results[110]]
    assert [(v.queue, v.queue_offset) for v in victims] == [(0, 51), (0, 55)]
    assert all((v.queue, v.queue_offset) in before for v in victims)
    for victim in victims:
        length = record_length(store_path, victim.commit_offset)
        flip_bit(store_path, victim.commit_offset + length - 12, bit=3)  # in the body

    reopened = open_store()  # clean shutdown: recovery does not rescan the old segment
    after, _, errors = _answer(reopened, expression)
    assert after == [at for at in before if at not in [(v.queue, v.queue_offset) for v in victims]]
    assert errors == 0
    reported = sorted(c.commit_offset for c in reopened.stats().corruptions)
    assert reported == sorted(v.commit_offset for v in victims)


def test_walks_in_turn_on_one_thread_see_only_their_own_entries(open_store):
    """The store core keeps a thread's entry buffer from one walk to the next (copied
    over, not zeroed): a shorter walk after a longer one, and a scan after reads, answer
    from their own queue's entries only, as the long way does."""
    store = open_store()
    store.create_topic(TOPIC, queues=2, layout="files")
    for i in range(120):
        store.append(TOPIC, b"long %d" % i, key=f"k{i}", queue=0)
    for i in range(3):
        store.append(TOPIC, b"short %d" % i, key=f"s{i}", queue=1)
    everything = "offset >= 0"
    for _ in range(2):
        long_walk = filters.scan(store, TOPIC, everything, max_matches=filters.MAX_MATCHES)
        assert [(m.queue, m.keys) for m in long_walk.messages] == [
            *((0, [f"k{i}"]) for i in range(120)),
            *((1, [f"s{i}"]) for i in range(3)),
        ]
        assert [m.keys for m in store.read(TOPIC, 1, 0, 500)] == [["s0"], ["s1"], ["s2"]]
        assert [m.keys for m in store.read(TOPIC, 1, 2, 500)] == [["s2"]]
        assert [m.keys for m in store.read(TOPIC, 0, 118, 500)] == [["k118"], ["k119"]]
        assert _answer(store, everything) == _answer(_View(store), everything)
