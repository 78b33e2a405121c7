"""The upkeep tasks, run by a real Celery worker over the machine's Redis."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from celery.signals import task_failure

from console.background.models import TaskRun
from console.background.tasks import EXPIRE_TASK, FLUSH_TASK, expire_segments, flush_store
from storeadapter.engine import fileio

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

#: In the retention hour (settings.TIDEMARK_RETENTION_HOUR, set to 4 below).
AT_RETENTION_HOUR = datetime(2030, 1, 10, 4, 15, tzinfo=UTC)
BODY = b"x" * 1000


@pytest.fixture(autouse=True)
def retention_hour(settings):
    settings.TIDEMARK_RETENTION_HOUR = 4


@pytest.fixture
def store_options():
    # Tiny segments (about three messages each) so a test can fill several.
    return {"segment_bytes": 4096, "retention_hours": 72}


def fill_old_segments(store, clock, sealed: int = 3, topic: str = "orders") -> None:
    """Append until ``sealed`` segments are full, all stored 80 h before AT_RETENTION_HOUR."""
    clock.set(AT_RETENTION_HOUR - timedelta(hours=80))
    store.create_topic(topic, queues=1)
    while store.stats(topics=False).segment_count < sealed + 1:
        store.append(topic, BODY)


@pytest.fixture
def run_in_worker(worker, wait_for):
    """``run_in_worker(task, name)``: send ``task`` to the real worker and wait until it has
    finished one more run; returns its TaskRun row."""

    def run(task, name: str) -> TaskRun:
        before = TaskRun.objects.filter(name=name).values_list("runs", flat=True).first() or 0
        task.delay()
        return wait_for(
            lambda: TaskRun.objects.filter(name=name, runs__gt=before).first(),
            what=f"a run of {name}",
        )

    return run


def spy(monkeypatch, store, method: str) -> list:
    """Count calls of ``store.<method>`` (still calling the real one)."""
    calls = []
    original = getattr(store, method)

    def wrapper(*args, **kwargs):
        calls.append((args, kwargs))
        return original(*args, **kwargs)

    monkeypatch.setattr(store, method, wrapper)
    return calls


def test_flush_task_flushes_an_async_store_and_records_ok(run_in_worker, store, monkeypatch):
    store.create_topic("orders", queues=1)
    store.append("orders", b"hello")
    flushes = spy(monkeypatch, store, "flush")

    row = run_in_worker(flush_store, FLUSH_TASK)

    assert len(flushes) == 1
    assert row.last_outcome == TaskRun.OK
    assert row.runs == 1 and row.failures == 0
    assert "fsynced and checkpointed" in row.last_message
    assert row.last_started_at <= row.last_finished_at
    assert row.last_duration_ms >= 0


@pytest.fixture
def sync_store(settings, store_options):
    settings.TIDEMARK_FLUSH_MODE = "sync"
    return store_options


def test_flush_task_in_sync_mode_says_there_is_nothing_to_do(
    sync_store, run_in_worker, store, monkeypatch
):
    flushes = spy(monkeypatch, store, "flush")

    row = run_in_worker(flush_store, FLUSH_TASK)

    assert store.config.flush_mode == "sync"
    assert flushes == []
    assert row.last_outcome == TaskRun.OK
    assert "nothing to do" in row.last_message


def test_expiry_deletes_expired_segments_at_the_retention_hour(run_in_worker, store, clock):
    fill_old_segments(store, clock, sealed=3)
    clock.set(AT_RETENTION_HOUR)

    row = run_in_worker(expire_segments, EXPIRE_TASK)

    assert row.last_outcome == TaskRun.OK
    assert "deleted 3 segments (3 expired)" in row.last_message
    report = store.stats(topics=False).last_retention
    assert len(report["deleted_segments"]) == 3
    assert report["now_ms"] == clock.ms
    assert store.stats(topics=False).segment_count == 1


def test_expiry_does_not_delete_twice_in_the_same_window(run_in_worker, store, clock, monkeypatch):
    fill_old_segments(store, clock, sealed=2)
    clock.set(AT_RETENTION_HOUR)
    run_in_worker(expire_segments, EXPIRE_TASK)
    deletions = spy(monkeypatch, store, "delete_expired")

    clock.set(AT_RETENTION_HOUR + timedelta(minutes=30))
    row = run_in_worker(expire_segments, EXPIRE_TASK)

    assert deletions == []
    assert row.runs == 2 and row.last_outcome == TaskRun.OK
    assert "already deleted in this window" in row.last_message


def test_expiry_deletes_again_in_the_next_days_window(run_in_worker, store, clock, monkeypatch):
    fill_old_segments(store, clock, sealed=2)
    clock.set(AT_RETENTION_HOUR)
    run_in_worker(expire_segments, EXPIRE_TASK)
    deletions = spy(monkeypatch, store, "delete_expired")

    clock.set(AT_RETENTION_HOUR + timedelta(days=1))
    row = run_in_worker(expire_segments, EXPIRE_TASK)

    assert len(deletions) == 1
    assert "retention hour 04:00 UTC" in row.last_message


def test_expiry_outside_the_retention_hour_only_checks(run_in_worker, store, clock, monkeypatch):
    fill_old_segments(store, clock, sealed=2)
    clock.set(AT_RETENTION_HOUR + timedelta(hours=3))
    deletions = spy(monkeypatch, store, "delete_expired")

    row = run_in_worker(expire_segments, EXPIRE_TASK)

    assert deletions == []
    assert row.last_outcome == TaskRun.OK
    assert "nothing to do" in row.last_message
    assert store.stats(topics=False).segment_count == 3


@pytest.mark.parametrize(
    "store_options",
    [
        {
            "segment_bytes": 4096,
            "retention_hours": 72,
            "disk_warn_ratio": 0.75,
            "disk_force_ratio": 0.95,
            "disk_reject_ratio": 0.99,
        }
    ],
)
def test_expiry_deletes_at_once_past_the_disk_warning(run_in_worker, store, clock, monkeypatch):
    fill_old_segments(store, clock, sealed=2)
    clock.set(AT_RETENTION_HOUR + timedelta(hours=3))  # not the retention hour
    monkeypatch.setattr(fileio, "disk_usage", lambda path: (80, 100))
    store.flush()  # the store probes the disk when it flushes

    row = run_in_worker(expire_segments, EXPIRE_TASK)

    assert row.last_outcome == TaskRun.OK
    assert row.last_message.startswith("disk use 80% is at or past the 75% warning")
    assert "deleted 2 segments (2 expired)" in row.last_message
    assert store.stats(topics=False).segment_count == 1


def test_expiry_message_counts_unconsumed_messages_dropped_per_group(run_in_worker, store, clock):
    fill_old_segments(store, clock, sealed=2)
    tail = store.queue_range("orders", 0)[1]
    store.commit_offset("billing", "orders", 0, 0)  # consumed nothing
    store.commit_offset("audit", "orders", 0, tail)  # consumed everything
    clock.set(AT_RETENTION_HOUR)

    row = run_in_worker(expire_segments, EXPIRE_TASK)

    dropped = store.queue_range("orders", 0)[0]
    assert dropped > 0
    assert f"unconsumed messages dropped: billing {dropped}" in row.last_message
    assert "audit" not in row.last_message


def test_two_runs_at_once_one_runs_and_the_other_is_skipped(worker, wait_for, store, monkeypatch):
    entered, release = threading.Event(), threading.Event()
    calls = []

    def slow_flush():
        calls.append(1)
        entered.set()
        release.wait(10)

    monkeypatch.setattr(store, "flush", slow_flush)
    flush_store.delay()
    assert entered.wait(10), "the worker's run did not start"
    try:
        second = flush_store()  # a second run while the worker's still holds the task
        skipped = TaskRun.objects.get(name=FLUSH_TASK)
    finally:
        release.set()
    finished = wait_for(lambda: TaskRun.objects.filter(name=FLUSH_TASK, runs=1).first())

    assert second is None
    assert skipped.last_outcome == TaskRun.SKIPPED
    assert len(calls) == 1
    assert finished.last_outcome == TaskRun.OK


def test_a_failing_run_is_recorded_as_failed_and_reraised(
    run_in_worker, wait_for, store, monkeypatch
):
    seen = []

    def on_failure(sender=None, exception=None, **kwargs):
        seen.append((sender.name, exception))

    def broken_flush():
        raise OSError("disk on fire")

    task_failure.connect(on_failure, weak=False)
    monkeypatch.setattr(store, "flush", broken_flush)
    try:
        row = run_in_worker(flush_store, FLUSH_TASK)
        wait_for(lambda: seen, what="the worker to see the task fail")
    finally:
        task_failure.disconnect(on_failure)

    assert row.last_outcome == TaskRun.FAILED
    assert row.failures == 1 and row.runs == 1
    assert row.last_message == "OSError: disk on fire"
    assert seen[0][0] == FLUSH_TASK and isinstance(seen[0][1], OSError)
