"""The one native call for a common ``append`` (nativeappend.py, append_core.rs)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore, StoreConfig, clock, fileio
from tests.engine.storetools import read_all, small_config


def _async_config(**overrides) -> StoreConfig:
    return small_config(flush_mode="async", **overrides)


def _queue_files(path: Path) -> dict[str, bytes]:
    root = path / "consumequeue"
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name.isdigit()
    }


def _append_plain(path: Path, native: bool, count: int, **overrides) -> tuple[list, int]:
    with MessageStore.open(path, _async_config(**overrides)) as store:
        store.create_topic("t", queues=3, layout="files")
        if not native:
            store._appender = None
        results = [store.append("t", b"body-%d" % i) for i in range(count)]
        taken = 0 if store._appender is None else store._appender.appended
    return results, taken


def test_plain_appends_in_async_mode_take_the_native_call(tmp_path):
    roomy = {"segment_bytes": 1 << 20, "queue_file_entries": 1024}
    _, taken = _append_plain(tmp_path / "s", True, 300, **roomy)

    # Time marks too (a queue's first opens its time index through TimeIndex.write);
    # an append goes the long way when it meets another thread of the store (the
    # flusher) holding the store's locks.
    assert 0 < taken <= 300


def test_rolls_and_new_queue_files_go_the_long_way_between_native_appends(tmp_path):
    results, taken = _append_plain(tmp_path / "s", True, 300)  # tiny segments and files

    assert 0 < taken < 300
    assert [r.commit_offset for r in results] == sorted(r.commit_offset for r in results)
    assert [r.queue_offset for r in results if r.queue == 0] == list(range(100))


def test_native_appends_leave_the_queue_files_the_long_way_leaves(tmp_path):
    native, _ = _append_plain(tmp_path / "native", True, 400)
    python, _ = _append_plain(tmp_path / "python", False, 400)

    assert _queue_files(tmp_path / "native") == _queue_files(tmp_path / "python")
    assert [r[1:5] for r in native] == [r[1:5] for r in python]


def test_entries_stored_across_reserved_windows_match_the_long_way_byte_for_byte(tmp_path):
    # 4,000 entries a queue: each queue's file gets two 64 KiB windows (3,276 entries
    # each) reserved and mapped; the long way pwrites every entry.
    roomy = {"segment_bytes": 4 << 20, "queue_file_entries": 16384}
    native, taken = _append_plain(tmp_path / "native", True, 12000, **roomy)
    python, _ = _append_plain(tmp_path / "python", False, 12000, **roomy)
    batched, _ = _batch_plain(tmp_path / "batched", True, 30, 400, **roomy)
    long_batched, _ = _batch_plain(tmp_path / "long-batched", False, 30, 400, **roomy)

    assert taken > 11000
    assert _queue_files(tmp_path / "native") == _queue_files(tmp_path / "python")
    assert [r[1:5] for r in native] == [r[1:5] for r in python]
    assert _queue_files(tmp_path / "batched") == _queue_files(tmp_path / "long-batched")
    assert [r[1:5] for r in batched] == [r[1:5] for r in long_batched]


def test_a_window_reserved_by_the_core_reads_back_after_a_reopen(tmp_path):
    path = tmp_path / "s"
    roomy = {"segment_bytes": 4 << 20, "queue_file_entries": 16384}
    with MessageStore.open(path, _async_config(**roomy)) as store:
        store.create_topic("t", queues=1, layout="files")
        for i in range(4000):
            store.append("t", b"w%d" % i)
        assert store._appender.reserved >= 2
    with MessageStore.open(path, _async_config(**roomy)) as store:
        assert store.queue_range("t", 0) == (0, 4000)
        assert [m.body for m in read_all(store, "t", 0)] == [b"w%d" % i for i in range(4000)]


def test_native_appends_read_back_after_a_reopen(tmp_path):
    path = tmp_path / "s"
    results, _ = _append_plain(path, True, 300)

    with MessageStore.open(path, _async_config()) as store:
        bodies = sorted(m.body for q in range(3) for m in read_all(store, "t", q))
        assert bodies == sorted(b"body-%d" % i for i in range(300))
        assert store.get(results[-1].message_id).body == b"body-299"


def test_a_replaced_file_call_turns_the_native_append_down(tmp_path, monkeypatch):
    calls = []
    genuine = fileio.pwrite_all

    def recording(fd, data, offset):
        calls.append(len(data))
        genuine(fd, data, offset)

    with MessageStore.open(tmp_path / "s", _async_config()) as store:
        store.create_topic("t", queues=1, layout="files")
        store.append("t", b"first")  # its time mark opens the time index
        monkeypatch.setattr(fileio, "pwrite_all", recording)
        before = store._appender.appended
        store.append("t", b"second")

        assert store._appender.appended == before
        assert calls, "the long way wrote through the replaced call"
        assert [m.body for m in read_all(store, "t", 0)] == [b"first", b"second"]


def test_sync_mode_appends_take_the_native_call_too(tmp_path):
    # Each then waits for its fsync on the group commit (tests/engine/test_native_sync.py).
    with MessageStore.open(tmp_path / "s", small_config(flush_mode="sync")) as store:
        store.create_topic("t", queues=1, layout="files")
        store.append("t", b"x")  # creates the queue's file: the long way
        store.append("t", b"y")
        assert store._appender.appended == 1
        assert store._log_syncer is not None


# ------------------------------------------------------------------ append_batch


def _batch_plain(path: Path, native: bool, batches: int, size: int, **overrides) -> tuple:
    with MessageStore.open(path, _async_config(**overrides)) as store:
        store.create_topic("t", queues=3, layout="files")
        if not native:
            store._appender = None
        results = [
            r
            for b in range(batches)
            for r in store.append_batch("t", [b"b%d-%d" % (b, i) for i in range(size)])
        ]
        taken = 0 if store._appender is None else store._appender.batched
    return results, taken


def _index_files(path: Path) -> dict[str, bytes]:
    """The queue files and time indexes; of a mark (its slot's word, store ms) the
    first word alone (two runs store at other times). Not ``queue-ends``: its slots are
    written by flushes, as many as the flusher's timing made."""
    root = path / "consumequeue"
    found = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != "queue-ends":
            data = p.read_bytes()
            if p.name == "timeindex":
                data = b"".join(data[i : i + 8] for i in range(0, len(data), 16))
            found[str(p.relative_to(root))] = data
    return found


def test_plain_batches_in_async_mode_take_one_native_call(tmp_path):
    roomy = {"segment_bytes": 1 << 20, "queue_file_entries": 4096}
    results, taken = _batch_plain(tmp_path / "s", True, 20, 50, **roomy)

    # Time marks (every 128th entry of a queue) are written by the native batch too.
    assert taken >= 18  # another thread (the flusher) holding a lock sends one the long way
    assert [r.commit_offset for r in results] == sorted(r.commit_offset for r in results)
    assert [r.queue_offset for r in results if r.queue == 0] == list(range(334))


def test_native_batches_leave_the_queue_files_and_time_marks_the_long_way_leaves(tmp_path):
    native, taken = _batch_plain(tmp_path / "native", True, 30, 40)  # tiny segments, files
    python, _ = _batch_plain(tmp_path / "python", False, 30, 40)

    assert taken > 0
    assert _index_files(tmp_path / "native") == _index_files(tmp_path / "python")
    assert [r[1:5] for r in native] == [r[1:5] for r in python]
    with MessageStore.open(tmp_path / "native", _async_config()) as store:
        bodies = sorted(m.body for q in range(3) for m in read_all(store, "t", q))
        assert bodies == sorted(b"b%d-%d" % (b, i) for b in range(30) for i in range(40))
        assert store.get(native[-1].message_id).body == b"b29-39"


def _bodies(batch: int, count: int, lengths: range) -> list[bytes]:
    """``count`` bodies of batch ``batch``, of lengths cycling through ``lengths``, no
    two alike and none of zero bytes alone."""
    return [
        bytes((batch * 31 + i * 7 + j) % 251 + 1 for j in range(lengths[i % len(lengths)]))
        for i in range(count)
    ]


#: Plain batches, the first a store's first (the long way: it makes the queue files),
#: then each shorter than the last (in count, record lengths or both), then a longer
#: one: a batch's records go into the buffer the last one left its bytes in.
_SHRINKING = [
    (3, range(5, 6)),
    (60, range(700, 1000, 37)),
    (40, range(1, 90, 7)),
    (55, range(40)),
    (20, range(300, 301)),
    (70, range(200, 260, 3)),
]


def _write_shrinking(path: Path, native: bool) -> int:
    """``_SHRINKING`` appended to a fresh store at a pinned time, by the core or the long
    way alone; the batches the core wrote."""
    clock.pin(1_750_000_000_000)
    taken = 0
    try:
        with MessageStore.open(
            path, _async_config(segment_bytes=1 << 20, queue_file_entries=4096)
        ) as store:
            store.create_topic("t", queues=3, layout="files")
            if not native:
                store._appender = None
            for b, (count, lengths) in enumerate(_SHRINKING):
                before = store._appender.batched if native else 0
                store.append_batch("t", _bodies(b, count, lengths))
                taken += store._appender.batched - before if native else 0
    finally:
        clock.pin(None)
    return taken


def _log_and_queues(path: Path) -> dict[str, bytes]:
    """The commit log's segments and the queue files, time indexes included (not
    ``queue-ends``: its slots are written by flushes)."""
    return {
        str(p.relative_to(path)): p.read_bytes()
        for part in ("commitlog", "consumequeue")
        for p in sorted((path / part).rglob("*"))
        if p.is_file() and p.name != "queue-ends"
    }


def test_a_batch_after_a_longer_one_writes_the_bytes_the_long_way_writes(tmp_path):
    """A core keeps its records buffer from one plain batch to the next without zeroing
    it: every byte a batch leaves in the log is its own (procs31-s53)."""
    taken = _write_shrinking(tmp_path / "native", native=True)
    _write_shrinking(tmp_path / "python", native=False)

    # All but the first, give or take one sent the long way by the flusher's locks.
    assert taken >= len(_SHRINKING) - 2, taken
    native = _log_and_queues(tmp_path / "native")
    assert any(name.startswith("commitlog") for name in native)
    assert native == _log_and_queues(tmp_path / "python")


def test_a_replaced_time_index_write_turns_the_native_batch_down(tmp_path, time_index_writes):
    with MessageStore.open(tmp_path / "s", _async_config()) as store:
        store.create_topic("t", queues=1, layout="files")
        calls = time_index_writes()
        before = store._appender.batched
        store.append_batch("t", [b"x"] * 10)

        assert store._appender.batched == before
        assert calls, "the long way wrote the time mark through the replaced method"


def test_the_native_calls_leave_a_disk_past_its_reject_ratio_to_the_long_way(tmp_path):
    from storeadapter.engine import DiskFullError

    with MessageStore.open(tmp_path / "s", _async_config()) as store:
        store.create_topic("t", queues=1, layout="files")
        store.append("t", b"first")
        store._disk.ratio = 0.999
        before = (store._appender.appended, store._appender.batched)
        with pytest.raises(DiskFullError):
            store.append("t", b"refused")
        with pytest.raises(DiskFullError):
            store.append_batch("t", [b"refused"] * 3)
        assert (store._appender.appended, store._appender.batched) == before


def test_an_unknown_topic_is_left_to_the_long_way(tmp_path):
    from storeadapter.engine import TopicNotFoundError

    with MessageStore.open(tmp_path / "s", _async_config()) as store:
        with pytest.raises(TopicNotFoundError):
            store.append("nowhere", b"x")
        with pytest.raises((TypeError, TopicNotFoundError)):  # as the long way answers it
            store.append(["not", "a", "name"], b"x")  # type: ignore[arg-type]


# ------------------------------------------------------------------ time marks


@pytest.fixture
def time_index_writes(monkeypatch):
    """Replace ``TimeIndex.write`` (when called) by one that records its marks and writes
    them; returns the list of recorded calls."""
    from storeadapter.engine.timeindex import TimeIndex

    def replace() -> list:
        calls = []
        genuine = TimeIndex.write

        def recording(self, marks):
            calls.append(marks)
            genuine(self, marks)

        monkeypatch.setattr(TimeIndex, "write", recording)
        return calls

    return replace


def _marks(store: MessageStore, path: Path, queues: int) -> dict[int, list[tuple]]:
    """Each queue's time index as (queue offset + 1, store ms) marks, each checked
    against the store time of the message at its offset."""
    import struct

    found = {}
    for q in range(queues):
        data = (path / "consumequeue" / "t" / str(q) / "timeindex").read_bytes()
        marks = [struct.unpack_from("<Qq", data, i) for i in range(0, len(data), 16)]
        stored = {m.queue_offset: m.store_time_ms for m in read_all(store, "t", q)}
        for mark, (word, ms) in enumerate(marks):
            assert word == mark * 128 + 1, (q, mark, word)
            assert stored[word - 1] == ms, (q, mark)
        found[q] = [word for word, _ in marks]
    return found


def _singles(path: Path, native: bool, count: int) -> tuple[dict, int]:
    roomy = {"segment_bytes": 1 << 20, "queue_file_entries": 4096}
    with MessageStore.open(path, _async_config(**roomy)) as store:
        store.create_topic("t", queues=2, layout="files")
        if not native:
            store._appender = None
        for i in range(count):
            store.append("t", b"s-%d" % i)
        marked = 0 if store._appender is None else store._appender.marked
        return _marks(store, path, 2), marked


def test_native_single_appends_write_the_time_marks_the_long_way_writes(tmp_path):
    native, marked = _singles(tmp_path / "native", True, 1100)
    python, _ = _singles(tmp_path / "python", False, 1100)

    # The first mark of a queue opens its file the long way (TimeIndex.write); the
    # others (every 128th entry) are written by the core.
    assert marked > 0
    assert native == python
    assert _index_files(tmp_path / "native") == _index_files(tmp_path / "python")


def test_native_batches_write_time_marks_with_the_messages_store_times(tmp_path):
    roomy = {"segment_bytes": 1 << 20, "queue_file_entries": 4096}
    path = tmp_path / "s"
    with MessageStore.open(path, _async_config(**roomy)) as store:
        store.create_topic("t", queues=3, layout="files")
        for b in range(20):
            store.append_batch("t", [b"b%d-%d" % (b, i) for i in range(60)])
        assert store._appender.marked > 0
        assert _marks(store, path, 3) == {q: [1, 129, 257, 385] for q in range(3)}


def test_a_native_time_mark_leaves_the_time_index_to_be_synced(tmp_path):
    roomy = {"segment_bytes": 1 << 20, "queue_file_entries": 4096}
    with MessageStore.open(tmp_path / "s", _async_config(**roomy)) as store:
        store.create_topic("t", queues=1, layout="files")
        for _ in range(127):
            store.append("t", b"x")
        store.flush()
        time_index = store._registry.topics["t"].queues[0].time_index
        assert not time_index.dirty
        before = store._appender.marked
        for _ in range(5):  # the flusher may hold a lock for one: the long way
            store.append("t", b"x")
            if store._appender.marked > before or time_index.dirty:
                break
        assert time_index.dirty
        store.flush()
        assert not time_index.dirty


def test_a_replaced_time_index_write_turns_the_native_append_down(tmp_path, time_index_writes):
    with MessageStore.open(tmp_path / "s", _async_config()) as store:
        store.create_topic("t", queues=1, layout="files")
        for _ in range(128):
            store.append("t", b"x")
        calls = time_index_writes()
        before = (store._appender.appended, store._appender.marked)
        store.append("t", b"marked")

        assert (store._appender.appended, store._appender.marked) == before
        assert calls == [[(128, calls[0][0][1])]]


def test_the_flush_thread_pretouches_ahead_of_native_appends(tmp_path):
    roomy = {"segment_bytes": 8 << 20, "queue_file_entries": 16384}
    with MessageStore.open(tmp_path / "s", _async_config(**roomy)) as store:
        store.create_topic("t", queues=2, layout="files")
        calls = []
        genuine = store._flusher._pretouch

        def counted() -> None:
            calls.append(store.commitlog.tail)
            genuine()

        store._flusher._pretouch = counted
        # Two asks, each waited for: asks made while the flush thread is busy are one.
        sent = 0
        for wanted in (1, 2):
            for _ in range(3000):  # about 300 KiB of log: asked every 256 KiB
                store.append("t", b"p%05d" % sent + b"x" * 80)
                sent += 1
            deadline = time.monotonic() + 10
            while len(calls) < wanted and time.monotonic() < deadline:
                time.sleep(0.01)
        assert len(calls) >= 2
        first = [m.body[:6] for m in read_all(store, "t", 0)][:3]
        assert first == [b"p00000", b"p00002", b"p00004"]
