"""The messages reads build natively are left off the garbage collector's lists (issue 29,
"a lean message"), and are still ``StoredMessage``s in every other way."""

from __future__ import annotations

import copy
import gc
import pickle
import sys
import weakref

from storeadapter.engine import StoredMessage
from tests.engine.storetools import memory_kept_by


def _sample(store):
    store.append("t", b"plain", queue=0)
    store.append("t", b"keyed", key=["k1", "k2"], tag="red", properties={"a": "1"}, queue=0)
    return store.read("t", 0, 0, 10)


def test_read_messages_and_their_keys_are_not_tracked_by_the_collector(store):
    messages = _sample(store)
    assert len(messages) == 2
    for message in messages:
        assert not gc.is_tracked(message)
        assert not gc.is_tracked(message.keys)


def test_a_message_from_get_is_not_tracked_by_the_collector(store):
    sent = store.append("t", b"keyed", key="k", queue=1)
    message = store.get(sent.message_id)
    assert message.body == b"keyed"
    assert not gc.is_tracked(message)
    assert not gc.is_tracked(message.keys)


def test_append_results_are_not_tracked_by_the_collector(store):
    results = store.append_batch("t", [b"a", b"b"])
    assert [gc.is_tracked(result) for result in results] == [False, False]


def test_an_untracked_message_behaves_as_one_built_in_python(store):
    _plain, keyed = _sample(store)
    built = StoredMessage(*tuple(keyed))
    assert keyed == built
    assert type(keyed) is StoredMessage
    assert repr(keyed) == repr(built)
    assert pickle.loads(pickle.dumps(keyed)) == keyed
    assert copy.deepcopy(keyed) == keyed
    assert keyed._asdict()["keys"] == ["k1", "k2"]
    assert keyed._replace(body=b"x").body == b"x"
    assert keyed.properties == {"a": "1"} and keyed.tag == "red"


def test_a_message_whose_keys_list_is_changed_stays_usable_through_collections(store):
    messages = _sample(store)
    messages[1].keys.append("k3")
    messages[1].keys.append(object())
    gc.collect()
    assert messages[1].keys[:3] == ["k1", "k2", "k3"]
    assert store.read("t", 0, 1, 1)[0].keys == ["k1", "k2"]


def _counted(make):
    """What ``make()`` returns, and how far it moved the collector's count of young
    allocations (the count that sets off a collection at 700)."""
    gc.collect()
    gc.disable()  # nothing collected (and the count reset) in between
    try:
        before = gc.get_count()[0]
        made = make()
        return made, gc.get_count()[0] - before
    finally:
        gc.enable()


def test_read_messages_held_count_at_most_one_allocation_each(store):
    # Held by the caller (a batch being handled), each message was three allocations
    # that count towards a collection (its tuple, its keys list, its properties dict),
    # though none is tracked: a collection every ~230 messages. Now only the dict counts.
    store.append_batch("t", [{"body": b"m%d" % i, "queue": 0} for i in range(600)])
    store.read("t", 0, 0, 500)  # warm: the queue loaded, its files mapped
    messages, moved = _counted(lambda: store.read("t", 0, 0, 500))
    assert len(messages) == 500
    assert moved <= len(messages) + 10
    assert all(not gc.is_tracked(m) and not gc.is_tracked(m.keys) for m in messages)


def test_a_message_without_keys_has_a_list_of_its_own(store):
    store.append_batch("t", [{"body": b"a", "queue": 0}, {"body": b"b", "queue": 0}])
    first, second = store.read("t", 0, 0, 10)
    assert type(first.keys) is list and first.keys == [] and first.keys is not second.keys
    first.keys.append("k")
    first.keys.extend(str(i) for i in range(100))  # grown past its first allocation
    assert second.keys == [] and store.read("t", 0, 0, 1)[0].keys == []
    assert first.keys[:2] == ["k", "0"] and len(first.keys) == 101
    gc.collect()
    assert first == StoredMessage(*tuple(first))
    assert sys.getsizeof(first) == sys.getsizeof(StoredMessage(*tuple(first)))


