"""An append without Python locks or frame (docs/PERFORMANCE.md, "Issue 31 (part 7)"):
the store's native thread locks (``dataplane.ThreadLock``), ``store.append`` bound to
the core's ``append_or_long_way``, the topic facts the core keeps, ``_seen`` renewed."""

from __future__ import annotations

import inspect
import statistics
import sys
import threading
import time

import pytest

from storeadapter.engine import MessageStore, StoreConfig, dataplane
from storeadapter.engine.errors import (
    InvalidMessageError,
    MessageTooLargeError,
    StoreClosedError,
    TopicNotFoundError,
)
from tests.engine.storetools import read_all, small_config


def _every(store: MessageStore, topic: str) -> list:
    queues = store._topics[topic].info.queues
    return [m for queue in range(queues) for m in read_all(store, topic, queue)]


def _open(path, **overrides) -> MessageStore:
    store = MessageStore.open(path, small_config(flush_mode="async", **overrides))
    store.create_topic("t", queues=3, layout="files")
    return store


# ------------------------------------------------------------------ the lock itself


def test_a_plain_lock_is_taken_once_and_refuses_a_second_taker():
    lock = dataplane.ThreadLock()
    assert lock.acquire() and lock.locked() and lock.held_here()
    taken = []
    thread = threading.Thread(target=lambda: taken.append(lock.acquire(blocking=False)))
    thread.start()
    thread.join()
    assert taken == [False]
    lock.release()
    assert not lock.locked()
    with pytest.raises(RuntimeError):
        lock.release()
    with lock:
        assert lock.locked()
    assert not lock.locked()


def test_a_plain_lock_held_by_its_own_thread_refuses_a_wait_rather_than_hang():
    lock = dataplane.ThreadLock()
    with lock:
        assert lock.acquire(blocking=False) is False
        assert lock.acquire(timeout=0.01) is False
        with pytest.raises(RuntimeError):
            lock.acquire()


def test_a_reentrant_lock_is_let_go_after_as_many_releases_by_its_owner_only():
    lock = dataplane.ThreadLock(reentrant=True)
    with lock, lock:
        assert lock.acquire(blocking=False)
        lock.release()
        errors = []

        def stranger():
            try:
                lock.release()
            except RuntimeError as error:
                errors.append(error)
            errors.append(lock.acquire(timeout=0.05))

        thread = threading.Thread(target=stranger)
        thread.start()
        thread.join()
        assert [type(e) for e in errors[:1]] == [RuntimeError] and errors[1] is False
        assert lock.locked()
    assert not lock.locked()


def test_a_waiter_gets_the_lock_when_it_is_let_go_and_waits_without_the_gil():
    lock = dataplane.ThreadLock()
    lock.acquire()
    got = threading.Event()

    def waiter():
        assert lock.acquire()
        got.set()
        lock.release()

    thread = threading.Thread(target=waiter)
    thread.start()
    # This thread keeps running Python while the other waits: the wait has no GIL.
    spins, deadline = 0, time.monotonic() + 0.2
    while time.monotonic() < deadline:
        spins += 1
    assert spins > 1000 and not got.is_set()
    lock.release()
    thread.join(5)
    assert got.is_set()


def test_a_timed_wait_ends_false_and_bad_timeouts_are_refused():
    lock = dataplane.ThreadLock()
    lock.acquire()
    answers = []
    thread = threading.Thread(target=lambda: answers.append(lock.acquire(timeout=0.05)))
    thread.start()
    thread.join(5)
    assert answers == [False]
    lock.release()
    with pytest.raises(ValueError):
        lock.acquire(blocking=False, timeout=1.0)
    with pytest.raises(ValueError):
        lock.acquire(timeout=-2.0)


# ------------------------------------------------------------------ in the store


def test_the_store_locks_are_native(tmp_path):
    with _open(tmp_path / "s") as store:
        assert isinstance(store._write_lock, dataplane.ThreadLock)
        assert isinstance(store._follow_lock, dataplane.ThreadLock)


def test_a_thread_holding_the_write_lock_holds_appends_back_with_the_gil_free(tmp_path):
    with _open(tmp_path / "s") as store:
        store.append("t", b"warm")
        done = threading.Event()
        results = []
        store._write_lock.acquire()
        try:

            def append():
                results.append(store.append("t", b"x"))
                done.set()

            thread = threading.Thread(target=append)
            thread.start()
            spins, deadline = 0, time.monotonic() + 0.3
            while time.monotonic() < deadline:
                spins += 1  # Python runs here while the append waits: no GIL held there
            assert spins > 1000
            assert not done.is_set()  # the append waits for the lock
            tail_while_held = store.commitlog.tail
        finally:
            store._write_lock.release()
        thread.join(5)
        assert done.is_set()
        assert results[0].commit_offset == tail_while_held


