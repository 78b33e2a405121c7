"""A shared topic's batch of dict items written by one native call (shared_core.rs)
against the long way (``Writer._write_general`` and ``BlockStore.write_many``)."""

from __future__ import annotations

import random
import time
import types
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore, StoreConfig
from storeadapter.engine.verify import verify_store
from tests.engine.storetools import read_all, run_until_killed, small_config

QUEUES = 40


def _config(**overrides) -> StoreConfig:
    settings = {
        "flush_mode": "async",
        "segment_bytes": 1 << 20,
        "shared_layout_above": 0,
        "shared_block_entries": 4,
        "shared_blocks_per_file": 64,
    }
    return small_config(**{**settings, **overrides})


def _queue_loads(monkeypatch) -> list[int]:
    """The ids of the shared queues loaded the Python way (``BlockQueue._load``) from now."""
    from storeadapter.engine.blockqueue import BlockQueue

    loads: list[int] = []
    genuine = BlockQueue._load

    def counting(self):
        loads.append(self.queue_id)
        return genuine(self)

    monkeypatch.setattr(BlockQueue, "_load", counting)
    return loads


def _batches() -> list[list[dict]]:
    """Batches over random queues: some queues many times in a batch (its entries span
    blocks), some with a tag, some without a queue (the round-robin)."""
    rng = random.Random(7)
    batches = []
    for b in range(12):
        batch = []
        for i in range(rng.randrange(1, 90)):
            item: dict = {"body": b"m%d-%d-" % (b, i) * rng.randrange(1, 4)}
            if i % 7:
                item["queue"] = rng.randrange(QUEUES) if i % 3 else rng.randrange(3)
            if i % 5 == 1:
                item["tag"] = ["paid", "x" * 30][i % 2]
            if i % 4 == 2:
                item["key"] = f"k{i % 3}" if i % 8 == 2 else [f"a{b}", f"k{i % 3}"]
            batch.append(item)
        batches.append(batch)
    return batches


def _write(path: Path, native: bool) -> tuple[list, int]:
    with MessageStore.open(path, _config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        if not native:
            store._appender = None
        results = [r[1:5] for batch in _batches() for r in store.append_batch("t", batch)]
        taken = 0 if store._appender is None else store._appender.batched
    return results, taken


def _records(path: Path) -> list[tuple]:
    with MessageStore.open(path, _config()) as store:
        return [
            (m.queue, m.queue_offset, m.commit_offset, m.body, m.tag, m.keys)
            for q in range(QUEUES)
            for m in read_all(store, "t", q)
        ]


def _block_files(path: Path) -> dict[str, bytes]:
    root = path / "consumequeue"
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "blocks" in p.parts
    }


def test_shared_dict_batches_match_the_long_way_byte_for_byte(tmp_path):
    native, taken = _write(tmp_path / "n", True)
    python, _ = _write(tmp_path / "p", False)

    # Native but for the batches whose blocks needed a new block file (Python makes it).
    assert taken >= 6
    assert native == python
    assert _block_files(tmp_path / "n") == _block_files(tmp_path / "p")
    assert len(_block_files(tmp_path / "n")) > 3  # new block files on the way
    assert _records(tmp_path / "n") == _records(tmp_path / "p")


def _named_batches() -> list[list[dict]]:
    """Batches whose items all name their queue (read before the thread lock), of every
    field: tags, keys, properties, born times; 1 to 120 items (from 32 the batch's work
    lets the GIL go)."""
    rng = random.Random(13)
    batches = []
    for b, size in enumerate([120, 1, 40, 31, 32, 90, 7, 64, 100, 33, 5, 80]):
        batch = []
        for i in range(size):
            item: dict = {
                "body": b"n%d-%d-" % (b, i) * rng.randrange(1, 30),
                "queue": rng.randrange(QUEUES),
            }
            if i % 5 == 1:
                item["tag"] = ["paid", "x" * 30][i % 2]
            if i % 4 == 2:
                item["key"] = f"k{i % 3}" if i % 8 == 2 else [f"a{b}", f"k{i % 3}"]
            if i % 3 == 0:
                item["properties"] = {"p": str(i), "colour": "blue" * (i % 4)}
            if i % 6 == 4:
                item["born_time_ms"] = 1_700_000_000_000 + i
            batch.append(item)
        batches.append(batch)
    return batches


def test_batches_naming_every_queue_with_every_field_match_the_long_way(tmp_path):
    # A batch whose items all name their queue is read before the thread lock: the same
    # records, entries, block files and results as the long way, and a log whose every
    # record checks. (It held a build that encoded these records before the lock and
    # placed them under it: put33-s52, reverted.)
    written = {}
    for name, native in (("n", True), ("p", False)):
        with MessageStore.open(tmp_path / name, _config()) as store:
            store.create_topic("t", queues=QUEUES, layout="shared")
            if not native:
                store._appender = None
            results = [r[1:5] for batch in _named_batches() for r in store.append_batch("t", batch)]
            taken = 0 if store._appender is None else store._appender.batched
        with MessageStore.open(tmp_path / name, _config()) as store:
            records = [
                (m.queue, m.queue_offset, m.commit_offset, m.body, m.tag, m.keys, m.properties)
                + ((m.born_time_ms,) if m.born_time_ms < 1_750_000_000_000 else ())
                for q in range(QUEUES)
                for m in read_all(store, "t", q)
            ]
        written[name] = (results, taken, records, _block_files(tmp_path / name))
        assert verify_store(tmp_path / name).ok

    (results, taken, records, blocks) = written["n"]
    assert taken >= 8  # native but for batches whose blocks needed a new block file
    assert results == written["p"][0]
    assert records == written["p"][2]
    assert blocks == written["p"][3]
    assert sum(map(len, _named_batches())) == len(records)


