"""current.py: the contract's dataclasses from the sampled rows, never from the store."""

from __future__ import annotations

import pytest

from console.monitoring import current
from console.monitoring.metrics import (
    CAUGHT_UP,
    DRAINING,
    ERR,
    NOT_DRAINING,
    OK,
    GroupMetrics,
    QueueMetrics,
)

pytestmark = pytest.mark.django_db


def fill(store, topic: str, per_queue: list[int], body: bytes = b"m") -> None:
    for queue, count in enumerate(per_queue):
        if count:
            store.append_batch(topic, [{"body": body, "queue": queue} for _ in range(count)])


@pytest.fixture
def two_groups(store, clock, sample_at):
    """`fast` keeps up with `orders`, `stuck` committed once and stopped (not judged STOP
    from one commit: Burrow needs two); two samples."""
    store.create_topic("orders", queues=2)
    fill(store, "orders", [50, 50])
    clock.at(0)
    store.commit_offset("stuck", "orders", 0, 10)
    store.commit_offset("fast", "orders", 0, 50)
    store.commit_offset("fast", "orders", 1, 50)
    sample_at(10)
    fill(store, "orders", [50, 50])  # 100 in 10 s
    clock.at(15)
    store.commit_offset("fast", "orders", 0, 100)
    store.commit_offset("fast", "orders", 1, 90)  # 90 consumed in 10 s
    sample_at(20)
    return store


def test_group_metrics_lists_every_group_worst_first(two_groups):
    metrics = current.group_metrics()

    assert [(m.group, m.status) for m in metrics] == [("stuck", OK), ("fast", OK)]  # by lag
    assert all(isinstance(m, GroupMetrics) for m in metrics)


def test_group_metrics_has_each_queue_as_sampled(two_groups, clock):
    stuck = current.group_metrics_for("stuck")

    assert stuck.topics == ["orders"]
    assert stuck.lag == 90 + 100
    assert stuck.sampled_ms == clock.at(20)
    assert stuck.queues == [
        QueueMetrics(
            "stuck", "orders", 0, 100, 10, 90, stuck.queues[0].lag_seconds, clock.at(0), OK
        ),
        # Never committed on: it lags from its first offset, but has no status (left out).
        QueueMetrics("stuck", "orders", 1, 100, None, 100, stuck.queues[1].lag_seconds, None, None),
    ]
    assert stuck.lag_seconds == max(q.lag_seconds for q in stuck.queues)


def test_rates_come_from_the_last_two_samples_while_the_history_is_short(two_groups):
    fast = current.group_metrics_for("fast")

    assert fast.produce_rate == pytest.approx(10.0)
    assert fast.consume_rate == pytest.approx(9.0)


def test_drain_time_reads_caught_up_for_a_group_keeping_pace(store, clock, sample_at):
    """10 messages a second; the consumer commits every 5 s what arrived until a second
    before."""
    store.create_topic("orders", queues=1)
    appended = []
    for second in range(61):
        clock.at(second)
        fill(store, "orders", [10])
        appended.append(10 * (second + 1))
        if second % 5 == 0 and second:
            store.commit_offset("fast", "orders", 0, appended[second - 1])
        if second % 10 == 0 and second:
            sample_at(second)

    fast = current.group_metrics_for("fast")

    assert fast.lag == 10
    assert (fast.drain, fast.drain_seconds) == (CAUGHT_UP, 0.0)


def test_drain_time_is_not_draining_when_producers_outpace_the_group(store, clock, sample_at):
    store.create_topic("orders", queues=1)
    fill(store, "orders", [100])
    store.commit_offset("slow", "orders", 0, 0)
    sample_at(0)
    fill(store, "orders", [200])  # 20/s
    clock.at(5)
    store.commit_offset("slow", "orders", 0, 50)  # 5/s
    sample_at(10)

    slow = current.group_metrics_for("slow")

    assert (slow.drain, slow.drain_seconds) == (NOT_DRAINING, None)


def test_drain_time_when_the_group_catches_up(store, clock, sample_at):
    store.create_topic("orders", queues=1)
    fill(store, "orders", [200])
    store.commit_offset("billing", "orders", 0, 0)
    sample_at(0)
    clock.at(5)
    store.commit_offset("billing", "orders", 0, 50)  # 10/s between its commits
    sample_at(10)

    metrics = current.group_metrics_for("billing")

    assert metrics.lag == 150
    assert (metrics.drain, metrics.drain_seconds) == (DRAINING, pytest.approx(15.0))


@pytest.mark.parametrize("store_options", [{"segment_bytes": 8192, "retention_hours": 10}])
def test_expiry_risk_is_hours_until_retention_deletes_unconsumed_messages(store, clock, sample_at):
    store.create_topic("orders", queues=1)
    clock.at(0)
    fill(store, "orders", [100], body=b"x" * 200)  # several 8 KiB segments
    store.commit_offset("billing", "orders", 0, 0)
    store.commit_offset("done", "orders", 0, 100)

    sample_at(3600)

    expires = min(r["expires_at_ms"] for r in store.expiry_forecast(clock.ms))
    billing = current.group_metrics_for("billing")
    assert billing.expiry_risk_hours == pytest.approx((expires - clock.ms) / 3_600_000)
    assert 8.9 < billing.expiry_risk_hours < 9.1
    assert current.group_metrics_for("done").expiry_risk_hours is None


def test_an_unknown_group_has_no_metrics(two_groups):
    assert current.group_metrics_for("nobody") is None


def test_nothing_before_the_first_sample(db):
    assert current.group_metrics() == []
    assert current.group_metrics_for("billing") is None
    assert current.store_metrics() is None


def test_store_metrics_from_the_last_two_samples(two_groups, clock):
    metrics = current.store_metrics()

    assert metrics.sampled_ms == clock.at(20)
    assert metrics.produce_rate == pytest.approx(10.0)
    assert metrics.consume_rate == pytest.approx(9.0)
    assert metrics.backlog == (90 + 100) + (0 + 10)
    assert metrics.disk_bytes == two_groups.stats(topics=False).disk_bytes


def test_metrics_are_read_without_the_store(two_groups, monkeypatch):
    import storeadapter.access

    def no_store(*args, **kwargs):
        raise AssertionError("current.py opened the store")

    monkeypatch.setattr(storeadapter.access, "store_at", no_store)

    assert [m.group for m in current.group_metrics()] == ["stuck", "fast"]
    assert current.store_metrics() is not None


def test_a_new_sample_replaces_what_was_cached(two_groups, clock, sample_at):
    assert current.group_metrics_for("stuck").lag == 190
    two_groups.commit_offset("stuck", "orders", 0, 100)
    two_groups.commit_offset("stuck", "orders", 1, 100)

    sample_at(30)

    assert [m.lag for m in current.group_metrics() if m.group == "stuck"] == [0]
    assert current.group_metrics_for("stuck").status == OK


def test_a_group_committing_the_same_offset_while_lag_grows_is_stalled(store, clock, sample_at):
    from console.monitoring.metrics import STALL

    store.create_topic("orders", queues=1)
    fill(store, "orders", [20])
    for step in range(12):
        clock.at(step * 10)
        store.commit_offset("stalled", "orders", 0, 5)  # keeps committing, never moves
        fill(store, "orders", [3])
        sample_at(step * 10 + 5)

    stalled = current.group_metrics_for("stalled")

    assert stalled.queues[0].status == STALL
    assert stalled.status == ERR
