"""last_commit_times: when a group last committed on each queue, moving or not."""

from __future__ import annotations

import pytest

from storeadapter.engine import clock
from storeadapter.engine.offsets import TOUCH_INTERVAL_MS, OffsetStore


class Clock:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ms = 1_000_000
        monkeypatch.setattr(clock, "now_ms", lambda: self.ms)


@pytest.fixture
def now(monkeypatch) -> Clock:
    return Clock(monkeypatch)


@pytest.fixture
def filled(store):
    store.append_batch("t", [{"body": f"m{i}", "queue": i % 2} for i in range(10)])
    return store


def test_a_change_sets_the_last_commit_time(filled, now):
    filled.commit_offset("g", "t", 0, 3)

    assert filled.last_commit_times("g") == {("t", 0): now.ms}
    assert filled.offset_history("g")[0].time_ms == now.ms


def test_committing_the_same_offset_later_moves_the_time_but_not_the_history(filled, now):
    filled.commit_offset("g", "t", 0, 3)
    now.ms += TOUCH_INTERVAL_MS

    assert filled.commit_offset("g", "t", 0, 3) is None
    assert filled.last_commit_times("g") == {("t", 0): now.ms}
    assert len(filled.offset_history("g")) == 1


def test_an_unchanged_commit_soon_after_is_not_journaled(filled, now, store_path):
    filled.commit_offset("g", "t", 0, 3)
    first = now.ms
    journal = max((store_path / "offsets").glob("journal-*"))
    size = journal.stat().st_size
    now.ms += TOUCH_INTERVAL_MS - 1

    filled.commit_offset("g", "t", 0, 3)

    assert filled.last_commit_times("g") == {("t", 0): first}
    assert journal.stat().st_size == size


def test_last_commit_times_survive_reopen(open_store, now):
    store = open_store()
    store.create_topic("t", queues=2)
    store.append_batch("t", [{"body": "x", "queue": q} for q in (0, 1)])
    store.commit_offset("g", "t", 0, 1)
    now.ms += TOUCH_INTERVAL_MS
    store.commit_offset("g", "t", 0, 1)
    store.commit_offset("h", "t", 1, 1)
    store.close()

    reopened = open_store()

    assert reopened.last_commit_times("g") == {("t", 0): now.ms}
    assert reopened.last_commit_times("h") == {("t", 1): now.ms}


def test_last_commit_times_survive_compaction(tmp_path, now):
    offsets = OffsetStore(tmp_path / "offsets", compact_bytes=512)
    for i in range(50):
        now.ms += TOUCH_INTERVAL_MS
        offsets.commit("g", "t", i % 3, i // 3, who="w", reason="r")
        offsets.touch("g", "t", 0)
    expected = offsets.commit_times()
    assert offsets.generation > 0
    offsets.close()

    reopened = OffsetStore(tmp_path / "offsets", compact_bytes=512)

    assert reopened.commit_times() == expected
    reopened.close()


def test_a_deleted_group_has_no_commit_times(filled, now):
    filled.commit_offset("g", "t", 0, 3)

    filled.delete_group("g")

    assert filled.last_commit_times("g") == {}


def test_a_group_that_never_committed_has_none(filled):
    assert filled.last_commit_times("nobody") == {}
