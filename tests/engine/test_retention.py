"""Retention with a fake clock and a fake disk: what goes, what stays, what is reported."""

from __future__ import annotations

import pytest

from storeadapter.engine import DiskFullError, MessageNotFoundError, fileio
from storeadapter.engine import clock as store_clock
from tests.engine.storetools import read_all, segment_paths

HOUR_MS = 3_600_000
START_MS = 1_700_000_000_000


@pytest.fixture
def clock(monkeypatch):
    now = {"ms": START_MS}
    monkeypatch.setattr(store_clock, "now_ms", lambda: now["ms"])
    return now


@pytest.fixture
def disk(monkeypatch):
    usage = {"ratio": 0.10}
    monkeypatch.setattr(fileio, "disk_usage", lambda path: (int(usage["ratio"] * 1e9), 10**9))
    return usage


def _fill(store, clock, hours: list[float], per_hour: int = 60) -> list:
    """Append ``per_hour`` 200-byte messages at each of the given hours after START."""
    results = []
    for hour in hours:
        clock["ms"] = START_MS + int(hour * HOUR_MS)
        for i in range(per_hour):
            results.append(store.append("t", b"x" * 200, queue=i % 2))
    return results


def test_expired_segments_go_and_queue_minimums_move(store, clock, disk, store_path):
    old = _fill(store, clock, [0])
    new = _fill(store, clock, [80])
    segments_before = len(segment_paths(store_path))

    report = store.delete_expired(now_ms=START_MS + 90 * HOUR_MS)

    assert report.deleted_segments and all(
        d["reason"] == "expired" for d in report.deleted_segments
    )
    assert len(segment_paths(store_path)) == segments_before - len(report.deleted_segments)
    assert store.queue_range("t", 0)[0] > 0
    with pytest.raises(MessageNotFoundError):
        store.get(old[0].message_id)
    assert store.get(new[-1].message_id).body == b"x" * 200
    assert all(m.store_time_ms >= START_MS for m in read_all(store, "t", 0))


def test_nothing_within_retention_is_deleted(store, clock, disk, store_path):
    _fill(store, clock, [0, 10])
    before = segment_paths(store_path)

    report = store.delete_expired(now_ms=START_MS + 20 * HOUR_MS)

    assert report.deleted_segments == []
    assert segment_paths(store_path) == before


def test_the_active_segment_is_never_deleted(store, clock, disk, store_path):
    _fill(store, clock, [0])

    store.delete_expired(now_ms=START_MS + 1000 * HOUR_MS)

    assert len(segment_paths(store_path)) >= 1
    assert store.append("t", b"still writable").status == "OK"


def test_the_report_counts_dropped_and_unconsumed_messages_per_group(store, clock, disk):
    _fill(store, clock, [0])
    _fill(store, clock, [80])
    store.commit_offset("caught-up", "t", 0, store.queue_range("t", 0)[1])
    store.commit_offset("behind", "t", 0, 5)

    report = store.delete_expired(now_ms=START_MS + 90 * HOUR_MS)

    drop = next(q for q in report.queues if q.queue == 0)
    assert drop.dropped == drop.new_min_offset - drop.old_min_offset > 5
    assert drop.unconsumed_by_group["caught-up"] == 0
    assert drop.unconsumed_by_group["behind"] == drop.new_min_offset - 5


def test_past_the_force_ratio_unexpired_segments_go_until_under_warn(store, clock, disk):
    _fill(store, clock, [0, 1, 2])
    disk["ratio"] = 0.86

    report = store.delete_expired(now_ms=START_MS + 3 * HOUR_MS)

    assert report.deleted_segments
    assert {d["reason"] for d in report.deleted_segments} == {"disk"}


def test_past_the_reject_ratio_appends_are_refused_and_resume_after(store, disk):
    disk["ratio"] = 0.95
    store.flush()  # the disk is probed when the store flushes

    with pytest.raises(DiskFullError, match="95% full"):
        store.append("t", b"refused")
    disk["ratio"] = 0.50
    store.flush()

    assert store.append("t", b"accepted").status == "OK"


