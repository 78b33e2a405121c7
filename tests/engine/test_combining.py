"""Write combining: concurrent appends written in groups, one fsync for a group in sync
mode; each appender gets its own outcome."""

from __future__ import annotations

import threading
import time

import pytest

from storeadapter.engine import (
    STATUS_FLUSH_TIMEOUT,
    STATUS_OK,
    ConfigError,
    MessageStore,
    StoreConfig,
    StoreFailedError,
    TopicNotFoundError,
    fileio,
)
from storeadapter.engine.combining import WriteCombiner
from tests.engine.storetools import read_all, small_config, stall_fdatasync

THREADS = 8


class _Flusher:
    """Stands in for the flush service: callbacks run when the test says so."""

    def __init__(self) -> None:
        self.waiting: list[tuple[int, object]] = []

    def on_durable(self, end, callback) -> None:
        self.waiting.append((end, callback))

    def make_durable(self, error: BaseException | None = None) -> None:
        waiting, self.waiting = self.waiting, []
        for _end, callback in waiting:
            callback(error)


class _Instant:
    def on_durable(self, end, callback) -> None:
        callback(None)


class _Writer:
    """A write_group that records its groups; the first call can be held back."""

    def __init__(self, hold_first: bool = False) -> None:
        self.groups: list[list[str]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        if not hold_first:
            self.release.set()

    def __call__(self, works: list[str]) -> tuple[list, int]:
        self.groups.append(list(works))
        self.entered.set()
        self.release.wait(10)
        outcomes = [
            ValueError(f"refused {work}") if work.startswith("bad") else f"done {work}"
            for work in works
        ]
        return outcomes, len(self.groups)


def _combiner(writer, flusher=None, timeout_s=5.0, fill_wait_s=0.0):
    """A combiner whose flush service makes every group durable at once, unless the
    test passes a ``_Flusher`` of its own to decide when."""
    return WriteCombiner(
        writer,
        lambda: flusher or _Instant(),
        timeout_s=timeout_s,
        fill_wait_s=fill_wait_s,
        on_timeout=lambda outcome: f"timed out {outcome}",
    )


def _submit_in_threads(combiner: WriteCombiner, works: list[str]) -> dict:
    outcomes: dict = {}

    def run(work: str) -> None:
        try:
            outcomes[work] = combiner.submit(work)
        except BaseException as error:
            outcomes[work] = error

    threads = [threading.Thread(target=run, args=(work,)) for work in works]
    for thread in threads:
        thread.start()
    return {"threads": threads, "outcomes": outcomes}


def _join(running: dict) -> dict:
    for thread in running["threads"]:
        thread.join(10)
    return running["outcomes"]


def _wait_until(condition, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.001)


def test_a_lone_appender_writes_its_work_alone():
    writer = _Writer()
    combiner = _combiner(writer)

    assert combiner.submit("a") == "done a"
    assert combiner.submit("b") == "done b"
    assert writer.groups == [["a"], ["b"]]


def _queued_behind_a_writer(works: list[str]) -> tuple[_Writer, dict, dict]:
    """Work "a" being written (held back), ``works`` queued behind it, then released."""
    writer = _Writer(hold_first=True)
    combiner = _combiner(writer)
    first = _submit_in_threads(combiner, ["a"])
    assert writer.entered.wait(5)
    rest = _submit_in_threads(combiner, works)
    _wait_until(lambda: len(combiner._queue) == len(works))
    writer.release.set()
    return writer, first, rest


def test_work_queued_behind_a_writer_is_written_in_one_group_by_the_next_leader():
    writer, first, rest = _queued_behind_a_writer(["b", "c", "d"])

    assert _join(first) == {"a": "done a"}
    assert _join(rest) == {"b": "done b", "c": "done c", "d": "done d"}
    assert writer.groups[0] == ["a"]
    assert sorted(writer.groups[1]) == ["b", "c", "d"]
    assert len(writer.groups) == 2


def test_an_error_meant_for_one_work_is_raised_only_by_its_appender():
    _writer, first, rest = _queued_behind_a_writer(["b", "bad c", "d"])

    outcomes = {**_join(first), **_join(rest)}
    assert isinstance(outcomes.pop("bad c"), ValueError)
    assert outcomes == {"a": "done a", "b": "done b", "d": "done d"}


def test_an_error_of_the_whole_group_is_raised_by_every_member():
    held = threading.Event()
    calls = []

    def failing(works):
        calls.append(works)
        if len(calls) == 1:
            held.wait(10)
            return ["done"], 1
        raise OSError("the disk went away")

    combiner = _combiner(failing)
    first = _submit_in_threads(combiner, ["a"])
    _wait_until(lambda: calls)
    rest = _submit_in_threads(combiner, ["b", "c"])
    _wait_until(lambda: len(combiner._queue) == 2)
    held.set()

    outcomes = _join(rest)
    assert _join(first) == {"a": "done"}
    assert [type(outcomes[w]) for w in ("b", "c")] == [OSError, OSError]
    assert outcomes["b"] is not outcomes["c"]  # each thread raises an object of its own


def test_sync_members_return_only_once_the_flush_calls_back():
    flusher = _Flusher()
    writer = _Writer()
    combiner = _combiner(writer, flusher)
    running = _submit_in_threads(combiner, ["a"])
    _wait_until(lambda: flusher.waiting)
    time.sleep(0.05)

    assert running["outcomes"] == {}
    flusher.make_durable()
    assert _join(running) == {"a": "done a"}


def test_sync_members_all_get_the_fsync_failure():
    flusher = _Flusher()
    writer = _Writer(hold_first=True)
    combiner = _combiner(writer, flusher)
    running = _submit_in_threads(combiner, ["a"])
    assert writer.entered.wait(5)
    rest = _submit_in_threads(combiner, ["b", "c"])
    _wait_until(lambda: len(combiner._queue) == 2)
    writer.release.set()
    _wait_until(lambda: len(flusher.waiting) == 2)

    flusher.make_durable(StoreFailedError("fsync failed"))

    outcomes = {**_join(running), **_join(rest)}
    assert all(isinstance(outcomes[w], StoreFailedError) for w in "abc")


def test_a_sync_member_not_made_durable_in_time_returns_its_timeout_outcome():
    flusher = _Flusher()
    combiner = _combiner(_Writer(), flusher, timeout_s=0.05)

    assert combiner.submit("a") == "timed out done a"
    flusher.make_durable()  # too late: nothing is woken twice
    assert combiner.submit("b") == "timed out done b"


def test_a_sync_leader_waits_for_as_many_appenders_as_the_last_group_had():
    flusher = _Flusher()
    writer = _Writer(hold_first=True)
    combiner = _combiner(writer, flusher, fill_wait_s=5.0)
    first = _submit_in_threads(combiner, ["a"])
    assert writer.entered.wait(5)
    rest = _submit_in_threads(combiner, ["b", "c", "d"])
    _wait_until(lambda: len(combiner._queue) == 3)
    writer.release.set()
    _wait_until(lambda: len(flusher.waiting) == 2)
    flusher.make_durable()
    _join(first)
    _join(rest)
    # the last group had 3: a new leader waits for two more before it writes
    leader = _submit_in_threads(combiner, ["e"])
    time.sleep(0.05)
    assert len(writer.groups) == 2
    others = _submit_in_threads(combiner, ["f", "g"])
    _wait_until(lambda: len(writer.groups) == 3)
    _wait_until(lambda: flusher.waiting)
    flusher.make_durable()

    assert sorted(writer.groups[2]) == ["e", "f", "g"]
    assert _join(leader) == {"e": "done e"}
    assert _join(others) == {"f": "done f", "g": "done g"}


# ----------------------------------------------------------------- in the engine


def _sync_config(**overrides) -> StoreConfig:
    return small_config(flush_mode="sync", **overrides)


def _append_in_threads(store: MessageStore, topic: str, per_thread: int) -> list:
    results: list = []
    lock = threading.Lock()
    barrier = threading.Barrier(THREADS)

    def run(number: int) -> None:
        barrier.wait()
        for i in range(per_thread):
            result = store.append(topic, f"{number}-{i}".encode())
            with lock:
                results.append(result)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def test_concurrent_sync_appends_share_fsyncs_and_each_lands_once(open_store, monkeypatch):
    store = open_store(cfg=_sync_config())
    store.create_topic("t", queues=4)
    real = fileio.fdatasync
    syncs = []

    def counting(fd: int) -> None:
        syncs.append(fd)
        real(fd)

    monkeypatch.setattr(fileio, "fdatasync", counting)

    results = _append_in_threads(store, "t", 50)

    assert len(results) == THREADS * 50
    assert {r.status for r in results} == {STATUS_OK}
    assert len(syncs) < len(results)
    placed = {(r.queue, r.queue_offset) for r in results}
    assert len(placed) == len(results)
    bodies = sorted(m.body for q in range(4) for m in read_all(store, "t", q))
    assert bodies == sorted(f"{n}-{i}".encode() for n in range(THREADS) for i in range(50))


def test_concurrent_async_appends_each_land_once(open_store):
    store = open_store(cfg=small_config(flush_mode="async"))
    store.create_topic("t", queues=4)

    results = _append_in_threads(store, "t", 200)

    assert {r.status for r in results} == {STATUS_OK}
    assert len({r.commit_offset for r in results}) == len(results)
    for queue in range(4):
        offsets = sorted(r.queue_offset for r in results if r.queue == queue)
        assert offsets == list(range(len(offsets)))


def test_an_append_to_a_deleted_topic_fails_alone_in_its_group(open_store):
    store = open_store(cfg=_sync_config())
    store.create_topic("t", queues=2)
    store.create_topic("gone", queues=1)
    state = store._topic("gone")
    store.delete_topic("gone")

    outcomes, _end = store._writer.write_group(
        [
            (store._topic("t"), [b"first"], True),
            (state, [b"lost"], True),
            (store._topic("t"), [b"last"], True),
        ]
    )

    assert isinstance(outcomes[1], TopicNotFoundError)
    assert [r[0].status for r in (outcomes[0], outcomes[2])] == [STATUS_OK, STATUS_OK]
    assert [m.body for q in range(2) for m in read_all(store, "t", q)] == [b"first", b"last"]


def test_every_sync_appender_of_a_group_gets_the_fsync_failure(open_store, monkeypatch):
    store = open_store(cfg=_sync_config())
    store.create_topic("t", queues=4)

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error (injected)")

    monkeypatch.setattr(fileio, "fdatasync", failing)
    errors = []

    def run() -> None:
        try:
            store.append("t", b"never durable")
        except StoreFailedError as error:
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert len(errors) == THREADS
    assert store.failed


def test_a_group_no_fsync_covers_in_time_returns_flush_timeout(open_store, monkeypatch):
    store = open_store(cfg=_sync_config(flush_timeout_ms=50))
    store.create_topic("t", queues=4)
    release = stall_fdatasync(monkeypatch)
    try:
        results = _append_in_threads(store, "t", 2)
    finally:
        release.set()

    assert {r.status for r in results} == {STATUS_FLUSH_TIMEOUT}
    assert sorted(m.body for q in range(4) for m in read_all(store, "t", q)) == sorted(
        f"{n}-{i}".encode() for n in range(THREADS) for i in range(2)
    )


def test_group_commit_wait_is_checked():
    with pytest.raises(ConfigError, match="group_commit_wait_us"):
        StoreConfig(group_commit_wait_us=-1)


def test_closing_the_store_answers_a_sync_appender_still_waiting(open_store):
    store = open_store(cfg=_sync_config(flush_interval_ms=60_000, flush_timeout_ms=60_000))
    store.create_topic("t", queues=1)
    store._flusher._unsynced = lambda: False  # the flush thread leaves the waiter be
    results = []
    appender = threading.Thread(target=lambda: results.append(store.append("t", b"last")))
    appender.start()
    _wait_until(lambda: store._flusher._waiting)

    store.close()
    appender.join(10)

    assert [r.status for r in results] == [STATUS_OK]