def test_a_lock_holder_that_wants_the_gil_does_not_deadlock_an_append(tmp_path):
    with _open(tmp_path / "s") as store:
        store.append("t", b"warm")
        holding = threading.Event()
        released = []

        def holder():
            with store._write_lock:
                holding.set()
                time.sleep(0.1)
                total = sum(range(200_000))  # wants the GIL while holding the lock
                released.append(total)

        thread = threading.Thread(target=holder)
        thread.start()
        holding.wait(5)
        result = store.append("t", b"after")  # the core declines; the long way waits
        assert released  # it could only go on once the holder let go
        thread.join(5)
        assert store.get(result.message_id).body == b"after"


def test_appends_from_threads_beside_topic_changes_all_land_once(tmp_path):
    with _open(tmp_path / "s", segment_bytes=1 << 20, queue_file_entries=4096) as store:
        store.create_topic("u", queues=2, layout="files")
        per_thread, threads = 300, 4
        results: list = []
        lock = threading.Lock()
        errors: list = []

        def appender(n):
            try:
                mine = [store.append("t", b"%d-%d" % (n, i)) for i in range(per_thread)]
            except BaseException as error:  # pragma: no cover - reported below
                errors.append(error)
                return
            with lock:
                results.extend(mine)

        workers = [threading.Thread(target=appender, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        # Topic changes meanwhile: settings on and off, queues added, another topic.
        for round_ in range(6):
            store.set_topic_settings("t", {"retention_hours": 100 + round_})
            store.set_topic_settings("t", {"retention_hours": None})
            store.append("u", b"beside-%d" % round_)
        store.add_queues("t", 1)
        for worker in workers:
            worker.join(30)
        assert errors == []
        assert len(results) == per_thread * threads
        assert len({r.commit_offset for r in results}) == len(results)
        by_queue: dict[int, list[int]] = {}
        for r in results:
            by_queue.setdefault(r.queue, []).append(r.queue_offset)
        for offsets in by_queue.values():
            assert sorted(offsets) == list(range(len(offsets)))
        bodies = sorted(m.body for m in _every(store, "t"))
        wanted = [b"%d-%d" % (n, i) for n in range(threads) for i in range(per_thread)]
        assert bodies == sorted(wanted)
        assert store._appender.appended > 0


# ------------------------------------------------------------------ append, bound natively


def test_append_is_bound_to_the_native_call_with_the_same_signature(tmp_path):
    with _open(tmp_path / "s") as store:
        bound = inspect.signature(store.append)
        declared = inspect.signature(MessageStore.append)
        assert list(bound.parameters) == list(declared.parameters)[1:]
        assert [p.default for p in bound.parameters.values()] == [
            p.default for p in list(declared.parameters.values())[1:]
        ]
        assert "append" in store.__dict__
    assert "append" not in store.__dict__  # closed: the class's method again


def test_the_bound_append_answers_every_argument_as_the_long_way(tmp_path):
    answers = {}
    for native in (True, False):
        with _open(tmp_path / f"s{native}") as store:
            if not native:
                store._appender = None
            got = [
                store.append("t", b"plain"),
                store.append("t", "text"),
                store.append("t", b"keyed", key="k"),
                store.append("t", b"tagged", tag="g"),
                store.append("t", b"queued", queue=2),
                store.append("t", b"props", properties={"a": "b"}),
                store.append("t", b"empty props", properties={}),
                store.append("t", b"deduped", dedup_id="d1"),
                store.append("t", b"deduped again", dedup_id="d1"),
                store.append(topic="t", body=b"by name"),
            ]
            answers[native] = [(r.queue, r.queue_offset, r.status) for r in got]
            errors = []
            for bad in (
                lambda: store.append("nope", b"x"),
                lambda: store.append("t", 5),
                lambda: store.append("t", b"x" * (store.config.max_message_bytes + 1)),
                lambda: store.append("t"),
            ):
                try:
                    bad()
                except Exception as error:
                    errors.append(type(error))
            answers[native, "errors"] = errors
            messages = [(m.body, m.tag, m.keys, m.properties) for m in _every(store, "t")]
            answers[native, "messages"] = sorted(messages, key=repr)
    assert answers[True] == answers[False]
    assert answers[True, "errors"] == answers[False, "errors"]
    assert answers[True, "errors"][:3] == [
        TopicNotFoundError,
        InvalidMessageError,
        MessageTooLargeError,
    ]
    assert answers[True, "messages"] == answers[False, "messages"]


def test_a_plain_append_with_empty_properties_is_native(tmp_path):
    with _open(tmp_path / "s") as store:
        store.append("t", b"first")
        before = store._appender.appended
        store.append("t", b"x", properties={})
        store.append("t", b"y", None, None, None, None, None)
        assert store._appender.appended == before + 2


def test_a_bound_append_kept_past_close_raises_that_the_store_is_closed(tmp_path):
    store = _open(tmp_path / "s")
    append = store.append
    append("t", b"x")
    store.close()
    with pytest.raises(StoreClosedError):
        append("t", b"y")
    with pytest.raises(StoreClosedError):
        store.append("t", b"y")


def test_a_topic_change_is_seen_by_the_next_native_append(tmp_path):
    with _open(tmp_path / "s") as store:
        store.append("t", b"x" * 50)
        taken = store._appender.appended
        store.set_topic_settings("t", {"max_message_bytes": 10})
        with pytest.raises(MessageTooLargeError):
            store.append("t", b"x" * 50)
        assert store._appender.appended == taken
        store.set_topic_settings("t", {"max_message_bytes": None})
        store.append("t", b"x" * 50)
        assert store._appender.appended == taken + 1
        store.delete_topic("t")
        with pytest.raises(TopicNotFoundError):
            store.append("t", b"x")
        store.create_topic("t", queues=1, layout="files")
        assert store.append("t", b"again").queue == 0


def test_the_seen_snapshot_is_renewed_in_place_only_when_no_one_else_holds_it(tmp_path):
    with _open(tmp_path / "s") as store:
        store.append("t", b"a")
        store.append("t", b"b")
        assert store._seen.tail == store.commitlog.tail
        held = store._seen
        tail_then = held.tail
        store.append("t", b"c")
        assert held.tail == tail_then  # a snapshot someone holds never changes
        assert store._seen is not held
        assert store._seen.tail == store.commitlog.tail
        assert store._seen[1:5] == held[1:5]


def test_sync_mode_binds_the_native_append_that_waits_for_its_fdatasync(tmp_path):
    config = StoreConfig(flush_mode="sync")
    with MessageStore.open(tmp_path / "s", config) as store:
        store.create_topic("t", queues=1)
        assert store.__dict__["append"] == store._appender.append_or_long_way
        result = store.append("t", b"x")
        assert result.status == "OK"
        assert store._flusher.flushed >= store.commitlog.tail


def test_the_flock_pen_keeps_the_class_append_beside_the_native_locks(tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEMARK_WRITE_LOCK", "flock")
    with _open(tmp_path / "s") as store:
        assert store._appender is None and "append" not in store.__dict__
        results = [store.append("t", b"%d" % i) for i in range(5)]
        assert [r.queue_offset for r in results] == [0, 0, 0, 1, 1]
        assert not store._write_lock.locked() and not store._follow_lock.locked()


def test_an_offset_commit_through_a_second_store_is_not_starved_by_a_loop_of_appends(tmp_path):
    # Two store objects on one directory in one process. The committer's first load of
    # the queue walked back over every entry the other object appended since its own
    # last follow, one read each, and each read gave up the GIL to the appending loop
    # for a switch interval: one commit in 19-33 s (docs/PERFORMANCE.md, "commit p99
    # beside appends").
    config = StoreConfig(
        flush_mode="async", segment_bytes=256 << 20, index_slots=4096, index_entries=65536
    )
    appender = MessageStore.open(tmp_path / "s", config)
    appender.create_topic("t", queues=1)
    committer = MessageStore.open(tmp_path / "s", config)
    appender.append("t", b"x")
    stop = threading.Event()

    def append_in_a_loop() -> None:
        while not stop.is_set():
            appender.append("t", b"x" * 100)

    looping = threading.Thread(target=append_in_a_loop)
    looping.start()
    try:
        time.sleep(0.3)
        ends = time.monotonic() + 30
        commits = 0
        while commits < 20 and time.monotonic() < ends:
            committer.commit_offset("g", "t", 0, commits % 2)
            commits += 1
    finally:
        stop.set()
        looping.join()
        committer.close()
        appender.close()
    assert commits == 20


def test_an_offset_commit_through_the_appending_store_does_not_wait_for_a_switch_interval(
    tmp_path,
):
    # One store object, a thread appending through it in a loop. A native append keeps
    # the GIL, so the committer, its write or its fdatasync done, waited for the
    # interpreter's switch interval to get it back, twice a commit (5.7 ms a commit at
    # the default 5 ms). An append now makes way for it (native/src/python/returning.rs).
    # The interval is raised to 0.2 s here: a commit that waited for it takes that long
    # (most of them did: 0.20-0.22 s, the others 1-30 ms); one that need not, ~1 ms.
    config = StoreConfig(
        flush_mode="async", segment_bytes=256 << 20, index_slots=4096, index_entries=65536
    )
    store = MessageStore.open(tmp_path / "s", config)
    store.create_topic("t", queues=1)
    store.append("t", b"x")
    store.commit_offset("g", "t", 0, 1)  # the group's first commit: its files made
    stop = threading.Event()

    def append_in_a_loop() -> None:
        while not stop.is_set():
            store.append("t", b"x" * 100)

    looping = threading.Thread(target=append_in_a_loop)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.2)
    took = []
    try:
        looping.start()
        for commit in range(10):
            began = time.perf_counter()
            store.commit_offset("g", "t", 0, commit % 2)
            took.append(time.perf_counter() - began)
    finally:
        stop.set()
        looping.join()
        sys.setswitchinterval(interval)
        store.close()
    assert statistics.median(took) < 0.1, took
    assert dataplane.made_way() > 0