def _write_bodies(path: Path, native: bool) -> tuple[list, int]:
    """Batches of plain bodies (``append_batch``'s bytes-only form; the round-robin)."""
    rng = random.Random(11)
    with MessageStore.open(path, _config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        if not native:
            store._appender = None
        results = [
            r[1:5]
            for b in range(12)
            for r in store.append_batch(
                "t", [b"p%d-%d" % (b, i) * rng.randrange(1, 4) for i in range(rng.randrange(1, 90))]
            )
        ]
        taken = 0 if store._appender is None else store._appender.batched
    return results, taken


def test_shared_byte_batches_take_the_native_call_and_match_the_long_way(tmp_path):
    native, taken = _write_bodies(tmp_path / "n", True)
    python, _ = _write_bodies(tmp_path / "p", False)

    # Native but for the batches whose blocks needed a new block file (Python makes it).
    assert taken >= 6
    assert native == python
    assert _block_files(tmp_path / "n") == _block_files(tmp_path / "p")
    assert _records(tmp_path / "n") == _records(tmp_path / "p")


def test_shared_batches_read_back_after_a_reopen_in_queue_order(tmp_path):
    path = tmp_path / "s"
    results, taken = _write(path, True)
    assert taken
    records = _records(path)
    assert len(records) == len(results)
    per_queue: dict[int, list[int]] = {}
    for queue, offset, *_ in records:
        per_queue.setdefault(queue, []).append(offset)
    assert all(offsets == list(range(len(offsets))) for offsets in per_queue.values())


def _found(path: Path) -> dict[str, list[int]]:
    with MessageStore.open(path, _config()) as store:
        return {
            key: sorted(m.commit_offset for m in store.query_by_key("t", key, limit=1000))
            for key in ["k0", "k1", "k2", "a3", "a11"]
        }


def test_keyed_items_on_a_shared_topic_take_the_native_call_and_are_found_by_key(tmp_path):
    _write(tmp_path / "n", True)
    _write(tmp_path / "p", False)

    native = _found(tmp_path / "n")
    assert native == _found(tmp_path / "p")
    assert all(native.values())
    with MessageStore.open(tmp_path / "s", _config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        store.append_batch("t", [{"body": b"a", "queue": 1}])  # its first block: the long way
        store.append_batch("t", [{"body": b"b", "queue": 1, "key": ["k", "j"]}])
        assert store._appender.batched == 1
        assert [m.body for m in read_all(store, "t", 1)] == [b"a", b"b"]
        assert [m.body for m in store.query_by_key("t", "j")] == [b"b"]


def test_a_replaced_block_write_turns_the_native_shared_batch_down(tmp_path, monkeypatch):
    from storeadapter.engine.blockqueue import BlockStore

    calls = []
    genuine = BlockStore.write_many

    def recording(self, writes):
        calls.append(len(writes))
        return genuine(self, writes)

    with MessageStore.open(tmp_path / "s", _config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        store.append_batch("t", [{"body": b"0", "queue": 2}])  # a new topic: the long way
        store.append_batch("t", [{"body": b"a", "queue": 2}])
        assert store._appender.batched == 1
        monkeypatch.setattr(BlockStore, "write_many", recording)
        store.append_batch("t", [{"body": b"b", "queue": 2}])
        assert (store._appender.batched, calls) == (1, [1])
        monkeypatch.undo()
        store.append_batch("t", [{"body": b"c", "queue": 2}])
        assert store._appender.batched == 2
        assert [m.body for m in read_all(store, "t", 2)] == [b"0", b"a", b"b", b"c"]


def _cadence_config(**overrides) -> StoreConfig:
    # No flush thread runs in the test's time: it calls the periodic flush itself.
    return _config(flush_interval_ms=600_000, queue_flush_interval_ms=600_000, **overrides)


def test_the_periodic_flush_leaves_block_files_to_their_own_cadence(tmp_path):
    from storeadapter.engine.blockqueue import BlockStore

    with MessageStore.open(tmp_path / "s", _cadence_config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        store.flush()
        before = store._checkpoint.current().dispatched
        for batch in _batches()[:3]:
            store.append_batch("t", batch)
        tail = store.commitlog.tail
        store._flush_periodic()  # not due: the log synced, the blocks held back
        vouched = store._checkpoint.current()
        assert (vouched.commitlog_flushed, vouched.dispatched) == (tail, before)
        held = [q for q in store._registry.dirty if isinstance(q, BlockStore)]
        assert len(held) == 1 and held[0].dirty
        store._blocks_due = 0  # due now
        store._flush_periodic()
        assert store._checkpoint.current().dispatched == tail
        assert not held[0].dirty


_KILLED_AFTER_A_PARTIAL_FLUSH = r"""
import os, sys
from pathlib import Path
from storeadapter.engine import MessageStore
from tests.engine.test_shared_items import QUEUES, _batches, _cadence_config

store = MessageStore.open(Path(sys.argv[1]), _cadence_config())
store.create_topic("t", queues=QUEUES, layout="shared")
store.flush()
for batch in _batches():
    store.append_batch("t", batch)
store._flush_periodic()
print(store._checkpoint.current().dispatched, store.commitlog.tail, flush=True)
os.kill(os.getpid(), 9)
"""


def test_a_kill_after_a_partial_flush_re_dispatches_from_the_checkpoint(tmp_path):
    child = run_until_killed(_KILLED_AFTER_A_PARTIAL_FLUSH, tmp_path / "s")
    dispatched, tail = map(int, child.stdout.split())
    assert dispatched < tail
    with MessageStore.open(tmp_path / "s", _config()) as store:
        recovery = store.stats(topics=False).last_recovery
        assert not recovery.clean_shutdown
        assert recovery.started_at == dispatched and recovery.tail == tail
    _write(tmp_path / "p", False)
    assert _records(tmp_path / "s") == _records(tmp_path / "p")


def test_a_closed_store_keeps_no_mapping_of_its_block_files_while_it_waits_for_the_collector(
    tmp_path,
):
    # The native shared batch maps block files process-wide; a store's close lets go of
    # them, not the next batch of another store (a deleted store's space stayed mapped).
    path = tmp_path / "s"
    store = MessageStore.open(path, _config())
    store.create_topic("t", queues=8, layout="shared")
    store.append_batch("t", [{"body": b"x", "queue": q} for q in range(8)])
    store.append_batch("t", [{"body": b"y", "queue": q} for q in range(8)])
    assert store._appender.batched >= 1
    store.close()

    with open("/proc/self/maps") as maps:
        mapped = [line for line in maps if str(path) in line and "/blocks/" in line]
    assert store is not None  # still referenced: nothing was collected
    assert mapped == []


def test_batches_of_several_threads_at_once_each_read_back_at_its_offset(tmp_path):
    # Each batch's work runs without the GIL (shared_core.rs): the threads' batches
    # overlap, yet every entry names its own message, in each queue's order.
    import threading

    threads, rounds = 4, 6
    errors: list[BaseException] = []
    with MessageStore.open(tmp_path / "s", _config(shared_blocks_per_file=4096)) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        store.append_batch("t", [{"body": b"first", "queue": 0}])  # the first block file
        start = threading.Barrier(threads)

        def produce(t: int) -> None:
            rng = random.Random(t)
            mine = [q for q in range(QUEUES) if q % threads == t]
            try:
                start.wait()
                for r in range(rounds):
                    store.append_batch(
                        "t",
                        [
                            {"body": b"%d-%d-%d" % (t, r, i), "queue": rng.choice(mine)}
                            for i in range(rng.randrange(40, 120))
                        ],
                    )
            except BaseException as error:  # reported below
                errors.append(error)

        workers = [threading.Thread(target=produce, args=(t,)) for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert errors == []
        assert store._appender.batched >= threads * rounds // 2
        written = {q: [m.body for m in read_all(store, "t", q)] for q in range(QUEUES)}

    again = {q: [(m.queue_offset, m.body) for m in r] for q, r in _reads(tmp_path / "s").items()}
    assert {q: [body for _, body in again[q]] for q in again} == written
    for queue, messages in again.items():
        assert [offset for offset, _ in messages] == list(range(len(messages)))
        threads_of = {body.split(b"-")[0] for _, body in messages if body != b"first"}
        assert threads_of <= {b"%d" % (queue % threads)}  # no entry names another's message
    # Every message once.
    sent = [
        (int(t), int(r), int(i))
        for messages in again.values()
        for _, body in messages
        if body != b"first"
        for t, r, i in [body.split(b"-")]
    ]
    assert len(sent) == len(set(sent))


def _reads(path: Path) -> dict[int, list]:
    with MessageStore.open(path, _config(shared_blocks_per_file=4096)) as store:
        return {q: read_all(store, "t", q) for q in range(QUEUES)}


_KILLED_WHILE_THREADS_APPEND = r"""
import os, random, sys, threading
from pathlib import Path
from storeadapter.engine import MessageStore
from tests.engine.test_shared_items import QUEUES, _cadence_config

store = MessageStore.open(Path(sys.argv[1]), _cadence_config(shared_blocks_per_file=4096))
store.create_topic("t", queues=QUEUES, layout="shared")
store.append_batch("t", [{"body": b"first", "queue": 0}])  # the first block file
store.flush()
acknowledged = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
batches = threading.Semaphore(0)

def produce(t):
    rng = random.Random(t)
    mine = [q for q in range(QUEUES) if q % 4 == t]
    try:
        for r in range(10_000):
            items = [
                {"body": b"%d-%d-%d" % (t, r, i), "queue": rng.choice(mine)} for i in range(64)
            ]
            results = store.append_batch("t", items)
            lines = "".join(
                "%d %d %s\n" % (res.queue, res.queue_offset, item["body"].decode())
                for res, item in zip(results, items)
            )
            os.write(acknowledged, lines.encode())
            batches.release()
    except BaseException as error:
        print(repr(error), file=sys.stderr, flush=True)
        os._exit(3)

for t in range(4):
    threading.Thread(target=produce, args=(t,), daemon=True).start()
for _ in range(40):
    batches.acquire()
store._flush_periodic()  # the log synced, the blocks held back
for _ in range(20):
    batches.acquire()
os.kill(os.getpid(), 9)
"""


def test_a_kill_while_threads_append_loses_no_acknowledged_message(tmp_path):
    # SIGKILL with four threads mid-batch (their work without the GIL): every message
    # a batch returned is read back at its queue offset, and no entry names a message
    # of another queue.
    log = tmp_path / "acknowledged"
    run_until_killed(_KILLED_WHILE_THREADS_APPEND, tmp_path / "s", log)
    acknowledged = [line.split() for line in log.read_text().splitlines()]
    assert len(acknowledged) >= 60 * 64
    with MessageStore.open(tmp_path / "s", _config(shared_blocks_per_file=4096)) as store:
        assert store._appender is not None
        found = {q: read_all(store, "t", q) for q in range(QUEUES)}
    for queue, messages in found.items():
        assert [m.queue_offset for m in messages] == list(range(len(messages)))
        bodies = [m.body for m in messages if m.body != b"first"]
        assert all(int(body.split(b"-")[0]) == queue % 4 for body in bodies)
    for queue, offset, body in acknowledged:
        message = found[int(queue)][int(offset)]
        assert message.body == body.encode()


def test_a_shared_batch_is_prepared_in_its_native_call_not_by_the_writer(tmp_path, monkeypatch):
    # Dicts, bytes and str to a shared topic: checked and written in one native call
    # (no prepared tuple per message, no `Writer.prepare_batch`), read back as sent.
    from storeadapter.engine.writer import Writer

    prepared = []
    genuine = Writer.prepare_batch

    def recording(self, state, messages, limit):
        prepared.append(len(messages))
        return genuine(self, state, messages, limit)

    with MessageStore.open(tmp_path / "s", _config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        store.append_batch("t", [{"body": b"0", "queue": 2}])  # its first block: the long way
        monkeypatch.setattr(Writer, "prepare_batch", recording)
        results = store.append_batch(
            "t", [{"body": b"a", "queue": 2}, {"body": "b", "queue": 2, "tag": "x"}, b"c"]
        )
        assert (prepared, store._appender.batched) == ([], 1)
        assert [(r.queue, r.queue_offset) for r in results[:2]] == [(2, 1), (2, 2)]
        assert [(m.body, m.tag) for m in read_all(store, "t", 2)] == [
            (b"0", None),
            (b"a", None),
            (b"b", "x"),
        ]


def test_a_shared_batch_with_a_refused_item_writes_nothing_and_raises_its_error(tmp_path):
    import pytest

    from storeadapter.engine.errors import QueueNotFoundError, StoreError

    with MessageStore.open(tmp_path / "s", _config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        store.append_batch("t", [{"body": b"0", "queue": 2}])
        tail = store.commitlog.tail
        with pytest.raises(StoreError) as raised:
            store.append_batch("t", [{"body": b"a", "queue": 2}, {"body": b"b", "queue": QUEUES}])
        assert isinstance(raised.value, QueueNotFoundError)
        with pytest.raises(StoreError):
            store.append_batch("t", [{"body": b"a", "queue": 2}, {"body": b"b", "colour": 1}])
        assert store.commitlog.tail == tail
        assert [m.body for m in read_all(store, "t", 2)] == [b"0"]


def test_a_shared_batch_makes_no_queue_object_and_keeps_the_ends_in_the_block_index(tmp_path):
    # A queue's ends are kept beside the block index (block_index.rs): the batch reads
    # and moves them there, an empty queue's first use makes no object, and an object
    # made later reads the ends the batches moved (and sees them move under it).
    with MessageStore.open(tmp_path / "s", _config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        store.append_batch("t", [{"body": b"0", "queue": 2}])  # its first block: the long way
        topic = store._registry.topics["t"]
        queues, ends = topic.queues, topic.blocks.index
        store.append_batch(
            "t",
            [{"body": b"a", "queue": 5}, {"body": b"b", "queue": 6}, {"body": b"c", "queue": 5}],
        )
        assert store._appender.batched == 1
        assert (queues.made_at(5), queues.made_at(6)) == (None, None)
        assert [(ends.loaded(q), ends.min_of(q), ends.max_of(q)) for q in (5, 6)] == [
            (True, 0, 2),
            (True, 0, 1),
        ]
        assert store.queue_range("t", 5) == (0, 2)
        assert [m.body for m in read_all(store, "t", 5)] == [b"a", b"c"]
        queue = queues[5]
        assert (queue.loaded, queue.min_offset, queue.max_offset) == (True, 0, 2)
        changes = queue.changes
        store.append_batch("t", [{"body": b"d", "queue": 5}])
        assert store._appender.batched == 2
        assert (queue.max_offset, queue.changes, ends.max_of(5)) == (3, changes + 1, 3)
        assert {5, 6} <= {q.queue_id for q in topic.made_queues()}


def test_a_shared_batch_loads_a_queue_with_blocks_it_meets_first_once(tmp_path, monkeypatch):
    # After a reopen a queue with blocks is loaded as every other user loads it (its ends
    # found from its blocks and checked, under the loading lock), once; an empty queue
    # is not loaded the Python way at all.
    path = tmp_path / "s"
    with MessageStore.open(path, _config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        store.append_batch("t", [{"body": b"0", "queue": 2}, {"body": b"1", "queue": 2}])
    loads = _queue_loads(monkeypatch)
    with MessageStore.open(path, _config()) as store:
        store.append_batch("t", [{"body": b"a", "queue": 2}, {"body": b"b", "queue": 6}])
        store.append_batch("t", [{"body": b"c", "queue": 2}, {"body": b"d", "queue": 6}])
        assert store._appender.batched == 2
        assert loads == [2]
        assert [m.body for m in read_all(store, "t", 2)] == [b"0", b"1", b"a", b"c"]
        assert [m.body for m in read_all(store, "t", 6)] == [b"b", b"d"]


def test_a_shared_batch_loads_the_python_way_an_empty_queue_whose_object_is_made(
    tmp_path, monkeypatch
):
    # The batch finds its queues' ends without the GIL, and loads there only a queue
    # whose object was never made (the index notes each one made: `set_made`) and that
    # has no blocks; a made one, empty or not, is loaded as every user loads it.
    loads = _queue_loads(monkeypatch)
    with MessageStore.open(tmp_path / "s", _config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        store.append_batch("t", [{"body": b"0", "queue": 2}])  # its first block: the long way
        topic = store._registry.topics["t"]
        made = topic.queues[7]
        del loads[:]
        batch = [{"body": b"a%d" % i, "queue": 7 + i % 2} for i in range(40)]
        store.append_batch("t", batch)
        assert store._appender.batched == 1
        assert loads == [7]
        assert topic.queues.made_at(8) is None
        assert (made.loaded, made.max_offset, store.queue_range("t", 8)) == (True, 20, (0, 20))
        assert [m.body for m in read_all(store, "t", 7)] == [b"a%d" % i for i in range(0, 40, 2)]


def test_a_queue_end_after_a_follow_and_a_truncate_is_the_one_the_index_keeps(tmp_path):
    path = tmp_path / "s"
    writer = MessageStore.open(path, _config())
    reader = MessageStore.open(path, _config())
    try:
        writer.create_topic("t", queues=QUEUES, layout="shared")
        writer.append_batch("t", [{"body": b"0", "queue": 2}])
        writer.append_batch("t", [{"body": b"a", "queue": 5}, {"body": b"b", "queue": 5}])
        # The reader follows the writer's appends: the ends it takes in are the index's.
        assert [m.body for m in reader.read("t", 5, 0)] == [b"a", b"b"]
        shared = reader._registry.topics["t"]
        assert (shared.blocks.index.loaded(5), shared.blocks.index.max_of(5)) == (True, 2)
        assert shared.queues[5].max_offset == 2
        reader.append_batch("t", [{"body": b"c", "queue": 5}, {"body": b"x", "queue": 7}])
        assert (shared.blocks.index.max_of(5), shared.queues[5].max_offset) == (3, 3)
        assert [m.body for m in writer.read("t", 5, 0)] == [b"a", b"b", b"c"]
        mine = writer._registry.topics["t"]
        assert (mine.blocks.index.max_of(5), mine.blocks.index.max_of(7)) == (3, 1)
        # A truncation through the queue's object moves the end the index keeps.
        mine.queues[7].truncate(0)
        assert (mine.blocks.index.max_of(7), writer.queue_range("t", 7)) == (0, (0, 0))
        assert writer.read("t", 7, 0) == []
    finally:
        reader.close()
        writer.close()


def test_queue_ends_recovered_after_a_kill_are_the_ones_the_index_keeps(tmp_path):
    run_until_killed(_KILLED_AFTER_A_PARTIAL_FLUSH, tmp_path / "s")
    with MessageStore.open(tmp_path / "s", _config()) as store:
        topic = store._registry.topics["t"]
        ends = topic.blocks.index
        before = {q: store.queue_range("t", q) for q in range(QUEUES)}
        assert before == {q: (ends.min_of(q), ends.max_of(q)) for q in range(QUEUES)}
        assert all(len(read_all(store, "t", q)) == before[q][1] for q in range(QUEUES))
        results = store.append_batch("t", [{"body": b"z", "queue": q} for q in range(QUEUES)])
        assert [r.queue_offset for r in results] == [before[q][1] for q in range(QUEUES)]
        assert all(ends.max_of(q) == before[q][1] + 1 for q in range(QUEUES))


def test_block_files_are_synced_every_few_seconds_by_default(tmp_path, monkeypatch):
    # A periodic flush two seconds after the blocks' last sync syncs the log but not the
    # block files: a store into a block page written back since faults, and at a million
    # queues those faults were most of a put (docs/PERFORMANCE.md, mill33-s50).
    from storeadapter.engine import store as store_module

    with MessageStore.open(tmp_path / "s", _config(flush_interval_ms=600_000)) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        store._blocks_due = 0
        store._flush_periodic()  # the blocks synced: the next due a cadence from now
        dispatched = store._checkpoint.current().dispatched
        store.append_batch("t", _batches()[0])
        later = time.monotonic() + 2.0
        clock = types.SimpleNamespace(**vars(time))
        clock.monotonic = lambda: later
        monkeypatch.setattr(store_module, "time", clock)
        store._flush_periodic()
        vouched = store._checkpoint.current()
        assert (vouched.commitlog_flushed, vouched.dispatched) == (store.commitlog.tail, dispatched)


def test_a_periodic_flush_syncs_block_files_early_once_the_log_past_dispatched_is_long(
    tmp_path, monkeypatch
):
    # Recovery replays every record past `dispatched`: however fast the puts, the block
    # files are synced once that much log waits, so a reopen after a kill stays short.
    from storeadapter.engine import store as store_module

    monkeypatch.setattr(store_module, "BLOCKS_BEHIND_BYTES", 1024)
    with MessageStore.open(tmp_path / "s", _cadence_config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        store.flush()
        store.append_batch("t", [{"body": b"x" * 600, "queue": q} for q in range(QUEUES)])
        store._flush_periodic()  # the cadence is 600 s away: only the log's length decides
        assert store._checkpoint.current().dispatched == store.commitlog.tail


def test_a_shared_batch_s_results_are_what_the_stored_messages_say_field_for_field(tmp_path):
    # Each AppendResult of the native batch: exactly an AppendResult of exact str and int
    # fields, each equal to what the message read back says (its id, topic, queue,
    # offsets, store time), status OK.
    from storeadapter.engine import AppendResult

    with MessageStore.open(tmp_path / "s", _config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        store.append_batch("t", [{"body": b"0", "queue": q} for q in range(QUEUES)])
        before = store._appender.batched
        results = store.append_batch(
            "t", [{"body": b"m%d" % i, "queue": (i * 7) % QUEUES} for i in range(2 * QUEUES)]
        )
        assert store._appender.batched == before + 1
        assert type(results) is list
        read = {
            (m.queue, m.queue_offset): m for q in range(QUEUES) for m in read_all(store, "t", q)
        }
        for r in results:
            assert type(r) is AppendResult
            assert [type(field) for field in r] == [str, str, int, int, int, int, str]
            m = read[(r.queue, r.queue_offset)]
            assert r == (
                m.message_id,
                m.topic,
                m.queue,
                m.queue_offset,
                m.commit_offset,
                m.store_time_ms,
                "OK",
            )
            assert store.get(r.message_id).body == m.body


class _Item(dict):
    pass


def test_two_key_dicts_in_every_form_are_written_as_the_long_way_writes_them(tmp_path):
    # A {"body", "queue"} dict whatever its keys' order, keys not interned, a str body, a
    # dict subclass, a bytearray body, a queue id past 255: the same records and results
    # as the long way.
    body, queue = "".join(["bo", "dy"]), "".join(["que", "ue"])

    def batches() -> list[list[dict]]:
        return [
            [{"body": b"a", "queue": 1}, {"queue": 2, "body": b"b"}],
            [
                {body: b"c", queue: 3},
                {"body": "d\u00e9", "queue": 1},
                {"body": bytearray(b"g"), "queue": 2},
            ],
            [_Item(body=b"e", queue=4), {"body": b"f", "queue": 300}, {"body": b"", "queue": 0}],
        ]

    def write(path: Path, native: bool) -> tuple[list, list]:
        with MessageStore.open(path, _config()) as store:
            store.create_topic("t", queues=400, layout="shared")
            store.append_batch("t", [{"body": b"0", "queue": q} for q in (0, 1, 2, 3, 4, 300)])
            if not native:
                store._appender = None
            results = [r[1:5] for batch in batches() for r in store.append_batch("t", batch)]
            records = [
                (m.queue, m.queue_offset, m.commit_offset, m.body)
                for q in (0, 1, 2, 3, 4, 300)
                for m in read_all(store, "t", q)
            ]
        return results, records

    assert write(tmp_path / "n", True) == write(tmp_path / "p", False)


def test_two_key_dicts_the_long_way_refuses_raise_its_error_and_write_nothing(tmp_path):
    import pytest

    from storeadapter.engine.errors import StoreError

    refused = [
        {"body": b"a", "queue": True},
        {"body": b"a", "queue": -1},
        {"body": b"a", "queue": 1 << 70},
        {"body": b"a", "queue": 1.0},
        {"body": b"a", "queue": 5},  # frozen
        {"body": b"x" * (1 << 21), "queue": 1},
        {"body": b"a", "colour": 1},
        {"bodies": b"a", "queue": 1},
    ]

    def outcome(path: Path, item: dict, native: bool) -> tuple:
        with MessageStore.open(path, _config()) as store:
            store.create_topic("t", queues=QUEUES, layout="shared")
            store.freeze_queue("t", 5)
            store.append_batch("t", [{"body": b"0", "queue": 1}])
            if not native:
                store._appender = None
            tail = store.commitlog.tail
            with pytest.raises(StoreError) as raised:
                store.append_batch("t", [{"body": b"b", "queue": 1}, item])
            return type(raised.value), store.commitlog.tail == tail

    for i, item in enumerate(refused):
        native = outcome(tmp_path / f"n{i}", item, True)
        assert native == outcome(tmp_path / f"p{i}", item, False)
        assert native[1], item


def test_batches_naming_their_queues_between_round_robin_ones_leave_the_turn_as_it_was(tmp_path):
    # A batch whose items all name their queue (read before the thread lock) moves no
    # round-robin: the batches without queues around it go on where they left off, as
    # the long way's do.
    def batches() -> list[list]:
        return [
            [b"r%d" % i for i in range(7)],
            [{"body": b"q%d" % i, "queue": (i * 5) % QUEUES} for i in range(9)],
            [{"body": b"s%d" % i} for i in range(6)],
            [{"body": b"t%d" % i, "queue": 3, "tag": "x"} for i in range(3)],
            [b"u%d" % i for i in range(5)],
        ]

    def write(path: Path, native: bool) -> tuple[list, list, int]:
        with MessageStore.open(path, _config()) as store:
            store.create_topic("t", queues=QUEUES, layout="shared")
            store.append_batch("t", [{"body": b"0", "queue": q} for q in range(QUEUES)])
            if not native:
                store._appender = None
            results = [r[1:5] for batch in batches() for r in store.append_batch("t", batch)]
            taken = 0 if store._appender is None else store._appender.batched
        return results, _records(path), taken

    native = write(tmp_path / "n", True)
    python = write(tmp_path / "p", False)
    assert native[2] == 5
    assert native[:2] == python[:2]


def _mapped_block_pages(store: MessageStore, topic: str) -> int:
    """KiB of the topic's block files mapped writable in this process (smaps' Rss of the
    batches' shared mappings)."""
    paths = {str(f.path) for f in store._registry.topics[topic].blocks.files.values()}
    rss, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:  # a mapping's first line
                inside = fields[1] == "rw-s" and len(fields) >= 6 and fields[5] in paths
            elif inside and fields[0] == "Rss:":
                rss += int(fields[1])
    return rss


def test_a_block_sync_leaves_no_page_of_the_block_files_mapped(tmp_path):
    # The block sync writes back every page stored into since the last one and
    # write-protects it, one TLB shootdown a page; a page no longer mapped costs none
    # (docs/PERFORMANCE.md, mill33b-s50). The next store into it maps it again.
    with MessageStore.open(tmp_path / "s", _cadence_config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        store.append_batch("t", [{"body": b"w", "queue": q} for q in range(QUEUES)])
        store.append_batch("t", [{"body": b"x", "queue": q} for q in range(QUEUES)])
        assert store._appender.batched == 1  # the first made the blocks the long way
        assert _mapped_block_pages(store, "t") > 0
        store.flush()
        assert _mapped_block_pages(store, "t") == 0
        store.append_batch("t", [{"body": b"y", "queue": q} for q in range(QUEUES)])
        assert _mapped_block_pages(store, "t") > 0


def test_a_periodic_block_sync_maps_again_the_pages_stored_into_before_it(tmp_path):
    # The flush thread's block sync lets go of the pages, writes them back, then maps
    # writable again those stored into since the sync before, so that the producers'
    # next stores into them fault no more, under the thread lock (docs/PERFORMANCE.md,
    # put33-s51). An explicit flush maps nothing again (the test above).
    with MessageStore.open(tmp_path / "s", _cadence_config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        store.append_batch("t", [{"body": b"w", "queue": q} for q in range(QUEUES)])
        store.flush()
        store.append_batch("t", [{"body": b"x", "queue": q} for q in range(QUEUES)])
        stored = _mapped_block_pages(store, "t")
        assert stored > 0
        store._blocks_due = 0  # the block files due
        store._flush_periodic()
        assert _mapped_block_pages(store, "t") == stored


def test_a_batch_after_a_queue_s_blocks_are_forgotten_stores_into_a_new_block(tmp_path):
    # The batch's plan looks first at each queue's latest block (block_index.rs,
    # `latest`), which must be forgotten with the block: a batch never stores into a
    # block erased for a removed queue.
    with MessageStore.open(tmp_path / "s", _cadence_config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        store.append_batch("t", [{"body": b"w", "queue": q} for q in range(QUEUES)])
        store.append_batch("t", [{"body": b"x", "queue": q} for q in range(QUEUES)])
        blocks = store._registry.topics["t"].blocks
        forgotten = blocks.index.get(0, 0)
        blocks.forget_queue(0)
        assert blocks.index.get(0, 0) is None
        taken = store._appender.batched
        store.append_batch("t", [{"body": b"y", "queue": q} for q in range(QUEUES)])
        assert store._appender.batched == taken + 1  # the native batch
        block = blocks.index.get(0, 0)
        assert block is not None and block != forgotten


def test_entries_stored_after_a_block_sync_are_read_back_after_a_reopen(tmp_path):
    with MessageStore.open(tmp_path / "s", _cadence_config()) as store:
        store.create_topic("t", queues=QUEUES, layout="shared")
        for round_ in range(3):
            store.append_batch(
                "t", [{"body": b"%d-%d" % (round_, q), "queue": q} for q in range(QUEUES)]
            )
            store.flush()
        taken = store._appender.batched
    assert taken == 2  # the first batch made the blocks the long way
    with MessageStore.open(tmp_path / "s", _cadence_config()) as store:
        assert store.stats(topics=False).last_recovery.records == 0
        for q in range(QUEUES):
            bodies = [m.body for m in read_all(store, "t", q)]
            assert bodies == [b"%d-%d" % (r, q) for r in range(3)]


@pytest.fixture
def parted_sync(monkeypatch) -> tuple[StoreConfig, int]:
    """Block syncs in parts of 256 KiB (``blockqueue.SYNC_PART``); the config (1,024
    blocks of 64 entries a block file) and the queue count (600: their blocks span 3 parts)."""
    from storeadapter.engine import blockqueue

    monkeypatch.setattr(blockqueue, "SYNC_PART", 1 << 18)
    return _cadence_config(shared_block_entries=64, shared_blocks_per_file=1024), 600


def _stored_block_file(store: MessageStore, queues: int):
    """A shared topic "t" of ``queues`` queues with two messages in each, the second
    batch stored into its block file's mapping: (its block store, its one block file)."""
    from storeadapter.engine import blockqueue

    store.create_topic("t", queues=queues, layout="shared")
    store.append_batch("t", [{"body": b"a%d" % q, "queue": q} for q in range(queues)])
    taken = store._appender.batched
    store.append_batch("t", [{"body": b"b%d" % q, "queue": q} for q in range(queues)])
    assert store._appender.batched == taken + 1  # stored into the file's mapping
    (blocks,) = [q for q in store._registry.dirty if isinstance(q, blockqueue.BlockStore)]
    (block_file,) = blocks.files.values()
    return blocks, block_file


def test_a_block_file_synced_in_parts_keeps_its_entries_and_maps_its_stored_pages_again(
    tmp_path, parted_sync
):
    # A block sync lets go of the file's pages and begins their writeback a part at a
    # time (blockqueue.SYNC_PART); every page stored into before it, in whichever part,
    # is mapped again after it, and every entry reads back.
    config, queues = parted_sync
    with MessageStore.open(tmp_path / "s", config) as store:
        blocks, block_file = _stored_block_file(store, queues)
        block_file.sync()
        # 600 blocks of 1,296 bytes from the file's start: pages 0 to 189, over 3 parts.
        assert block_file.map_stored_pages() == -(-queues * blocks.block_bytes // 4096)
        store.append_batch("t", [{"body": b"c%d" % q, "queue": q} for q in range(queues)])
    with MessageStore.open(tmp_path / "s", config) as store:
        for q in (0, 1, 299, 598, 599):
            assert [m.body for m in read_all(store, "t", q)] == [
                b"a%d" % q,
                b"b%d" % q,
                b"c%d" % q,
            ]


def test_a_block_sync_lets_go_of_the_pages_stored_into_while_its_parts_were_written_back(
    tmp_path, monkeypatch, parted_sync
):
    # The batches go on storing while a block sync lets go of the file's pages a part at
    # a time; a page stored into after its part was let go is mapped again, and the
    # fdatasync after the parts write-protected each such page, a TLB shootdown each
    # (an IPI to every other core the process runs on: docs/PERFORMANCE.md, put33-s57).
    # They are let go as well before it; the next sync's map_stored_pages counts them.
    from storeadapter.engine import blockqueue

    config, queues = parted_sync
    with MessageStore.open(tmp_path / "s", config) as store:
        _, block_file = _stored_block_file(store, queues)
        drop = blockqueue.drop_block_pages

        def drop_then_store(file, part=0):
            dropped = drop(file, part)
            if part:  # a batch's stores while the parts are written back
                batch = [{"body": b"c%d" % q, "queue": q} for q in range(queues)]
                store.append_batch("t", batch)
                assert _mapped_block_pages(store, "t") > 0
            return dropped

        monkeypatch.setattr(blockqueue, "drop_block_pages", drop_then_store)
        block_file.sync()
        assert _mapped_block_pages(store, "t") == 0
        monkeypatch.setattr(blockqueue, "drop_block_pages", drop)  # for the close's sync
    with MessageStore.open(tmp_path / "s", config) as store:
        for q in (0, 299, 599):
            assert [m.body for m in read_all(store, "t", q)] == [b"a%d" % q, b"b%d" % q, b"c%d" % q]