def test_messages_read_and_let_go_leave_no_memory_behind(store):
    store.append_batch("t", [{"body": b"x" * 50, "queue": 1} for _ in range(300)])
    store.append_batch("t", [b"y"] * 10)

    def read_and_drop():
        for _ in range(20):
            messages = store.read("t", 1, 0, 300)
            assert len(messages) == 300
            del messages
            store.append_batch("t", [b"z"])  # results made and let go too

    assert memory_kept_by(read_and_drop) < 64 << 10  # 6,000 messages made: ~1.5 MB, had they stayed


def test_a_read_of_messages_held_counts_no_allocation_a_message(store):
    # Each message's properties dict (and each read's list) counted one allocation
    # towards a collection: a consumer holding a round of 2,048 messages set off ~3
    # collections a round, every tenth of them walking the older objects and every
    # hundredth all of them (a topic's list of a million queue slots among them).
    store.append_batch("t", [{"body": b"m%d" % i, "queue": 0} for i in range(600)])
    store.append("t", b"p", queue=0, properties={"a": "1"}, key=["k"])
    store.read("t", 0, 0, 500)  # warm: the queue loaded, its files mapped
    messages, moved = _counted(lambda: store.read("t", 0, 0, 500))
    assert len(messages) == 500
    assert moved <= 5  # the call's own few (its arguments' tuple), whatever its size
    more, moved = _counted(lambda: store.read("t", 0, 590, 20))
    assert more[-1].properties == {"a": "1"} and more[-1].keys == ["k"]
    assert moved <= 5 + 1  # a message's keys list with keys in it still counts


def test_a_message_s_properties_dict_is_a_plain_dict_of_its_own(store):
    store.append_batch("t", [{"body": b"a", "queue": 0}, {"body": b"b", "queue": 0}])
    store.append("t", b"c", queue=0, properties={"x": "1", "y": "2"})
    first, second, third = store.read("t", 0, 0, 10)
    assert type(first.properties) is dict and first.properties == {}
    assert first.properties is not second.properties
    assert not gc.is_tracked(first.properties)  # as a new empty dict is
    first.properties["k"] = "v"
    first.properties.update({str(i): i for i in range(100)})  # grown past its first table
    assert second.properties == {} and store.read("t", 0, 0, 1)[0].properties == {}
    assert len(first.properties) == 101 and first.properties["k"] == "v"
    second.properties["cycle"] = [second]  # a container: the dict is tracked from now on
    assert gc.is_tracked(second.properties)
    gc.collect()
    del first.properties["k"]
    first.properties.clear()
    assert first.properties == {} and first == StoredMessage(*tuple(first))
    assert third.properties == {"x": "1", "y": "2"}
    assert pickle.loads(pickle.dumps(third)) == third and copy.deepcopy(second)[9] is not None
    assert sys.getsizeof(store.read("t", 0, 0, 1)[0].properties) == sys.getsizeof({})


def test_a_read_s_list_of_messages_is_a_tracked_list(store):
    store.append_batch("t", [{"body": b"a", "queue": 0}])
    messages = store.read("t", 0, 0, 10)
    assert type(messages) is list and gc.is_tracked(messages)
    marker = _Marker()
    messages.append([messages, marker])  # a cycle through it: collected once let go
    gone = weakref.ref(marker)
    del messages, marker
    gc.collect()
    assert gone() is None


class _Marker:
    pass


# A message let go gives its objects' memory (its id, offsets, time, body, empty keys list
# and properties dict, when it alone held them) to the next messages made: what a caller
# still holds, or has changed, is left to Python.


def _queue_of(store, queue, count, size=50):
    store.append_batch(
        "t", [{"body": bytes([65 + i % 26]) * size, "queue": queue} for i in range(count)]
    )


def _traced_while(work):
    import tracemalloc

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        held = work()
        return held, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_messages_let_go_give_their_memory_to_the_next_read_s(store):
    _queue_of(store, 0, 40)
    del store.read("t", 0, 0, 10)[:]  # the queue warmed
    store.read("t", 0, 10, 10)  # made and let go
    held, grown = _traced_while(lambda: store.read("t", 0, 20, 10))
    assert [m.body for m in held] == [bytes([65 + i % 26]) * 50 for i in range(20, 30)]
    # The list and its room; ten messages' own objects took ~3.5 KB from the allocator.
    assert grown < 1000