def test_consume_queue_and_index_files_below_the_minimum_go(files_store, clock, disk, store_path):
    store = files_store
    clock["ms"] = START_MS
    for i in range(300):  # 64 entries per consume-queue file, 512 per index file
        store.append("t", b"y" * 100, key=f"k{i}", queue=0)
    _fill(store, clock, [80])
    queue_dir = store_path / "consumequeue" / "t" / "0"
    files_before = len([p for p in queue_dir.iterdir() if p.name.isdigit()])

    report = store.delete_expired(now_ms=START_MS + 90 * HOUR_MS)

    assert len([p for p in queue_dir.iterdir() if p.name.isdigit()]) < files_before
    assert report.index_files_deleted >= 0
    assert store.query_by_key("t", "k0") == []


def test_minimums_survive_a_reopen(open_store, store_path, clock, disk):
    store = open_store()
    store.create_topic("t", queues=2)
    _fill(store, clock, [0])
    _fill(store, clock, [80])
    store.delete_expired(now_ms=START_MS + 90 * HOUR_MS)
    expected = store.queue_range("t", 0)
    store.close()

    assert open_store().queue_range("t", 0) == expected


def test_another_store_object_follows_the_deletion(open_store, clock, disk):
    store = open_store()
    store.create_topic("t", queues=2)
    other = open_store()
    _fill(store, clock, [0])
    _fill(store, clock, [80])
    assert other.queue_range("t", 0)[0] == 0

    store.delete_expired(now_ms=START_MS + 90 * HOUR_MS)

    assert other.queue_range("t", 0) == store.queue_range("t", 0)
    assert read_all(other, "t", 0)[0].queue_offset == store.queue_range("t", 0)[0]


def test_expiry_forecast_names_groups_with_unconsumed_old_messages(store, clock, disk):
    _fill(store, clock, [0])
    _fill(store, clock, [5])
    store.commit_offset("behind", "t", 0, 0)
    store.commit_offset("caught-up", "t", 0, store.queue_range("t", 0)[1])

    rows = store.expiry_forecast(now_ms=START_MS + 6 * HOUR_MS)

    behind = [r for r in rows if r["group"] == "behind"]
    assert behind and behind[0]["queue"] == 0 and behind[0]["messages"] > 0
    assert behind[0]["expires_at_ms"] <= START_MS + (5 + 72) * HOUR_MS
    assert behind[0]["overdue"] is False
    assert not [r for r in rows if r["group"] == "caught-up"]


def test_expiry_forecast_looks_only_at_the_topics_asked_for(store, clock, disk):
    store.create_topic("u", queues=1)
    _fill(store, clock, [0])
    store.append("u", b"old")
    _fill(store, clock, [5])
    store.commit_offset("behind", "t", 0, 0)
    store.commit_offset("behind", "u", 0, 0)
    now = START_MS + 6 * HOUR_MS

    every = {r["topic"] for r in store.expiry_forecast(now_ms=now)}
    asked = {r["topic"] for r in store.expiry_forecast(now_ms=now, topics=["u"])}

    assert (every, asked) == ({"t", "u"}, {"u"})


def test_a_queue_emptied_at_a_file_boundary_keeps_its_offsets_after_reopen(
    open_store, store_path, disk
):
    store = open_store()
    store.create_topic("t", queues=1)
    store.create_topic("u", queues=1)
    store.append_batch("t", [b"z" * 100 for _ in range(64)])  # exactly one queue file
    store.append_batch("u", [b"y" * 300 for _ in range(40)])  # t's records now all sealed
    disk["ratio"] = 0.86  # force: every sealed segment goes
    store.delete_expired()
    expected = store.queue_range("t", 0)
    assert expected == (64, 64)  # every message of t gone, at a queue-file boundary
    store.close()

    reopened = open_store()

    assert reopened.queue_range("t", 0) == expected
    assert reopened.append("t", b"next").queue_offset == 64


