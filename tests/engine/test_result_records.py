"""The records the engine hands out (``AppendResult``, ``StoredMessage``) freed the
ordinary way in every case: their items let go, subclasses' fields and finalizers, cycles
through them, long chains of them, and memory reused without leaking (issue 33: the
results freed by the caller)."""

from __future__ import annotations

import gc
import sys
import weakref

from storeadapter.engine import AppendResult, StoredMessage
from tests.engine.storetools import memory_kept_by, small_config


class _Witness:
    """An object whose end a weak reference sees."""


def _shared(store):
    store.create_topic("s", queues=8, layout="shared")
    return [{"body": b"m%d" % i, "queue": i % 8} for i in range(64)]


def test_results_let_go_leave_no_memory_behind(open_store):
    # Blocks of the default size: the store's own objects (a block file's every 8 blocks
    # of 4 entries in the shared layout's tests) do not grow with the results measured.
    store = open_store(cfg=small_config(shared_block_entries=32, shared_blocks_per_file=65536))
    store.create_topic("t", queues=4)
    batch = _shared(store)

    def put_and_drop():
        for _ in range(50):
            results = store.append_batch("s", batch)
            assert len(results) == 64
            del results
            store.append_batch("t", [b"a", b"b"])

    # 3,300 results made: ~0.6 MB, had they stayed. The pools of freed items (records.rs,
    # bounded) may keep blocks made during the measured run: 74,870 bytes seen once.
    assert memory_kept_by(put_and_drop) < 128 << 10


def test_results_let_go_let_go_of_what_they_hold(store):
    batch = _shared(store)
    store.append_batch("s", batch)  # warm
    status = store.append_batch("s", batch)[0].status
    # The status is the interpreter's one "OK": garbage an earlier test left holding some
    # (results in cycles) is collected now, not between the counts.
    gc.collect()
    gc.disable()
    try:
        status_held = sys.getrefcount(status)
        results = store.append_batch("s", batch)
        assert sys.getrefcount(status) == status_held + len(results)
        # The list's, the comprehension's and the call's references to each: no other.
        assert {sys.getrefcount(result) for result in results} == {3}
        del results
        assert sys.getrefcount(status) == status_held
    finally:
        gc.enable()


def test_results_made_after_others_were_let_go_hold_their_own_values(store):
    batch = _shared(store)
    first = store.append_batch("s", batch)
    seen = [tuple(result) for result in first]
    del first
    second = store.append_batch("s", batch)
    assert all(type(result) is AppendResult for result in second)
    assert [r.queue_offset for r in second] == [offset + 8 for _, _, _, offset, *_ in seen]
    assert len({r.message_id for r in second} | {s[0] for s in seen}) == 128
    assert [r.queue for r in second] == [s[2] for s in seen]
    assert second[0] == AppendResult(*tuple(second[0]))


def test_a_subclass_s_dict_and_finalizer_are_let_go(store):
    freed: list[int] = []

    class Noted(AppendResult):
        def __del__(self) -> None:
            freed.append(self.queue)

    result = store.append_batch("t", [{"body": b"x", "queue": 3}])[0]
    noted = Noted(*tuple(result))
    witness = _Witness()
    noted.witness = witness
    seen = weakref.ref(witness)
    del witness, noted
    assert freed == [3]
    assert seen() is None


def test_a_subclass_s_instances_in_a_long_chain_are_let_go(store):
    store.append_batch("t", [b"a"])  # the result type in use

    class Linked(AppendResult):
        pass

    chain = None
    for i in range(100_000):
        chain = Linked(chain, "t", i, i, i, i, "OK")
    witness = _Witness()
    chain.witness = witness
    seen = weakref.ref(witness)
    del chain, witness
    assert seen() is None


def test_a_long_chain_of_records_is_let_go(store):
    store.append_batch("t", [b"a"])
    store.read("t", 0, 0, 1)  # the result and message types in use
    witness = _Witness()
    seen = weakref.ref(witness)
    chain: object = [witness]
    for i in range(200_000):
        chain = AppendResult(chain, "t", i, i, i, i, "OK")
        chain = StoredMessage(chain, "t", 0, i, i, 0, 0, None, [], {}, b"")
    del witness, chain
    assert seen() is None


def test_a_cycle_through_a_result_is_collected(store):
    store.append_batch("t", [b"a"])
    witness = _Witness()
    seen = weakref.ref(witness)
    holder: list = [witness]
    holder.append(AppendResult(holder, "t", 0, 0, 0, 0, "OK"))
    del holder, witness
    gc.collect()
    assert seen() is None


def test_a_finalizer_given_to_the_result_type_later_runs(store):
    freed: list[int] = []
    store.append_batch("t", [b"before"])  # the type in use before it changes
    AppendResult.__del__ = lambda self: freed.append(self.queue_offset)
    try:
        results = store.append_batch("t", [{"body": b"x", "queue": 2}] * 3)
        offsets = [result.queue_offset for result in results]
        del results
        assert sorted(freed) == sorted(offsets)
    finally:
        del AppendResult.__del__
    freed.clear()
    store.append_batch("t", [b"after"])
    assert freed == []