def test_objects_a_caller_still_holds_outlive_the_message(store):
    _queue_of(store, 0, 30)
    messages = store.read("t", 0, 0, 10)
    kept = [
        (m.message_id, m.commit_offset, m.store_time_ms, m.body, m.keys, m.properties)
        for m in messages
    ]
    expected = [(i, c, t, b, list(k), dict(p)) for i, c, t, b, k, p in kept]
    del messages
    for _ in range(3):
        assert len(store.read("t", 0, 10, 10)) == 10  # made and let go on the freed memory
    assert [(i, c, t, b, list(k), dict(p)) for i, c, t, b, k, p in kept] == expected
    assert all(
        type(c) is int and type(b) is bytes and type(k) is list and type(p) is dict
        for _, c, _, b, k, p in kept
    )
    kept[0][4].append("k")
    kept[0][5]["a"] = "1"
    assert store.read("t", 0, 0, 1)[0].keys == [] and store.read("t", 0, 0, 1)[0].properties == {}


def test_an_interned_id_and_changed_lists_and_dicts_are_freed_as_python_frees_them(store):
    _queue_of(store, 0, 30)
    messages = store.read("t", 0, 0, 10)
    texts = [str(m.message_id) for m in messages]
    interned = sys.intern(messages[0].message_id)  # held by the interpreter's table too
    del interned
    messages[1].keys.extend(["a", "b"])
    messages[1].keys.clear()  # empty again, its item array freed
    messages[2].properties.update(a="1", b="2")
    messages[2].properties.clear()  # empty again, on the shared empty table
    messages[3].properties["x"] = "y"
    messages[4].properties["loop"] = [messages[4]]  # tracked from now on
    messages[4].keys.append(messages[4])
    del messages
    gc.collect()
    for _ in range(3):
        again = store.read("t", 0, 0, 10)
        assert [m.message_id for m in again] == texts
        assert all(m.keys == [] and m.properties == {} for m in again)
        again[0].properties["n"] = "1"
        again[0].keys.append("n")
        del again
    assert sys.intern("".join(texts[0])) == texts[0]
    gc.collect()


def test_bodies_of_every_size_read_back_whole_after_others_were_let_go(store):
    sizes = list(range(1, 300)) + [600, 1000]
    store.append_batch(
        "t", [{"body": bytes([i % 251]) * size, "queue": 1} for i, size in enumerate(sizes)]
    )
    for _round in range(3):
        for first in range(0, len(sizes), 7):
            got = store.read("t", 1, first, 7)
            want = [bytes([i % 251]) * sizes[i] for i in range(first, min(first + 7, len(sizes)))]
            assert [m.body for m in got] == want
            assert all(
                len(m.body) == len(w) and m.body[-1:] == w[-1:]
                for m, w in zip(got, want, strict=True)
            )
            del got


def test_small_offsets_are_the_interpreter_s_shared_ints(store):
    _queue_of(store, 0, 300)
    messages = store.read("t", 0, 250, 20)
    assert [m.queue_offset for m in messages] == list(range(250, 270))
    for m in messages:
        assert type(m.queue_offset) is int
        if m.queue_offset <= 256:
            assert m.queue_offset is int(str(m.queue_offset))  # the one CPython hands out


def test_a_long_chain_of_read_messages_through_their_keys_lists_is_let_go(store):
    # Each message held by the keys list of the one read after it: freeing the last frees
    # them all, one inside another, which must not run out of stack.
    _queue_of(store, 0, 500)
    witness = _Marker()
    chain = [witness]
    for _ in range(400):
        for message in store.read("t", 0, 0, 500):
            message.keys.append(chain)
            chain = message
    gone = weakref.ref(witness)
    del witness, message
    del chain
    assert gone() is None
    assert [m.keys for m in store.read("t", 0, 0, 3)] == [[], [], []]