def test_queue_minimums_are_raised_after_a_crash_reopen(open_store, store_path, clock, disk):
    store = open_store()
    store.create_topic("t", queues=2)
    _fill(store, clock, [0])
    _fill(store, clock, [80])
    store.delete_expired(now_ms=START_MS + 90 * HOUR_MS)
    expected = store.queue_range("t", 0)
    store.close()
    (store_path / "checkpoint").unlink()
    (store_path / "abort").touch()

    assert open_store().queue_range("t", 0) == expected


def test_the_retention_plan_lists_what_delete_expired_then_deletes(store, clock, disk):
    _fill(store, clock, [0])
    _fill(store, clock, [80])
    now = START_MS + 90 * HOUR_MS

    plan = store.retention_plan(now_ms=now)
    report = store.delete_expired(now_ms=now)

    assert plan and [p["reason"] for p in plan] == ["expired"] * len(plan)
    assert [p["name"] for p in plan] == [d["name"] for d in report.deleted_segments]
    assert all(p["end"] > p["base"] for p in plan)


def test_the_retention_plan_deletes_nothing(store, clock, disk, store_path):
    _fill(store, clock, [0])
    _fill(store, clock, [80])
    before = segment_paths(store_path)

    store.retention_plan(now_ms=START_MS + 90 * HOUR_MS)

    assert segment_paths(store_path) == before


def test_a_refused_segment_is_kept_with_every_later_one(store, clock, disk, store_path):
    old = _fill(store, clock, [0])
    _fill(store, clock, [80])
    now = START_MS + 90 * HOUR_MS
    plan = store.retention_plan(now_ms=now)
    assert len(plan) >= 2
    refused = plan[1]["name"]
    asked = []

    def may_delete(segment: dict) -> bool:
        asked.append(segment["name"])
        return segment["name"] != refused

    report = store.delete_expired(now_ms=now, may_delete=may_delete)

    assert asked == [p["name"] for p in plan[:2]]
    assert [d["name"] for d in report.deleted_segments] == [plan[0]["name"]]
    assert [h["name"] for h in report.held_segments] == [p["name"] for p in plan[1:]]
    kept = {path.name for path in segment_paths(store_path)}
    assert {p["name"] for p in plan[1:]} <= kept
    survivor = next(r for r in old if r.commit_offset >= plan[1]["base"])
    assert store.get(survivor.message_id).body == b"x" * 200


def test_refusing_the_oldest_segment_deletes_nothing(store, clock, disk, store_path):
    _fill(store, clock, [0])
    _fill(store, clock, [80])
    before = segment_paths(store_path)

    report = store.delete_expired(now_ms=START_MS + 90 * HOUR_MS, may_delete=lambda s: False)

    assert report.deleted_segments == [] and report.held_segments
    assert segment_paths(store_path) == before
    assert store.queue_range("t", 0)[0] == 0


def test_a_queue_file_deleted_while_the_queue_loads_is_passed_over(
    open_store, store_path, monkeypatch
):
    from storeadapter.engine import consumequeue
    from tests.engine.storetools import QUEUE_FILE_ENTRIES

    store = open_store()
    store.create_topic("t", queues=1, layout="files")
    store.append_batch("t", [b"m"] * (QUEUE_FILE_ENTRIES * 2 + 1))
    store.close()
    existing = consumequeue.QueueFile.existing.__func__

    def vanishing(cls, path, entries, handles):
        if int(path.name) == 0:  # another process's retention deleted it just now
            raise FileNotFoundError(path)
        return existing(cls, path, entries, handles)

    monkeypatch.setattr(consumequeue.QueueFile, "existing", classmethod(vanishing))
    reopened = open_store()

    assert reopened.queue_range("t", 0) == (QUEUE_FILE_ENTRIES, QUEUE_FILE_ENTRIES * 2 + 1)
