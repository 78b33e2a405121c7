"""offset_for_time: the first offset whose store time is at or after a timestamp."""

from __future__ import annotations

import random

import pytest

from storeadapter.engine import Message, MessageStore, StoreError, TopicNotFoundError, clock
from storeadapter.engine.consumequeue import TIME_INDEX_INTERVAL


class Clock:
    """The store's clock, set by the test (store times are what offset_for_time reads)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, start: int = 1_000_000) -> None:
        self.now = start
        monkeypatch.setattr(clock, "now_ms", lambda: self.now)


def _append_at(store, clock: Clock, times: list[int], queue: int = 0) -> None:
    for at in times:
        clock.now = at
        store.append("t", f"at {at}", queue=queue)


def _expected(times: list[int], timestamp: int) -> int:
    return next((i for i, at in enumerate(times) if at >= timestamp), len(times))


def test_answers_follow_kafka_semantics(store, monkeypatch):
    clock = Clock(monkeypatch)
    _append_at(store, clock, [1000, 1000, 2000, 3000])

    assert store.offset_for_time("t", 0, 0) == 0  # before the first: the min offset
    assert store.offset_for_time("t", 0, 1000) == 0
    assert store.offset_for_time("t", 0, 1500) == 2
    assert store.offset_for_time("t", 0, 3000) == 3
    assert store.offset_for_time("t", 0, 3001) == 4  # after the last: the max offset


def test_an_empty_queue_answers_its_max_offset(store):
    assert store.offset_for_time("t", 2, 123) == 0


def test_random_lookups_across_many_time_marks_match_a_full_scan(store, monkeypatch):
    clock = Clock(monkeypatch)
    rng = random.Random(7)
    times, at = [], 10_000
    for _ in range(TIME_INDEX_INTERVAL * 5 + 17):
        at += rng.choice([0, 0, 1, 3, 20])
        times.append(at)
    for at in times:
        clock.now = at
        store.append_batch("t", [Message(f"{at}", queue=1)])

    for timestamp in [rng.randint(times[0] - 5, times[-1] + 5) for _ in range(300)]:
        assert store.offset_for_time("t", 1, timestamp) == _expected(times, timestamp)


def test_a_lost_time_index_still_gives_right_answers(files_store, store_path, monkeypatch):
    store = files_store
    clock = Clock(monkeypatch)
    times = [5000 + 10 * i for i in range(TIME_INDEX_INTERVAL * 3)]
    _append_at(store, clock, times)
    (store_path / "consumequeue" / "t" / "0" / "timeindex").unlink()
    store.close()
    reopened = MessageStore.open(store_path, store.config)

    try:
        for timestamp in (4999, 5000, 5005, times[200], times[-1] + 1):
            assert reopened.offset_for_time("t", 0, timestamp) == _expected(times, timestamp)
    finally:
        reopened.close()


def test_recovery_rewrites_the_time_index(open_store, store_path, monkeypatch):
    clock = Clock(monkeypatch)
    store = open_store()
    store.create_topic("t", queues=1, layout="files")
    _append_at(store, clock, [7000 + i for i in range(TIME_INDEX_INTERVAL * 2 + 1)])
    store.close()
    (store_path / "consumequeue" / "t" / "0" / "timeindex").unlink()
    (store_path / "checkpoint").unlink()
    (store_path / "abort").touch()

    open_store()

    marks = (store_path / "consumequeue" / "t" / "0" / "timeindex").read_bytes()
    assert len(marks) == 16 * 3


def test_store_times_never_go_back_when_the_clock_does(store, monkeypatch):
    clock = Clock(monkeypatch)
    _append_at(store, clock, [9000, 8000, 9500])

    times = [m.store_time_ms for m in store.read("t", 0, 0)]

    assert times == [9000, 9000, 9500]
    assert store.offset_for_time("t", 0, 9000) == 0


def test_bad_arguments_raise_typed_errors(store):
    with pytest.raises(StoreError):
        store.offset_for_time("t", 0, "noon")
    with pytest.raises(TopicNotFoundError):
        store.offset_for_time("missing", 0, 0)


def test_store_time_at_reads_one_message_store_time(store, monkeypatch):
    clock = Clock(monkeypatch)
    _append_at(store, clock, [1000, 2500])

    assert store.store_time_at("t", 0, 1) == 2500


def test_store_time_at_outside_the_queue_is_none(store, monkeypatch):
    clock = Clock(monkeypatch)
    _append_at(store, clock, [1000])

    assert store.store_time_at("t", 0, -1) is None
    assert store.store_time_at("t", 0, 1) is None


def test_store_times_never_go_back_across_writers(open_store, store, monkeypatch):
    clock = Clock(monkeypatch)
    other = open_store()
    _append_at(store, clock, [5000])
    _append_at(other, clock, [3000])

    times = [m.store_time_ms for m in store.read("t", 0, 0, max_messages=10)]

    assert times == [5000, 5000]
